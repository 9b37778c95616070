"""The two generation prompts of the EHRNoteQA paper, character for character, and what is sent.

They are the spec's (``shared/spec/ehrnoteqa.md``); a test compares them with it, so they live
apart from the code around them:

1. **Question** (:data:`QUESTION_PROMPT`, temperature 1): the paper's instruction, a blank line,
   then the patient's notes exactly as the benchmark formats them
   (:func:`clinieval.ehr.notes.format_notes`: first three by chart time, whitespace normalised,
   a header per note, ``[note i start]`` markers). The reply is ``- Question : … - Answer : … -
   Reason : …`` (:func:`~.parsing.parse_question_reply`).
2. **Choices** (:data:`CHOICES_PROMPT`): the paper's instruction, a blank line, the same notes, a
   blank line, then the step-1 result under ``Doctor's question :`` (question, answer and reason,
   one labelled line each; see :func:`choices_messages`). The reply is five options, the correct
   letter and a rationale (:func:`~.parsing.parse_choices_reply`).
"""

from __future__ import annotations

from clinieval.benchmarks.ehrnoteqa.build.parsing import QuestionReply
from clinieval.types import Message

__all__ = ["CHOICES_PROMPT", "QUESTION_PROMPT", "choices_messages", "question_messages"]

QUESTION_PROMPT = (
    "Situation : When a patient is admitted to the hospital, important clinical records are "
    "summarized in a 'discharge summary'. On the patient's subsequent visit, the previous 'discharge "
    "summaries' serve as essential reference for the doctor's clinical decision making. Objective : "
    "Please formulate one question that a doctor might actually ask based on the provided 'discharge "
    "summaries'. The questions should have clear answer, and these answer should be found within the "
    "provided 'discharge summaries'. Note : 1. The 'discharge summary' is provided between [note 1 "
    "start] and [note 1 end]. If there are multiple notes, they are labeled as [note 1 start], [note "
    "2 start], etc. 2. The 'discharge summaries' are provided in chronological order. This means "
    "note1 is a record from before note2. At the beginning of each note, there is an admission ID "
    "and the date it was written, so please refer to that. 3. Please refrain from formulating "
    "questions that can be answered without referring to a note. 4. Do not create question that is "
    "too easy to answer. To answer your question, someone should have the clinical expertise "
    "equivalent to a doctor and must fully understand all provided discharge summaries. 5. Your "
    "answer should also contain short rationale behind the answer. 6. When explaining the answer and "
    "its rationale, utilize the chart date of the note. In other words, instead of saying the first "
    "note or the second note, phrase it as 'as per the note charted on [specific date], …'. 7. "
    "Arrange your output in the following format: - Question : [Your Question] - Answer : [Your "
    "Answer] - Reason : [Explanation for your answer]"
)
CHOICES_PROMPT = (
    "Objective : Please generate a multiple-choice question answering data with five possible "
    "answers (A-E) based on the doctor's question derived from the provided 'discharge summary'. "
    "Ensure that one answer is correct, and the remaining four are incorrect answers. Note : 1. Use "
    "the provided doctor's question as the basis for the multiple-choice question without "
    "modification. 2. The 'discharge summary' is enclosed within [note 1 start] and [note 1 end], "
    "with additional notes being similarly labeled. 3. All distractors (incorrect answer choices) "
    "should contain contents that appear in the provided discharge summary but should be wrong "
    "answer to the question. 4. After choosing all five choices, paraphrase them so that all choices "
    "are consistent with the format and length. Ensure that longest length answer choice is not an "
    "answer. 5. The correct answer should be clearly indicated, and the rationale should explain why "
    "this is the answer and why the other options are not correct but are good distractors. 6. "
    "Arrange your output in the following format: - Question: [The doctor's question] - Answer "
    "Choices: A: [First option] B: [Second option] C: [Third option] D: [Fourth option] E: [Fifth "
    "option] - Correct Answer: [The letter of the correct choice] - Reason: [Explanation behind your "
    "answer and why each other options are incorrect but can be good distractors]"
)


def question_messages(notes: str) -> list[Message]:
    """Step 1: :data:`QUESTION_PROMPT`, a blank line, then the ``{notes}`` block, as one user turn.

    The paper quotes the instruction only; its public code sent the instruction followed by the
    notes, which is what this does (the backend applies the model's chat template).
    """
    return [Message("user", f"{QUESTION_PROMPT}\n\n{notes}")]


def choices_messages(notes: str, source: QuestionReply) -> list[Message]:
    """Step 2: :data:`CHOICES_PROMPT`, a blank line, the notes, a blank line, then the step-1 result::

        Doctor's question :
        - Question : {question}
        - Answer : {answer}
        - Reason : {reason}

    The answer and reason go along so that the one correct option says what step 1 found in the
    notes (the prompt asks for "one answer [that] is correct"); the ``Reason`` line is left out
    when step 1 gave none.
    """
    lines = ["Doctor's question :", f"- Question : {source.question}", f"- Answer : {source.answer}"]
    if source.reason:
        lines.append(f"- Reason : {source.reason}")
    return [Message("user", f"{CHOICES_PROMPT}\n\n{notes}\n\n" + "\n".join(lines))]
