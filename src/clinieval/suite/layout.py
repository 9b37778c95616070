"""The suite file's own tables (top level, ``[models]``, ``[judge]``, ``[endpoints]``) and the whole
file's JSON Schema around the benchmarks' tables.

Kept apart from reading (:mod:`clinieval.suite.config`) so the schema, which ``clinieval suite
schema`` publishes and the checker enforces, is in one place: the ``[endpoints]`` table is a
dataclass like a benchmark's options, and the rest is written out here once. Keys such as
``typeText`` or ``requiredText`` carry the checker's wording for a fault and are left out of the
published schema (:func:`clinieval.suite.schema.published`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from clinieval.models.server import ServerKind
from clinieval.suite.part import SuitePart
from clinieval.suite.schema import DRAFT, MODEL_NAME, JSONSchema, options_schema, published


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
    fingerprint: Literal["strict", "warn", "off"] | None = field(
        default=None,
        metadata={
            "help": "another model behind a cell's spec when it resumes: strict refuses, warn goes on, "
            "off compares nothing (default: $CLINIEVAL_FINGERPRINT, else strict; docs/endpoints.md)"
        },
    )
    server_kind: ServerKind | None = field(
        default=None,
        metadata={
            "help": "what every HTTP server is, when detection should not decide (log-likelihoods and "
            "slots follow from it; default: ask each server)"
        },
    )
    executor: Literal["local", "ray"] = field(
        default="local", metadata={"help": "where model requests are answered: local or ray"}
    )
    ray_address: str | None = field(
        default=None, metadata={"help": 'with executor = "ray": the cluster to join, HEAD:6379'}
    )
    ray_workers: int | None = field(
        default=None, metadata={"help": 'with executor = "ray": how many workers (default: one per node)'}
    )


_MINIMA = {"n_ctx": 256, "retries": 0, "concurrency": 1, "ray_workers": 1}
_NAME_MODELS = 'name each model under test, e.g. smol = "llamacpp:smollm2-135m-instruct"'


def suite_schema(parts: Sequence[SuitePart]) -> JSONSchema:
    """The JSON Schema of a suite file whose benchmarks are ``parts`` (with the checker's own
    message keys; :func:`published_schema` leaves them out)."""
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
            "models": _models(),
            "judge": _judge(),
            "endpoints": _endpoints(),
            "benchmarks": _benchmarks(parts),
        },
    }


def published_schema(parts: Sequence[SuitePart]) -> JSONSchema:
    """The JSON Schema ``clinieval suite schema`` prints (docs/suite.schema.json)."""
    schema: JSONSchema = published(suite_schema(parts))
    return schema


def _models() -> JSONSchema:
    return {
        "type": "object",
        "description": "the models under test: leaderboard name = model spec (any spec "
        "`clinieval run --model` takes, endpoint pools included)",
        "minProperties": 1,
        "minText": f"no model: {_NAME_MODELS}",
        "propertyNames": {
            "pattern": MODEL_NAME,
            "patternText": "not a usable model name: it names a folder, so use letters, digits, "
            "'.', '_' and '-'",
        },
        "additionalProperties": {
            "type": "string",
            "typeText": 'a model spec string such as "openai:http://127.0.0.1:8080/v1@NAME"',
        },
    }


def _judge() -> JSONSchema:
    return {
        "type": "object",
        "description": "the judge of the benchmarks that use one",
        "additionalProperties": False,
        "required": ["model"],
        "requiredText": {"model": 'missing key model: the judge\'s spec, e.g. model = "openai:URL@NAME"'},
        "properties": {
            "model": {"type": "string", "description": "the judge's model spec"},
            "repeats": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "how many times each answer is judged",
            },
        },
    }


def _endpoints() -> JSONSchema:
    schema = options_schema(EndpointSettings)
    for key, minimum in _MINIMA.items():
        schema["properties"][key]["minimum"] = minimum
    schema["properties"]["timeout"]["exclusiveMinimum"] = 0
    schema["description"] = "how models are reached (the command line's endpoint options)"
    return schema


def _benchmarks(parts: Sequence[SuitePart]) -> JSONSchema:
    common = common_keys()
    return {
        "type": "object",
        "description": "one table per benchmark: its options plus limit, judge, judge_repeats",
        "minProperties": 1,
        "minText": "no benchmark: add a [benchmarks.NAME] table",
        "additionalProperties": False,
        "keyWord": "benchmark",
        "properties": {
            p.name: {**options_schema(p.options, extra=common), "description": f"{p.name}: {p.metric}"}
            for p in sorted(parts, key=lambda p: p.name)
        },
    }


def common_keys() -> dict[str, JSONSchema]:
    """The keys every ``[benchmarks.NAME]`` table takes besides the benchmark's own options."""
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
        "margin": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "a clinical margin on the metric's scale: the leaderboard also says which models"
            " are practically equivalent (two one-sided tests) or better by at least it",
        },
    }


_OPTION = re.compile(r"--([a-z][a-z-]*)(?: (?!or\b)([^\s,;()]+))?")


def in_suite_terms(message: str, benchmark: str | None = None, options: type | None = None) -> str:
    """An error from the layers below, worded for a suite file: the command line's endpoint
    options it names (``--allow-host HOST``, ``--n-ctx``, ``--timeout`` ...) become the
    ``[endpoints]`` keys a suite sets instead (``[endpoints] allow_host = ["HOST"]``), and, given
    a benchmark and its options dataclass, the benchmark command's own options that its table
    sets (``--max-context N`` becomes ``[benchmarks.medalign] max_context = N``), since a suite
    user has no such option to pass. Other text is left as it is."""
    fields = {f.name: f for f in dataclasses.fields(EndpointSettings)}
    own = {f.name for f in dataclasses.fields(options)} if options is not None and benchmark else set()

    def key(match: re.Match[str]) -> str:
        name = match.group(1).replace("-", "_")
        table = "[endpoints]" if name in fields else f"[benchmarks.{benchmark}]" if name in own else None
        if table is None:
            return match.group(0)
        value = match.group(2)
        if name == "allow_host" and value is not None:
            return f'[endpoints] allow_host = ["{value}"]'
        if value is not None and value[0].isdigit():
            return f"{table} {name} = {value}"
        if value is not None and not value.isupper():  # a value, not a placeholder such as FILE
            return f'{table} {name} = "{value}"'
        return f"{table} {name}" + ("" if value is None else f" {value}")

    return _OPTION.sub(key, message)
