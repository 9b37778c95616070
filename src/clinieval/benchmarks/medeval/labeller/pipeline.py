"""The medspaCy pipeline that finds and classifies mentions, and :class:`Labeller`, its front door.

spaCy's blank English pipeline (a tokenizer, nothing trained, nothing downloaded), then:

1. ``sentencizer`` plus a split at blank lines: ConText's triggers reach to the end of their
   sentence at most, and a report's lines without full stops are still separate statements.
2. The phrases, one span group for the mentions and one for the unmention phrases that cancel a
   mention they overlap. Phrases are regular expressions over the text, widened to whole tokens
   ("atelecta" covers "atelectasis"), as medspaCy's ``TargetMatcher`` widens its regex rules
   (see :class:`PhraseSpans` for why that matcher is not used).
3. medspaCy's ``Sectionizer`` with radiology headers: mentions under INDICATION, HISTORY,
   COMPARISON, TECHNIQUE or EXAMINATION state the clinical question or the method, not a finding,
   and are dropped. A header also starts a sentence.
4. medspaCy's ``ConText`` with the triggers of :mod:`.modifiers`.

spaCy and medspaCy are imported only when a pipeline is built: they take seconds to import, and
``clinieval --help`` must not pay for them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.benchmarks.medeval.labeller.aggregate import Mention, aggregate
from clinieval.benchmarks.medeval.labeller.modifiers import (
    MODIFIERS,
    NEGATED,
    PRECEDENCE,
    STRUCTURE_WORDS,
    UNCERTAIN,
    UNCERTAIN_FIRST,
    Modifier,
)
from clinieval.benchmarks.medeval.labeller.rules import DomainRules, Phrase, rules_for_domain
from clinieval.benchmarks.medeval.records import CHEST, CodeValue

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span

MENTIONS = "clinieval_mentions"
UNMENTIONS = "clinieval_unmentions"
BLANK_LINES = "clinieval_blank_line_sentences"
PHRASE_SPANS = "clinieval_phrase_spans"

VALUE_OF: Mapping[str, CodeValue] = {UNCERTAIN_FIRST: "unknown", NEGATED: "negative", UNCERTAIN: "unknown"}

SECTION_HEADERS: Mapping[str, tuple[str, ...]] = {
    "indication": ("indication:", "indications:", "clinical indication:", "reason for exam:",
                   "reason for examination:", "reason for study:", "reason:"),
    "history": ("history:", "clinical history:", "clinical information:", "clinical data:"),
    "comparison": ("comparison:", "comparisons:", "prior studies:"),
    "technique": ("technique:", "procedure:", "views:"),
    "examination": ("examination:", "exam:", "study:"),
    "findings": ("findings:", "finding:"),
    "impression": ("impression:", "impressions:", "conclusion:", "conclusions:", "summary:", "opinion:"),
}  # fmt: skip
"""Radiology section headers (with their colon, so that "impression" in a sentence is no header)."""

SKIPPED_SECTIONS = frozenset({"indication", "history", "comparison", "technique", "examination"})

ABBREVIATIONS = (
    (r"\bw/o\b", "without"),
    (r"\bw/", "with "),
    (r"\br/o\b", "rule out"),
    (r"\bs/p\b", "status post"),
    (r"\bc/w\b", "consistent with"),
    (r"\band/or\b", "or"),
)
"""Slashed shorthand, expanded before "x/y" becomes "x or y" (which would read "w/o" as "w or o")."""


def normalise(text: str) -> str:
    """Report text as the matchers read it (much as CheXpert cleans its input): shorthand expanded,
    "x/y" read as "x or y", doubled full stops removed, a space after a full stop or comma that
    runs into a word, blank lines kept as sentence breaks and other whitespace made one space."""
    for pattern, replacement in ABBREVIATIONS:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    text = re.sub(r"(?<=[A-Za-z])/(?=[A-Za-z])", " or ", text)
    text = re.sub(r"\.\.+", ".", text)
    text = re.sub(r"(?<=[A-Za-z][.,])(?=[A-Za-z])", " ", text)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


# --- building the pipeline ------------------------------------------------------------------


def split_at_blank_lines(doc: Doc) -> Doc:
    """A blank line ends a sentence, full stop or not."""
    for token in doc[:-1]:
        if token.is_space and token.text.count("\n") >= 2:
            doc[token.i + 1].is_sent_start = True
    return doc


def after_or_adjacent(target: Span, modifier: Span, _between: Span) -> bool:
    """Forward freely; backward only onto the mention right before the trigger."""
    return target.start >= modifier.end or target.end == modifier.start


def names_structure(target: Span, _modifier: Span, _between: Span) -> bool:
    """Only a mention named by a structure word (see :data:`.modifiers.STRUCTURE_WORDS`)."""
    text = target.text.lower()
    return any(word in text for word in STRUCTURE_WORDS)


CHECKS = {"after_or_adjacent": after_or_adjacent, "structure": names_structure}


def _import_medspacy() -> Any:
    """medspaCy, imported without its side effect on the process: importing it switches every
    warning off (``warnings.filterwarnings("ignore")``), which ``catch_warnings`` undoes."""
    with warnings.catch_warnings():
        import medspacy  # type: ignore[import-untyped]

        return medspacy


@contextmanager
def quiet_matchers() -> Iterator[None]:
    """Without spaCy's warning W036 on every report: medspaCy runs a token matcher, a phrase
    matcher and a regex matcher for every component, and some of them have no patterns here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[W036\]")
        yield


def context_rules(modifiers: Sequence[Modifier], medspacy: Any) -> list[Any]:
    rule = medspacy.context.ConTextRule
    return [
        rule(
            m.literal,
            m.category,
            direction=m.direction,
            max_scope=m.max_scope,
            on_modifies=CHECKS.get(m.check),
        )
        for m in modifiers
    ]


def flat(table: Mapping[str, Sequence[Phrase]]) -> list[tuple[str, Phrase]]:
    return [(code, p) for code, phrases in table.items() for p in phrases]


class PhraseSpans:
    """A spaCy component: every phrase's matches as spans labelled with their code, widened to
    whole tokens, in one span group; each span's ``id`` is its phrase's index in :attr:`phrases`.

    medspaCy's ``TargetMatcher`` runs regular expressions too, but rebuilds the report's text from
    its tokens for each pattern: with CheXpert's ~230 patterns that was 85% of the labeller's time
    in a profile. Here the text is built once per report and the widening is the same."""

    def __init__(self, group: str) -> None:
        from spacy.tokens import Span

        self.group = group
        self.phrases: list[Phrase] = []
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        self._span = Span

    def add(self, phrases: Sequence[tuple[str, Phrase]]) -> None:
        self.phrases.extend(p for _, p in phrases)
        self._patterns.extend((code, re.compile(p.pattern, re.IGNORECASE)) for code, p in phrases)

    def __call__(self, doc: Doc) -> Doc:
        text = doc.text
        spans = []
        for i, (code, pattern) in enumerate(self._patterns):
            for match in pattern.finditer(text):
                found = doc.char_span(match.start(), match.end(), alignment_mode="expand")
                if found is not None and len(found):
                    spans.append(self._span(doc, found.start, found.end, label=code, span_id=i))
        doc.spans[self.group] = spans
        return doc


def phrase_spans(nlp: Language, name: str, group: str) -> PhraseSpans:
    """spaCy's factory for :class:`PhraseSpans` (a pipeline only holds registered components)."""
    return PhraseSpans(group)


def section_rules(medspacy: Any) -> list[Any]:
    rule = medspacy.section_detection.SectionRule
    return [rule(literal, category) for category, literals in SECTION_HEADERS.items() for literal in literals]


def add_rules(nlp: Language, factory: str, config: dict[str, Any], rules: list[Any], name: str = "") -> None:
    """Add a medspaCy component and its rules (spaCy types components as plain callables)."""
    component: Any = nlp.add_pipe(factory, name=name or None, config=config)
    component.add(rules)


def build_pipeline(rules: DomainRules) -> Language:
    """A spaCy pipeline that leaves each report's mentions in ``doc.spans[MENTIONS]`` with their
    ConText modifiers, and the unmentions in ``doc.spans[UNMENTIONS]``."""
    import spacy
    from spacy.language import Language

    medspacy = _import_medspacy()
    if not Language.has_factory(BLANK_LINES):
        Language.component(BLANK_LINES, func=split_at_blank_lines)
    if not Language.has_factory(PHRASE_SPANS):
        Language.factory(PHRASE_SPANS, default_config={"group": MENTIONS}, func=phrase_spans)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe(BLANK_LINES)
    for name, group, table in (
        ("mentions", MENTIONS, rules.mentions),
        ("unmentions", UNMENTIONS, rules.unmentions),
    ):
        add_rules(nlp, PHRASE_SPANS, {"group": group}, flat(table), name)
    groups = {"input_span_type": "group", "span_group_name": MENTIONS, "span_attrs": None}
    sections = {"rules": None, "apply_sentence_boundary": True, **groups}
    add_rules(nlp, "medspacy_sectionizer", sections, section_rules(medspacy))
    add_rules(nlp, "medspacy_context", {"rules": None, **groups}, context_rules(MODIFIERS, medspacy))
    return nlp


# --- reading a processed report -------------------------------------------------------------


def value_of(span: Span) -> CodeValue:
    """The mention's value from its ConText modifiers, in CheXpert's order of passes."""
    categories = {m.category for m in span._.modifiers}
    return next((VALUE_OF[c] for c in PRECEDENCE if c in categories), "positive")


def overlaps(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


def mentions_of(doc: Doc, phrases: Sequence[Phrase]) -> list[Mention]:
    """The report's mentions outside skipped sections and not cancelled by an unmention
    (``phrases``: the mention component's :attr:`PhraseSpans.phrases`)."""
    cancelled: dict[str, list[Span]] = {}
    for span in doc.spans[UNMENTIONS]:
        cancelled.setdefault(span.label_, []).append(span)
    found = []
    for span in doc.spans[MENTIONS]:
        if doc[span.start]._.section_category in SKIPPED_SECTIONS:
            continue
        if any(overlaps(span, u) for u in cancelled.get(span.label_, ())):
            continue
        phrase = phrases[span.id]
        value = value_of(span)
        found.append(
            Mention(span.label_, "unknown" if phrase.hedged and value == "positive" else value, phrase)
        )
    return found


class Labeller:
    """Labels radiology reports of one domain: per report, every code's value.

    ``Labeller("chest x-ray")`` uses CheXpert's phrase lists (``chexpert``: the labeler's folder,
    default the shared copy beside the checkout); any other domain uses its rules file, or
    ``rules_file`` when given. Building the pipeline takes a few seconds (imports); reuse it.
    An empty report mentions nothing, so its no-finding code is positive (as with CheXpert).
    """

    def __init__(
        self, domain: str = CHEST, *, chexpert: Path | None = None, rules_file: Path | None = None
    ) -> None:
        self.rules = rules_for_domain(domain, chexpert=chexpert, rules_file=rules_file)
        self.codes = self.rules.codes
        self._nlp = build_pipeline(self.rules)
        self._phrases: list[Phrase] = self._nlp.get_pipe("mentions").phrases  # type: ignore[attr-defined]

    def mentions(self, report: str) -> list[Mention]:
        """What the labels are made of, for explaining one report's labels."""
        with quiet_matchers():
            return mentions_of(self._nlp(normalise(report)), self._phrases)

    def label(self, reports: Sequence[str], batch_size: int = 64) -> list[dict[str, CodeValue]]:
        """One dict code -> value per report, in the order of ``reports`` and of the codes."""
        with quiet_matchers():
            docs = self._nlp.pipe((normalise(r) for r in reports), batch_size=batch_size)
            return [aggregate(mentions_of(doc, self._phrases), self.rules) for doc in docs]


def label_reports(
    reports: Sequence[str],
    domain: str = CHEST,
    *,
    chexpert: Path | None = None,
    rules_file: Path | None = None,
) -> list[dict[str, CodeValue]]:
    """:meth:`Labeller.label` for a one-off call."""
    return Labeller(domain, chexpert=chexpert, rules_file=rules_file).label(reports)
