"""The direction of imports inside the package, read from the source (ast), so the rule holds.

The layers, lowest first, are written once in :data:`LAYERS`; a module may import its own layer
and any layer below it, never one above. Benchmarks (``clinieval.benchmarks.<name>``) sit above
every shared layer, and one benchmark never imports another. No two modules import each other,
directly or through others (lazy imports inside functions count: they hide cycles, not remove
them). docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clinieval"

LAYERS: tuple[tuple[str, ...], ...] = (
    # foundation: no clinieval imports beyond this row
    ("clinieval", "errors", "types", "fsutil", "privacy"),
    ("datasets", "sample_record", "record_codec"),
    ("models",),
    ("scoring",),
    ("task",),
    ("ehr",),
    ("context",),
    ("analysis",),
    # execution: run directories, the request cache, the runner, summaries, re-scoring, runs as a table,
    # fitting a run to its server, and what a finished run left failed
    (
        "cache",
        "runs",
        "run_writer",
        "runner",
        "distributed",
        "summary",
        "failures",
        "server_fit",
        "session",
        "rescore",
        "run_table",
    ),
    ("judge",),
    ("report",),
    # the read-only results browser: run folders and judge verdicts as a static site
    ("view",),
    ("benchmark", "cli_options", "cli_commands"),
    # clinician review: below the benchmarks, which convert their files into review items
    ("review",),
    ("benchmarks",),
    ("cli",),
)
"""Top-level names under ``clinieval`` (a module or a package), lowest layer first."""


def _layer_of() -> dict[str, int]:
    return {name: i for i, row in enumerate(LAYERS) for name in row}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """Every ``clinieval`` module that ``path`` imports (top level or inside functions)."""
    module = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            if target == "clinieval" or target.startswith("clinieval."):
                # `from clinieval.x import y` may name a submodule y; count the deeper one when it exists
                for alias in node.names:
                    deeper = f"{target}.{alias.name}"
                    yield node.lineno, deeper if _exists(deeper) else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("clinieval"):
                    yield node.lineno, alias.name


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").is_file() or (
        PACKAGE.parent / rel / "__init__.py"
    ).is_file()


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "clinieval"


def _benchmark(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "benchmarks" else None


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_violations() -> list[str]:
    layer = _layer_of()
    problems: list[str] = []
    for path in sources():
        here = module_name(path)
        own = layer.get(_top(here))
        if own is None:
            problems.append(f"{path}: {_top(here)!r} is in no layer; add it to LAYERS")
            continue
        for line, target in imports_of(path):
            theirs = layer.get(_top(target))
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if theirs is None:
                problems.append(f"{where}: imports {target}, which is in no layer")
            elif theirs > own:
                problems.append(
                    f"{where}: {here} (layer {own}) imports {target} (layer {theirs}), a higher layer"
                )
            mine, other = _benchmark(here), _benchmark(target)
            if mine and other and mine != other:
                problems.append(f"{where}: benchmark {mine} imports benchmark {other}")
    return problems


def import_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources():
        here = module_name(path)
        graph.setdefault(here, set()).update(t for _, t in imports_of(path) if t != here)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing its own submodules is how packages work, not a cycle
            if node != "clinieval" and nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_every_import_points_down_or_sideways() -> None:
    problems = layer_violations()
    assert not problems, "import direction broken:\n" + "\n".join(problems)


def test_no_import_cycles() -> None:
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_shared_layers_never_import_a_benchmark() -> None:
    offenders = [
        f"{module_name(p)}:{line} imports {t}"
        for p in sources()
        if _top(module_name(p)) not in {"benchmarks", "cli"}
        for line, t in imports_of(p)
        if t.startswith("clinieval.benchmarks")
    ]
    assert not offenders, "\n".join(offenders)


def test_the_checker_catches_what_it_should(tmp_path: Path) -> None:
    """The rule must be able to fail: an upward import and a cycle are both reported."""
    upward = ast.parse("from clinieval.runner import execute\n")
    node = upward.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("clinieval.scoring.scorers", False, node) == "clinieval.runner"
    layer = _layer_of()
    assert layer[_top("clinieval.runner")] > layer[_top("clinieval.scoring.scorers")]
    relative = ast.parse("from ..sample_record import SampleRecord\n").body[0]
    assert isinstance(relative, ast.ImportFrom)
    assert _resolve("clinieval.scoring.scorers", False, relative) == "clinieval.sample_record"
    assert _benchmark("clinieval.benchmarks.medalign.task") == "medalign"
    assert _benchmark("clinieval.task") is None


@pytest.mark.parametrize("name", [row for layer in LAYERS for row in layer if row != "clinieval"])
def test_every_layer_name_exists(name: str) -> None:
    assert _exists(f"clinieval.{name}"), f"LAYERS names clinieval.{name}, which does not exist"
