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
4. medspaCy's ``ConText`` with the triggers of :mod:`.modifiers` (the domain's
   :class:`~.modifiers.ContextRules`) and their checks (:class:`Checks`). Each trigger gets a
   category of its own (``NEGATED_EXISTENCE/12``): medspaCy cuts a trigger's scope at the next
   trigger of the same category, which CheXpert, whose patterns apply one by one, never does
   ("Pneumonia is considered less likely": "considered" must not stop "less likely" reaching back).

spaCy and medspaCy are imported only when a pipeline is built: they take seconds to import, and
``clinieval --help`` must not pay for them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.benchmarks.medeval.items import CHEST, CodeValue
from clinieval.benchmarks.medeval.labeller.aggregate import Mention, aggregate
from clinieval.benchmarks.medeval.labeller.modifiers import (
    ABNORMAL_SIZE,
    COPULAS,
    LIST_STOPS,
    NEGATED,
    PRECEDENCE,
    UNCERTAIN,
    UNCERTAIN_FIRST,
    ContextRules,
    Modifier,
)
from clinieval.benchmarks.medeval.labeller.rules import DomainRules, Phrase, rules_for_domain

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

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


CheckFunction = Callable[["Span", "Span", "Span"], bool]

CLAUSE_VERBS = frozenset({
    "is", "are", "was", "were", "appears", "appear", "remains", "remain", "has", "have", "had",
    "measures", "measure", "demonstrates", "shows",
})  # fmt: skip
"""A verb right after a mention makes it the subject of its own clause."""
AUXILIARIES = frozenset({"is", "are", "was", "were", "has", "have", "had", "been", "be", "now", "since"})
NEAR_STOPS = frozenset({"with", "without", "and", "or", "but"}) | ABNORMAL_SIZE


class Checks:
    """The ``check`` functions of :mod:`.modifiers` (see its docstring), bound to one pipeline's
    structure words. Each takes medspaCy's ``(target, modifier, between)`` and works out the
    tokens between the two itself (medspaCy's ``between`` is not that for backward triggers)."""

    def __init__(self, context: ContextRules) -> None:
        self.structures = context.structures
        stable = {w for m in context.modifiers if m.check == "structure" for w in m.literal.lower().split()}
        self.after_clause = COPULAS | stable | {",", "and", "in", "at"}
        """What may follow a list's verb before its normality statement: "contour is stable and normal"."""

    def function(self, check: str) -> CheckFunction | None:
        return {
            "normal": self.normal,
            "structure": self.structure,
            "nearest": self.nearest,
            "participle": self.participle,
            "predicate": self.predicate,
            "dropped_of": self.dropped_of,
        }.get(check)

    def names_structure(self, target: Span) -> bool:
        text = target.text.lower()
        return any(word in text for word in self.structures)

    @staticmethod
    def gap(target: Span, modifier: Span) -> Span:
        doc = target.doc
        if target.start >= modifier.end:
            return doc[modifier.end : target.start]
        return doc[target.end : modifier.start]

    @staticmethod
    def mention_tokens(doc: Doc, structures_only: frozenset[str] | None = None) -> set[int]:
        tokens: set[int] = set()
        for m in doc.spans[MENTIONS]:
            if structures_only is None or any(w in m.text.lower() for w in structures_only):
                tokens.update(range(m.start, m.end))
        return tokens

    def finding_tokens(self, doc: Doc) -> set[int]:
        """Tokens of mentions that name a finding, not a structure ("effusion", "calcified")."""
        return self.mention_tokens(doc) - self.mention_tokens(doc, self.structures)

    @staticmethod
    def member_word(token: Token) -> bool:
        """A word that may be (part of) a list member: "pulmonary", "XXXX", "soft-tissue"."""
        return token.is_alpha or (not token.is_punct and any(c.isalpha() for c in token.text))

    def in_list(self, gap: Span, backward: bool) -> bool:
        """The gap is part of the list one normality statement describes: members (structures and
        anything that is no finding), commas and conjunctions, no word of ``LIST_STOPS``; going
        back to a subject, its verb may come once, and nothing but the statement's words after it."""
        findings = self.finding_tokens(gap.doc)
        clause = False
        for t in gap:
            word = t.lower_
            if clause:
                if word not in self.after_clause:
                    return False
            elif t.i in findings or word in LIST_STOPS:
                return False
            elif word in CLAUSE_VERBS or word in ("be", "been"):
                if not backward:
                    return False
                clause = True
            elif not (word in (",", "and", "or") or self.member_word(t)):
                return False
        return True

    @staticmethod
    def sized(target: Span, before: int = 2) -> bool:
        """The target or the words just before it say the structure is abnormal ("enlarged heart
        size"): no normality statement further off describes it."""
        doc = target.doc
        start = max(target.sent.start, target.start - before)
        return any(t.lower_ in ABNORMAL_SIZE for t in doc[start : target.end])

    def normal(self, target: Span, modifier: Span, _between: Span) -> bool:
        gap = self.gap(target, modifier)
        if target.start >= modifier.end:  # "normal interstitial markings", "normal heart size and contour"
            if len(gap) <= 2 and all(t.is_alpha and t.lower_ not in NEAR_STOPS for t in gap):
                return True
            after = target.doc[target.end] if target.end < len(target.doc) else None
            described = after is not None and (after.lower_ in CLAUSE_VERBS or after.lower_ in ABNORMAL_SIZE)
            return (
                self.names_structure(target)
                and not described
                and not self.sized(target, 0)
                and self.in_list(gap, backward=False)
            )
        if all(t.lower_ in COPULAS for t in gap):  # "markings are normal"
            return True
        return self.names_structure(target) and not self.sized(target) and self.in_list(gap, backward=True)

    def structure(self, target: Span, modifier: Span, _between: Span) -> bool:
        """A structure whose size the sentence does not state near it: not in the mention itself
        ("enlarged heart"), not between it and "stable", not three words before or after it."""
        if not self.names_structure(target):
            return False
        doc = target.doc
        sent = target.sent
        start = min(max(sent.start, target.start - 3), modifier.start)
        end = max(min(sent.end, target.end + 3), modifier.end)
        return not any(t.lower_ in ABNORMAL_SIZE for t in doc[start:end])

    def predicate(self, target: Span, modifier: Span, between: Span) -> bool:
        """Forward: the nearest mention. Backward: the subject the word is said of, with nothing
        but a verb between ("the heart is borderline", "heart size borderline")."""
        if target.start >= modifier.end:
            return self.nearest(target, modifier, between)
        gap = self.gap(target, modifier)
        subject = self.mention_tokens(target.doc, self.structures)  # "[the heart] size is borderline"
        return len(gap) <= 4 and all(t.lower_ in COPULAS or t.lower_ == "xxxx" or t.i in subject for t in gap)

    def dropped_of(self, target: Span, modifier: Span, _between: Span) -> bool:
        """ "clear airspace disease", "clear focal consolidation or effusion": up to two words
        before the first finding, then only findings, their words and conjunctions."""
        if target.start < modifier.end or self.names_structure(target):
            return False
        doc = target.doc
        after = doc[target.end] if target.end < len(doc) else None
        if after is not None and (after.lower_ in CLAUSE_VERBS or after.lower_ in ABNORMAL_SIZE):
            return False
        mentions = self.mention_tokens(doc)
        lead = 0
        seen_mention = False
        for t in self.gap(target, modifier):
            word = t.lower_
            if t.i in mentions:
                seen_mention = True
            elif word in LIST_STOPS or word in CLAUSE_VERBS:
                return False
            elif seen_mention:
                if not (word in (",", "and", "or") or t.is_alpha):
                    return False
            elif not t.is_alpha or word in ("and", "or") or (lead := lead + 1) > 2:
                return False
        return True

    def nearest(self, target: Span, modifier: Span, _between: Span) -> bool:
        gap = self.gap(target, modifier)
        return not any(gap.start <= m.start and m.end <= gap.end for m in target.doc.spans[MENTIONS])

    def participle(self, target: Span, modifier: Span, between: Span) -> bool:
        if target.start < modifier.end:
            return True
        doc = target.doc
        if modifier.start > 0 and not doc[modifier.start].is_sent_start:
            before = doc[modifier.start - 1]
            if before.lower_ in AUXILIARIES or before.i in self.mention_tokens(doc):
                return False
        gap = self.gap(target, modifier)
        return not any(t.is_punct for t in gap) and self.nearest(target, modifier, between)


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


def context_rules(modifiers: Sequence[Modifier], checks: Checks, medspacy: Any) -> list[Any]:
    """One ``ConTextRule`` per trigger, each with a category of its own (``NEGATED_EXISTENCE/3``)."""
    rule = medspacy.context.ConTextRule
    return [
        rule(
            m.literal,
            f"{m.category}/{i}",
            direction=m.direction,
            max_scope=m.max_scope,
            on_modifies=checks.function(m.check),
        )
        for i, m in enumerate(modifiers)
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
    triggers = context_rules(rules.context.modifiers, Checks(rules.context), medspacy)
    add_rules(nlp, "medspacy_context", {"rules": None, **groups}, triggers)
    return nlp


# --- reading a processed report -------------------------------------------------------------


def value_of(span: Span) -> CodeValue:
    """The mention's value from its ConText modifiers, in CheXpert's order of passes."""
    categories = {m.category.partition("/")[0] for m in span._.modifiers}
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
