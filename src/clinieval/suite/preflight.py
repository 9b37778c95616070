"""Every cell's pre-flight before any cell runs: a suite plan that passes is a run that starts.

Each benchmark command refuses some mistakes only once it has opened the model: a completions
model whose tokenizer cannot be read, a server that does not report its context size, a record
with no room beside its prompt, log-likelihoods from a server that cannot serve them, a judge
that is not there. A suite that found these only when it reached the cell failed 19 minutes into
its run, and fixing the benchmark's options then invalidated a finished cell. So ``suite plan``
and ``suite run`` ask each cell still to run for its checks first (:meth:`SuitePart.check`,
through the benchmark's own code), open and check each model once for all its cells, and refuse
the suite with every refused cell named in one message, before anything is asked or written.

A check asks no model for an answer. It may send what the benchmark's command sends before its
first item: ``GET /models`` and what tells a server's kind, and for a server of unknown kind
whose log-likelihoods a cell scores, the command's one tiny probe request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.errors import UserError
from clinieval.suite.layout import in_suite_terms
from clinieval.suite.manifest import SuiteManifest
from clinieval.suite.plan import PlannedCell, SuitePlan

if TYPE_CHECKING:
    from clinieval.models.base import Model
    from clinieval.models.spec import BackendOptions

log = logging.getLogger(__name__)


class ModelCache:
    """:class:`~clinieval.suite.part.CheckedModels` for one check pass: a model is opened and
    checked the first time a cell names it; a refusal is remembered and raised again for every
    cell that names the same model (one unreachable server is one problem, not one per cell)."""

    def __init__(self, backend: BackendOptions) -> None:
        self._backend = backend
        self._models: dict[str, Model] = {}
        self._refused: dict[str, UserError] = {}

    async def checked(self, spec: str, make: Callable[[str], Model] | None = None) -> Model:
        if spec in self._refused:
            raise self._refused[spec]
        if spec not in self._models:
            from clinieval.models.spec import parse_model_spec

            try:
                model = make(spec) if make is not None else parse_model_spec(spec, self._backend)
            except UserError as e:
                self._refused[spec] = e
                raise
            self._models[spec] = model
            try:
                await model.check()
            except UserError as e:
                self._refused[spec] = e
                raise
        return self._models[spec]

    @property
    def opened(self) -> int:
        return len(self._models)

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()


def still_to_run(planned: SuitePlan, manifest: SuiteManifest | None) -> list[PlannedCell]:
    """The cells a run would start: all of them for a new suite, else those not complete."""
    if manifest is None:
        return list(planned.cells)
    return [c for c in planned.cells if manifest.status(c.key) != "complete" or not c.cell.out.exists()]


def check_cells(cells: Sequence[PlannedCell], suite_path: Path) -> int:
    """Run every cell's pre-flight; refuse with one UserError naming every refused cell (cells
    refused for the same reason share one entry). Returns how many models were opened."""
    refused, opened = find_refusals(cells)
    if refused:
        raise UserError(f"{suite_path}: {refusal_text(refused)}")
    return opened


def find_refusals(cells: Sequence[PlannedCell]) -> tuple[list[tuple[PlannedCell, str]], int]:
    """Each cell its benchmark would refuse, with the refusal in suite terms; models opened."""
    if not cells:
        return [], 0
    return asyncio.run(_check_all(cells))


async def _check_all(cells: Sequence[PlannedCell]) -> tuple[list[tuple[PlannedCell, str]], int]:
    models = ModelCache(cells[0].cell.shared.backend)
    refused: list[tuple[PlannedCell, str]] = []
    try:
        for c in cells:
            try:
                await c.entry.part.check(c.prepared, c.cell, models)
            except UserError as e:
                refused.append((c, in_suite_terms(str(e), c.entry.name, c.entry.part.options)))
            except Exception as e:  # a part's own fault: the cell would fail the same way
                log.debug("checking %s failed", c.key, exc_info=True)
                refused.append((c, f"{type(e).__name__}: {e}"))
    finally:
        await models.aclose()
    return refused, models.opened


def refusal_text(refused: Sequence[tuple[PlannedCell, str]]) -> str:
    """One line: the cells a run would refuse before their first model call, and why (cells
    refused for the same reason, such as one unreachable model, in one entry)."""
    grouped: dict[str, list[str]] = {}
    for c, message in refused:
        grouped.setdefault(message, []).append(c.label)
    entries = [f"{', '.join(labels)}: {message}" for message, labels in grouped.items()]
    head = (
        f"{len(refused)} cell{'s' if len(refused) != 1 else ''} would be refused before the first model call"
    )
    tail = "; nothing was asked or written (or pass --skip-refused to `suite run` to run the others)"
    if len(entries) == 1:
        return f"{head}: {entries[0]}{tail}"
    return f"{head}: " + " ".join(f"({i}) {e}" for i, e in enumerate(entries, 1)) + tail
