"""The suite file's JSON Schema, made from the benchmarks' option dataclasses, and a checker for it.

A suite file is checked by one schema that is *generated*: each benchmark's options dataclass
(its fields, types, defaults and the ``help`` of each) becomes the schema of its
``[benchmarks.NAME]`` table, and the suite's own tables are dataclasses here and in
:mod:`clinieval.suite.config`. So ``clinieval suite schema`` (the published JSON Schema,
``docs/suite.schema.json``), the validation and the documentation cannot drift apart.

The checker is hand-written over the small part of JSON Schema (draft 2020-12) the generator
uses, rather than a new dependency, because what matters here is the error: the first fault in
document order, as one line naming the table and key the user wrote —
``suite.toml: [benchmarks.ehrnoteqa] format: expected one of "mc", "free", got "MC"`` — with a
"did you mean" for a misspelt key.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from clinieval.errors import UserError

JSONSchema = dict[str, Any]

DRAFT = "https://json-schema.org/draft/2020-12/schema"
MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""A model's name on the leaderboard is also its folder name in the suite's output."""


class SchemaError(TypeError):
    """An options dataclass uses a field type a suite file cannot express (a programming error)."""


def field_schema(annotation: Any) -> JSONSchema:
    """The schema of one allowed field type: str, int, float, bool, Path, Literal[str, ...],
    tuple[str, ...], and any of these ``| None`` (None: the key may be left out)."""
    annotation = _without_none(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is Path:
        return {"type": "string", "format": "path"}
    origin = typing.get_origin(annotation)
    if origin is Literal:
        choices = typing.get_args(annotation)
        if not all(isinstance(c, str) for c in choices):
            raise SchemaError(f"Literal choices must be strings: {annotation!r}")
        return {"type": "string", "enum": list(choices)}
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[0] is str and args[1] is Ellipsis:
            return {"type": "array", "items": {"type": "string"}}
    raise SchemaError(f"a suite option cannot have the type {annotation!r}")


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def options_schema(options: type[Any], *, extra: Mapping[str, JSONSchema] | None = None) -> JSONSchema:
    """The schema of a table whose keys are the fields of the frozen dataclass ``options`` (plus
    ``extra`` keys the suite adds): every key optional, no other key allowed."""
    if not dataclasses.is_dataclass(options):
        raise SchemaError(f"{options!r} is not a dataclass")
    hints = typing.get_type_hints(options)
    properties: dict[str, JSONSchema] = {}
    for f in dataclasses.fields(options):
        schema = field_schema(hints[f.name])
        help_text = f.metadata.get("help")
        if help_text:
            schema["description"] = str(help_text)
        default = _default(f)
        if default is not None:
            schema["default"] = default
        schema.update(f.metadata.get("schema", {}))
        properties[f.name] = schema
    for name, schema in (extra or {}).items():
        if name in properties:
            raise SchemaError(f"{options.__name__}.{name}: the suite sets this key for every benchmark")
        properties[name] = schema
    return {"type": "object", "additionalProperties": False, "properties": properties}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        raise SchemaError(f"suite option {f.name!r} has no default")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def to_options(options: type[Any], table: Mapping[str, Any]) -> Any:
    """An instance of ``options`` from a table the schema has accepted (lists become tuples,
    path strings Paths, integers for float fields floats)."""
    hints = typing.get_type_hints(options)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        if f.name not in table:
            continue
        kind, value = _without_none(hints[f.name]), table[f.name]
        if kind is Path:
            value = Path(value)
        elif kind is float:
            value = float(value)
        elif typing.get_origin(kind) is tuple:
            value = tuple(value)
        values[f.name] = value
    return options(**values)


# --- checking a parsed table ---------------------------------------------------------------------


def check(value: Any, schema: JSONSchema, source: str) -> None:
    """Raise one UserError naming every place (in document order) where ``value`` breaks
    ``schema``, on one line; ``source`` (the suite file as the user named it) starts the message.
    Every fault at once: a file with three mistakes should not take three runs to fix."""
    problems = _problems(value, schema, ())
    if not problems:
        return
    said = [_said(path, message) for path, message in problems]
    if len(said) == 1:
        raise UserError(f"{source}: {said[0]}")
    listed = "; ".join(f"({n}) {text}" for n, text in enumerate(said, 1))
    raise UserError(f"{source}: {len(said)} problems: {listed}")


def _said(path: tuple[str, ...], message: str) -> str:
    if path and path[-1] == _TABLE:  # about the table itself: a missing or unknown key
        path = path[:-1]
        return f"{f'[{_header(path)}] ' if path else ''}{message}"
    return f"{where(path)}{message}"


def where(path: Sequence[str]) -> str:
    """``("benchmarks", "ehrnoteqa", "format")`` -> ``[benchmarks.ehrnoteqa] format: ``: the table
    header and key as the user wrote them."""
    if not path:
        return ""
    if len(path) == 1:
        return f"{_key(path[0])}: "
    return f"[{_header(path[:-1])}] {_key(path[-1])}: "


def _header(path: Sequence[str]) -> str:
    return ".".join(_key(p) for p in path)


_TABLE = "\0table"
"""Ends the path of a fault in a table itself (not in one of its values)."""


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


Problem = tuple[tuple[str, ...], str]


def _problems(value: Any, schema: JSONSchema, path: tuple[str, ...]) -> list[Problem]:
    """Every fault in ``value``: one per value that breaks its own schema (its first), and, in a
    table, those of every key."""
    if isinstance(value, dict) and (schema.get("type") in (None, "object")):
        return _table_problems(value, schema, path)
    found = _first_problem(value, schema, path)
    return [] if found is None else [found]


def _first_problem(value: Any, schema: JSONSchema, path: tuple[str, ...]) -> Problem | None:
    wanted = schema.get("type")
    if wanted is not None and not _has_type(value, wanted):
        return path, f"expected {_type_words(wanted, schema)}, got {shown(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(shown(c) for c in schema["enum"])
        return path, f"expected one of {choices}, got {shown(value)}{_did_you_mean(value, schema['enum'])}"
    if _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            return path, f"expected a number of at least {schema['minimum']}, got {shown(value)}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return path, f"expected a number above {schema['exclusiveMinimum']}, got {shown(value)}"
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return path, str(schema.get("patternText", "has the wrong form"))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found = _first_problem(item, schema["items"], path)
            if found is not None:
                return found[0], f"item {i + 1}: {found[1]}"
    if isinstance(value, dict):
        inside = _table_problems(value, schema, path)
        return inside[0] if inside else None
    return None


def _table_problems(table: dict[str, Any], schema: JSONSchema, path: tuple[str, ...]) -> list[Problem]:
    properties: dict[str, JSONSchema] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    names = schema.get("propertyNames")
    out: list[Problem] = []
    for key, item in table.items():
        if names is not None and key not in properties:
            found = _first_problem(key, names, (*path, key))
            if found is not None:
                out.append(found)
                continue
        if key in properties:
            out += _problems(item, properties[key], (*path, key))
        elif extra is False:
            out.append(((*path, _TABLE), _unknown_key(key, properties, schema)))
        elif isinstance(extra, dict):
            out += _problems(item, extra, (*path, key))
    for key in schema.get("required", []):
        if key not in table:
            out.append(((*path, _TABLE), schema.get("requiredText", {}).get(key, f"missing key {_key(key)}")))
    if len(table) < schema.get("minProperties", 0):
        out.append(((*path, _TABLE), schema.get("minText", "empty table")))
    return out


def _unknown_key(key: str, properties: Mapping[str, Any], schema: JSONSchema) -> str:
    what = schema.get("keyWord", "key")
    known = ", ".join(properties) or "none"
    return f"unknown {what} {shown(key)}{_did_you_mean(key, list(properties))} (known: {known})"


def _did_you_mean(value: object, choices: Sequence[Any]) -> str:
    if not isinstance(value, str):
        return ""
    folded = {str(c).lower(): str(c) for c in choices}
    if value.lower() in folded:
        return f"; did you mean {shown(folded[value.lower()])}?"
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {shown(close[0])}?" if close else ""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _has_type(value: object, wanted: str | Sequence[str]) -> bool:
    kinds = [wanted] if isinstance(wanted, str) else list(wanted)
    return any(_is(value, k) for k in kinds)


def _is(value: object, kind: str) -> bool:
    match kind:
        case "string":
            return isinstance(value, str)
        case "boolean":
            return isinstance(value, bool)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return _is_number(value)
        case "array":
            return isinstance(value, list)
        case "object":
            return isinstance(value, dict)
    return False


_WORDS = {
    "string": "a string",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "array": "a list",
    "object": "a table",
}


def _type_words(wanted: str | Sequence[str], schema: JSONSchema) -> str:
    if "typeText" in schema:
        return str(schema["typeText"])
    kinds = [wanted] if isinstance(wanted, str) else list(wanted)
    words = " or ".join(_WORDS.get(k, k) for k in kinds)
    if schema.get("type") == "array" and schema.get("items", {}).get("type") == "string":
        return "a list of strings"
    return words


def shown(value: object) -> str:
    """A value as TOML would spell it, for an error: strings quoted, tables and lists named."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


PRIVATE_KEYS = ("typeText", "patternText", "requiredText", "minText", "keyWord")
"""Keys the checker reads for its messages; left out of the published schema."""


def published(schema: Any) -> Any:
    """``schema`` without the checker's own message keys: the JSON Schema a user's editor reads."""
    if isinstance(schema, dict):
        return {k: published(v) for k, v in schema.items() if k not in PRIVATE_KEYS}
    if isinstance(schema, list):
        return [published(v) for v in schema]
    return schema
