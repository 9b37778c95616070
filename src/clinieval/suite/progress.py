"""One progress view over a whole suite, instead of one bar per benchmark run.

The benchmarks run with their own bars off (``Shared.progress`` is False), so the suite draws a
single bar over every cell, each weighted by the model calls it plans, with the cell being run
named beside it. Within a cell the bar follows the result lines the benchmark's runs append
(``*.jsonl`` under the cell's folder, read every two seconds): a view, capped at the cell's
planned calls, never a count anything relies on. ``--no-progress`` gets one plain line when a
cell starts and one when it ends instead. Both go to stderr; stdout stays for results.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Protocol

POLL_S = 2.0
_NOT_RESULTS = frozenset({"texts.jsonl"})
"""Line files in a run folder that are not one line per answer (shared long texts)."""


class SuiteView(Protocol):
    def start(self, label: str, calls: int, folder: Path) -> None: ...

    def finish(self, label: str, calls: int, status: str, seconds: float) -> None: ...

    def close(self) -> None: ...


class PlainLines:
    """A line per cell start and end, on stderr (``--no-progress``)."""

    def __init__(self, total_cells: int) -> None:
        self.total = total_cells
        self.done = 0

    def start(self, label: str, calls: int, folder: Path) -> None:
        print(f"suite: {label}: running ({calls:,} model calls planned)", file=sys.stderr, flush=True)

    def finish(self, label: str, calls: int, status: str, seconds: float) -> None:
        self.done += 1
        print(
            f"suite: {label}: {status} in {seconds:.1f}s [{self.done}/{self.total}]",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        pass


class Bar:
    """A rich bar over all planned calls; cells already complete count as done from the start."""

    def __init__(self, total_calls: int, done_calls: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns: list[Any] = [
            TextColumn("[bold]suite"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("calls"),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
        ]
        self._bar = Progress(*columns, console=Console(stderr=True))
        self._done = done_calls
        self._task = self._bar.add_task("", total=max(total_calls, 1), completed=done_calls)
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._bar.start()

    def start(self, label: str, calls: int, folder: Path) -> None:
        self._bar.update(self._task, description=label)
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch, args=(folder, calls), daemon=True)
        self._watcher.start()

    def _watch(self, folder: Path, calls: int) -> None:
        while not self._stop.wait(POLL_S):
            self._bar.update(self._task, completed=self._done + min(calls, result_lines(folder)))

    def finish(self, label: str, calls: int, status: str, seconds: float) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        self._done += calls
        described = "" if status == "complete" else f"{label}: {status}"
        self._bar.update(self._task, completed=self._done, description=described)
        if status != "complete":
            self._bar.console.print(f"suite: {label}: {status}")

    def close(self) -> None:
        self._stop.set()
        self._bar.stop()


def result_lines(folder: Path) -> int:
    """Result lines the runs under ``folder`` have appended so far (each about one finished model
    call: near enough for a progress bar)."""
    total = 0
    for path in folder.rglob("*.jsonl"):
        if path.name in _NOT_RESULTS:
            continue
        try:
            with path.open("rb") as f:
                while block := f.read(1 << 20):
                    total += block.count(b"\n")
        except OSError:
            continue
    return total


def suite_view(progress: bool, total_calls: int, done_calls: int, cells: int) -> SuiteView:
    return Bar(total_calls, done_calls) if progress else PlainLines(cells)
