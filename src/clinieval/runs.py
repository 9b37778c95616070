"""Run directories: a manifest, an append-only results file and the request cache.

Layout::

    RUN/manifest.json    what was run (task, model, settings, versions, data hashes, status)
    RUN/samples.jsonl    one SampleRecord per finished (sample, repeat), appended as they finish
    RUN/texts.jsonl      each long text (a record, a prompt) once, which samples.jsonl refers to
                         by hash (see clinieval.record_codec)
    RUN/cache.sqlite     every answered model request (see clinieval.cache)
    RUN/scores/NAME.jsonl  re-scoring output of `clinieval score`, text metrics and judges
    RUN/scores/NAME.summary.json  a judge's call, token and failure accounting

A run is resumed by running the same command again: finished records are skipped and any
request answered before a crash comes from the cache.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import IO

import orjson

from clinieval import __version__
from clinieval.cache import RequestCache
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, raise_named
from clinieval.record_codec import MissingText, TextTable
from clinieval.records import SampleRecord
from clinieval.types import JSON

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
TEXTS = "texts.jsonl"
CACHE = "cache.sqlite"
SUMMARY = "summary.json"
SCORES = "scores"

_TRACKED_PACKAGES = ("clinieval", "llama_cpp_python", "orjson", "numpy", "typer", "rich")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(spec: JSON) -> str:
    """Hash of what decides a run's results; a resume must match it exactly."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def build_manifest(spec: JSON, data_files: list[Path]) -> JSON:
    return {
        "clinieval_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "fingerprint": fingerprint(spec),
        "spec": spec,
        "packages": package_versions(),
        "data": {str(p): file_sha256(p) for p in data_files},
        "status": "running",
    }


class RunDir:
    """A run directory on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES

    @property
    def texts_path(self) -> Path:
        return self.path / TEXTS

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def manifest(self) -> JSON:
        try:
            data: JSON = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{self.path}: not a run directory (no {MANIFEST})") from None
        except json.JSONDecodeError as e:
            raise UserError(f"{self.manifest_path}: not valid JSON ({e})") from None
        return data

    @classmethod
    def open(cls, path: Path) -> RunDir:
        run = cls(path)
        run.manifest()
        return run

    @classmethod
    def create_or_resume(cls, path: Path, manifest: JSON, *, overwrite: bool = False) -> RunDir:
        """Start a new run at ``path``, or resume the one there if it is the same run."""
        run = cls(path)
        if run.exists() and not overwrite:
            old = run.manifest()
            if old.get("fingerprint") != manifest["fingerprint"]:
                diff = _first_difference(old.get("spec", {}), manifest["spec"])
                raise UserError(
                    f"{path}: holds a different run ({diff}); use another --out, or --overwrite to discard it"
                )
            old["status"] = "running"
            old["resumed"] = [*old.get("resumed", []), time.strftime("%Y-%m-%dT%H:%M:%S%z")]
            atomic_write_json(run.manifest_path, old)
            return run
        if path.exists() and any(path.iterdir()) and not overwrite:
            raise UserError(f"{path}: exists and is not a clinieval run; choose another --out")
        if overwrite and path.exists():
            for name in (MANIFEST, SAMPLES, TEXTS, SUMMARY, CACHE, f"{CACHE}-wal", f"{CACHE}-shm"):
                (path / name).unlink(missing_ok=True)
            shutil.rmtree(path / SCORES, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run.manifest_path, manifest)
        return run

    def set_status(self, status: str, **extra: object) -> None:
        data = self.manifest()
        data["status"] = status
        data.update(extra)
        atomic_write_json(self.manifest_path, data)

    def cache(self) -> RequestCache:
        return RequestCache(self.path / CACHE)

    def text_table(self) -> TextTable:
        """The run's shared long texts (empty for a run written before they existed)."""
        rows: list[dict[str, str]] = []
        for i, line in enumerate(_whole_lines(self.texts_path), 1):
            try:
                row = orjson.loads(line)
                rows.append({"id": str(row["id"]), "text": str(row["text"])})
            except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                raise UserError(f"{self.texts_path}:{i}: unreadable text ({e})") from None
        return TextTable.from_lines(rows)

    def iter_records(self) -> Iterator[SampleRecord]:
        """Records in file order; a torn last line (crash mid-write) is ignored."""
        if not self.samples_path.exists():
            return
        table = self.text_table()
        for i, line in enumerate(_whole_lines(self.samples_path), 1):
            try:
                yield SampleRecord.from_dict(table.decode(orjson.loads(line)))
            except MissingText as e:
                raise UserError(f"{self.samples_path}:{i}: refers to text {e} missing from {TEXTS}") from None
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise UserError(f"{self.samples_path}:{i}: unreadable record ({e})") from None

    def records(self) -> list[SampleRecord]:
        """The latest record for each (sample, repeat), in first-seen order."""
        latest: dict[tuple[str, int], SampleRecord] = {}
        for rec in self.iter_records():
            latest[rec.key] = rec
        return list(latest.values())

    def open_appender(self, path: Path | None = None) -> IO[str]:
        """Open samples.jsonl (or another of the run's line files) for appending, first cutting
        any torn last line."""
        path = path or self.samples_path
        if path.exists():
            with path.open("rb+") as f:
                data = f.read()
                if data and not data.endswith(b"\n"):
                    f.truncate(data.rfind(b"\n") + 1)
        return path.open("a", encoding="utf-8")


def _whole_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of a line file; a torn last one (a kill mid-write) is left out, and
    the next append cuts it."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                return
            yield line


def append_record(f: IO[str], record: SampleRecord) -> None:
    """One line per record, flushed at once: a kill loses at most the line being written, which
    the next open repairs (a full disk is reported with the results file's name)."""
    try:
        f.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        f.flush()
    except OSError as e:
        raise_named(e, f.name)


def _first_difference(old: JSON, new: JSON, prefix: str = "") -> str:
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        where = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            return _first_difference(a, b, where + ".")
        return f"{where} was {json.dumps(a)[:80]}, now {json.dumps(b)[:80]}"
    return "fingerprint differs"


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories among ``paths``; a folder holding run directories stands for them all."""
    out: list[Path] = []
    for p in paths:
        if (p / MANIFEST).is_file():
            out.append(p)
            continue
        inner = sorted(d for d in p.iterdir() if (d / MANIFEST).is_file()) if p.is_dir() else []
        if not inner:
            raise UserError(f"{p}: not a run directory, nor a folder of run directories")
        out.extend(inner)
    return out
