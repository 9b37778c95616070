"""What a judge's reply may not be read from: the material its prompt quoted.

Why a module of its own: a judge is shown the answer it grades, the question, the notes and the
reference, and any of them can hold a verdict-shaped line ("Score: Doctor 1: 5 points", "Pain
score: 0", ``{"correct": true}``). When the judge echoes that material, the echo must not be read
as its verdict; an answer under test could otherwise write its own grade. The reading policy
(docs/judge.md) masks every copy of quoted material (:func:`clinieval.scoring.echo.mask_copies`)
before a rubric reads the reply, so the same rule holds for every rubric without each knowing it.

Only material from the data is quoted here, never the rubric's own template. The template is
masked too, but only where a run of its words with content is copied (its worked example's
question and answer, its instructions): a verdict line equal to the example's, written after the
judge's own analysis, is the judge's verdict, whereas any whole line of quoted material is masked
however short, since an answer under test may plant exactly that line.
"""

from __future__ import annotations

from collections.abc import Sequence

from clinieval.judge.rubric import Rubric, Verdict, VerdictParseError
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.echo import mask_copies

__all__ = ["mask_for_judge", "quoted_material", "read_masked"]


def quoted_material(record: SampleRecord) -> tuple[str, ...]:
    """The texts of the data a judge prompt about ``record`` quotes: the answer under judgement,
    what the answering model was sent (question, notes, options) and the reference answers."""
    texts: list[str] = []
    if record.output is not None and record.output.ok:
        texts.append(record.output.text)
    texts.extend(m.content for m in record.messages)
    texts.extend(record.sample.all_targets)
    context = record.sample.context
    if context and not any(context in m.content for m in record.messages):  # not quoted twice
        texts.append(context)
    return tuple(t for t in texts if t.strip())


def mask_for_judge(reply: str, quoted: Sequence[str], prompt: Sequence[str] = ()) -> str:
    """``reply`` with what the judge copied masked: runs of the prompt's words (``prompt``: the
    judge prompt's texts, template and all) and any whole line of the ``quoted`` material."""
    return mask_copies(reply, [*prompt, *quoted], whole=quoted)


def read_masked(rubric: Rubric, reply: str, quoted: Sequence[str], prompt: Sequence[str] = ()) -> Verdict:
    """The rubric's reading of ``reply`` with copies of its prompt masked out (:func:`mask_for_judge`).

    The verdict comes from the masked reply; the rationale, when the unmasked reply reads to the
    same values, is the unmasked one (a judge's reasons may quote the answer, and a rationale full
    of blanks would hide them from the clinician reading it).
    """
    masked = mask_for_judge(reply, quoted, prompt)
    if reply.strip() and not masked.strip():
        raise VerdictParseError("the reply only repeats what the judge was shown", "echoed_prompt")
    verdict = rubric.parse(masked)
    if masked == reply:
        return verdict
    try:
        plain = rubric.parse(reply)
    except VerdictParseError:
        return Verdict(verdict.values, _squeeze(verdict.rationale))
    if plain.values == verdict.values and plain.rationale:
        return Verdict(verdict.values, plain.rationale)
    return Verdict(verdict.values, _squeeze(verdict.rationale))


def _squeeze(text: str | None) -> str | None:
    """A masked rationale without the runs of blanks the masking left."""
    if text is None:
        return None
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line) or None
