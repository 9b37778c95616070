"""The direction of imports inside the package, read from the source (ast), so the rule holds.

The layers, lowest first, are written once in :data:`LAYERS`; a module may import its own layer
and any layer below it, never one above. A row names a top-level module or package
(``scoring``), or one module of a package whose modules sit on different rows (``records.runs``:
the run folder is stored below scoring, but summarised above the analysis it uses); every module
of such a package must then be named, so a new one cannot slip in unplaced. Benchmarks
(``clinieval.benchmarks.<name>``) sit above every shared layer, and one benchmark never imports
another. No two modules import each other, directly or through others (lazy imports inside
functions count: they hide cycles, not remove them). docs/architecture.md draws the same picture.

The checker reads whatever package root it is given (the real one by default), so its own test
feeds it small bad packages written to a temporary folder and sees each fault reported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clinieval"

LAYERS: tuple[tuple[str, ...], ...] = (
    # foundation: no clinieval imports beyond this row
    ("clinieval", "errors", "types", "fsutil", "privacy", "cpus"),
    # records, stored: one line of a run's results and its long texts stored once (scorers read
    # records, so these sit below scoring) ...
    ("datasets", "records.sample_record", "records.record_codec"),
    ("models",),
    # ... the request cache, the run folder around it (its manifest names the model), the writer
    # of records and answers into it
    ("records.cache",),
    ("records.runs",),
    ("records.run_writer",),
    ("scoring",),
    ("task",),
    ("ehr",),
    ("context",),
    ("analysis",),
    # records, read back: summaries (bootstrap CIs, echo counts), what a run left failed, runs as
    # the long table analyze reads; the package's own names (records/__init__) re-export these
    ("records.summary", "records.failures", "records.run_table", "records"),
    # the engine, in its own order: the runner (the per-item loop every executor runs, and the
    # local executor), the Ray executor on that loop, fitting a run to its server and re-scoring
    # one, one run end to end
    ("engine.runner",),
    ("engine.distributed",),
    ("engine.server_fit", "engine.rescore"),
    ("engine.session", "engine"),
    ("judge",),
    ("report",),
    # the read-only results browser: run folders and judge verdicts as a static site
    ("view",),
    # clinician review: below the benchmark protocol, whose review_sources() hands over review's
    # source type, and below the benchmarks, which convert their files into review items; its
    # command group is cli/review.py
    ("review",),
    # suites: every model over every benchmark through the benchmark protocol's suite(), and the
    # leaderboard; below the protocol, which hands over its SuitePart type
    ("suite",),
    ("benchmark", "cli_options", "cli_commands"),
    ("benchmarks",),
    ("cli",),
)
"""Names under ``clinieval`` (a module, a package, or ``package.module`` of a package split over
rows), lowest layer first."""


def _layer_of(layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, int]:
    return {name: i for i, row in enumerate(layers) for name in row}


def _split(layers: tuple[tuple[str, ...], ...] = LAYERS) -> set[str]:
    """The packages whose modules the table places one by one (``records``, ``engine``)."""
    return {name.split(".")[0] for row in layers for name in row if "." in name}


def _room(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> str:
    """The name in the table that places ``module``: the longest one it starts with
    (``clinieval.records.runs`` -> ``records.runs``; ``clinieval.scoring.echo`` -> ``scoring``)."""
    parts = module.split(".")[1:]
    if not parts:
        return "clinieval"
    inner = ".".join(parts[:2])
    return inner if len(parts) > 1 and inner in _layer_of(layers) else parts[0]


def _unplaced(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> bool:
    """A module of a split package that the table does not name (the package itself is named)."""
    parts = module.split(".")
    return len(parts) > 2 and parts[1] in _split(layers) and _room(module, layers) == parts[1]


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """``root/models/base.py`` -> ``clinieval.models.base`` (``root`` is the ``clinieval`` folder)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
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


def imports_of(path: Path, root: Path = PACKAGE) -> Iterator[tuple[int, str]]:
    """Every ``clinieval`` module that ``path`` imports (top level or inside functions)."""
    module = module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            if target == "clinieval" or target.startswith("clinieval."):
                # `from clinieval.x import y` may name a submodule y; count the deeper one when it exists
                for alias in node.names:
                    deeper = f"{target}.{alias.name}"
                    yield node.lineno, deeper if _exists(deeper, root) else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("clinieval"):
                    yield node.lineno, alias.name


def _exists(module: str, root: Path = PACKAGE) -> bool:
    rel = Path(*module.split("."))
    return (root.parent / rel).with_suffix(".py").is_file() or (root.parent / rel / "__init__.py").is_file()


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "clinieval"


def _benchmark(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "benchmarks" else None


def sources(root: Path = PACKAGE) -> list[Path]:
    return sorted(root.rglob("*.py"))


def layer_violations(root: Path = PACKAGE, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """One line per import that points up, names a module in no layer, or crosses benchmarks."""
    layer = _layer_of(layers)
    problems: list[str] = []
    for path in sources(root):
        here = module_name(path, root)
        own = layer.get(_room(here, layers))
        if own is None or _unplaced(here, layers):
            name = here.removeprefix("clinieval.") if own is not None else _room(here, layers)
            problems.append(f"{path}: {name!r} is in no layer; add it to LAYERS")
            continue
        for line, target in imports_of(path, root):
            theirs = layer.get(_room(target, layers))
            where = f"{path.relative_to(root.parent)}:{line}"
            if theirs is None or _unplaced(target, layers):
                problems.append(f"{where}: imports {target}, which is in no layer")
            elif theirs > own:
                problems.append(
                    f"{where}: {here} (layer {own}) imports {target} (layer {theirs}), a higher layer"
                )
            mine, other = _benchmark(here), _benchmark(target)
            if mine and other and mine != other:
                problems.append(f"{where}: benchmark {mine} imports benchmark {other}")
    return problems


def import_cycles(root: Path = PACKAGE) -> list[list[str]]:
    """Each cycle of imports (lazy ones included) as the modules along it, first one repeated last."""
    graph: dict[str, set[str]] = {}
    for path in sources(root):
        here = module_name(path, root)
        graph.setdefault(here, set()).update(t for _, t in imports_of(path, root) if t != here)
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


MAX_MODULE_LINES = 700
"""The house's size limit for one module: past it, a module holds more than one concern."""


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert over == {}, f"modules over {MAX_MODULE_LINES} lines (split each by concern): {over}"


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
    upward = ast.parse("from clinieval.engine.runner import execute\n")
    node = upward.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("clinieval.scoring.scorers", False, node) == "clinieval.engine.runner"
    layer = _layer_of()
    assert layer[_room("clinieval.engine.runner")] > layer[_room("clinieval.scoring.scorers")]
    # a split package's modules each have their own row; the rest of a package shares its row
    assert _room("clinieval.records.runs") == "records.runs" and _room("clinieval.records") == "records"
    assert _room("clinieval.scoring.text.registry") == "scoring" and _room("clinieval") == "clinieval"
    assert layer["records.sample_record"] < layer["scoring"] < layer["records.summary"]
    assert max(v for k, v in layer.items() if k.startswith("records")) < layer["engine.runner"]
    relative = ast.parse("from ..records.sample_record import SampleRecord\n").body[0]
    assert isinstance(relative, ast.ImportFrom)
    assert _resolve("clinieval.scoring.scorers", False, relative) == "clinieval.records.sample_record"
    assert _benchmark("clinieval.benchmarks.medalign.task") == "medalign"
    assert _benchmark("clinieval.task") is None


# --- the checker on synthetic packages --------------------------------------------------------------

GOOD: dict[str, str] = {
    "errors.py": "class UserError(Exception): ...\n",
    "models/base.py": "from clinieval.errors import UserError\n",
    "scoring/scorers.py": "from ..models.base import UserError\n",
    "records/sample_record.py": "import clinieval.errors\n",
    "records/cache.py": "import clinieval.errors\n",
    "records/runs.py": "from clinieval.records.cache import RequestCache\n",
    "records/summary.py": "from clinieval.records import runs\n",
    "records/__init__.py": "def __getattr__(name):\n    from clinieval.records.summary import summarize\n",
    "engine/runner.py": "from clinieval.records import runs\nfrom clinieval.scoring.scorers import Scorer\n",
    "engine/distributed.py": "from clinieval.engine.runner import ItemLoop\n",
    "engine/session.py": (
        "from clinieval.records import summarize\n"
        "def run():\n    from clinieval.engine.distributed import RayExecutor\n"
    ),
    "benchmarks/__init__.py": "from clinieval.benchmarks import alpha, beta\n",
    "benchmarks/alpha/__init__.py": "from clinieval.benchmarks.alpha.task import make\n",
    "benchmarks/alpha/task.py": (
        "from clinieval.engine.runner import execute\nfrom clinieval.benchmarks.alpha import data\n"
    ),
    "benchmarks/alpha/data.py": "from clinieval.errors import UserError\nimport clinieval.benchmarks.alpha\n",
    "benchmarks/beta/__init__.py": "def task():\n    from clinieval.engine.session import run\n",
    "cli/__init__.py": "from clinieval.benchmarks import alpha\nfrom clinieval.engine.session import run\n",
}
"""A small package shaped like clinieval whose every import is allowed: down and sideways, lazy
ones, relative ones, a package importing its own submodules and a submodule its package."""


def write_package(tmp: Path, files: dict[str, str]) -> Path:
    """``files`` (path under the package -> source) as a package ``clinieval`` in ``tmp``, with an
    ``__init__.py`` in every folder; returns the package's root."""
    root = tmp / "clinieval"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        for folder in [path.parent, *path.parent.parents]:
            if folder == root.parent:
                break
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


def test_a_good_package_passes(tmp_path: Path) -> None:
    root = write_package(tmp_path, GOOD)
    assert layer_violations(root) == []
    assert import_cycles(root) == []


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        (
            "scoring/scorers.py",
            "from clinieval.engine.runner import execute\n",
            f"clinieval/scoring/scorers.py:1: clinieval.scoring.scorers (layer {_layer_of()['scoring']}) "
            "imports clinieval.engine.runner",
        ),
        (
            "scoring/lazy.py",
            "def f():\n    from ..cli import main\n",
            f"clinieval/scoring/lazy.py:2: clinieval.scoring.lazy (layer {_layer_of()['scoring']}) "
            "imports clinieval.cli",
        ),
        (  # records sit below the engine: the run folder may not reach up to the runner
            "records/runs.py",
            "from clinieval.engine.runner import execute\n",
            f"clinieval/records/runs.py:1: clinieval.records.runs (layer {_layer_of()['records.runs']}) "
            "imports clinieval.engine.runner",
        ),
        (  # stored records sit below scoring, which reads them
            "records/sample_record.py",
            "def f():\n    from clinieval.scoring import scorers\n",
            "clinieval/records/sample_record.py:2: clinieval.records.sample_record "
            f"(layer {_layer_of()['records.sample_record']}) imports clinieval.scoring.scorers",
        ),
        (  # and below the package's own names, which load the summaries above scoring
            "records/cache.py",
            "from clinieval.records import SampleRecord\n",
            f"clinieval/records/cache.py:1: clinieval.records.cache (layer {_layer_of()['records.cache']}) "
            "imports clinieval.records",
        ),
        (  # inside the engine: the runner may not reach up to the Ray executor built on it
            "engine/runner.py",
            "import clinieval.engine.distributed\n",
            f"clinieval/engine/runner.py:1: clinieval.engine.runner (layer {_layer_of()['engine.runner']}) "
            "imports clinieval.engine.distributed",
        ),
        (  # a new module of a split package must be given its row
            "records/extra.py",
            "import clinieval.errors\n",
            "'records.extra' is in no layer; add it to LAYERS",
        ),
        (
            "benchmarks/alpha/data.py",
            "from clinieval.benchmarks.beta import task\n",
            "clinieval/benchmarks/alpha/data.py:1: benchmark alpha imports benchmark beta",
        ),
        ("mystery.py", "", "'mystery' is in no layer; add it to LAYERS"),
    ],
)
def test_each_bad_import_is_reported(tmp_path: Path, name: str, source: str, expected: str) -> None:
    root = write_package(tmp_path, {**GOOD, name: source})
    problems = layer_violations(root)
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_a_cycle_through_a_lazy_import_is_reported(tmp_path: Path) -> None:
    """Sideways imports in one layer break no layer rule: only the cycle check can see this one."""
    cyclic = {
        "models/http.py": "from clinieval.models.pool import Pool\n",
        "models/pool.py": "def make():\n    from clinieval.models import http\n",
    }
    root = write_package(tmp_path, {**GOOD, **cyclic})
    assert layer_violations(root) == []
    assert import_cycles(root) == [
        ["clinieval.models.http", "clinieval.models.pool", "clinieval.models.http"]
    ]


def test_a_cycle_across_layers_is_reported_as_both(tmp_path: Path) -> None:
    lazy = {"records/cache.py": "def f():\n    import clinieval.engine.session\n"}
    root = write_package(tmp_path, {**GOOD, **lazy})
    assert [p.split(": ", 1)[1] for p in layer_violations(root)] == [
        f"clinieval.records.cache (layer {_layer_of()['records.cache']}) imports clinieval.engine.session "
        f"(layer {_layer_of()['engine.session']}), a higher layer"
    ]
    [cycle] = import_cycles(root)
    assert cycle[0] == cycle[-1] and len(cycle) == 6
    assert set(cycle) == {
        f"clinieval.{m}"
        for m in ("records.cache", "engine.session", "engine.distributed", "engine.runner", "records.runs")
    }


@pytest.mark.parametrize("name", [row for layer in LAYERS for row in layer if row != "clinieval"])
def test_every_layer_name_exists(name: str) -> None:
    assert _exists(f"clinieval.{name}"), f"LAYERS names clinieval.{name}, which does not exist"
