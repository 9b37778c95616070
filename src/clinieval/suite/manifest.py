"""``DIR/suite.json``: what a suite ran, with which code, data and settings, cell by cell.

The manifest is the suite's memory across runs. It records the suite file (its text and hash),
the settings as parsed, the code (clinieval's version, the git commit where there is one, the
packages), each benchmark's data file hashes, and for every model x benchmark cell its settings,
status (pending, running, complete, failed), planned model calls and wall time. A rerun reads it
to skip finished cells and to refuse one whose settings changed — results recorded under the old
settings must not be mixed with new ones silently. It is rewritten atomically at every change,
so a ``kill -9`` leaves the last state whole.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clinieval import __version__
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json
from clinieval.models.fingerprint import spec_without_urls
from clinieval.records.runs import file_sha256, package_versions
from clinieval.suite.config import BenchmarkEntry, Suite
from clinieval.suite.part import Prepared, SuiteModel

MANIFEST = "suite.json"
STATUSES = ("pending", "running", "complete", "failed")


def cell_key(benchmark: str, model: str) -> str:
    return f"{benchmark}/{model}"


def jsonable(value: Any) -> Any:
    """Options and settings as JSON: dataclasses as objects, paths as text, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def cell_settings(entry: BenchmarkEntry, model: SuiteModel) -> dict[str, Any]:
    """What decides a cell's results: a rerun with any of these changed is a different cell.
    Endpoint settings (timeouts, requests in flight) are left out: they change how, not what."""
    judge = entry.shared.judge
    return {
        "model": model.spec,
        "options": jsonable(entry.options),
        "limit": entry.shared.limit,
        "seed": entry.shared.seed,
        "judge": None if judge is None else {"model": judge.spec, "repeats": judge.repeats},
    }


def data_hashes(prepared: Sequence[Prepared]) -> dict[str, dict[str, str]]:
    """Each benchmark's data files and their SHA-256, as the manifest records them."""
    return {p.benchmark: {str(f): file_sha256(f) for f in p.data_files} for p in prepared}


def git_commit() -> str | None:
    """The commit clinieval's source is checked out at, when it runs from a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


class SuiteManifest:
    """The manifest of the suite at ``out`` (``out/suite.json``), read and written whole."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.out = out
        self.data = data

    @property
    def path(self) -> Path:
        return self.out / MANIFEST

    @classmethod
    def read(cls, out: Path) -> SuiteManifest | None:
        """The manifest at ``out``, or None when there is none."""
        path = out / MANIFEST
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(f"{path}: unreadable suite manifest ({e})") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), dict):
            raise UserError(f"{path}: not a clinieval suite manifest")
        return cls(out, data)

    @classmethod
    def open(cls, out: Path) -> SuiteManifest:
        found = cls.read(out)
        if found is None:
            raise UserError(f"{out}: not a suite folder (no {MANIFEST}); run `clinieval suite run` first")
        return found

    def cells(self) -> dict[str, dict[str, Any]]:
        cells: dict[str, dict[str, Any]] = self.data["cells"]
        return cells

    def status(self, key: str) -> str:
        return str(self.cells().get(key, {}).get("status", "pending"))

    def changed(self, key: str, settings: Mapping[str, Any]) -> str | None:
        """The first setting of cell ``key`` that differs from what it ran with, as ``field was
        X, now Y``; None when it is new or the same."""
        old = self.cells().get(key, {}).get("settings")
        if old is None:
            return None
        return _first_difference(_portable(old), _portable(jsonable(settings)))

    def changed_data(self, benchmark: str, hashes: Mapping[str, str]) -> str | None:
        """The first data file of ``benchmark`` whose content differs from when its cells ran, as
        ``FILE changed (sha256 OLD… -> NEW…)``; None when none did (or it never ran)."""
        old = self.data.get("benchmarks", {}).get(benchmark, {}).get("data", {})
        for name, digest in hashes.items():
            if name in old and old[name] != digest:
                hashes_shown = f"sha256 {old[name][:12]}… -> {digest[:12]}…"
                return f"data file {name} changed since its cells ran ({hashes_shown})"
        return None

    def record(
        self, suite: Suite, prepared: Sequence[Prepared], hashes: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Take this run's suite file, code and data hashes (``hashes``: benchmark -> file ->
        sha256; a rerun's replace the old ones; the cells keep their history) and write it."""
        benchmarks = self.data.setdefault("benchmarks", {})
        for p in prepared:
            benchmarks[p.benchmark] = {
                "describe": p.describe,
                "items": p.items,
                "clustered": p.clustered,
                "data": dict(hashes[p.benchmark]),
            }
        self.data.update(
            {
                "suite": {"file": str(suite.path.resolve()), "sha256": suite.sha256, "text": suite.text},
                "title": suite.title,
                "settings": jsonable(suite.data),
                "code": {
                    "clinieval": __version__,
                    "git_commit": git_commit(),
                    "packages": package_versions(),
                },
                "updated": _now(),
            }
        )
        self.data.setdefault("created", _now())
        self.write()

    def set_cell(self, key: str, **fields: Any) -> None:
        cell = self.cells().setdefault(key, {})
        cell.update(fields)
        self.data["updated"] = _now()
        self.write()

    def write(self) -> None:
        atomic_write_json(self.path, self.data)

    @classmethod
    def new(cls, out: Path) -> SuiteManifest:
        return cls(out, {"format": 1, "cells": {}})


def _portable(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Cell settings with the models' addresses left out: the same model moved to another URL is
    the same cell (each run's model fingerprint tells whether the same model answers there)."""
    out = dict(settings)
    if isinstance(out.get("model"), str):
        out["model"] = spec_without_urls(out["model"])
    judge = out.get("judge")
    if isinstance(judge, dict) and isinstance(judge.get("model"), str):
        out["judge"] = {**judge, "model": spec_without_urls(judge["model"])}
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _first_difference(old: Any, new: Any, prefix: str = "") -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_difference(old.get(key), new.get(key), f"{prefix}{key}.")
            if found is not None:
                return found
        return None
    if old == new:
        return None
    shown = json.dumps(old, ensure_ascii=False), json.dumps(new, ensure_ascii=False)
    return f"{prefix.rstrip('.')} was {shown[0]}, now {shown[1]}"
