"""Move the run engine into ``clinieval.engine`` and ``clinieval.records`` (issue 40), re-runnably.

Why a script rather than one hand-made commit: other branches keep adding code that imports
``clinieval.runs``, ``clinieval.session`` and the rest while the move waits to be merged. Run after
each merge of such a branch, this script moves whatever is still at the old place and rewrites every
reference that still names an old module, and does nothing where all is already moved: running it
twice changes nothing the second time (``--check`` says whether anything is left).

What it does, from the repository root (or wherever ``--root`` points):

1. ``git mv src/clinieval/NAME.py src/clinieval/PACKAGE/NAME.py`` for each module of :data:`MOVES`
   still at the old place, after writing any relative import in it as an absolute one (a relative
   import means something else one folder down), and gives each package an ``__init__.py`` if it
   has none (a one-line placeholder; never overwrites one).
2. In every text file under :data:`SCAN` (tracked, or untracked and not ignored), rewrites
   ``from clinieval import runs`` (split from other names), ``from .runs import`` /
   ``from ..runs import`` (resolved against the file's place), and every dotted
   ``clinieval.runs`` (imports, ``import clinieval.runs``, monkeypatch targets, docs, docstrings)
   and path ``clinieval/runs.py`` to the new place.
3. Sorts the imports of the rewritten Python files and folds lines grown past the limit, with
   ruff when there is one (``.venv/bin/ruff`` or on PATH).

Bare file names in prose (``runs.py`` in docs/architecture.md) are left for a person: which file a
bare name means needs reading. Python 3.11+, standard library only::

    python3 tools/move_engine.py            # move and rewrite, and say what changed
    python3 tools/move_engine.py --check    # change nothing; exit 1 if anything is left to do

After a merge that stopped on conflicts, resolve them first: where both sides changed an import
line that names a moved module, keep the other branch's line (its names) and let this script
rewrite the module in it. tests/test_move_engine.py fails while anything is left to do.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MOVES: dict[str, str] = {
    # what drives a run
    "runner": "engine",
    "session": "engine",
    "rescore": "engine",
    "server_fit": "engine",
    "distributed": "engine",
    # what a run writes and reads back
    "runs": "records",
    "run_table": "records",
    "run_writer": "records",
    "summary": "records",
    "failures": "records",
    "record_codec": "records",
    "sample_record": "records",
    "cache": "records",
}
"""Old top-level module under ``clinieval`` -> the package it moves into."""

SCAN = ("src", "tests", "bench", "docs", "README.md", "Makefile", "pyproject.toml")
"""What is rewritten, relative to the root: folders (every text file below) and single files."""

TEXT_SUFFIXES = frozenset(
    {".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".sh"}
)
TEXT_NAMES = frozenset({"Makefile"})

_OLD = "|".join(sorted(MOVES, key=len, reverse=True))
DOTTED = re.compile(rf"(?<![\w.])clinieval\.(?P<mod>{_OLD})(?![\w])")
"""``clinieval.runs`` anywhere (but not ``clinieval.records.runs`` nor ``x.clinieval.runs``)."""
PATH = re.compile(rf"(?<![\w.])clinieval/(?P<mod>{_OLD})\.py(?![\w])")
"""``clinieval/runs.py`` (with or without ``src/`` before it)."""
FROM_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<dots>\.*)(?P<module>[\w.]*) import "
    r"(?P<names>\([^)]*\)|[^\n#]*?)(?P<comment>[ \t]*#[^\n]*)?$",
    re.M,
)
"""A ``from X import names`` statement: one line, or parenthesised over several."""

PLACEHOLDER = '"""The {package} package (issue 40); see tools/move_engine.py."""\n'


@dataclass(frozen=True, slots=True)
class Place:
    """Where a Python file sits in the package: its dotted module name and whether it is a package."""

    module: str
    is_package: bool

    @classmethod
    def of(cls, path: Path, src: Path) -> Place | None:
        try:
            rel = path.relative_to(src)
        except ValueError:
            return None
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        return cls(".".join(parts), is_package) if parts else None

    def resolve(self, dots: str, module: str) -> str:
        """The absolute module a relative import (``dots`` + ``module``) from here names."""
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        base = base[: len(base) - (len(dots) - 1)]
        return ".".join(base + ([module] if module else []))


def new_module(absolute: str) -> str | None:
    """``clinieval.runs[.x]`` -> ``clinieval.records.runs[.x]``; None when not an old module."""
    parts = absolute.split(".")
    if len(parts) >= 2 and parts[0] == "clinieval" and parts[1] in MOVES:
        return ".".join([parts[0], MOVES[parts[1]], *parts[1:]])
    return None


def _names(text: str) -> list[str]:
    inner = text.strip()
    if inner.startswith("("):
        inner = inner[1:-1]
    inner = re.sub(r"#[^\n]*", "", inner)
    return [n.strip() for n in inner.replace("\n", " ").split(",") if n.strip()]


def _split_from_clinieval(indent: str, keep_from: str, names: list[str], comment: str) -> str | None:
    """``from clinieval import a, runs`` as one line for what stays and one per package for what
    moved; None when none of ``names`` moved."""
    by_package: dict[str, list[str]] = {}
    stay: list[str] = []
    for name in names:
        target = MOVES.get(name.split(" as ")[0].strip())
        (by_package.setdefault(target, []) if target else stay).append(name)
    if not by_package:
        return None
    lines = [f"{indent}from {keep_from} import {', '.join(stay)}"] if stay else []
    lines += [
        f"{indent}from clinieval.{pkg} import {', '.join(ns)}" for pkg, ns in sorted(by_package.items())
    ]
    lines[0] += comment
    return "\n".join(lines)


def rewrite_from_imports(text: str, place: Place | None) -> str:
    """Every ``from ... import`` that names an old module, written for the new place: absolute
    ones everywhere (docs included), relative ones where ``place`` says where the file is."""

    def one(m: re.Match[str]) -> str:
        dots, module = m["dots"], m["module"]
        if dots and place is None:
            return m[0]
        absolute = place.resolve(dots, module) if dots and place else module
        comment = m["comment"] or ""
        if absolute == "clinieval":
            keep_from = f"{dots}{module}" if dots else "clinieval"
            split = _split_from_clinieval(m["indent"], keep_from, _names(m["names"]), comment)
            return m[0] if split is None else split
        moved = new_module(absolute)
        if moved is None:
            return m[0]
        return f"{m['indent']}from {moved} import {m['names']}{comment}"

    return FROM_IMPORT.sub(one, text)


def absolutize(text: str, place: Place) -> str:
    """Every relative import in a file written as an absolute one (before the file moves, when a
    relative import would come to mean another module)."""

    def one(m: re.Match[str]) -> str:
        if not m["dots"]:
            return m[0]
        absolute = place.resolve(m["dots"], m["module"])
        return f"{m['indent']}from {absolute} import {m['names']}{m['comment'] or ''}"

    return FROM_IMPORT.sub(one, text)


def rewrite(text: str, place: Place | None) -> str:
    """All of a file's references to old modules, written to the new places."""
    text = rewrite_from_imports(text, place)
    text = DOTTED.sub(lambda m: f"clinieval.{MOVES[m['mod']]}.{m['mod']}", text)
    return PATH.sub(lambda m: f"clinieval/{MOVES[m['mod']]}/{m['mod']}.py", text)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def files_to_scan(root: Path) -> Iterator[Path]:
    """Tracked files and untracked ones git does not ignore, under :data:`SCAN`, that are text."""
    listed = _git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *SCAN)
    for rel in sorted(set(filter(None, listed.split("\0")))):
        path = root / rel
        if (
            path.is_file()
            and not path.is_symlink()
            and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES)
        ):
            yield path


def move_modules(root: Path, write: bool, say: Callable[[str], None]) -> int:
    """Step 1: ``git mv`` each module still at its old place; returns how many moves (were) due."""
    package = root / "src" / "clinieval"
    due = 0
    for pkg in sorted(set(MOVES.values())):
        init = package / pkg / "__init__.py"
        if not init.exists():
            due += 1
            say(f"create {init.relative_to(root)}")
            if write:
                init.parent.mkdir(exist_ok=True)
                init.write_text(PLACEHOLDER.format(package=f"clinieval.{pkg}"), encoding="utf-8")
                _git(root, "add", str(init.relative_to(root)))
    for name, pkg in MOVES.items():
        old, new = package / f"{name}.py", package / pkg / f"{name}.py"
        if not old.exists():
            continue
        if new.exists():
            raise SystemExit(
                f"both {old.relative_to(root)} and {new.relative_to(root)} exist: merge them by hand"
            )
        due += 1
        say(f"git mv {old.relative_to(root)} {new.relative_to(root)}")
        if write:
            place = Place(f"clinieval.{name}", False)
            text = old.read_text(encoding="utf-8")
            absolute = absolutize(text, place)
            if absolute != text:
                old.write_text(absolute, encoding="utf-8")
            _git(root, "mv", str(old.relative_to(root)), str(new.relative_to(root)))
    return due


def rewrite_references(root: Path, write: bool, say: Callable[[str], None]) -> list[Path]:
    """Step 2: rewrite what still names an old module; returns the files that (would) change."""
    src = root / "src"
    changed: list[Path] = []
    for path in files_to_scan(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        place = Place.of(path, src) if path.suffix == ".py" else None
        new = rewrite(text, place)
        if new != text:
            changed.append(path)
            refs = len(DOTTED.findall(text)) + len(PATH.findall(text))
            say(f"rewrite {path.relative_to(root)} ({refs} dotted/path references, plus imports)")
            if write:
                path.write_text(new, encoding="utf-8")
    return changed


def tidy(root: Path, files: list[Path], say: Callable[[str], None]) -> None:
    """Step 3: sort the rewritten imports and fold lines grown past the limit, with the project's
    own ruff (``.venv/bin/ruff``, else one on PATH) where there is one; else say what to run."""
    python = [str(f.relative_to(root)) for f in files if f.suffix == ".py"]
    found = root / ".venv" / "bin" / "ruff"
    ruff = str(found) if found.exists() else shutil.which("ruff")
    if not python:
        return
    if ruff is None:
        say("no ruff found: run `ruff check --select I --fix` and `ruff format` on the rewritten files")
        return
    subprocess.run([ruff, "check", "--select", "I", "--fix", "--quiet", *python], cwd=root, check=False)
    subprocess.run([ruff, "format", "--quiet", *python], cwd=root, check=False)
    say(f"ruff sorted imports and formatted {len(python)} rewritten Python files")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", type=Path, default=Path(__file__).resolve().parents[1], help="repository root"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if anything is left to do"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the last line")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    say: Callable[[str], None] = (lambda _line: None) if args.quiet else print
    write = not args.check
    moves = move_modules(root, write, say)
    # In --check mode nothing moved, so a file's place is still its old one: good enough to count.
    changed = rewrite_references(root, write, say)
    if write:
        tidy(root, changed, say)
    files = len(changed)
    verb = "left to do" if args.check else "done"
    print(
        f"{moves} moves and {files} files rewritten {verb}" if moves or files else "nothing to do: all moved"
    )
    return 1 if args.check and (moves or files) else 0


if __name__ == "__main__":
    sys.exit(main())
