"""Phrasing families for MedEval's report labeller: sentences built from parts, each with the labels
the dev set's conventions give it (tests/data/medeval-labeller-dev.md).

A hand-written set covers the sentences someone thought of; real reports vary them in ways a set
misses (the held-out check found "The heart and pulmonary XXXX are normal": a list member that is no
observation, and Open-i's de-identification token inside it). A *family* is one rule of the
conventions ("a normality statement negates every structure of the list it describes") with its
free parts left free: which structures, in which order, with which non-observations among them
("pulmonary vasculature", "XXXX"), commas or none, a final full stop or none, the statement's
wording. Each ``build`` function turns one choice of parts into a :class:`Variant` whose expected
labels follow from the convention alone, never from the labeller's output.

The same parts serve two readers: ``tests/test_medeval_labeller_families.py`` draws them with
hypothesis (strategies below) and states properties across variants (order changes nothing, an
added non-observation changes nothing); ``bench/medeval_labeller.py --families`` draws a fixed,
seeded sample of each family (:func:`sample`) and counts how many the labeller gets right.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

OBSERVATIONS = (
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion", "Lung Opacity", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
    "Fracture", "Support Devices",
)  # fmt: skip
"""CheXpert's 14 observations (a copy, so that this module imports nothing of the package)."""

CM, EC = "Cardiomegaly", "Enlarged Cardiomediastinum"
NF = "No Finding"


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a list: its text and the observation its CheXpert mention phrase names (None: a
    word that mentions nothing, like "pulmonary vasculature" or Open-i's "XXXX")."""

    text: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Variant:
    """One generated report and the labels the conventions give it: every observation of the
    14, as the labeller's values (``positive``, ``negative``, ``unknown``, ``absent``)."""

    family: str
    report: str
    expected: Mapping[str, str]


def labels(values: Mapping[str, str]) -> dict[str, str]:
    """All 14 observations; No Finding by CheXpert's rule: positive when nothing but Support
    Devices is positive or uncertain (the families add no other finding of ``no_finding.txt``)."""
    out = {code: values.get(code, "absent") for code in OBSERVATIONS}
    affirmed = any(v in ("positive", "unknown") for c, v in out.items() if c not in (NF, "Support Devices"))
    out[NF] = "absent" if affirmed else "positive"
    return out


def capital(text: str) -> str:
    return text[:1].upper() + text[1:]


# --- the parts ----------------------------------------------------------------------------------

STRUCTURES = (
    Part("the heart", CM), Part("heart size", CM), Part("the heart size", CM), Part("cardiac size", CM),
    Part("the cardiac silhouette", CM), Part("cardiac silhouette", CM),
    Part("the mediastinum", EC), Part("mediastinum", EC), Part("mediastinal contours", EC),
    Part("the mediastinal contour", EC), Part("the cardiomediastinal silhouette", EC),
    Part("mediastinal silhouette", EC),
)  # fmt: skip
"""Structures that CheXpert's phrases mention ("the heart" is a Cardiomegaly phrase, "heart" alone
is none; "cardiac contour" is left out: it is a phrase of both Cardiomegaly and, through
"contour", Enlarged Cardiomediastinum)."""

NON_OBSERVATIONS = (
    Part("pulmonary vasculature"), Part("pulmonary vascularity"), Part("pulmonary XXXX"), Part("XXXX"),
    Part("bony structures"), Part("osseous structures"), Part("the osseous structures"),
    Part("soft tissues"), Part("the soft tissues"), Part("the lungs"), Part("lungs"), Part("the hila"),
    Part("great vessels"), Part("XXXX XXXX"), Part("the trachea"), Part("visualized bony structures"),
)  # fmt: skip
"""List members that name no observation: the held-out reports' "pulmonary XXXX" among them."""

NORMAL_AFTER = (
    "are normal", "are within normal limits", "are unremarkable", "are normal in appearance",
    "appear normal", "appear within normal limits", "are within normal", "remain normal",
    "are again normal", "are otherwise unremarkable", "are within normal limits for size",
)  # fmt: skip
"""Normality statements after a list ("are within normal": Open-i's dropped "limits")."""

NORMAL_BEFORE = ("Normal", "Unremarkable", "Stable normal")

FINDINGS = (
    Part("pneumothorax", "Pneumothorax"), Part("pleural effusion", "Pleural Effusion"),
    Part("effusion", "Pleural Effusion"), Part("large pleural effusion", "Pleural Effusion"),
    Part("focal consolidation", "Consolidation"), Part("consolidation", "Consolidation"),
    Part("pulmonary edema", "Edema"), Part("edema", "Edema"),
    Part("focal airspace disease", "Lung Opacity"), Part("airspace opacity", "Lung Opacity"),
    Part("infiltrate", "Lung Opacity"), Part("pneumonia", "Pneumonia"), Part("nodules", "Lung Lesion"),
    Part("atelectasis", "Atelectasis"),
)  # fmt: skip
"""Findings a negation over a list names."""

NEGATED_NON_OBSERVATIONS = (
    Part("acute bony abnormality"),
    Part("acute osseous abnormality"),
    Part("XXXX"),
    Part("adenopathy"),
    Part("free air"),
)
NEGATIONS = ("No", "There is no", "No evidence of", "Without evidence of", "Negative for", "No XXXX of")
NEGATION_ENDINGS = ("", " is seen", " is identified", " is demonstrated")

HEDGED_FINDINGS = (
    Part("small left pleural effusion", "Pleural Effusion"),
    Part("right lower lobe infiltrate", "Lung Opacity"),
    Part("left basilar atelectasis", "Atelectasis"), Part("right upper lobe pneumonia", "Pneumonia"),
    Part("mild pulmonary edema", "Edema"), Part("tiny apical pneumothorax", "Pneumothorax"),
    Part("left lower lobe consolidation", "Consolidation"), Part("right basilar opacity", "Lung Opacity"),
    Part("XXXX opacity in the left base", "Lung Opacity"), Part("small right effusion", "Pleural Effusion"),
)  # fmt: skip
HEDGES_BEFORE = ("Possible", "Questionable", "Probable", "Suspected", "Equivocal", "Possibly")
HEDGES_AFTER = (
    "is questionable", "is possible", "is suspected", "is equivocal", "is not excluded",
    "cannot be excluded", "cannot be ruled out", "is not ruled out",
)  # fmt: skip

BORDERLINE_BEFORE = (
    "Borderline enlarged heart", "Borderline enlarged heart size", "Borderline cardiomegaly",
    "Borderline heart size", "Borderline enlargement of the cardiac silhouette",
    "Borderline cardiac enlargement", "Borderline enlarged cardiac silhouette",
    "Borderline mild cardiomegaly",
)  # fmt: skip
CARDIAC_SUBJECTS = (
    "The heart",
    "The cardiac silhouette",
    "Heart size",
    "The heart size",
    "Cardiac silhouette",
)
BORDERLINE_AFTER = (
    "is borderline in size", "is borderline enlarged", "is borderline", "borderline", "remains borderline",
    "is borderline enlarged in size", "appears borderline enlarged", "is again borderline in size",
)  # fmt: skip

ENLARGED = (
    Part("enlarged cardiac silhouette", CM), Part("enlarged heart", CM), Part("mildly enlarged heart", CM),
    Part("moderately enlarged cardiac silhouette", CM), Part("enlarged heart size", CM),
    Part("cardiomegaly", CM), Part("mild cardiomegaly", CM), Part("widened mediastinum", EC),
    Part("enlarged cardiomediastinal silhouette", EC),
)  # fmt: skip
STABLE_BEFORE = ("Stable", "Unchanged", "Stable XXXX", "Persistent")
STABLE_AFTER = (
    "stable", ", stable", ", unchanged", "unchanged from prior", "stable from prior",
    ", unchanged from prior",
    "is stable", "is unchanged", "stable compared to prior", "is again seen and stable",
)  # fmt: skip
ENLARGED_SUBJECTS = (
    ("The heart is enlarged", CM), ("The cardiac silhouette is enlarged", CM),
    ("Heart size is enlarged", CM), ("The cardiac silhouette is mildly enlarged", CM),
    ("The mediastinum is widened", EC), ("Heart size is mildly increased", CM),
)  # fmt: skip
STRUCTURE_SUBJECTS = (
    ("Heart size", CM), ("The heart size", CM), ("The cardiac silhouette", CM),
    ("The cardiomediastinal silhouette", EC), ("The mediastinal contours", EC), ("Cardiac size", CM),
)  # fmt: skip
STABLE_STRUCTURE = (
    "is stable",
    "is unchanged",
    "stable",
    "unchanged",
    "is stable XXXX",
    "is not significantly changed",
)
STABLE_NORMAL = ("is stable and normal", "is normal and unchanged", "is stable and within normal limits",
                 "remains normal", "is unchanged and within normal limits")  # fmt: skip

NOT_SIGNIFICANTLY = (
    ("The heart is", CM), ("The cardiac silhouette is", CM), ("Heart size is", CM), ("Heart size", CM),
    ("The heart size is", CM), ("The mediastinum is", EC),
)  # fmt: skip
DEGREES = ("not significantly", "not appreciably", "not", "not substantially")

RESOLVED_FINDINGS = (
    Part("right pleural effusion", "Pleural Effusion"), Part("left pneumothorax", "Pneumothorax"),
    Part("right lower lobe consolidation", "Consolidation"), Part("left lower lobe pneumonia", "Pneumonia"),
    Part("left basilar atelectasis", "Atelectasis"), Part("pulmonary edema", "Edema"),
    Part("right basilar airspace disease", "Lung Opacity"), Part("XXXX opacity", "Lung Opacity"),
)  # fmt: skip
RESOLVED_AFTER = ("has resolved", "has cleared", "is no longer seen", "has since resolved", "is resolved",
                  "is no longer present")  # fmt: skip
RESOLVED_BEFORE = ("Resolved", "Interval resolution of the", "Resolution of the", "Interval clearing of the",
                   "Clearing of the")  # fmt: skip

LUNGS_CLEAR = (
    "Lungs are clear", "The lungs are clear", "Lungs clear", "Lungs are expanded and clear",
    "The lungs are well expanded and clear", "Lungs are hyperexpanded but clear",
    "The lungs are otherwise clear",
)  # fmt: skip
CLEAR_LINKS = ("of ", "", "XXXX ", "of any ")
CLEAR_FINDINGS = (
    Part("airspace disease", "Lung Opacity"), Part("focal airspace disease", "Lung Opacity"),
    Part("consolidation", "Consolidation"), Part("focal consolidation", "Consolidation"),
    Part("infiltrate", "Lung Opacity"), Part("effusion", "Pleural Effusion"),
    Part("pleural effusion", "Pleural Effusion"), Part("edema", "Edema"),
    Part("pneumothorax", "Pneumothorax"),
)  # fmt: skip

DROPPED_SUBJECTS = (("The heart is", CM), ("The cardiac silhouette is", CM), ("Heart size", CM),
                    ("The heart", CM), ("Heart size is", CM), ("The mediastinum is", EC),
                    ("Mediastinal contours", EC))  # fmt: skip
DROPPED_STATEMENTS = ("within normal in size", "within normal", "normal in size", "normal size",
                      "within normal limits in size", "within normal size")  # fmt: skip

ENDS = (".", "")
LIST_STYLES = ("commas", "oxford", "bare")


# --- building sentences --------------------------------------------------------------------


def join(parts: Sequence[str], style: str) -> str:
    """A list in one of the ways reports write them: "A, B and C", "A, B, and C", "A B and C"."""
    if len(parts) == 1:
        return parts[0]
    head, last = list(parts[:-1]), parts[-1]
    if style == "bare":
        return f"{' '.join(head)} and {last}"
    comma = "," if style == "oxford" and len(parts) > 2 else ""
    return f"{', '.join(head)}{comma} and {last}"


def normal_list(members: Sequence[Part], statement: str, style: str, end: str) -> Variant:
    """A normality statement after a list: every structure of it is negative."""
    text = capital(join([m.text for m in members], style)) + f" {statement}{end}"
    return Variant("normal-list", text, labels({m.code: "negative" for m in members if m.code}))


BARE = {"the heart": "heart size"}
"""Without its article "the heart" is no mention ("heart" alone is none): the list says "heart size"."""


def normal_first(members: Sequence[Part], word: str, style: str, end: str) -> Variant:
    """ "Normal heart size, pulmonary vasculature and mediastinum": the same, the statement first."""
    bare = list(dict.fromkeys(BARE.get(m.text, m.text.removeprefix("the ")) for m in members))
    return Variant(
        "normal-first", f"{word} {join(bare, style)}{end}",
        labels({m.code: "negative" for m in members if m.code}),
    )  # fmt: skip


def negated_list(members: Sequence[Part], cue: str, ending: str, style: str, end: str) -> Variant:
    """One negation cue over a list: every finding of it is negative."""
    joiner = "or" if cue != "Negative for" else "and"
    text = f"{cue} {join([m.text for m in members], style).replace(' and ', f' {joiner} ')}{ending}{end}"
    return Variant("negated-list", text, labels({m.code: "negative" for m in members if m.code}))


def hedge_before(hedge: str, finding: Part, end: str) -> Variant:
    return Variant("hedge-before", f"{hedge} {finding.text}{end}", labels({finding.code or "": "unknown"}))


def hedge_after(finding: Part, hedge: str, end: str) -> Variant:
    return Variant(
        "hedge-after", f"{capital(finding.text)} {hedge}{end}", labels({finding.code or "": "unknown"})
    )


def borderline(phrase: str, end: str) -> Variant:
    """ "Borderline enlarged heart", "The heart is borderline in size": both uncertain (dev `hedge`)."""
    return Variant("borderline", f"{phrase}{end}", labels({CM: "unknown"}))


def stable_finding(stable: str, finding: Part, before: bool, end: str) -> Variant:
    """Stable / unchanged with the enlargement stated: positive (dev `stable-finding`)."""
    text = (
        f"{stable} {finding.text}"
        if before
        else f"{capital(finding.text)}{'' if stable[0] == ',' else ' '}{stable}"
    )
    return Variant("stable-finding", f"{text}{end}", labels({finding.code or "": "positive"}))


def stable_structure(subject: tuple[str, str], statement: str, end: str) -> Variant:
    """Stable / unchanged of a structure whose size is not stated: uncertain (`stable-structure`);
    stable and normal: negative (`normal-over-stable`)."""
    value = "negative" if statement in STABLE_NORMAL else "unknown"
    return Variant("stable-structure", f"{subject[0]} {statement}{end}", labels({subject[1]: value}))


def enlarged_stable(subject: tuple[str, str], stable: str, end: str) -> Variant:
    return Variant("stable-finding", f"{subject[0]} and {stable}{end}", labels({subject[1]: "positive"}))


def not_significantly(subject: tuple[str, str], degree: str, end: str) -> Variant:
    """ "Not significantly enlarged / widened": a negation (dev `not-significant`)."""
    word = "widened" if subject[1] == EC else "enlarged"
    return Variant(
        "not-significantly", f"{subject[0]} {degree} {word}{end}", labels({subject[1]: "negative"})
    )


def resolved(finding: Part, wording: str, before: bool, end: str) -> Variant:
    """Resolved / cleared / no longer seen: negative (dev `resolved`)."""
    text = f"{wording} {finding.text}" if before else f"The {finding.text} {wording}"
    return Variant("resolved", f"{text}{end}", labels({finding.code or "": "negative"}))


def clear_of(lungs: str, link: str, findings: Sequence[Part], end: str) -> Variant:
    """ "Lungs are clear (of) X (or Y)": negation, with or without its "of" (dev `neg`, `xxxx`)."""
    text = f"{lungs} {link}{' or '.join(f.text for f in findings)}{end}"
    return Variant("clear-of", text, labels({f.code or "": "negative" for f in findings}))


def dropped_word(subject: tuple[str, str], statement: str, end: str) -> Variant:
    """A normality statement with a word dropped ("within normal in size"): still negative."""
    return Variant("dropped-word", f"{subject[0]} {statement}{end}", labels({subject[1]: "negative"}))


# --- hypothesis strategies ---------------------------------------------------------------------


def same(part: Part) -> str:
    """Two members are the same with or without their article ("the heart size", "heart size")."""
    return part.text.removeprefix("the ")


@st.composite
def list_members(draw: st.DrawFn, pool: Sequence[Part], others: Sequence[Part]) -> list[Part]:
    """2-4 members: at least one from ``pool``, any others from ``pool`` or ``others``, in any order,
    no two the same but for "the"."""
    first = draw(st.sampled_from(pool))
    rest = draw(st.lists(st.sampled_from([*pool, *others]), min_size=1, max_size=3, unique_by=same))
    members = [first, *(p for p in rest if same(p) != same(first))]
    if len(members) < 2:
        members.append(draw(st.sampled_from([p for p in others if same(p) != same(first)])))
    ordered: list[Part] = draw(st.permutations(members))
    return ordered


def structure_lists() -> st.SearchStrategy[list[Part]]:
    return list_members(STRUCTURES, NON_OBSERVATIONS)


def finding_lists() -> st.SearchStrategy[list[Part]]:
    return list_members(FINDINGS, NEGATED_NON_OBSERVATIONS)


ends = st.sampled_from(ENDS)
styles = st.sampled_from(LIST_STYLES)
one = st.sampled_from
stable_words = one(("stable", "unchanged"))
cardiac_after = st.builds("{} {}".format, one(CARDIAC_SUBJECTS), one(BORDERLINE_AFTER))

FAMILIES: Mapping[str, st.SearchStrategy[Variant]] = {
    "normal-list": st.builds(normal_list, structure_lists(), one(NORMAL_AFTER), styles, ends),
    "normal-first": st.builds(normal_first, structure_lists(), one(NORMAL_BEFORE), styles, ends),
    "negated-list": st.builds(
        negated_list, finding_lists(), one(NEGATIONS), one(NEGATION_ENDINGS), styles, ends
    ),
    "hedge-before": st.builds(hedge_before, one(HEDGES_BEFORE), one(HEDGED_FINDINGS), ends),
    "hedge-after": st.builds(hedge_after, one(HEDGED_FINDINGS), one(HEDGES_AFTER), ends),
    "borderline": st.builds(borderline, st.one_of(one(BORDERLINE_BEFORE), cardiac_after), ends),
    "stable-finding": st.one_of(
        st.builds(stable_finding, one(STABLE_BEFORE), one(ENLARGED), st.just(True), ends),
        st.builds(stable_finding, one(STABLE_AFTER), one(ENLARGED), st.just(False), ends),
        st.builds(enlarged_stable, one(ENLARGED_SUBJECTS), stable_words, ends),
    ),
    "stable-structure": st.builds(
        stable_structure, one(STRUCTURE_SUBJECTS), one(STABLE_STRUCTURE + STABLE_NORMAL), ends
    ),
    "not-significantly": st.builds(not_significantly, one(NOT_SIGNIFICANTLY), one(DEGREES), ends),
    "resolved": st.one_of(
        st.builds(resolved, one(RESOLVED_FINDINGS), one(RESOLVED_AFTER), st.just(False), ends),
        st.builds(resolved, one(RESOLVED_FINDINGS), one(RESOLVED_BEFORE), st.just(True), ends),
    ),
    "clear-of": st.builds(
        clear_of,
        one(LUNGS_CLEAR),
        one(CLEAR_LINKS),
        st.lists(one(CLEAR_FINDINGS), min_size=1, max_size=2, unique_by=lambda p: p.code),
        ends,
    ),
    "dropped-word": st.builds(dropped_word, one(DROPPED_SUBJECTS), one(DROPPED_STATEMENTS), ends),
}
"""Every family as a hypothesis strategy of :class:`Variant`."""


# --- a fixed sample, for the benchmark ------------------------------------------------------------


def _draw_members(rng: random.Random, pool: Sequence[Part], others: Sequence[Part]) -> list[Part]:
    size = rng.randint(2, 4)
    first = rng.choice(pool)
    members = [first]
    for p in rng.sample([*pool, *others], len(pool) + len(others)):
        if len(members) < size and same(p) not in {same(m) for m in members}:
            members.append(p)
    rng.shuffle(members)
    return members


def _normal_list(r: random.Random) -> Variant:
    members = _draw_members(r, STRUCTURES, NON_OBSERVATIONS)
    return normal_list(members, r.choice(NORMAL_AFTER), r.choice(LIST_STYLES), r.choice(ENDS))


def _normal_first(r: random.Random) -> Variant:
    members = _draw_members(r, STRUCTURES, NON_OBSERVATIONS)
    return normal_first(members, r.choice(NORMAL_BEFORE), r.choice(LIST_STYLES), r.choice(ENDS))


def _negated_list(r: random.Random) -> Variant:
    members = _draw_members(r, FINDINGS, NEGATED_NON_OBSERVATIONS)
    cue, ending = r.choice(NEGATIONS), r.choice(NEGATION_ENDINGS)
    return negated_list(members, cue, ending, r.choice(LIST_STYLES), r.choice(ENDS))


def _borderline(r: random.Random) -> Variant:
    before = r.random() < 0.5
    phrase = (
        r.choice(BORDERLINE_BEFORE)
        if before
        else f"{r.choice(CARDIAC_SUBJECTS)} {r.choice(BORDERLINE_AFTER)}"
    )
    return borderline(phrase, r.choice(ENDS))


def _stable_finding(r: random.Random) -> Variant:
    end, kind = r.choice(ENDS), r.randrange(3)
    if kind == 0:
        return stable_finding(r.choice(STABLE_BEFORE), r.choice(ENLARGED), True, end)
    if kind == 1:
        return stable_finding(r.choice(STABLE_AFTER), r.choice(ENLARGED), False, end)
    return enlarged_stable(r.choice(ENLARGED_SUBJECTS), r.choice(("stable", "unchanged")), end)


def _resolved(r: random.Random) -> Variant:
    before = r.random() < 0.5
    wording = r.choice(RESOLVED_BEFORE if before else RESOLVED_AFTER)
    return resolved(r.choice(RESOLVED_FINDINGS), wording, before, r.choice(ENDS))


def _clear_of(r: random.Random) -> Variant:
    findings = [r.choice(CLEAR_FINDINGS)] if r.random() < 0.6 else _two_codes(r)
    return clear_of(r.choice(LUNGS_CLEAR), r.choice(CLEAR_LINKS), findings, r.choice(ENDS))


SAMPLERS: Mapping[str, Callable[[random.Random], Variant]] = {
    "normal-list": _normal_list,
    "normal-first": _normal_first,
    "negated-list": _negated_list,
    "hedge-before": lambda r: hedge_before(
        r.choice(HEDGES_BEFORE), r.choice(HEDGED_FINDINGS), r.choice(ENDS)
    ),
    "hedge-after": lambda r: hedge_after(r.choice(HEDGED_FINDINGS), r.choice(HEDGES_AFTER), r.choice(ENDS)),
    "borderline": _borderline,
    "stable-finding": _stable_finding,
    "stable-structure": lambda r: stable_structure(
        r.choice(STRUCTURE_SUBJECTS), r.choice(STABLE_STRUCTURE + STABLE_NORMAL), r.choice(ENDS)
    ),
    "not-significantly": lambda r: not_significantly(
        r.choice(NOT_SIGNIFICANTLY), r.choice(DEGREES), r.choice(ENDS)
    ),
    "resolved": _resolved,
    "clear-of": _clear_of,
    "dropped-word": lambda r: dropped_word(
        r.choice(DROPPED_SUBJECTS), r.choice(DROPPED_STATEMENTS), r.choice(ENDS)
    ),
}
"""Every family as a draw from a seeded :class:`random.Random` (the benchmark's fixed sample)."""


def _two_codes(rng: random.Random) -> list[Part]:
    first = rng.choice(CLEAR_FINDINGS)
    return [first, rng.choice([f for f in CLEAR_FINDINGS if f.code != first.code])]


def sample(per_family: int = 200, seed: int = 0) -> list[Variant]:
    """``per_family`` variants of every family, the same for a given seed; duplicates dropped."""
    rng = random.Random(seed)
    out: list[Variant] = []
    for family, draw in SAMPLERS.items():
        seen: set[str] = set()
        for _ in range(per_family * 5):
            if len(seen) == per_family:
                break
            v = draw(rng)
            if v.report not in seen:
                seen.add(v.report)
                out.append(v)
        assert seen, family
    return out
