"""MedAlign's clinician criteria as an LLM-judge rubric.

The paper (Fleming et al., 2023) gives the criteria its clinicians applied, not a judge prompt:
a response is incorrect if at least one of C1 (not clinically appropriate given the EHR), C2
(contains errors that would change the clinical interpretation) or C3 (does not address the
instruction) holds. The wording of the prompt below is therefore this project's own. It shows
the judge the instruction, the clinician's gold response when the sample has one, up to a few
EHR evidence snippets (the judge cannot read a 60k-token record), and the answer; it asks for the
three criteria plus a 1-5 quality score and a short rationale as one JSON object.

Verdict fields: ``correct`` (1 when none of C1-C3 holds), ``score`` (1-5), ``c1``, ``c2``,
``c3`` (1 when the problem is present). ``primary`` picks which one is the score's value; all
of them are kept in each line's ``metadata.mean``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clinieval.judge.rubric import (
    Verdict,
    VerdictParseError,
    as_bool,
    as_score,
    extract_json_object,
    json_field,
)
from clinieval.records.sample_record import SampleRecord
from clinieval.types import Message, Sample

FIELDS = ("correct", "score", "c1", "c2", "c3")
CRITERIA = ("C1", "C2", "C3")
_KEYS = (*CRITERIA, "score")

INTRO = (
    "You are a physician reviewing an AI assistant's answer to a clinician's instruction about one "
    "patient's electronic health record (EHR). Judge it as a careful clinician would: on clinical "
    "substance, not on style or length."
)
GOLD_NOTE = (
    "This is one acceptable answer, not the only one: an answer that differs from it can still be correct."
)
SNIPPETS_NOTE = (
    "These were retrieved for the instruction; the full record is longer, so something missing from "
    "the excerpts is not necessarily missing from the record."
)
NO_SNIPPETS = "No EHR excerpts are available: judge C1 from the instruction and the reference answer."
REVIEW = """## Your review
Answer three questions. Each is true when the problem IS present.
- C1: Is the answer not clinically appropriate given the EHR?
- C2: Does the answer contain errors that would change the clinical interpretation?
- C3: Does the answer fail to address the instruction?
The answer is correct only if C1, C2 and C3 are all false.

Then rate the answer from 1 to 5:
1 = unusable: wrong, unsafe, or unrelated to the instruction.
2 = poor: touches the instruction but has major errors or omissions.
3 = acceptable: broadly right, with minor errors or notable omissions.
4 = good: correct and useful, with small gaps in completeness or precision.
5 = what a careful clinician would write: correct, complete, precise and grounded in the EHR.

Reply with one JSON object and nothing else, in this form:
{"rationale": "<one to three sentences>", "C1": <true|false>, "C2": <true|false>, "C3": <true|false>, \
"score": <1-5>}"""

SnippetSource = Callable[[SampleRecord], list[str]]


def _quoted(text: str) -> str:
    return f'"""{text.strip()}"""'


def metadata_snippets(record: SampleRecord) -> list[str]:
    """``sample.metadata["evidence_snippets"]``: a list of strings (a lone string is one snippet)."""
    raw = record.sample.metadata.get("evidence_snippets")
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else list(raw)
    return [str(s) for s in items if str(s).strip()]


@dataclass(frozen=True, slots=True)
class MedAlignRubric:
    """The MedAlign judge: prompt from a run record, parser of the JSON verdict.

    ``snippets`` overrides where evidence comes from (default: the sample's metadata); at most
    ``max_snippets`` are shown, each cut to ``max_snippet_chars`` so the judge prompt stays
    bounded. ``primary`` is the field that becomes each score's ``value``.
    """

    name: str = "medalign_judge"
    primary: str = "correct"
    snippets: SnippetSource | None = None
    max_snippets: int = 5
    max_snippet_chars: int = 2000

    def __post_init__(self) -> None:
        if self.primary not in FIELDS:
            raise ValueError(f"primary field {self.primary!r}: choose one of {', '.join(FIELDS)}")
        if self.max_snippets < 0 or self.max_snippet_chars < 1:
            raise ValueError("max_snippets must be >= 0 and max_snippet_chars >= 1")

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.primary, *(f for f in FIELDS if f != self.primary))

    def evidence(self, record: SampleRecord) -> list[str]:
        """The snippets the judge will see, already capped in number and length."""
        found = (self.snippets or metadata_snippets)(record)
        return [s.strip()[: self.max_snippet_chars] for s in found[: self.max_snippets]]

    def messages(self, record: SampleRecord) -> list[Message]:
        if record.output is None or not record.output.ok:
            raise ValueError(f"sample {record.sample.id}: no answer to judge")
        parts = [INTRO, f"## Instruction\n{_quoted(record.sample.input)}"]
        if record.sample.target and record.sample.target.strip():
            parts.append(
                f"## Reference answer written by a clinician\n{GOLD_NOTE}\n{_quoted(record.sample.target)}"
            )
        evidence = self.evidence(record)
        if evidence:
            listed = "\n".join(f"[{i}] {_quoted(s)}" for i, s in enumerate(evidence, 1))
            parts.append(f"## Excerpts from the patient's EHR\n{SNIPPETS_NOTE}\n{listed}")
        else:
            parts.append(f"## Excerpts from the patient's EHR\n{NO_SNIPPETS}")
        parts.append(f"## Answer to review\n{_quoted(record.output.text)}")
        parts.append(REVIEW)
        return [Message("user", "\n\n".join(parts))]

    def parse(self, text: str) -> Verdict:
        # the final verdict object (clinieval.judge.verdict): an echoed format is not JSON, a
        # corrected verdict is an earlier object, a key given twice with different values is unparsed
        obj = extract_json_object(text, required=_KEYS)
        flags = {c.lower(): as_bool(json_field(obj, c), c) for c in CRITERIA}
        values = {
            "correct": 0.0 if any(flags.values()) else 1.0,
            "score": as_score(json_field(obj, "score"), 1, 5, "score"),
            **{k: float(v) for k, v in flags.items()},
        }
        return Verdict(values=values, rationale=_rationale(obj))


def _rationale(obj: Mapping[str, Any]) -> str | None:
    """The optional rationale: a judge that omits it still gave a verdict."""
    try:
        value = json_field(obj, "rationale")
    except VerdictParseError:
        return None
    text = "" if value is None else str(value).strip()
    return text or None


def evidence_snippets(sample: Sample, k: int = 5, size: int = 200) -> list[str]:
    """The ``k`` passages of ``size`` words of the sample's EHR that best match its instruction
    (BM25Okapi), in record order: the "source" MedAlign gave source-augmented metrics, whose
    models read far less than a whole record, and the evidence a judge is shown."""
    from clinieval.ehr.retrieval import BM25Index, Document, snippets

    parts = snippets(sample.context, size) if sample.context.strip() else []
    if not parts:
        return []
    index = BM25Index.build((Document(str(i), p) for i, p in enumerate(parts)), keep_text=False)
    best = sorted(int(doc_id) for doc_id, _ in index.search(sample.input, k))
    return [parts[i] for i in best]


def retrieval_rubric(snippets: int) -> MedAlignRubric:
    """The rubric both judge commands use: ``snippets`` BM25 excerpts of the record the answer was
    given for (0: only those in the sample's metadata), so ``clinieval medalign judge`` and
    ``clinieval judge --rubric medalign_judge`` ask the same prompts and share cached replies."""
    if not snippets:
        return MedAlignRubric()
    return MedAlignRubric(snippets=lambda rec: evidence_snippets(rec.sample, snippets))
