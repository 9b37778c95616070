"""One progress view over a whole suite, instead of one bar per benchmark run.

The benchmarks run with their own bars off (``Shared.progress`` is False), so the suite draws a
single bar over every cell, each weighted by the model calls it plans, with the cell being run
named beside it. ``--no-progress`` (and any pipe a script reads) gets one plain line when a cell
starts and one when it ends instead. Both go to stderr; stdout stays for results.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class SuiteView(Protocol):
    def start(self, label: str, calls: int) -> None: ...

    def finish(self, label: str, calls: int, status: str, seconds: float) -> None: ...

    def close(self) -> None: ...


class PlainLines:
    """A line per cell start and end, on stderr (``--no-progress``)."""

    def __init__(self, total_cells: int) -> None:
        self.total = total_cells
        self.done = 0

    def start(self, label: str, calls: int) -> None:
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
        self._task = self._bar.add_task("", total=max(total_calls, 1), completed=done_calls)
        self._bar.start()

    def start(self, label: str, calls: int) -> None:
        self._bar.update(self._task, description=label)

    def finish(self, label: str, calls: int, status: str, seconds: float) -> None:
        self._bar.update(
            self._task, advance=calls, description="" if status == "complete" else f"{label}: {status}"
        )
        if status != "complete":
            self._bar.console.print(f"suite: {label}: {status}")

    def close(self) -> None:
        self._bar.stop()


def suite_view(progress: bool, total_calls: int, done_calls: int, cells: int) -> SuiteView:
    return Bar(total_calls, done_calls) if progress else PlainLines(cells)
