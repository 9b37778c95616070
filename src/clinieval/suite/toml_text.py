"""A suite file written out as TOML text (``clinieval suite demo`` writes the suite it runs).

``tomllib`` reads TOML but cannot write it, and a suite file holds only strings, numbers, booleans,
paths and lists of strings, so a few lines here are enough and need no new dependency. Paths under
the suite file's folder are written relative to it, so the demo's folder can be moved whole.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def suite_toml(
    *,
    title: str,
    seed: int,
    models: Mapping[str, str],
    judge: Mapping[str, Any] | None,
    benchmarks: Mapping[str, Mapping[str, Any]],
    base: Path,
) -> str:
    lines = [f"title = {value(title, base)}", f"seed = {seed}", "", "[models]"]
    lines += [f"{key(name)} = {value(spec, base)}" for name, spec in models.items()]
    if judge is not None:
        lines += ["", "[judge]", *(f"{key(k)} = {value(v, base)}" for k, v in judge.items())]
    for name, table in benchmarks.items():
        lines += [
            "",
            f"[benchmarks.{key(name)}]",
            *(f"{key(k)} = {value(v, base)}" for k, v in table.items()),
        ]
    return "\n".join(lines) + "\n"


def key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def value(v: Any, base: Path) -> str:
    """One TOML value: a JSON string is a valid TOML basic string; lists hold strings here."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, Path):
        inside = v.resolve().is_relative_to(base.resolve())
        text = Path(os.path.relpath(v.resolve(), base.resolve())).as_posix() if inside else str(v)
        return json.dumps(text, ensure_ascii=False)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x, base) for x in v) + "]"
    raise TypeError(f"a suite file cannot hold {v!r}")
