"""What the labeller looks for in a domain: phrase lists per code, read from files the user can edit.

Two sources, one shape (:class:`DomainRules`):

* **Chest x-ray** reads the CheXpert labeler's own phrase lists in place (``phrases/mention/*.txt``
  and ``phrases/unmention/*.txt`` of stanfordmlgroup/chexpert-labeler, one phrase per line, the file
  named after the observation). They are kept with CheXpert's meaning so that its labels come out
  again: a phrase is a case-insensitive regular expression found anywhere in the text ("atelecta"
  finds "atelectasis"), a ``_`` at either end of a phrase asks for a word boundary there, and one
  inside stands for a space. ``no_finding.txt`` lists *other* findings: they have no column of
  their own but, affirmed, rule out No Finding. The labeler's ``patterns`` folder beside
  ``phrases``, when there, gives the negation and uncertainty vocabulary (:mod:`.patterns`).

* **Every other domain** reads a JSON rules file (the package's ``rules/foot_ankle.json`` for
  foot/ankle x-rays, or the user's own)::

      {
        "format": "clinieval-labeller-rules/1",
        "domain": "foot/ankle x-ray",
        "no_finding": {"code": "No Finding", "ignore": ["Hardware"]},
        "other_findings": ["osteopenia", "sclerosis"],
        "codes": {
          "Fracture": {"mention": ["fractur*", "fx"], "unmention": [], "hedged": []},
          "No Finding": {}
        }
      }

  ``codes`` lists the output columns in order. A phrase is one or more words matched as whole words,
  case-insensitively; a space matches any run of spaces, line breaks or hyphens ("hammer toe" finds
  "hammer-toe"), and ``*`` ending a word matches any ending ("fractur*": fracture, fractured).
  ``unmention`` phrases look like a mention but are not one ("growth plate" is no Hardware): a
  mention overlapping one is dropped. ``hedged`` phrases mention the code but only suggest it, so
  an affirmed one counts as unknown. The ``no_finding`` code is positive when nothing other than
  its ``ignore`` codes is positive or unknown (CheXpert's rule, where Support Devices is ignored).

Every problem in a file is one :class:`~clinieval.errors.UserError` naming the file and the line
(phrase lists, JSON syntax) or the field (``codes.Fracture.mention[2]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.items import CHEST, CHEXPERT_OBSERVATIONS, CodeValue
from clinieval.benchmarks.medeval.labeller.modifiers import DEFAULT_CONTEXT, ContextRules, context_for
from clinieval.benchmarks.medeval.labeller.patterns import patterns_dir, read_vocabulary
from clinieval.datasets import UNDECODABLE, not_utf8
from clinieval.errors import UserError

RULES_FORMAT = "clinieval-labeller-rules/1"
RULES_DIR = Path(__file__).resolve().parents[1] / "rules"
DOMAIN_RULE_FILES: Mapping[str, str] = {"foot/ankle x-ray": "foot_ankle.json"}
"""The package's own rules file for each miscellaneous domain it knows."""

DEFAULT_CHEXPERT = Path(__file__).resolve().parents[5].parent / "shared" / "data" / "chexpert-labeler"
"""Where a source checkout finds the CheXpert labeler's files: ``../shared/data/chexpert-labeler``."""

NO_FINDING = "No Finding"
SUPPORT_DEVICES = "Support Devices"
OTHER_FINDING = "(other finding)"
"""The label of a phrase that rules out No Finding without having a column of its own."""

CHEXPERT_HEDGED: Mapping[str, frozenset[str]] = {
    "Edema": frozenset(
        {"vascular congestion", "pulmonary congestion", "indistinctness", "vascular prominence"}
    ),
}
"""CheXpert phrases that only suggest their observation (its uncertainty rules list them alone)."""

CHEXPERT_IMPLIES: Mapping[str, tuple[str, CodeValue]] = {
    "chf": ("Cardiomegaly", "unknown"),
    "heart failure": ("Cardiomegaly", "unknown"),
}
"""Affirmed heart failure raises the question of an enlarged heart: CheXpert adds Cardiomegaly as
uncertain whenever "chf" or "heart failure" is positive or uncertain."""

LOCATION_OBSERVATIONS = ("Cardiomegaly", "Enlarged Cardiomediastinum")
"""Observations named by a structure ("the heart", "mediastinum") that reports also use as a
place: "pacer leads over the heart" mentions no cardiomegaly. CheXpert drops such mentions."""

LOCATION_PREFIX = (
    r"(?:over|overly|overlying|overlies|overlie|in|projects? over|projecting over) the "
    r"(?:(?:superior|left|right) )?"
)

PROJECT_UNMENTIONS: Mapping[str, tuple[str, ...]] = {"Support Devices": (r"plate[\s-]?like",)}
"""Look-alikes the labeler's lists miss: "plate" is a device, "platelike atelectasis" is a shape."""


@dataclass(frozen=True, slots=True)
class Phrase:
    """One phrase: the regular expression the matcher runs and where it was written."""

    pattern: str
    text: str
    source: str
    hedged: bool = False


@dataclass(frozen=True, slots=True)
class DomainRules:
    """Everything the pipeline needs for one domain."""

    domain: str
    codes: tuple[str, ...]
    """The output columns, in order (the no-finding code among them)."""
    mentions: Mapping[str, tuple[Phrase, ...]]
    """Code (or :data:`OTHER_FINDING`) -> the phrases that mention it."""
    unmentions: Mapping[str, tuple[Phrase, ...]] = field(default_factory=dict)
    no_finding: str | None = None
    no_finding_ignores: frozenset[str] = frozenset()
    implies: Mapping[str, tuple[str, CodeValue]] = field(default_factory=dict)
    """Phrase text -> a code and value it also sets when the phrase is affirmed (CheXpert's chf)."""
    source: str = ""
    context: ContextRules = DEFAULT_CONTEXT
    """The ConText triggers (from CheXpert's pattern files for chest, else the whole lexicon)."""


# --- the CheXpert labeler's phrase lists -------------------------------------------------------


def observation_of(stem: str) -> str:
    """CheXpert's naming: ``pleural_effusion.txt`` holds phrases for "Pleural Effusion"."""
    return stem.replace("_", " ").title()


def chexpert_phrase(line: str, source: str) -> Phrase:
    """A line of a CheXpert phrase file as a regular expression with CheXpert's meaning."""
    text = line.strip()
    core = text.strip("_")
    pattern = core.replace("_", " ")
    try:
        re.compile(pattern)
    except re.error as e:
        raise UserError(f"{source}: {text!r} is not a valid regular expression ({e})") from None
    before = r"(?<!\w)" if text.startswith("_") else ""
    after = r"(?!\w)" if text.endswith("_") else ""
    return Phrase(f"{before}{pattern}{after}", pattern, source)


def read_phrase_file(path: Path) -> list[Phrase]:
    """The phrases of one CheXpert file, one per non-blank line."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    text = raw.decode("utf-8", errors="surrogateescape")
    phrases = []
    for n, line in enumerate(text.splitlines(), 1):
        if UNDECODABLE.search(line):
            raise not_utf8(path, n)
        if line.strip():
            phrases.append(chexpert_phrase(line, f"{path}:{n}"))
    return phrases


def chexpert_phrases_dir(chexpert: Path | None) -> Path:
    """The ``phrases`` folder under ``chexpert`` (the labeler's checkout, or its phrases folder
    itself), or the shared copy beside this checkout; else one error saying what to pass."""
    if chexpert is None:
        if not (DEFAULT_CHEXPERT / "phrases" / "mention").is_dir():
            raise UserError(
                "no CheXpert phrase lists: pass --chexpert DIR, a checkout of the CheXpert labeler "
                "(stanfordmlgroup/chexpert-labeler) holding phrases/mention and phrases/unmention"
            )
        chexpert = DEFAULT_CHEXPERT
    for candidate in (chexpert / "phrases", chexpert):
        if (candidate / "mention").is_dir():
            return candidate
    raise UserError(
        f"{chexpert}: no phrases/mention folder; point --chexpert at the CheXpert labeler's checkout"
    )


def load_chexpert_rules(chexpert: Path | None = None) -> DomainRules:
    """CheXpert's 14 observations from its phrase lists (see the module's docstring)."""
    phrases = chexpert_phrases_dir(chexpert)
    mentions: dict[str, tuple[Phrase, ...]] = {}
    unmentions: dict[str, tuple[Phrase, ...]] = {}
    for kind, table in (("mention", mentions), ("unmention", unmentions)):
        folder = phrases / kind
        files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
        for path in files:
            name = observation_of(path.stem)
            if name not in CHEXPERT_OBSERVATIONS:
                raise UserError(f"{path}: {name!r} is not one of the 14 CheXpert observations")
            found = read_phrase_file(path)
            hedged = CHEXPERT_HEDGED.get(name, frozenset())
            table[OTHER_FINDING if name == NO_FINDING else name] = tuple(
                Phrase(p.pattern, p.text, p.source, p.text in hedged) for p in found
            )
    missing = [o for o in CHEXPERT_OBSERVATIONS if o != NO_FINDING and o not in mentions]
    if missing:
        stem = missing[0].lower().replace(" ", "_")
        raise UserError(
            f"{phrases / 'mention' / (stem + '.txt')}: not found (every observation needs its phrase list)"
        )
    add_location_unmentions(mentions, unmentions)
    for name, looks in PROJECT_UNMENTIONS.items():
        extra = tuple(Phrase(p, p, "clinieval (look-alike)") for p in looks)
        unmentions[name] = (*unmentions.get(name, ()), *extra)
    patterns = patterns_dir(phrases)
    return DomainRules(
        domain=CHEST,
        codes=CHEXPERT_OBSERVATIONS,
        mentions=mentions,
        unmentions=unmentions,
        no_finding=NO_FINDING,
        no_finding_ignores=frozenset({SUPPORT_DEVICES}),
        implies=CHEXPERT_IMPLIES,
        source=str(phrases),
        context=context_for(None if patterns is None else read_vocabulary(patterns)),
    )


def add_location_unmentions(
    mentions: Mapping[str, Sequence[Phrase]], unmentions: dict[str, tuple[Phrase, ...]]
) -> None:
    """For each structure-named observation, its mentions preceded by "over the" and the like are
    places, not findings (:data:`LOCATION_OBSERVATIONS`)."""
    for name in LOCATION_OBSERVATIONS:
        places = tuple(
            Phrase(
                LOCATION_PREFIX + p.pattern.removeprefix("the "), f"over {p.text}", f"{p.source} (as a place)"
            )
            for p in mentions.get(name, ())
        )
        unmentions[name] = (*unmentions.get(name, ()), *places)


# --- the JSON rules file of a miscellaneous domain ------------------------------------------

WORD = re.compile(r"[\w][\w'./-]*\*?$")


def rules_phrase(text: object, where: str, hedged: bool = False) -> Phrase:
    """A rules-file phrase (whole words, ``*`` for any ending) as a regular expression."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{where}: a phrase must be a non-empty string, got {text!r}")
    words = text.lower().split()
    bad = next((w for w in words if not WORD.match(w) or "*" in w[:-1]), None)
    if bad is not None:
        raise UserError(
            f"{where}: {text!r}: {bad!r} is not a word (letters, digits, - ' . / and a final * only)"
        )
    parts = [re.escape(w.rstrip("*")) + (r"\w*" if w.endswith("*") else "") for w in words]
    return Phrase(r"(?<!\w)" + r"[\s-]+".join(parts) + r"(?!\w)", text, where, hedged)


def phrase_list(value: object, where: str, hedged: bool = False) -> tuple[Phrase, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{where}: expected a list of phrases, got {type(value).__name__}")
    return tuple(rules_phrase(v, f"{where}[{i}]", hedged) for i, v in enumerate(value))


def read_rules_json(path: Path) -> dict[str, Any]:
    """The file's JSON object; a syntax error names its line and column."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: rules file not found") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the rules file ({e.strerror or e})") from None
    text = raw.decode("utf-8", errors="surrogateescape")
    bad = UNDECODABLE.search(text)
    if bad is not None:
        raise not_utf8(path, text.count("\n", 0, bad.start()) + 1)
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object with format, domain and codes")
    return data


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        got = "nothing" if value is None else type(value).__name__
        raise UserError(f"{where}: field {key!r} should be a {kind.__name__}, got {got}")
    return value


KNOWN_CODE_KEYS = frozenset({"mention", "unmention", "hedged"})


def _code_entries(
    codes: Mapping[str, Any], where: str
) -> tuple[dict[str, tuple[Phrase, ...]], dict[str, tuple[Phrase, ...]]]:
    mentions: dict[str, tuple[Phrase, ...]] = {}
    unmentions: dict[str, tuple[Phrase, ...]] = {}
    for code, entry in codes.items():
        at = f"{where}: codes.{code}"
        if not code.strip() or code == OTHER_FINDING:
            raise UserError(f"{where}: codes: {code!r} is not a usable code name")
        if not isinstance(entry, dict):
            raise UserError(f"{at}: expected an object with mention/unmention/hedged lists")
        unknown = sorted(set(entry) - KNOWN_CODE_KEYS)
        if unknown:
            raise UserError(f"{at}: unknown field {unknown[0]!r} (known: mention, unmention, hedged)")
        found = phrase_list(entry.get("mention"), f"{at}.mention") + phrase_list(
            entry.get("hedged"), f"{at}.hedged", hedged=True
        )
        if found:
            mentions[code] = found
        unmentions[code] = phrase_list(entry.get("unmention"), f"{at}.unmention")
    return mentions, unmentions


def _no_finding(
    data: Mapping[str, Any], codes: Sequence[str], mentions: Mapping[str, object], where: str
) -> tuple[str | None, frozenset[str]]:
    spec = data.get("no_finding")
    if spec is None:
        return None, frozenset()
    if not isinstance(spec, dict):
        raise UserError(f"{where}: no_finding should be an object with code and ignore")
    code = _field(spec, "code", str, f"{where}: no_finding")
    if code not in codes:
        raise UserError(f"{where}: no_finding.code {code!r} is not one of the codes")
    if code in mentions:
        raise UserError(f"{where}: codes.{code} must have no phrases: the no-finding code is computed")
    ignore = spec.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(c, str) for c in ignore):
        raise UserError(f"{where}: no_finding.ignore should be a list of code names")
    stray = [c for c in ignore if c not in codes]
    if stray:
        raise UserError(f"{where}: no_finding.ignore names {stray[0]!r}, which is not one of the codes")
    return code, frozenset(ignore)


def load_rules_file(path: Path) -> DomainRules:
    """A miscellaneous domain's rules from a JSON rules file (format in the module's docstring)."""
    data = read_rules_json(path)
    where = str(path)
    fmt = data.get("format")
    if fmt != RULES_FORMAT:
        raise UserError(f"{where}: field 'format' should be {RULES_FORMAT!r}, got {fmt!r}")
    domain = _field(data, "domain", str, where).strip()
    codes = _field(data, "codes", dict, where)
    if not codes:
        raise UserError(f"{where}: codes is empty; list at least one code")
    mentions, unmentions = _code_entries(codes, where)
    no_finding, ignores = _no_finding(data, list(codes), mentions, where)
    others = phrase_list(data.get("other_findings"), f"{where}: other_findings")
    if others:
        mentions[OTHER_FINDING] = others
    unused = [c for c in codes if c not in mentions and c != no_finding]
    if unused:
        raise UserError(f"{where}: codes.{unused[0]} has no mention phrases, so it could never be found")
    return DomainRules(
        domain=domain,
        codes=tuple(codes),
        mentions=mentions,
        unmentions={k: v for k, v in unmentions.items() if v},
        no_finding=no_finding,
        no_finding_ignores=ignores,
        source=where,
    )


def rules_for_domain(
    domain: str, *, chexpert: Path | None = None, rules_file: Path | None = None
) -> DomainRules:
    """The rules for ``domain``: a user's rules file when given, CheXpert's lists for chest x-rays,
    else the package's file for that domain."""
    if rules_file is not None:
        return load_rules_file(rules_file)
    if domain == CHEST:
        return load_chexpert_rules(chexpert)
    name = DOMAIN_RULE_FILES.get(domain)
    if name is None:
        known = ", ".join([CHEST, *DOMAIN_RULE_FILES])
        raise UserError(f"no labeller rules for domain {domain!r}; known: {known} (or pass a rules file)")
    return load_rules_file(RULES_DIR / name)
