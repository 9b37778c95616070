"""PubMedQA-sized chat items for bench/client_throughput.py, built from the shared data in place.

Each item is one JSON line ``{"id", "input", "target"}``: ``input`` is a PubMedQA-style prompt
(the abstract's labelled contexts, the question, the answer instruction; ~1.5 KB), ``target`` the
expert label. For N above the number of questions the questions repeat, each pass with new ids
(``f"{pmid}-{k}"``) and every input made unique by an ``Item i.`` prefix, so no client (or cache)
can answer one item from another's reply. Only the temp dir the caller names holds the copy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def data_file() -> Path:
    """``ori_pqal.json`` under ``$CLINIEVAL_DATA``, ``/work/shared/data`` or the repo's ``shared/data``."""
    candidates = [
        Path(os.environ.get("CLINIEVAL_DATA", "/nonexistent")) / "pubmedqa" / "ori_pqal.json",
        Path("/work/shared/data/pubmedqa/ori_pqal.json"),
        ROOT / "shared" / "data" / "pubmedqa" / "ori_pqal.json",
        ROOT.parent / "shared" / "data" / "pubmedqa" / "ori_pqal.json",
    ]
    for path in candidates:
        if path.is_file():
            return path
    raise SystemExit("PubMedQA ori_pqal.json not found (set CLINIEVAL_DATA to the shared data folder)")


def prompt(record: dict[str, object]) -> str:
    labels = record.get("LABELS") or []
    contexts = record.get("CONTEXTS") or []
    assert isinstance(labels, list) and isinstance(contexts, list)
    pairs = zip(labels, contexts, strict=False)
    parts = [f"{str(label).title()}: {text}" if label else str(text) for label, text in pairs]
    abstract = "\n".join(parts) if parts else "\n".join(map(str, contexts))
    return (
        f"Context:\n{abstract}\n\nQuestion: {record['QUESTION']}\n\nAnswer with one word: yes, no, or maybe."
    )


def items(n: int, path: Path | None = None) -> Iterator[dict[str, str]]:
    """The first ``n`` items, cycling through the questions with unique ids and inputs."""
    records: dict[str, dict[str, object]] = json.loads((path or data_file()).read_text(encoding="utf-8"))
    keyed = list(records.items())
    if not keyed:
        raise SystemExit("no PubMedQA records found")
    prompts = [(pmid, prompt(rec), str(rec.get("final_decision", ""))) for pmid, rec in keyed]
    for i in range(n):
        pmid, text, target = prompts[i % len(prompts)]
        yield {"id": f"{pmid}-{i // len(prompts)}", "input": f"Item {i}. {text}", "target": target}


def write_items(n: int, dest: Path) -> int:
    """Write ``n`` items to ``dest`` (JSONL); returns the file's size in bytes."""
    with dest.open("w", encoding="utf-8") as f:
        for item in items(n):
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    return dest.stat().st_size
