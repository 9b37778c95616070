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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clinieval.errors import UserError
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.suite.part import Shared, SuiteJudge, SuiteModel, SuitePart
from clinieval.suite.schema import (
    COMMON_KEYS,
    DRAFT,
    MODEL_NAME,
    JSONSchema,
    check,
    options_schema,
    published,
    to_options,
    where,
)


@dataclass(frozen=True, slots=True)
class EndpointSettings:
    """The ``[endpoints]`` table: the command line's endpoint options, by the same names
    (``--n-ctx`` is ``n_ctx``), applied to every model and judge of the suite."""

    n_ctx: int = field(default=4096, metadata={"help": "context window of an embedded model"})
    timeout: float = field(default=600.0, metadata={"help": "seconds per HTTP request"})
    retries: int = field(default=4, metadata={"help": "retries on 429/5xx/connection errors"})
    concurrency: int | None = field(
        default=None, metadata={"help": "requests in flight (default: the server's slots, or 16)"}
    )
    allow_host: tuple[str, ...] = field(
        default=(), metadata={"help": "non-loopback endpoint hosts a model or judge may be on"}
    )
    ca_bundle: Path | None = field(
        default=None, metadata={"help": "PEM file of CA certificates trusted for https endpoints"}
    )
    no_proxy: bool = field(default=False, metadata={"help": "never send requests through HTTPS_PROXY"})
    executor: Literal["local", "ray"] = field(
        default="local", metadata={"help": "where model requests are answered: local or ray"}
    )
    ray_address: str | None = field(
        default=None, metadata={"help": 'with executor = "ray": the cluster to join, HEAD:6379'}
    )
    ray_workers: int | None = field(
        default=None, metadata={"help": 'with executor = "ray": how many workers (default: one per node)'}
    )


BackendFor = Callable[[EndpointSettings], BackendOptions]
"""How the command layer turns the ``[endpoints]`` table into the options models are opened with."""

_MINIMA = {"n_ctx": 256, "retries": 0, "concurrency": 1, "ray_workers": 1}


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


_NAME_MODELS = 'name each model under test, e.g. smol = "llamacpp:smollm2-135m-instruct"'


def suite_schema(parts: Sequence[SuitePart]) -> JSONSchema:
    """The JSON Schema of a suite file whose benchmarks are ``parts`` (with the checker's own
    message keys; :func:`published_schema` leaves them out)."""
    common = _common_schema()
    benchmarks = {
        p.name: {**options_schema(p.options, extra=common), "description": f"{p.name}: {p.metric}"}
        for p in sorted(parts, key=lambda p: p.name)
    }
    endpoints = options_schema(EndpointSettings)
    for key, minimum in _MINIMA.items():
        endpoints["properties"][key]["minimum"] = minimum
    endpoints["properties"]["timeout"]["exclusiveMinimum"] = 0
    return {
        "$schema": DRAFT,
        "title": "clinieval suite file",
        "description": "Every model over every benchmark: `clinieval suite run SUITE.toml --out DIR` "
        "(docs/suite.md). Relative paths are read against the suite file's folder.",
        "type": "object",
        "additionalProperties": False,
        "required": ["models", "benchmarks"],
        "requiredText": {
            "models": f"no [models] table: {_NAME_MODELS}",
            "benchmarks": "no [benchmarks.NAME] table: name a benchmark, e.g. [benchmarks.pubmedqa]",
        },
        "properties": {
            "title": {"type": "string", "description": "the leaderboard's title"},
            "seed": {"type": "integer", "default": 0, "description": "seed for shuffles and sampling"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "at most this many items per benchmark (a benchmark's own limit wins)",
            },
            "models": {
                "type": "object",
                "description": "the models under test: leaderboard name = model spec (any spec "
                "`clinieval run --model` takes, endpoint pools included)",
                "minProperties": 1,
                "minText": f"no model: {_NAME_MODELS}",
                "propertyNames": {
                    "pattern": MODEL_NAME,
                    "patternText": "is not a usable model name: it names a folder, so use letters, "
                    "digits, '.', '_' and '-'",
                },
                "additionalProperties": {
                    "type": "string",
                    "typeText": 'a model spec string such as "openai:http://127.0.0.1:8080/v1@NAME"',
                },
            },
            "judge": {
                "type": "object",
                "description": "the judge of the benchmarks that use one",
                "additionalProperties": False,
                "required": ["model"],
                "requiredText": {
                    "model": 'missing key model: the judge\'s spec, e.g. model = "openai:URL@NAME"'
                },
                "properties": {
                    "model": {"type": "string", "description": "the judge's model spec"},
                    "repeats": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 1,
                        "description": "how many times each answer is judged",
                    },
                },
            },
            "endpoints": {**endpoints, "description": "how models are reached (the CLI's endpoint options)"},
            "benchmarks": {
                "type": "object",
                "description": "one table per benchmark: its options plus limit, judge, judge_repeats",
                "minProperties": 1,
                "minText": "no benchmark: add a [benchmarks.NAME] table",
                "additionalProperties": False,
                "keyWord": "benchmark",
                "properties": benchmarks,
            },
        },
    }


def published_schema(parts: Sequence[SuitePart]) -> JSONSchema:
    """The JSON Schema ``clinieval suite schema`` prints (docs/suite.schema.json)."""
    schema: JSONSchema = published(suite_schema(parts))
    return schema


def _common_schema() -> dict[str, JSONSchema]:
    return {
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": "at most this many items (wins over the suite's)",
        },
        "judge": {
            "type": ["string", "boolean"],
            "typeText": "a judge model spec, or false for no judge",
            "description": "this benchmark's judge: a model spec, false for none (default: [judge])",
        },
        "judge_repeats": {
            "type": "integer",
            "minimum": 1,
            "description": "how many times the judge reads each answer (default: [judge] repeats)",
        },
    }


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
        options = backend(endpoints)
    except UserError as e:
        raise UserError(f"{source}: [endpoints] {e}") from None
    models = tuple(SuiteModel(name, spec) for name, spec in data["models"].items())
    judge = None
    if "judge" in data:
        judge = SuiteJudge(data["judge"]["model"], data["judge"].get("repeats", 1))
    _check_specs(models, judge, data, options, source)
    seed, limit = int(data.get("seed", 0)), data.get("limit")
    shared = Shared(backend=options, concurrency=_in_flight(endpoints), limit=limit, seed=seed, judge=judge)
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


def _in_flight(endpoints: EndpointSettings) -> int | None:
    """Requests each run keeps in flight: ``concurrency``; under Ray None, as the CLI does (each
    worker keeps ``concurrency`` in flight and the model sums them)."""
    return None if endpoints.executor == "ray" else endpoints.concurrency


def _entry(part: SuitePart, table: Mapping[str, Any], shared: Shared, source: str) -> BenchmarkEntry:
    own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
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
            raise UserError(f"{source}: {where(path)}{e}") from None
