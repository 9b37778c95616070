"""A rubric for any task with reference answers: is the answer correct given the reference?

The benchmarks' rubrics need what their loaders put in a sample (MedAlign's instruction and
record, EHRNoteQA's answer letter); a user's own JSONL task has only a question, maybe options,
and ``target``/``targets``. This rubric asks a yes/no question a capable judge answers reliably
("does the answer state what the reference states?") and reads nothing but the verdict: the reply
must carry a ``Verdict: yes|no`` line (or be only "yes" or "no"); its last one is the verdict
(:mod:`clinieval.judge.verdict`). A number, or a "no" in the reason, is never a verdict, so a
rationale cannot change the score.

The judge is not shown the sample's context: correctness against a reference does not need the
record, and leaving it out keeps the prompt short enough for small local judges.
"""

from __future__ import annotations

from dataclasses import dataclass

from clinieval.errors import UserError
from clinieval.judge.rubric import Verdict
from clinieval.judge.verdict import section
from clinieval.judge.verdict_yes_no import label_line, yes_no_verdict
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.choices import option_lines
from clinieval.types import Message

PROMPT = """You are checking an answer to a question against a reference answer written by an expert.

## Question
\"\"\"{question}\"\"\"
{options}
## {reference_heading}
{reference}

## Answer to check
\"\"\"{answer}\"\"\"

## Your verdict
The answer is correct when it states what the reference states, in any wording; more detail is \
fine unless it contradicts the reference. It is not correct when it contradicts the reference, \
misses its point, or does not answer the question.

Reply in exactly this format:
Verdict: <yes or no>
Reason: <one sentence>"""

_VERDICT_LINE = label_line("verdict")


def _quoted(text: str) -> str:
    return f'"""{text.strip()}"""'


def _references(record: SampleRecord) -> tuple[str, str]:
    """The heading and text of the reference section; a sample without one is the user's mistake
    (the rubric has nothing to compare with), so it stops the pass before any judge call."""
    refs = [t for t in record.sample.all_targets if t.strip()]
    if not refs:
        raise UserError(
            f"sample {record.sample.id}: no target to judge against; the reference_correct rubric "
            "needs `target` or `targets` on every sample"
        )
    if len(refs) == 1:
        return "Reference answer", _quoted(refs[0])
    return "Reference answers (any one of them is correct)", "\n".join(f"- {_quoted(r)}" for r in refs)


def _options(record: SampleRecord) -> str:
    """The sample's choices, lettered, when it has any: a reference may be just a letter."""
    choices = record.sample.choices
    if not choices:
        return ""
    return f"\n## Options\n{option_lines(choices)}\n"


def parse_verdict_line(text: str) -> bool:
    """The yes/no on the reply's last ``Verdict:`` line, or a reply that is only "yes" or "no".

    Nothing else is read: not the reason, not a number, not a yes or no elsewhere in the text, not
    an earlier verdict line (the format echoed, a verdict the judge corrected). A verdict line
    that says both, a hedge ("yes or no", the format echoed) and a reply without a verdict line
    are failures, never a guess.
    """
    return yes_no_verdict(text, "verdict", unlabelled=False)


@dataclass(frozen=True, slots=True)
class ReferenceRubric:
    """Yes (1) when the answer is correct given the sample's reference answer(s), no (0) otherwise."""

    name: str = "reference_correct"
    fields: tuple[str, ...] = ("correct",)

    def messages(self, record: SampleRecord) -> list[Message]:
        if record.output is None or not record.output.ok:
            raise ValueError(f"sample {record.sample.id}: no answer to judge")
        heading, reference = _references(record)
        prompt = PROMPT.format(
            question=record.sample.input.strip(),
            options=_options(record),
            reference_heading=heading,
            reference=reference,
            answer=record.output.text.strip(),
        )
        return [Message("user", prompt)]

    def parse(self, text: str) -> Verdict:
        correct = parse_verdict_line(text)
        # the Reason: that goes with the final verdict: the last one, up to a later Verdict: line
        return Verdict(
            {"correct": 1.0 if correct else 0.0}, rationale=section(text, "Reason", stop=_VERDICT_LINE)
        )


__all__ = ["PROMPT", "ReferenceRubric", "parse_verdict_line"]
