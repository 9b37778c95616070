"""The judge's prompt, and the worked example a one-shot prompt shows before it.

The paper's judge is fine-tuned to write ``Analyze: Step 1: ... Score: Doctor 1: X points. ...``;
its prompt is not public, so the wording here is clinieval's, asking for exactly that format. The
teacher that labels training data sees one worked example first (the paper's one-shot prompt), and
a judge that was not trained on the format may be given the same example (``--one-shot``).
"""

from __future__ import annotations

from collections.abc import Sequence

from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Response
from clinieval.types import Message

INSTRUCTION = (
    "You are a medical expert evaluating answers to a patient's question. Compare each doctor's "
    "answer with the reference answer for relevance, fluency and medical knowledge correctness, and "
    "score each from 1 (worst) to 5 (best).{ask} Answer in this format:\n"
    "Analyze: Step 1: ... Step 2: ...\n"
    "Score: {scores}"
)
ASK = (
    " If you need medical knowledge you are unsure of, write one line starting with [Question] and stop; "
    "the knowledge will be given to you."
)
"""Offered only when a knowledge base will answer: a judge that asks and gets no answer loses its
verdict (a scripted judge asking half the time parsed 52 % without a base, 100 % with one)."""


def judge_messages(item: JudgeItem, shown: Sequence[str], *, knowledge: bool) -> list[Message]:
    """The judge's prompt: the question, the reference, and the answers as Doctor 1..k in the
    order shown, asking for the paper's output format; ``knowledge``: offer the ``[Question]``
    lookup (only when a knowledge base is there to answer it)."""
    scores = " ".join(f"Doctor {i}: X points." for i in range(1, len(shown) + 1))
    answers = "\n".join(f"Doctor {i}: {text}" for i, text in enumerate(shown, 1))
    # "[Patient Question]", not "[Question]": a judge echoing its prompt must not look like a lookup
    body = (
        f"[Patient Question]\n{item.question}\n\n[Reference Answer]\n{item.reference}\n\n"
        f"[Doctors' Answers]\n{answers}"
    )
    system = INSTRUCTION.format(scores=scores, ask=ASK if knowledge else "")
    return [Message("system", system), Message("user", body)]


EXAMPLE = JudgeItem(
    id="one-shot-example",
    question="I have had a sore throat and a mild fever for two days. Should I take antibiotics?",
    reference=(
        "Most sore throats with fever are caused by viruses and get better within a week; antibiotics "
        "do not help them. Rest, fluids and paracetamol or ibuprofen ease the symptoms. Antibiotics are "
        "needed only for a bacterial (streptococcal) throat infection, confirmed by a rapid test or a "
        "throat swab. See a doctor if it lasts over a week, or for trouble swallowing or breathing."
    ),
    responses=(
        Response("example-a", (
            "It is most likely a viral infection, which antibiotics do not treat. Rest, drink fluids and "
            "take paracetamol for the fever. If it is not better in a week, or swallowing becomes hard, "
            "see a doctor, who may test for a strep throat that would need antibiotics."
        )),
        Response("example-b", (
            "Drink warm fluids and rest. A sore throat usually goes away. You could ask a pharmacist "
            "for lozenges."
        )),
        Response("example-c", "Yes, start amoxicillin at once so the infection does not spread."),
    ),
)  # fmt: skip
"""The one-shot example: made up, three answers clearly good, partial and wrong."""

EXAMPLE_REPLY = (
    "Analyze: Step 1: The reference says a sore throat with fever is usually viral, antibiotics do not "
    "help, symptoms are eased with rest, fluids and paracetamol, and antibiotics are only for a "
    "confirmed bacterial throat. Step 2: Doctor 1 matches the reference: viral cause, no antibiotics, "
    "symptom relief, when to see a doctor and the strep test; relevant, fluent and correct. Doctor 2 is "
    "relevant and fluent and not wrong, but it does not answer whether antibiotics are needed and "
    "omits when to seek care. Doctor 3 recommends antibiotics without a test, which contradicts the "
    "reference and is harmful.\n"
    "Score: Doctor 1: 5 points. Doctor 2: 3 points. Doctor 3: 1 points."
)


def one_shot_messages(item: JudgeItem, shown: Sequence[str], *, knowledge: bool) -> list[Message]:
    """The judge's prompt for ``item`` with the worked example before it as a user/assistant pair."""
    system, user = judge_messages(item, shown, knowledge=knowledge)
    _, example_user = judge_messages(EXAMPLE, [r.text for r in EXAMPLE.responses], knowledge=knowledge)
    return [system, example_user, Message("assistant", EXAMPLE_REPLY), user]
