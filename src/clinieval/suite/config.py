"""A suite file read and checked: models, judge, endpoint settings and benchmark tables, all before
any model is opened.

The file is TOML (``tomllib``): a hospital team writes it by hand and keeps it beside its results.
Everything a mistake can break is refused here with one line (see :mod:`clinieval.suite.schema`),
and every model and judge spec is parsed, without being opened, so a typo in the last model does
not surface an hour into the suite. Endpoint settings are the same keys as the command line's
endpoint options; the command layer (which owns them) turns them into the
:class:`~clinieval.models.spec.BackendOptions` every model is opened with and hands that in as
``backend`` — this layer sits below it and knows only the keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.errors import UserError
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.suite.layout import EndpointSettings, common_keys, in_suite_terms, suite_schema
from clinieval.suite.part import Shared, SuiteJudge, SuiteModel, SuitePart
from clinieval.suite.schema import check, to_options, where

BackendFor = Callable[[EndpointSettings], tuple[BackendOptions, int | None]]
"""The ``[endpoints]`` table read as the command line's endpoint options read it: the options
every model is opened with, and the requests each run keeps in flight (the CLI's one rule for
both, handed down because this layer sits below it)."""
"""How the command layer turns the ``[endpoints]`` table into the options models are opened with."""


@dataclass(frozen=True, slots=True)
class BenchmarkEntry:
    """One ``[benchmarks.NAME]`` table: the part that runs it, its options, and the suite's shared
    settings resolved for it (its limit, its judge)."""

    part: SuitePart
    options: Any
    shared: Shared
    table: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.part.name


@dataclass(frozen=True, slots=True)
class Suite:
    """A suite file, checked: its text (the manifest keeps it), its folder (relative paths in the
    file are read against it), and what it names."""

    path: Path
    text: str
    title: str
    seed: int
    limit: int | None
    models: tuple[SuiteModel, ...]
    judge: SuiteJudge | None
    endpoints: EndpointSettings
    benchmarks: tuple[BenchmarkEntry, ...]
    data: Mapping[str, Any]

    @property
    def base(self) -> Path:
        return self.path.parent

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def read_suite(path: Path, parts: Sequence[SuitePart], backend: BackendFor) -> Suite:
    """Read and check the suite file at ``path``: one UserError for the first fault, before any
    model is opened (specs are parsed, not opened)."""
    from clinieval.fsutil import read_user_text

    text = read_user_text(path, "the suite file", missing="no such suite file")
    return parse_suite(text, path, parts, backend)


def parse_suite(text: str, path: Path, parts: Sequence[SuitePart], backend: BackendFor) -> Suite:
    """A suite from its ``text`` (``path``: where it lives, for messages and relative paths)."""
    source = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{source}: not valid TOML: {e}") from None
    check(data, suite_schema(parts), source)
    endpoints = to_options(EndpointSettings, data.get("endpoints", {}))
    if endpoints.ca_bundle is not None and not endpoints.ca_bundle.is_absolute():
        endpoints = dataclasses.replace(endpoints, ca_bundle=path.parent / endpoints.ca_bundle)
    try:
        options, in_flight = backend(endpoints)
    except UserError as e:
        raise UserError(f"{source}: [endpoints] {e}") from None
    models = tuple(SuiteModel(name, spec) for name, spec in data["models"].items())
    _check_names([m.name for m in models], source)
    judge = None
    if "judge" in data:
        judge = SuiteJudge(data["judge"]["model"], data["judge"].get("repeats", 1))
    _check_specs(models, judge, data, options, source)
    seed, limit = int(data.get("seed", 0)), data.get("limit")
    shared = Shared(backend=options, concurrency=in_flight, limit=limit, seed=seed, judge=judge)
    by_name = {p.name: p for p in parts}
    entries = tuple(
        _entry(by_name[name], table, shared, source) for name, table in data["benchmarks"].items()
    )
    return Suite(
        path=path,
        text=text,
        title=str(data.get("title", path.stem)),
        seed=seed,
        limit=limit,
        models=models,
        judge=judge,
        endpoints=endpoints,
        benchmarks=entries,
        data=data,
    )


def _entry(part: SuitePart, table: Mapping[str, Any], shared: Shared, source: str) -> BenchmarkEntry:
    common = common_keys()
    given = [k for k in ("judge", "judge_repeats") if k in table and table[k] is not False]
    if given and not part.judged:
        raise UserError(
            f"{source}: [benchmarks.{part.name}] {given[0]}: {part.name} is scored without a judge, so"
            f" {given[0]} would be ignored; remove it"
        )
    own = {k: v for k, v in table.items() if k not in common}
    try:
        options = to_options(part.options, own)
    except (TypeError, ValueError) as e:  # a part's own __post_init__ check
        raise UserError(f"{source}: [benchmarks.{part.name}] {e}") from None
    judge = shared.judge
    chosen = table.get("judge", True)
    if chosen is False:
        judge = None
    elif isinstance(chosen, str):
        judge = SuiteJudge(chosen, shared.judge.repeats if shared.judge else 1)
    if judge is not None and "judge_repeats" in table:
        judge = SuiteJudge(judge.spec, int(table["judge_repeats"]))
    limit = table.get("limit", shared.limit)
    return BenchmarkEntry(part, options, dataclasses.replace(shared, limit=limit, judge=judge), table)


def _check_names(names: Sequence[str], source: str) -> None:
    """Refuse model names that differ only in case: each names a folder of cells, and on a
    case-insensitive file system (macOS, Windows) ``Smol`` and ``smol`` would be one folder."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            raise UserError(
                f"{source}: [models] {other!r} and {name!r} differ only in case; their result folders would"
                " be one folder on a case-insensitive file system: rename one"
            )


def _check_specs(
    models: Sequence[SuiteModel],
    judge: SuiteJudge | None,
    data: Mapping[str, Any],
    options: BackendOptions,
    source: str,
) -> None:
    """Parse every model and judge spec as a run would, without opening it (no file is loaded, no
    server asked); Ray is left out (its workers parse the same spec on their nodes)."""
    local = dataclasses.replace(options, executor=None)
    named: list[tuple[tuple[str, ...], str]] = [(("models", m.name), m.spec) for m in models]
    if judge is not None:
        named.append((("judge", "model"), judge.spec))
    for name, table in data["benchmarks"].items():
        if isinstance(table.get("judge"), str):
            named.append((("benchmarks", name, "judge"), table["judge"]))
    for path, spec in named:
        try:
            parse_model_spec(spec, local)
        except UserError as e:
            raise UserError(f"{source}: {where(path)}{in_suite_terms(str(e))}") from None
