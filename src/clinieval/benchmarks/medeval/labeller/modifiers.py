"""The ConText modifiers: which words around a mention make it negative or uncertain, and how far.

CheXpert decides with dependency-parse patterns, in three passes: uncertainty that must win over
negation ("cannot exclude"), then negation, then the remaining uncertainty ("may reflect"). No
parser is used here (spaCy's blank English pipeline has none and no model may be downloaded), so
the same vocabulary is written as medspaCy ConText rules: a trigger phrase, the direction of its
scope in the sentence, how many tokens it reaches and a check on what it may modify. The three
passes become three categories ranked in that order (:data:`PRECEDENCE`).

Which triggers are on comes from the labeler's own pattern files when they are there
(:mod:`.patterns`): every word of a file switches on its entry in :data:`LEXICON` for that file's
pass, the words no entry knows get plain triggers of their own (:func:`generated`), and an entry
whose word the files do not use stays off. :data:`LEXICON` is this package's part: how a word is
written in reports and which way it reaches ("resolve": "has resolved" looks back to its subject;
"removal": "removal of" looks forward). Words that only ever appear beside another word of the same
pattern ("evidence" in "no evidence of", "limit" needs "within normal") have an empty entry: the
other word carries the trigger. Without the pattern files (a domain with its own rules file) every
entry is on. :data:`ADDITIONS` are always on: terminators, pseudo-triggers, and a few hedges
plain English has that the patterns lack ("suggestive of", "equivocal").

Checks (what a trigger may modify, besides being in its sentence and scope):

* ``normal``: a normality statement ("normal", "unremarkable", "within normal limits") negates the
  mention it describes: one right next to it, one up to two words after it ("normal interstitial
  markings"), or a structure ("heart size", "mediastinal contour") anywhere in the same list:
  "Normal heart size and mediastinal contour", "Heart size, mediastinal contour and pulmonary
  vascularity are within normal limits", "normal in size and contour", "The heart and pulmonary
  XXXX are normal". A list's members may be anything but a finding's mention or a word of
  :data:`LIST_STOPS` (a structure said to be enlarged, "with ..."): reports list what they found
  normal, observations or not ("bony structures", Open-i's "XXXX"). A clause verb ends the list:
  after it only the statement's own words may follow ("is stable and normal"), so "Heart size is
  stable, the lungs are normal" leaves the heart size alone.
* ``structure``: "stable / unchanged" makes a structure uncertain (CheXpert: "stable heart size"
  says nothing about the size) unless its size is stated ("stable enlargement of the cardiac
  silhouette" is positive), and leaves findings alone ("stable cardiomegaly" is positive).
* ``nearest``: only the nearest mention ("atelectasis versus pneumonia" leaves the opacity before
  them alone; "with infection not excluded" leaves the atelectasis before it alone).
* ``predicate``: forward onto the nearest mention ("borderline enlarged heart"); backward only onto
  the subject it is said of ("the heart is borderline in size", "heart size borderline"), so that
  "atelectasis, borderline heart size" leaves the atelectasis alone.
* ``dropped_of``: "clear" with its "of" dropped ("lungs are expanded and clear airspace disease"):
  a finding right after it, or the rest of a list that starts there; never a structure, nor a
  mention that has a clause of its own ("lungs clear bilateral effusions are present").
* ``participle``: backward onto its subject ("pneumonia resolved"); forward only as a participle
  before its noun ("resolved pneumonia"), not as a predicate that ends a clause ("the effusion has
  resolved, chest tube in place").

One literal has one rule: medspaCy keeps one of two triggers matching the same words, so a word
that reaches both ways is one BIDIRECTIONAL rule whose check tells the two apart.

Plain data, so that reading it needs no spaCy; :mod:`.pipeline` turns it into ``ConTextRule``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from clinieval.benchmarks.medeval.labeller.patterns import (
    NEGATION_FILE,
    POST_NEGATION_FILE,
    PRE_NEGATION_FILE,
    Vocabulary,
)

Direction: TypeAlias = Literal["FORWARD", "BACKWARD", "BIDIRECTIONAL", "TERMINATE", "PSEUDO"]
Check: TypeAlias = Literal["", "normal", "structure", "nearest", "participle", "predicate", "dropped_of"]

UNCERTAIN_FIRST = "UNCERTAIN_FIRST"
"""CheXpert's pre-negation uncertainty: phrases holding a negation that still mean "maybe"."""
NEGATED = "NEGATED_EXISTENCE"
UNCERTAIN = "POSSIBLE_EXISTENCE"
TERMINATE = "TERMINATE"
PSEUDO = "PSEUDO"

PRECEDENCE = (UNCERTAIN_FIRST, NEGATED, UNCERTAIN)
"""The first category among a mention's modifiers decides its value (none: positive)."""

CATEGORY_OF_FILE: Mapping[str, str] = {
    PRE_NEGATION_FILE: UNCERTAIN_FIRST,
    NEGATION_FILE: NEGATED,
    POST_NEGATION_FILE: UNCERTAIN,
}

STRUCTURE_WORDS = frozenset({
    "cardiomediastinal", "pericardial", "mediastinal", "mediastinum", "cardiomediastinum", "contour",
    "configuration", "silhouette", "size", "heart", "shadow",
})  # fmt: skip
"""Words that name a structure, not a finding: "stable heart size" says nothing about whether the
heart is enlarged, so it is uncertain, while "stable cardiomegaly" is positive (CheXpert's rule).
The pattern files' own list replaces this one when they are read."""

ABNORMAL_SIZE = frozenset({
    "enlarged", "enlargement", "enlarging", "widened", "widening", "increased", "prominent",
    "prominence", "large", "larger", "dilated", "dilatation", "abnormal", "cardiomegaly",
})  # fmt: skip
"""Words that state a structure is abnormal: a stable structure with one of them is positive, and
a normality statement does not reach over them."""

COPULAS = frozenset({
    "is", "are", "was", "were", "be", "been", "appears", "appear", "remains", "remain", "again",
    "otherwise", "now", "still", "also", "overall", "grossly", "both",
})  # fmt: skip
"""Words between a subject and its normality statement ("markings are otherwise normal")."""

LIST_STOPS = frozenset({
    "with", "without", "but", "no", "not", "versus", "vs", "except", "than", "there", "new",
    "tortuous", "tortuosity", "ectatic", "shifted", "deviated", "displaced", "asymmetric", "irregular",
    "bulging", "lobulated", "obscured", "blunted", "unfolded", "unfolding",
}) | ABNORMAL_SIZE  # fmt: skip
"""Words that end a list a normality statement describes: a preposition or negation that starts a
phrase of its own ("normal heart size with ..."), or a word that says a member is abnormal. Any
other word may name a list member that is no observation ("The heart and pulmonary XXXX are
normal": "pulmonary XXXX", "bony structures", "soft tissues")."""

DEGREE_ADVERBS = ("significantly", "appreciably", "substantially", "definitely", "grossly", "markedly")
"""Adverbs between "not" and the word it negates ("not significantly enlarged")."""

SIZE_PARTICIPLES = ("enlarged", "widened", "increased", "dilated")


@dataclass(frozen=True, slots=True)
class Modifier:
    """One trigger phrase (see the module's docstring for ``check``)."""

    literal: str
    category: str
    direction: Direction
    max_scope: int | None = None
    check: Check = ""


def _many(
    category: str, direction: Direction, literals: str, max_scope: int | None = None, check: Check = ""
) -> tuple[Modifier, ...]:
    return tuple(Modifier(w.strip(), category, direction, max_scope, check) for w in literals.split("|"))


def _not_size(category: str) -> tuple[Modifier, ...]:
    """ "not enlarged", "not significantly enlarged", ... looking back to their subject."""
    phrases = [f"not {w}" for w in SIZE_PARTICIPLES] + [
        f"not {a} {w}" for a in DEGREE_ADVERBS for w in SIZE_PARTICIPLES
    ]
    phrases += [f"no longer {w}" for w in SIZE_PARTICIPLES]
    return _many(category, "BACKWARD", "|".join(phrases), 8)


def _entries(
    category: str, table: Mapping[str, tuple[Modifier, ...] | str]
) -> dict[str, tuple[Modifier, ...]]:
    """A lexicon section; a string value is a note on why the word has no trigger of its own."""
    return {word: (() if isinstance(mods, str) else mods) for word, mods in table.items()}


N, U, F = NEGATED, UNCERTAIN, UNCERTAIN_FIRST
NORMAL_FAMILY = (
    "normal|top normal|top-normal|upper normal|upper-normal|high normal|low normal|borderline normal|"
    "is borderline normal|normal-sized"
)

PRE_NEGATION: dict[str, tuple[Modifier, ...]] = _entries(F, {
    "cannot": (
        *_many(F, "FORWARD", "cannot exclude|can not exclude|cannot rule out|can not rule out|"
               "cannot entirely exclude|cannot completely exclude|cannot definitely exclude"),
        *_many(F, "BACKWARD", "cannot be excluded|can not be excluded|cannot be ruled out|"
               "can not be ruled out|cannot be entirely excluded|cannot be completely excluded",
               10, "nearest"),
    ),
    "exclude": (
        *_many(F, "FORWARD", "difficult to exclude|not exclude"),
        *_many(F, "BACKWARD", "not excluded|not be excluded|not entirely excluded|not completely excluded|"
               "not definitely excluded|not been excluded", 10, "nearest"),
    ),
    "rule": (
        *_many(F, "FORWARD", "no evidence to rule out"),
        *_many(F, "BACKWARD", "not ruled out|not be ruled out|not been ruled out", 10, "nearest"),
    ),
    "new": _many(F, "FORWARD", "no new"),
    "no": "in 'no new' and 'no evidence to rule out'",
    "not": "in 'not excluded' and 'not ruled out'",
    "out": "in 'rule out'",
    "area": "in 'no new area of', which 'no new' covers",
    "evidence": "in 'no evidence to rule out'",
})  # fmt: skip

NEGATION: dict[str, tuple[Modifier, ...]] = _entries(N, {
    "no": (
        *_many(N, "FORWARD", "no|no longer"),
        *_many(N, "BACKWARD", "no longer seen|no longer present|no longer visualized|no longer evident|"
               "no longer identified|no longer demonstrated|no longer visible", 8),
    ),
    "not": (
        *_many(N, "FORWARD", "not"),
        *_many(N, "BACKWARD", "not seen|not identified|not present|not demonstrated|not detected|not noted|"
               "not evident|not visible|not been seen|not definitely seen", 8),
    ),
    "without": _many(N, "FORWARD", "without"),
    "normal": _many(N, "BIDIRECTIONAL", NORMAL_FAMILY, None, "normal"),
    "unremarkable": _many(N, "BIDIRECTIONAL", "unremarkable|unremarkable in appearance", None, "normal"),
    "limit": _many(N, "BIDIRECTIONAL",
                   "within normal limits|within normal limit|within the normal limits|within normal range|"
                   "within normal|"
                   "within the normal range|upper limits of normal|upper limit of normal|"
                   "at the upper limits of normal|at the upper limit of normal|upper limits normal|"
                   "upper limit normal|wnl", None, "normal"),
    "clear": (
        # "clear of X", and Open-i's de-identified "clear XXXX X" (the XXXX is "of" or "without")
        *_many(N, "FORWARD", "clear of|cleared of|clear XXXX|clear XXXX XXXX"),
        # ... and "clear X" with the "of" dropped ("lungs are expanded and clear airspace disease")
        *_many(N, "FORWARD", "clear", 10, "dropped_of"),
        *_many(N, "BACKWARD", "cleared|has cleared|have cleared|has been cleared|has since cleared|"
               "have since cleared|now cleared", 8),
    ),
    "clearing": _many(N, "FORWARD", "clearing of|interval clearing of"),
    "resolution": (
        *_many(N, "FORWARD", "resolution of|interval resolution of|complete resolution of"),
        *_many(N, "BACKWARD", "with resolution|with interval resolution", 8, "nearest"),
    ),
    "resolve": (
        *_many(N, "BACKWARD", "has resolved|have resolved|has since resolved|have since resolved|"
               "is resolved|are resolved|now resolved|has completely resolved", 8),
        *_many(N, "BIDIRECTIONAL", "resolved", 8, "participle"),
    ),
    "remove": _many(N, "BACKWARD", "removed|has been removed|have been removed|was removed|were removed|"
                    "since removed|since been removed", 8),
    "removal": _many(N, "FORWARD", "removal of|interval removal of"),
    "absent": (
        *_many(N, "BACKWARD", "is absent|are absent|now absent", 8),
        *_many(N, "BIDIRECTIONAL", "absent", 8, "participle"),
    ),
    "negative": _many(N, "FORWARD", "negative for"),
    "free": _many(N, "FORWARD", "free of"),
    "history": _many(N, "FORWARD", "history of"),
    "drainage": _many(N, "FORWARD", "drainage of"),
    "disappearance": _many(N, "FORWARD", "disappearance of"),
    "exclude": _many(N, "BACKWARD", "excluded|is excluded|are excluded|been excluded|has been excluded", 8),
    "rule": _many(N, "BACKWARD", "ruled out|has been ruled out|been ruled out", 8),
    "enlarge": _not_size(N),
    "negcc": _many(N, "FORWARD", "rather than"),
    # words that only appear beside one that carries the trigger
    "see": "in 'not seen', 'no longer seen'", "visualize": "in 'no longer visualized'",
    "within": "in 'within normal limits'", "at": "in 'at the upper limits of normal'",
    "upper": "in 'upper limits of normal'", "evidence": "in 'no evidence of', 'without evidence of'",
    "focus": "in 'no focus of'", "area": "in 'no area of'", "finding": "in 'no finding of'",
    "development": "in 'no development of'", "developing": "in 'no evidence of developing'",
    "obvious": "in 'no obvious'", "definite": "in 'no definite'", "moderate": "in 'no moderate to'",
    "acute": "in 'no acute finding'", "associate": "in 'no obvious associated'",
    "suggest": "in 'no X to suggest Y'", "explain": "in 'no X to explain Y'",
    "diagnose": "in 'no X to diagnose Y'", "appear": "in 'appears normal'", "remain": "in 'remains normal'",
    "be": "in 'there is no'", "show": "in 'shows normal'", "demonstrate": "in 'demonstrates normal'",
    "display": "in 'displays normal'", "present": "in 'presents normal'",
    "appearance": "in 'normal appearance of'", "structure": "in 'structures appear normal'",
    "vascularity": "in 'normal pulmonary vascularity'", "pulmonary": "in 'normal pulmonary vascularity'",
    "interval": "in 'interval resolution'", "of": "a preposition", "for": "a preposition",
    "to": "a preposition", "out": "in 'ruled out'", "or": "'no' reaching over an 'or' list",
    "previously": "'previously demonstrated X' is left alone: a finding seen before is often still there",
    "silhouette": "'obscured silhouette': here 'obscured' is uncertainty (post-negation file)",
    "obscure": "'obscured silhouette': here 'obscured' is uncertainty (post-negation file)",
})  # fmt: skip

POST_NEGATION: dict[str, tuple[Modifier, ...]] = _entries(U, {
    "may": (*_many(U, "FORWARD", "may|may be"),
            *_many(U, "BACKWARD", "may be present|may be seen|may also be present", 8, "nearest")),
    "might": (*_many(U, "FORWARD", "might"), *_many(U, "BACKWARD", "might be present", 8, "nearest")),
    "could": (*_many(U, "FORWARD", "could"), *_many(U, "BACKWARD", "could be present", 8, "nearest")),
    "would": _many(U, "FORWARD", "would"),
    "can": (*_many(U, "FORWARD", "can represent|can reflect|can indicate"),
            *_many(U, "BACKWARD", "can be present", 8, "nearest")),
    "possibly": _many(U, "FORWARD", "possibly"),
    "possible": (*_many(U, "FORWARD", "possible|possibility of"),
                 *_many(U, "BACKWARD", "is possible|are possible|also possible", 8, "nearest")),
    "probable": _many(U, "FORWARD", "probable|probably"),
    "presumably": _many(U, "FORWARD", "presumably|presumed"),
    "questionable": (
        *_many(U, "FORWARD", "questionable"),
        *_many(U, "BACKWARD", "is questionable|are questionable|remains questionable", 8, "nearest"),
    ),
    "question": (*_many(U, "FORWARD", "question of|questioned"),
                 *_many(U, "BACKWARD", "is questioned|are questioned|in question", 8, "nearest")),
    "suspect": (*_many(U, "FORWARD", "suspect"),
                *_many(U, "BACKWARD", "is suspected|are suspected", 8, "nearest")),
    "suspected": _many(U, "BIDIRECTIONAL", "suspected", 8, "nearest"),
    "suspicious": _many(U, "FORWARD", "suspicious for|suspicious of|suspicious"),
    "suspicion": _many(U, "FORWARD", "suspicion for|suspicion of"),
    "worrisome": _many(U, "FORWARD", "worrisome for|worrisome"),
    "concern": _many(U, "FORWARD", "concern for|concerning for"),
    "favor": (*_many(U, "FORWARD", "favor|favoring"), *_many(U, "BACKWARD", "is favored", 8, "nearest")),
    "consider": (*_many(U, "FORWARD", "consider|considered"),
                 *_many(U, "BACKWARD", "is considered|are considered", 8, "nearest")),
    "suggestion": _many(U, "FORWARD", "suggestion of"),
    "likely": _many(U, "BIDIRECTIONAL", "less likely", 4),
    "maybe": _many(U, "FORWARD", "maybe"),
    "secondary": _many(U, "FORWARD", "secondary to"),
    "differential": _many(U, "FORWARD", "differential diagnosis|differential includes|differential"),
    # one rule both ways: "borderline enlarged heart" and "the heart is borderline (in size)" alike
    "borderline": _many(U, "BIDIRECTIONAL", "borderline", 8, "predicate"),
    "evaluate": _many(U, "BACKWARD", "not well evaluated|not evaluated|poorly evaluated|"
                      "incompletely evaluated|not fully evaluated|not well assessed", 8),
    "visualize": _many(U, "BACKWARD", "not well visualized|not visualized|poorly visualized|"
                       "not well seen|not clearly visualized", 8),
    "clearly": _many(U, "BACKWARD", "not clearly seen|not clearly identified", 8),
    "appreciate": _many(U, "BACKWARD", "not appreciated|not well appreciated", 8),
    "obscure": (*_many(U, "BACKWARD", "is obscured|are obscured|obscured", 8),
                *_many(U, "BIDIRECTIONAL", "obscuring", 4)),
    "correlate": _many(U, "FORWARD", "correlate for|correlate clinically for"),
    "correlation": _many(U, "FORWARD", "clinical correlation for|correlation for"),
    "versus": _many(U, "BIDIRECTIONAL", "versus|vs|vs.", 6, "nearest"),
    "or": _many(U, "BIDIRECTIONAL", "or", 3),
    "and.or": _many(U, "BIDIRECTIONAL", "or", 3),
    "stable": _many(U, "BIDIRECTIONAL", "stable|grossly stable|overall stable|stable in size|"
                    "stable in appearance|stable appearance of", 5, "structure"),
    "unchanged": _many(U, "BIDIRECTIONAL", "unchanged|grossly unchanged|unchanged in appearance|"
                       "unchanged in size", 5, "structure"),
    "change": _many(U, "BIDIRECTIONAL", "no change|no significant change|no interval change|"
                    "no significant interval change|not changed|not significantly changed|without change|"
                    "without significant change|without interval change|without significant interval change|"
                    "little change|minimal change", 5, "structure"),
    "similar": _many(U, "BIDIRECTIONAL", "similar|similar to prior|similar to the prior|similar to previous|"
                     "similar in appearance", 5, "structure"),
    # words that only appear beside one that carries the trigger
    "prior": "in 'similar to prior'", "poorly": "in 'poorly evaluated'",
    "incompletely": "in 'incompletely evaluated'", "see": "in 'not clearly seen'",
    "less": "in 'less likely'", "left": "in 'question left'", "diagnosis": "in 'differential diagnosis'",
    "represent": "after a modal ('may represent')", "reflect": "after a modal", "indicate": "after a modal",
    "include": "after a modal", "relate": "after a modal", "due": "after a modal",
    "compatible": "after a modal", "consistent": "after a modal ('consistent with' alone is no hedge)",
    "appear": "after a modal", "have": "after a modal", "be": "after a modal", "present": "after a modal",
    "presence": "after a modal", "appearance": "in 'stable appearance of'",
    "clinically": "in 'correlate clinically'",
    "symptom": "in 'correlation for symptoms of'", "symptoms": "in 'correlation for symptoms of'",
    "sign": "in 'correlate for signs of'", "signs": "in 'correlate for signs of'",
    "evidence": "in 'correlate for evidence of'", "no": "in 'no new' (pre-negation)",
    "new": "in 'no new' (pre-negation)", "not": "in 'not excluded', 'not visualized', 'not appreciated'",
    "cannot": "in 'cannot exclude' (pre-negation)", "excluded": "in 'not excluded' (pre-negation)",
    "out": "in 'cannot rule out' (pre-negation)", "of": "a preposition", "for": "a preposition",
    "to": "a preposition", "with": "a preposition",
    "vascular": "a hedged mention phrase ('vascular congestion'), rules.CHEXPERT_HEDGED",
    "congestion": "a hedged mention phrase, rules.CHEXPERT_HEDGED",
    "pulmonary": "a hedged mention phrase, rules.CHEXPERT_HEDGED",
    "indistinctness": "a hedged mention phrase, rules.CHEXPERT_HEDGED",
    "prominence": "a hedged mention phrase, rules.CHEXPERT_HEDGED",
    "costophrenic": "'blunting of the costophrenic angle': 'blunt' is itself a finding phrase",
    "angle": "'blunting of the costophrenic angle'", "blunt": "'blunting of the costophrenic angle'",
    "nsubj": "a dependency label written as a lemma in the file",
    "heart": "a structure word", "size": "a structure word", "silhouette": "a structure word",
    "shadow": "a structure word", "pericardial": "a structure word", "mediastinum": "a structure word",
    "mediastinal": "a structure word", "contour": "a structure word", "configuration": "a structure word",
    "cardiomediastinum": "a structure word", "cardiomediastinal": "a structure word",
})  # fmt: skip

LEXICON: Mapping[str, Mapping[str, tuple[Modifier, ...]]] = {
    PRE_NEGATION_FILE: PRE_NEGATION,
    NEGATION_FILE: NEGATION,
    POST_NEGATION_FILE: POST_NEGATION,
}
"""Pattern file -> word -> its triggers in that file's pass (empty: the word has none of its own)."""

ADDITIONS: tuple[Modifier, ...] = (
    # hedges of plain English that the pattern files lack
    *_many(U, "FORWARD",
           "suggestive of|suggesting|suggests|suggest|indeterminate|equivocal|rule out|evaluate for|"
           "evaluation for|assess for"),
    *_many(U, "BACKWARD", "is equivocal|are equivocal|is indeterminate|are indeterminate", 8, "nearest"),
    # words that look like a trigger but are not one
    *_many(PSEUDO, "PSEUDO",
           "no increase|no decrease|not only|no further|gram negative|not necessarily"),
    # A terminator's own scope is one token each side: medspaCy only lets it cut a trigger whose
    # scope overlaps its own without lying inside it, and a whole-sentence scope would contain them.
    *_many(TERMINATE, "TERMINATE",
           "but|however|although|though|which|while|whereas|except|aside from|apart from|other than|"
           "there is|there are|there has been|there have been|there remains|;", 1),
)  # fmt: skip
"""Triggers that are on whatever the pattern files say."""


@dataclass(frozen=True, slots=True)
class ContextRules:
    """The triggers of a pipeline and the structure words its checks use."""

    modifiers: tuple[Modifier, ...]
    structures: frozenset[str]
    source: str = "the built-in lexicon"


def generated(word: str, category: str) -> tuple[Modifier, ...]:
    """Triggers for a pattern word no lexicon entry knows: the word and its common endings, near
    the mention on either side."""
    stem = word.replace(".", " ").strip()
    if not stem.replace(" ", "").isalpha():
        return ()
    forms = (
        {stem, stem + "s", stem + "d" if stem.endswith("e") else stem + "ed"} if " " not in stem else {stem}
    )
    return tuple(Modifier(f, category, "BIDIRECTIONAL", 3) for f in sorted(forms))


def unknown_words(vocabulary: Vocabulary) -> dict[str, list[str]]:
    """Pattern file -> its words that no lexicon entry knows (each gets :func:`generated`)."""
    return {
        name: sorted(w for w in words if w not in LEXICON.get(name, {}))
        for name, words in vocabulary.words.items()
    }


def _unique(modifiers: Iterable[Modifier]) -> tuple[Modifier, ...]:
    """One rule per literal, the first (in the order of the passes); medspaCy would keep only one
    of two anyway, and not by any rule of ours."""
    seen: dict[str, Modifier] = {}
    for m in modifiers:
        seen.setdefault(m.literal.lower(), m)
    return tuple(seen.values())


def context_for(vocabulary: Vocabulary | None) -> ContextRules:
    """The triggers that the pattern files' words switch on (all of the lexicon without them)."""
    if vocabulary is None:
        everything = (m for table in LEXICON.values() for mods in table.values() for m in mods)
        return ContextRules(_unique([*everything, *ADDITIONS]), STRUCTURE_WORDS)
    chosen: list[Modifier] = []
    for name, words in vocabulary.words.items():
        table = LEXICON.get(name, {})
        category = CATEGORY_OF_FILE[name]
        for word in sorted(words):
            chosen.extend(table[word] if word in table else generated(word, category))
    return ContextRules(
        _unique([*chosen, *ADDITIONS]), vocabulary.structures or STRUCTURE_WORDS, vocabulary.source
    )


DEFAULT_CONTEXT = context_for(None)
MODIFIERS = DEFAULT_CONTEXT.modifiers
"""Every trigger of the lexicon and the additions (the rules of a domain without pattern files)."""
