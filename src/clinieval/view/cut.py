"""How a record was cut to fit the model, in words and as character ranges of the stored record.

The context policies (``clinieval.context``) record what they kept in each record's
``context_info``; this module reads those fields back so a reviewer sees, next to the prompt,
which part of the patient's record the model never saw. Only the fields the policies write are
read; an unknown policy still gets its raw fields shown by the page, just no sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CutRange = tuple[int, int]
"""Characters ``[start, end)`` of the stored record that the model did not see."""


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def describe_cut(info: Mapping[str, Any]) -> str:
    """One sentence on what the policy did with the record (empty when nothing was recorded)."""
    policy = info.get("policy")
    if not policy:
        return ""
    if info.get("dropped"):
        return f"Dropped ({policy}): {info.get('reason') or 'over the budget'}; the model was not asked."
    if policy == "refine" or "steps" in info:
        return _describe_steps(info)
    if policy == "chunk":
        pieces, size = _n(info.get("n_chunks", "?")), _n(info.get("chunk_tokens", "?"))
        return f"Read in {pieces} pieces of at most {size} tokens."
    if policy == "retrieval" and not info.get("whole") and "fallback" not in info:
        kept = info.get("kept_visits") or []
        return (
            f"Retrieval kept {len(kept)} of {_n(info.get('visits', '?'))} visits: "
            f"{_n(info.get('kept_tokens', '?'))} of {_n(info.get('original_tokens', '?'))} tokens."
        )
    if not info.get("truncated"):
        return f"The whole record was sent ({policy})."
    return _describe_truncation(str(policy), info)


def _describe_truncation(policy: str, info: Mapping[str, Any]) -> str:
    kept, total = info.get("kept_tokens", "?"), info.get("original_tokens", "?")
    cut = info.get("cut_tokens", "?")
    where = "from the end" if policy == "keep_oldest" else "from the start"
    via = f" (fell back to {info['fallback']})" if info.get("fallback") else ""
    return f"Cut ({policy}{via}): kept {_n(kept)} of {_n(total)} tokens; {_n(cut)} tokens removed {where}."


def _describe_steps(info: Mapping[str, Any]) -> str:
    calls = info.get("model_calls", len(info.get("steps") or []))
    failed = info.get("failed_steps") or []
    text = f"Read piece by piece ({info.get('policy')}): {_n(calls)} model calls"
    text += f", failed steps {', '.join(map(str, failed))}." if failed else "."
    return text + " The prompt shown is the last step's that succeeded."


def cut_ranges(info: Mapping[str, Any], record_chars: int) -> list[CutRange]:
    """The parts of the stored record (``record_chars`` long) that were not sent; empty when the
    policy did not say, or said it about a record of another length (the data changed)."""
    if info.get("dropped"):
        return [(0, record_chars)] if record_chars else []
    if not info.get("truncated") or info.get("original_chars") != record_chars:
        return []
    first = info.get("first_kept_char")
    kept_chars = info.get("kept_chars")
    policy = info.get("policy") if "fallback" not in info else info.get("fallback")
    if policy == "keep_oldest" and isinstance(kept_chars, int):
        return [(kept_chars, record_chars)] if kept_chars < record_chars else []
    if isinstance(first, int) and first > 0:
        return [(0, first)]
    return []
