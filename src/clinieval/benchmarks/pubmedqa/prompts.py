"""The PubMedQA prompt: the abstract, the question, and a one-word answer."""

from __future__ import annotations

from clinieval.task import PromptTemplate

PROMPT = PromptTemplate(
    user=(
        "Read the abstract and answer the research question with yes, no or maybe.\n\n"
        "Abstract:\n{context}\n\nQuestion: {input}\n\n"
        "Reply with one word: yes, no or maybe."
    )
)
