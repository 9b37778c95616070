"""What the suite tests share: a small PubMedQA folder, a suite file around it, and a server reply.

The PubMedQA folder is written here (twelve made-up items in the published layout) rather than
read from ../shared, so the suite tests need nothing outside the checkout and each question's
prompt can be traced back to its item id.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

N_ITEMS = 12

GOOD = '[models]\na = "openai:http://127.0.0.1:9/v1@fault"\n\n[benchmarks.pubmedqa]\ndata = "pqa"\n'
"""A valid suite file (its model is never asked: the tests that use it fail before)."""


def pubmedqa_folder(folder: Path, n: int = N_ITEMS) -> Path:
    """``n`` PubMedQA-shaped items, all in the test split; item ``i``'s question is ``Question i?``."""
    folder.mkdir(parents=True, exist_ok=True)
    items = {
        str(1000 + i): {
            "QUESTION": f"Does treatment {i} help?",
            "CONTEXTS": [f"We studied treatment {i} in {10 + i} patients.", "Outcomes improved."],
            "LABELS": ["METHODS", "RESULTS"],
            "final_decision": ("yes", "no", "maybe")[i % 3],
            "YEAR": "2020",
        }
        for i in range(n)
    }
    (folder / "ori_pqal.json").write_text(json.dumps(items), encoding="utf-8")
    truth = {pmid: item["final_decision"] for pmid, item in items.items()}
    (folder / "test_ground_truth.json").write_text(json.dumps(truth), encoding="utf-8")
    return folder


_QUESTION = re.compile(r"Does treatment (\d+) help\?")


def reply(prompt: str) -> str:
    """A deterministic yes/no/maybe that varies with the question."""
    return ("yes", "no", "maybe")[zlib.crc32(prompt.encode()) % 3]


def item_of(prompt: str) -> str:
    """The item id a PubMedQA prompt asks about."""
    found = _QUESTION.search(prompt)
    assert found is not None, prompt
    return str(1000 + int(found.group(1)))


def asked(prompts: list[str]) -> Counter[str]:
    """How many times each item was asked."""
    return Counter(item_of(p) for p in prompts)


def suite_text(url: str, models: tuple[str, ...] = ("a", "b"), limit: int = 6, extra: str = "") -> str:
    """Models ``models`` all on the server at ``url``; PubMedQA from ``pqa`` with ``limit`` items."""
    lines = ["title = 'test suite'", "seed = 3", "", "[models]"]
    lines += [f'{m} = "openai:{url}@fault"' for m in models]
    lines += ["", "[endpoints]", "concurrency = 2", "retries = 0", "timeout = 30"]
    lines += ["", "[benchmarks.pubmedqa]", 'data = "pqa"', f"limit = {limit}", extra]
    return "\n".join(lines) + "\n"


class CountedCalls:
    """Counts the embedded model's calls, through the real methods (a suite part's plan is checked
    against what it really asked)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from clinieval.models.llamacpp import LlamaCppModel

        self.calls = 0
        for name in ("generate", "loglikelihood"):
            real = getattr(LlamaCppModel, name)

            async def counted(model: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
                self.calls += 1
                return await _real(model, *args, **kwargs)

            monkeypatch.setattr(LlamaCppModel, name, counted)


def run_suite_file(folder: Path, lines: list[str]) -> Path:
    """Write ``lines`` as ``folder/suite.toml``, run it into ``folder/run`` through the installed
    command (every cell must finish) and return the run folder."""
    from tests.conftest import run_cli

    (folder / "suite.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli("suite", "run", str(folder / "suite.toml"), "--out", str(folder / "run"), "--no-progress")
    assert done.returncode == 0, done.stderr
    return folder / "run"
