"""Run directories: a manifest, an append-only results file and the request cache.

Layout::

    RUN/manifest.json    what was run (task, model, settings, versions, data hashes, status)
    RUN/samples.jsonl    one SampleRecord per finished (sample, repeat), appended as they finish
    RUN/texts.jsonl      each long text (a record, a prompt) once, which samples.jsonl refers to
                         by hash (see clinieval.records.record_codec)
    RUN/cache.sqlite     every answered model request (see clinieval.records.cache)
    RUN/scores/NAME.jsonl  re-scoring output of `clinieval score`, text metrics and judges
    RUN/scores/NAME.summary.json  a judge's call, token and failure accounting

A run is resumed by running the same command again: finished records are skipped and any
request answered before a crash comes from the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import IO

import orjson

from clinieval import __version__
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, raise_named
from clinieval.models.fingerprint import portable_spec
from clinieval.records.cache import RequestCache
from clinieval.records.record_codec import MissingText, TextTable
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
TEXTS = "texts.jsonl"
CACHE = "cache.sqlite"
SUMMARY = "summary.json"
SCORES = "scores"

_TRACKED_PACKAGES = ("clinieval", "llama_cpp_python", "orjson", "numpy", "typer", "rich")


def run_infos_under(folder: Path) -> Iterator[JSON]:
    """The ``run`` part of every ``summary.json`` under ``folder`` (a suite cell holds one run per
    arm), in path order; a file that is unreadable or of another shape is passed over."""
    for found in sorted(folder.rglob(SUMMARY)):
        try:
            data = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        info = data.get("run") if isinstance(data, dict) else None
        if isinstance(info, dict):
            yield info


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
    """Hash of what decides a run's results; a resume must match it exactly. The model's address
    is left out: the model fingerprint (models/fingerprint.py) says whether the same model answers,
    so the same model moved to another URL resumes."""
    return hashlib.sha256(json.dumps(portable_spec(spec), sort_keys=True).encode()).hexdigest()[:16]


def same_run(old: JSON, new: JSON) -> bool:
    """Whether the manifest ``old`` found in a run folder is the run ``new`` describes: the same
    fingerprint, or the same spec without the model's address (a manifest written while the
    address was still part of the fingerprint)."""
    if old.get("fingerprint") == new["fingerprint"]:
        return True
    spec = old.get("spec")
    return isinstance(spec, dict) and portable_spec(spec) == portable_spec(new["spec"])


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
    """A run directory on disk, named by a ``str`` or a path (``RunDir("runs/x").records()``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fresh = False
        """Whether this process wrote the manifest (a new run, not a resumed one)."""
        self._made: Path | None = None
        """The topmost folder this process created for the new run (None: it was there)."""

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
    def open(cls, path: str | os.PathLike[str]) -> RunDir:
        run = cls(path)
        run.manifest()
        return run

    @classmethod
    def create_or_resume(
        cls, path: str | os.PathLike[str], manifest: JSON, *, overwrite: bool = False
    ) -> RunDir:
        """Start a new run at ``path``, or resume the one there if it is the same run."""
        run = cls(path)
        path = run.path
        if run.exists() and not overwrite:
            old = run.manifest()
            if not same_run(old, manifest):
                diff = _first_difference(portable_spec(old.get("spec", {})), portable_spec(manifest["spec"]))
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
            _remove_run_files(path)
        run._fresh, run._made = True, _first_missing(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            atomic_write_json(run.manifest_path, manifest)
        except BaseException:
            run.discard_if_unused()
            raise
        return run

    def discard_if_unused(self) -> bool:
        """Remove the run this process started here if it holds nothing worth keeping yet (no
        record, no cached answer), and say whether it did.

        Called when a run ends in an error before its first record: the folder would otherwise
        hold a manifest of the refused command, and the corrected command would be refused as
        "a different run". A resumed run, or one with anything recorded, is never touched.
        """
        if not self._fresh:
            return False
        try:
            if any(_whole_lines(self.samples_path)) or not _cache_empty(self.path / CACHE):
                return False
            if self._made is not None:
                shutil.rmtree(self._made)
            else:  # the folder was there before (empty, or holding a run --overwrite discarded)
                _remove_run_files(self.path)
        except OSError:
            return False  # the error being reported matters more than the leftover folder
        self._fresh = False
        return True

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


def _remove_run_files(path: Path) -> None:
    """Everything a run writes into its folder, and nothing else that may be there."""
    for name in (MANIFEST, SAMPLES, TEXTS, SUMMARY, CACHE, f"{CACHE}-wal", f"{CACHE}-shm"):
        (path / name).unlink(missing_ok=True)
    shutil.rmtree(path / SCORES, ignore_errors=True)


def _first_missing(path: Path) -> Path | None:
    """The topmost of ``path`` and its parents that does not exist (what ``mkdir(parents=True)``
    creates first), or None when ``path`` exists."""
    if path.exists():
        return None
    top = path
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    return top


def _cache_empty(path: Path) -> bool:
    """Whether a run's request cache surely holds no answer (an absent one holds none; one that
    cannot be read counts as holding some, so it is kept)."""
    if not path.exists():
        return True
    try:
        cache = RequestCache(path)
        try:
            return cache.is_empty()
        finally:
            cache.close()
    except (OSError, sqlite3.Error):
        return False


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


_FLAGS = {
    "model.identity.n_ctx": "--n-ctx",
    "generation.temperature": "--temperature",
    "generation.max_tokens": "--max-tokens",
    "generation.seed": "--seed",
    "generation.stop": "--stop",
    "repeats": "--repeats",
    "task.scorers": "--scorer",
}
"""The command-line flag behind a field of the run spec, for the "different run" refusal."""
_POLICY_FLAGS = {
    "tokenizer": "--tokenizer",
    "ctx": "--max-context",
    "reserve": "--reserve",
    "answer": "--max-tokens",
}
"""The flag behind each ``key=value`` of a context policy's name (``keep_recent(ctx=...,...)``)."""
_POLICY_SETTING = re.compile(r"(\w+)=([^,()\[\]]*)")
_WHOLE = 400
"""Two differing values up to this many characters together are shown whole."""
_AROUND = 6
"""Words (and the spaces between them) kept on each side of where two long values differ."""
_SPAN = 160
"""Characters of a long differing stretch shown from each of its ends."""


def _first_difference(old: JSON, new: JSON, prefix: str = "") -> str:
    """The first field (in sorted order) whose value differs, both values, and the flag that
    sets it where one does. Values are never cut inside a word, so a path is always whole."""
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        where = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            return _first_difference(a, b, where + ".")
        shown_a, shown_b = _shown(json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False))
        flag = _flag_for(where, a, b)
        return f"{where} was {shown_a}, now {shown_b}" + (f"; set by {flag}" if flag else "")
    return "fingerprint differs"


def _flag_for(where: str, a: object, b: object) -> str | None:
    if where == "task.context_policy" and isinstance(a, str) and isinstance(b, str):
        old, new = dict(_POLICY_SETTING.findall(a)), dict(_POLICY_SETTING.findall(b))
        changed = dict.fromkeys(k for k in (*old, *new) if old.get(k) != new.get(k) and k in _POLICY_FLAGS)
        return " and ".join(_POLICY_FLAGS[k] for k in changed) or None
    if where.startswith("model.") and where not in _FLAGS:
        return "--model"
    return _FLAGS.get(where)


def _shown(a: str, b: str) -> tuple[str, str]:
    """Two differing values as they are, or, when long, the words around where they differ with
    an ellipsis for what both share; a stretch longer than twice :data:`_SPAN` keeps its two
    ends. Only whole words are left out."""
    if len(a) + len(b) <= _WHOLE:
        return a, b
    wa, wb = re.split(r"(\s+)", a), re.split(r"(\s+)", b)
    same = 0
    while same < min(len(wa), len(wb)) and wa[same] == wb[same]:
        same += 1
    tail = 0
    while tail < min(len(wa), len(wb)) - same and wa[-1 - tail] == wb[-1 - tail]:
        tail += 1
    start = max(0, same - _AROUND)
    return _excerpt(wa, start, len(wa) - tail + _AROUND), _excerpt(wb, start, len(wb) - tail + _AROUND)


def _excerpt(words: list[str], start: int, stop: int) -> str:
    stop = min(len(words), stop)
    kept = words[start:stop]
    if len("".join(kept)) > 2 * _SPAN:
        head, rest = _words_within(kept, _SPAN), kept[::-1]
        back = _words_within(rest, _SPAN)[::-1]
        if len(head) + len(back) < len(kept):
            kept = [*head, " … ", *back]
    return ("…" if start > 0 else "") + "".join(kept) + ("…" if stop < len(words) else "")


def _words_within(words: list[str], chars: int) -> list[str]:
    """The leading words of ``words`` up to ``chars`` characters (at least one word, whole)."""
    out: list[str] = []
    used = 0
    for w in words:
        if out and used + len(w) > chars:
            break
        out.append(w)
        used += len(w)
    return out


def find_run_dirs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The run directories among ``paths``; a folder holding run directories stands for them all."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / MANIFEST).is_file():
            out.append(p)
            continue
        inner = sorted(d for d in p.iterdir() if (d / MANIFEST).is_file()) if p.is_dir() else []
        if not inner:
            raise UserError(f"{p}: not a run directory, nor a folder of run directories")
        out.extend(inner)
    return out
