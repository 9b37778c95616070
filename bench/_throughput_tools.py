"""The tools bench/client_throughput.py measures: how each is set up, started and checked.

One :class:`Job` per tool run (command, environment, output and scratch folders), built from a
:class:`Ctx` (stub server, items, N, concurrency); why a tool cannot run here (:func:`missing`);
its version. Split out of client_throughput.py so neither file grows past 600 lines.

Every tool runs in a clean environment (:func:`clean_env`: no VIRTUAL_ENV, PYTHONPATH or
PYTHONHOME of the caller's), so which clinieval a run measures is decided here, never by the
shell: ``clinieval`` is the installed (editable) package, ``clinieval-before`` the same command
with ``--before TREE``'s ``src`` on PYTHONPATH, and :func:`clinieval_source` says (and checks)
which ``clinieval/__init__.py`` each one imports.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from _stub_server import Stub

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT_DIR = BENCH / "out"
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
CLINIEVAL_BIN = ROOT / ".venv" / "bin" / "clinieval"
LMEVAL_VENV = BENCH / ".venv-lmeval"
INSPECT_VENV = BENCH / ".venv-inspect"
MODEL = "stub"
TOOLS = ("bare", "clinieval", "lmeval", "inspect")
LMEVAL_TASK = "clinieval_client_throughput"
SETUP = {
    "lmeval": (
        "python -m venv bench/.venv-lmeval && bench/.venv-lmeval/bin/pip install torch==2.13.0 && "
        'bench/.venv-lmeval/bin/pip install "lm-eval[api]==0.4.13"  (or `make bench`)'
    ),
    "inspect": (
        "python -m venv bench/.venv-inspect && bench/.venv-inspect/bin/pip install inspect_ai==0.3.285 "
        "openai && echo '*' > bench/.venv-inspect/.gitignore"
    ),
}

LMEVAL_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{input}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: []
  max_gen_toks: {max_tokens}
  temperature: 0
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

INSPECT_TASK = """\
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def client_throughput():
    return Task(dataset=json_dataset({data!r}), solver=generate(), scorer=includes())
"""


@dataclass(frozen=True, slots=True)
class Job:
    """One tool run: its command, environment, output dir (measured) and scratch dir (caches)."""

    cmd: list[str]
    env: dict[str, str] | None
    out: Path
    scratch: Path
    cwd: Path | None = None


@dataclass(frozen=True, slots=True)
class Ctx:
    stub: Stub
    items: Path
    n: int
    concurrency: int
    max_tokens: int
    before: Path | None = None  # --before TREE: the source tree clinieval-before imports
    after: Path | None = None  # --after TREE: the one clinieval imports (None: the installed one)


def clean_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **extra)
    return env


def bare_job(ctx: Ctx, work: Path) -> Job:
    out = work / "out"
    cmd = [
        str(MAIN_PYTHON), str(BENCH / "client_throughput.py"), "--bare-client",
        str(ctx.items), str(out), ctx.stub.base_url, str(ctx.concurrency), str(ctx.max_tokens),
    ]  # fmt: skip
    return Job(cmd, clean_env(), out, work)


def clinieval_job(ctx: Ctx, work: Path) -> Job:
    out = work / "run"
    cmd = [
        str(CLINIEVAL_BIN), "run", str(ctx.items),
        "-m", f"openai:{ctx.stub.base_url}@{MODEL}",
        "--concurrency", str(ctx.concurrency),
        "--no-progress",
        "--out", str(out),
        "--max-tokens", str(ctx.max_tokens),
    ]  # fmt: skip
    return Job(cmd, clinieval_env(ctx.after), out, work)


def clinieval_before_job(ctx: Ctx, work: Path) -> Job:
    """The same command as clinieval's, importing ``--before TREE``'s ``src`` through PYTHONPATH."""
    if ctx.before is None:
        raise ValueError("clinieval-before needs --before TREE")
    return replace(clinieval_job(ctx, work), env=clinieval_env(ctx.before))


def clinieval_env(tree: Path | None) -> dict[str, str]:
    """The installed (editable) clinieval for None, else ``tree/src`` ahead of it on PYTHONPATH.

    clean_env drops the caller's PYTHONPATH, so ``PYTHONPATH=OLD/src python bench/...`` never
    reached the clinieval child (issue 27 measured one tree twice that way); this sets it here."""
    return clean_env() if tree is None else clean_env(PYTHONPATH=str(tree / "src"))


def clinieval_source(tree: Path | None) -> tuple[str, str | None]:
    """Which ``clinieval/__init__.py`` a tool importing ``tree`` (None: the installed one) gets,
    and why that is wrong (or None).

    Same interpreter and environment as the tool's command, run from the console script's folder
    (its ``sys.path[0]``); the answer must lie under the tree the tool is meant to measure."""
    expected = ((tree or ROOT) / "src" / "clinieval").resolve()
    code = "import clinieval; print(clinieval.__file__)"
    env = clinieval_env(tree)
    try:
        out = subprocess.run(
            [str(MAIN_PYTHON), "-c", code], env=env, cwd=CLINIEVAL_BIN.parent,
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        return "?", f"cannot import clinieval: {e}"
    where = Path(out.stdout.strip()).resolve()
    if not where.is_relative_to(expected):
        return str(where), f"imports {where}, expected a file under {expected}"
    return f"{where} ({tree_revision(expected.parents[1])})", None


def tree_revision(tree: Path) -> str:
    """``tree``'s git commit (short), with ``+ uncommitted src changes`` when its src differs."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--", "src"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "not a git tree"
    return f"{rev} + uncommitted src changes" if dirty else rev


def lmeval_job(ctx: Ctx, work: Path) -> Job:
    tasks = work / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    yaml = LMEVAL_YAML.format(task=LMEVAL_TASK, data=json.dumps(str(ctx.items)), max_tokens=ctx.max_tokens)
    (tasks / f"{LMEVAL_TASK}.yaml").write_text(yaml, encoding="utf-8")
    model_args = ",".join(
        [
            f"model={MODEL}",
            f"base_url={ctx.stub.base_url}/chat/completions",
            f"num_concurrent={ctx.concurrency}",
            "tokenizer_backend=None",
            "tokenized_requests=False",
            "seed=0",
            "max_retries=3",
        ]
    )
    out = work / "out"
    cmd = [
        str(LMEVAL_VENV / "bin" / "lm-eval"), "run",
        "--model", "local-chat-completions",
        "--model_args", model_args,
        "--tasks", LMEVAL_TASK,
        "--include_path", str(tasks),
        "--apply_chat_template",
        "--batch_size", "1",
        "--output_path", str(out),
        "--log_samples",
    ]  # fmt: skip
    env = clean_env(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(work / "hf-home"),  # fresh datasets cache: lm-eval prepares the JSON each run
        TOKENIZERS_PARALLELISM="false",
    )
    return Job(cmd, env, out, work)


def inspect_job(ctx: Ctx, work: Path) -> Job:
    task_file = work / "client_throughput_task.py"
    task_file.write_text(INSPECT_TASK.format(data=str(ctx.items)), encoding="utf-8")
    out = work / "logs"
    cmd = [
        str(INSPECT_VENV / "bin" / "inspect"), "eval", task_file.name,  # relative: it globs the path
        "--model", f"openai-api/{MODEL}/{MODEL}",
        "--max-connections", str(ctx.concurrency),
        "--max-tokens", str(ctx.max_tokens),
        "--temperature", "0",
        "--display", "none",
        "--no-log-realtime",  # no live sample buffer (a side database for `inspect view`)
        "--log-dir", str(out),
    ]  # fmt: skip
    env = clean_env(
        STUB_BASE_URL=ctx.stub.base_url,
        STUB_API_KEY="stub",
        XDG_DATA_HOME=str(work / "xdg-data"),  # its trace logs etc. land in scratch, not in ~
        XDG_CACHE_HOME=str(work / "xdg-cache"),
        INSPECT_LOG_DIR=str(out),
    )
    return Job(cmd, env, out, work, cwd=work)


JOBS: dict[str, Callable[[Ctx, Path], Job]] = {
    "bare": bare_job,
    "clinieval": clinieval_job,
    "clinieval-before": clinieval_before_job,
    "lmeval": lmeval_job,
    "inspect": inspect_job,
}


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot run here, or None."""
    need = {
        "bare": MAIN_PYTHON,
        "clinieval": CLINIEVAL_BIN,
        "clinieval-before": CLINIEVAL_BIN,
        "lmeval": LMEVAL_VENV / "bin" / "lm-eval",
        "inspect": INSPECT_VENV / "bin" / "inspect",
    }[tool]
    if need.exists():
        return None
    how = f"; create it: {SETUP[tool]}" if tool in SETUP else "; run `make install`"
    shown = need.relative_to(ROOT) if need.is_relative_to(ROOT) else need
    return f"{shown} missing{how}"


def tool_version(tool: str) -> str:
    python, dist = {
        "bare": (MAIN_PYTHON, "aiohttp"),
        "clinieval": (MAIN_PYTHON, "clinieval"),
        "clinieval-before": (MAIN_PYTHON, "clinieval"),  # the installed metadata; the tree: sources
        "lmeval": (LMEVAL_VENV / "bin" / "python", "lm_eval"),
        "inspect": (INSPECT_VENV / "bin" / "python", "inspect_ai"),
    }[tool]
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip()
