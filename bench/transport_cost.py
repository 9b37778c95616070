"""Transport cost: CPU and wall time per request of clinieval's HTTP/1.1 client and of aiohttp.

    .venv/bin/python bench/transport_cost.py                       # 20,000 requests, 32 in flight, 3 rounds
    .venv/bin/python bench/transport_cost.py --requests 5000 --rounds 1   # quick
    .venv/bin/python bench/transport_cost.py --before /tmp/before   # + an older tree's http1.py

Why: issue 28 asks whether the OpenAI-compatible backend keeps its home-made client
(src/clinieval/models/http1.py) or moves to a well-kept one (aiohttp), "with the measured cost of
each". client_throughput.py measures whole commands; this isolates the transport. In ONE process
(this one), against the instant stub server (bench/_stub_server.py, in its own process so its CPU
is not counted), each variant sends the same N chat-completion POSTs (PubMedQA-sized bodies,
~1.6 KB, built and serialized before the clock starts) with C workers on one client, and parses
every answer with orjson (the backend's parser), checking it says "yes":

  http1 plain     clinieval.models.http1.Http1Client (max_idle=C, the backend's headers)
  http1 gzip      the same against a stub started with --gzip asked, the request carrying
                  Accept-Encoding: gzip (the client's own, or added here if it sends none)
  aiohttp plain   aiohttp.ClientSession(TCPConnector(limit=C)): post, read, parse
  aiohttp gzip    the same against the --gzip stub (aiohttp asks for gzip by default)
  http1-before plain   (with --before TREE) TREE/src/clinieval/models/http1.py, loaded in this
                  process as a module of its own (it needs only the standard library), plain:
                  the transport before a change and after it, in one sitting

Per variant (median over --rounds, variants rotated ABBA so drift hits all alike): CPU µs per
request (time.process_time of this process over the run: client, event loop and parse), requests/s
(N / wall), the stub's CPU µs per request, and how many answers the stub sent gzip-encoded (a gzip
row is valid only if all N were, a plain row only if none were). Ratios: aiohttp ÷ http1 CPU per
request, http1 ÷ aiohttp requests/s, gzip ÷ plain for each client. A variant that fails (e.g. a
client that does not decode gzip returns bytes orjson cannot parse) is reported with its error.
Each variant first runs --warmup requests untimed. Results also go to
bench/out/transport_cost-YYYYmmdd-HHMMSS.json. Two CPUs are shared with the stub: a quiet machine
gives the cleanest numbers, and the load average at start and end is printed and recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _stub_server import Stub, stub_server  # noqa: E402
from _throughput_items import items  # noqa: E402

OUT_DIR = BENCH / "out"
MODEL = "stub"
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer stub"}
VARIANTS = ("http1 plain", "http1 gzip", "aiohttp plain", "aiohttp gzip")
BEFORE = "http1-before plain"

Send = Callable[[bytes], Awaitable[bytes]]
"""One POST of a prepared body; returns the (decoded) answer body."""


@dataclass(slots=True)
class Run:
    variant: str
    round: int
    requests: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    stub_cpu_s: float = 0.0
    stub_completions: int = 0
    stub_gzip: int = 0
    loadavg_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    error: str = ""

    @property
    def valid(self) -> bool:
        gzip_ok = self.stub_gzip == (self.requests if self.variant.endswith("gzip") else 0)
        return not self.error and self.stub_completions == self.requests and gzip_ok

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "valid": self.valid,
            "cpu_us_per_request": self.cpu_s / self.requests * 1e6,
            "requests_per_s": self.requests / self.wall_s if self.wall_s else 0.0,
            "stub_cpu_us_per_request": self.stub_cpu_s / max(self.stub_completions, 1) * 1e6,
        }


# --------------------------------------------------------------------------- the clients


def request_head() -> bytes:
    """The head Http1Client writes for a POST (with what it adds on its own), read off a loopback socket."""
    import socket

    from clinieval.models.http1 import Http1Client

    async def capture() -> bytes:
        with socket.socket() as srv:
            srv.bind(("127.0.0.1", 0))
            srv.listen(1)
            srv.setblocking(False)
            url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
            client = Http1Client(url, timeout_s=5.0, connect_timeout_s=5.0, headers=dict(HEADERS), max_idle=1)
            task = asyncio.ensure_future(client.request("POST", url + "/chat/completions", b"{}"))
            loop = asyncio.get_running_loop()
            conn, _ = await asyncio.wait_for(loop.sock_accept(srv), 5.0)
            with conn:
                head = await asyncio.wait_for(loop.sock_recv(conn, 65536), 5.0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            client.close()
            return head

    return asyncio.run(capture())


async def drive(send: Send, bodies: list[bytes], concurrency: int) -> None:
    """C workers over the bodies: POST each, parse the answer as the backend does, check it."""
    import orjson

    queue: Iterator[bytes] = iter(bodies)

    async def worker() -> None:
        for body in queue:
            answer = orjson.loads(await send(body))
            if answer["choices"][0]["message"]["content"] != "yes":
                raise ValueError(f"unexpected answer {answer!r:.200}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def load_before(tree: Path) -> ModuleType:
    """``tree``'s http1.py as module ``clinieval_before_http1`` (the installed clinieval stays as is)."""
    import importlib.util

    path = tree / "src" / "clinieval" / "models" / "http1.py"
    spec = importlib.util.spec_from_file_location("clinieval_before_http1", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"--before {tree}: no src/clinieval/models/http1.py there")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


async def with_http1(
    base_url: str, bodies: list[bytes], concurrency: int, headers: dict[str, str], module: ModuleType | None
) -> None:
    import clinieval.models.http1 as installed

    client = (module or installed).Http1Client(
        base_url, timeout_s=60.0, connect_timeout_s=10.0, headers=headers, max_idle=concurrency
    )
    url = base_url + "/chat/completions"

    async def send(body: bytes) -> bytes:
        response = await client.request("POST", url, body)
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")
        body_: bytes = response.body
        return body_

    try:
        await drive(send, bodies, concurrency)
    finally:
        client.close()


async def with_aiohttp(base_url: str, bodies: list[bytes], concurrency: int) -> None:
    import aiohttp

    url = base_url + "/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=HEADERS) as session:

        async def send(body: bytes) -> bytes:
            async with session.post(url, data=body) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}")
                return await resp.read()

        await drive(send, bodies, concurrency)


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Setup:
    plain: Stub
    gzip: Stub
    concurrency: int
    http1_asks_gzip: bool  # whether Http1Client sends Accept-Encoding on its own
    before: ModuleType | None = None  # --before TREE: that tree's http1 module

    def coroutine(self, variant: str, bodies: list[bytes]) -> Awaitable[None]:
        gzip = variant.endswith("gzip")
        url = (self.gzip if gzip else self.plain).base_url
        if variant.startswith("aiohttp"):
            return with_aiohttp(url, bodies, self.concurrency)
        extra = {"Accept-Encoding": "gzip"} if gzip and not self.http1_asks_gzip else {}
        module = self.before if variant == BEFORE else None
        return with_http1(url, bodies, self.concurrency, HEADERS | extra, module)

    def stub(self, variant: str) -> Stub:
        return self.gzip if variant.endswith("gzip") else self.plain


def measure(setup: Setup, variant: str, bodies: list[bytes], rnd: int) -> Run:
    """One run of ``variant`` over ``bodies``; a failure is recorded in ``error``, never raised."""
    stub = setup.stub(variant)
    run = Run(variant, rnd, len(bodies), loadavg_before=os.getloadavg())
    gc.collect()
    before = stub.stats(reset=True)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        asyncio.run(setup.coroutine(variant, bodies))  # type: ignore[arg-type]
    except Exception as e:  # a failing client is a result, not a crash
        run.error = f"{type(e).__name__}: {e}"[:300]
    run.wall_s, run.cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    after = stub.stats()
    run.stub_cpu_s = after["cpu_s"] - before["cpu_s"]
    run.stub_completions, run.stub_gzip = int(after["completions"]), int(after["gzip"])
    return run


def rotated(variants: list[str], rnd: int) -> list[str]:
    """ABBA: the given order in odd rounds, reversed in even ones."""
    return variants if rnd % 2 == 1 else variants[::-1]


def bodies_for(n: int, max_tokens: int) -> list[bytes]:
    import orjson

    return [
        orjson.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": item["input"]}],
                "max_tokens": max_tokens,
                "temperature": 0.0,
            }
        )
        for item in items(n)
    ]


def sitting(
    args: argparse.Namespace, http1_asks_gzip: bool, before: ModuleType | None
) -> tuple[list[Run], dict[str, str]]:
    """Warm-up, then --rounds timed runs of every variant; returns the runs and variant -> why not run."""
    bodies = bodies_for(args.requests, args.max_tokens)
    warm = bodies[: args.warmup]
    runs: list[Run] = []
    broken: dict[str, str] = {}
    with stub_server() as plain, stub_server("--gzip", "asked") as gz:
        setup = Setup(plain, gz, args.concurrency, http1_asks_gzip, before)
        for variant in args.variants:
            w = measure(setup, variant, warm, 0)
            status = "ok" if w.valid else f"FAILED: {w.error or stub_mismatch(w)}"
            print(f"  warm-up {variant:13s} {w.requests} requests {w.wall_s:5.2f}s {status}", flush=True)
            if not w.valid:
                broken[variant] = f"warm-up failed: {w.error or stub_mismatch(w)}"
        for rnd in range(1, args.rounds + 1):
            for variant in rotated([v for v in args.variants if v not in broken], rnd):
                run = measure(setup, variant, bodies, rnd)
                runs.append(run)
                j = run.to_json()
                status = "ok" if run.valid else f"INVALID: {run.error or stub_mismatch(run)}"
                print(
                    f"  {variant:13s} round {rnd}: {run.wall_s:6.2f}s {j['requests_per_s']:8.0f} req/s, "
                    f"CPU {j['cpu_us_per_request']:6.1f} µs/req, stub {j['stub_cpu_us_per_request']:.0f} "
                    f"µs/req, gzip answers {run.stub_gzip} {status}",
                    flush=True,
                )
    return runs, broken


def stub_mismatch(run: Run) -> str:
    return f"stub answered {run.stub_completions} of {run.requests}, {run.stub_gzip} gzip-encoded"


# --------------------------------------------------------------------------- the report


def summary(runs: list[Run], variants: list[str]) -> dict[str, dict[str, float]]:
    """Per variant with valid runs only: median CPU µs/request, requests/s, stub CPU µs/request."""
    out: dict[str, dict[str, float]] = {}
    for variant in variants:
        rs = [r.to_json() for r in runs if r.variant == variant]
        if not rs or not all(r["valid"] for r in rs):
            continue
        out[variant] = {
            k: statistics.median(float(r[k]) for r in rs)  # type: ignore[arg-type]
            for k in ("cpu_us_per_request", "requests_per_s", "stub_cpu_us_per_request")
        }
        out[variant]["rounds"] = len(rs)
    return out


def ratios(med: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for enc in ("plain", "gzip"):
        a, h = med.get(f"aiohttp {enc}"), med.get(f"http1 {enc}")
        if a and h:
            out[f"aiohttp/http1 CPU per request, {enc}"] = a["cpu_us_per_request"] / h["cpu_us_per_request"]
            out[f"http1/aiohttp requests/s, {enc}"] = h["requests_per_s"] / a["requests_per_s"]
    for client in ("http1", "aiohttp"):
        g, p = med.get(f"{client} gzip"), med.get(f"{client} plain")
        if g and p:
            out[f"{client} gzip/plain CPU per request"] = g["cpu_us_per_request"] / p["cpu_us_per_request"]
    b, h = med.get(BEFORE), med.get("http1 plain")
    if b and h:
        out["http1/http1-before CPU per request, plain"] = h["cpu_us_per_request"] / b["cpu_us_per_request"]
        out["http1/http1-before requests/s, plain"] = h["requests_per_s"] / b["requests_per_s"]
    return out


def table(
    med: dict[str, dict[str, float]], runs: list[Run], broken: dict[str, str], variants: list[str]
) -> list[str]:
    base = med.get("http1 plain", {}).get("cpu_us_per_request")
    lines = [
        "| variant | CPU µs/request | × http1 plain | requests/s | stub CPU µs/req "
        "| rounds: CPU µs/request |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for variant in variants:
        rounds = ", ".join(f"{r.to_json()['cpu_us_per_request']:.1f}" for r in runs if r.variant == variant)
        if variant in broken:
            lines.append(f"| {variant} | not run: {broken[variant][:200]} | | | | |")
        elif variant not in med:
            errors = "; ".join(
                r.error or stub_mismatch(r) for r in runs if r.variant == variant and not r.valid
            )
            lines.append(f"| {variant} | INVALID: {errors[:200]} | | | | {rounds} |")
        else:
            m = med[variant]
            times = f"{m['cpu_us_per_request'] / base:.2f}" if base else "–"
            lines.append(
                f"| {variant} | {m['cpu_us_per_request']:.1f} | {times} | {m['requests_per_s']:,.0f} "
                f"| {m['stub_cpu_us_per_request']:.0f} | {rounds} |"
            )
    return lines


def environment(http1_asks_gzip: bool, before: ModuleType | None) -> dict[str, object]:
    import platform

    import aiohttp
    from _throughput_tools import tree_revision

    import clinieval.models.http1 as http1

    def where(module: ModuleType) -> str:
        source = Path(str(module.__file__)).resolve()
        return f"{source} ({tree_revision(source.parents[3])})"

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "aiohttp": aiohttp.__version__,
        "http1_source": where(http1),
        "http1_before_source": where(before) if before else None,
        "http1_sends_accept_encoding_itself": http1_asks_gzip,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20000, help="timed requests per variant and round")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight, every variant")
    p.add_argument("--rounds", type=int, default=3, help="timed runs per variant (median reported)")
    p.add_argument("--warmup", type=int, default=500, help="untimed requests per variant first")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--json", type=Path, default=None, help="results file (default bench/out/...-TIME.json)")
    p.add_argument(
        "--before", type=Path, default=None, metavar="TREE", help=f"also run {BEFORE!r}: TREE's http1.py"
    )
    args = p.parse_args(argv)
    args.variants = [*VARIANTS[:1], BEFORE, *VARIANTS[1:]] if args.before else list(VARIANTS)
    if args.requests < 1 or args.concurrency < 1 or args.rounds < 1 or args.warmup < 1:
        p.error("--requests, --concurrency, --rounds and --warmup must be at least 1")
    args.warmup = min(args.warmup, args.requests)
    return args


def main() -> None:
    args = parse_args()
    load_start = os.getloadavg()
    print(f"loadavg at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}", flush=True)
    asks = b"\r\naccept-encoding:" in request_head().lower()
    before = load_before(args.before.resolve()) if args.before else None
    env = environment(asks, before)
    print(f"http1: {env['http1_source']}; sends Accept-Encoding itself: {asks}; aiohttp {env['aiohttp']}")
    if before:
        print(f"http1-before: {env['http1_before_source']}")
    runs, broken = sitting(args, asks, before)
    load_end = os.getloadavg()
    med = summary(runs, args.variants)
    rs = ratios(med)
    print()
    print(
        f"{args.requests} requests per run, concurrency {args.concurrency}, "
        f"median of {args.rounds} round(s); "
        f"loadavg at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, at the end "
        f"{load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; {os.cpu_count()} CPUs"
    )
    print()
    print("\n".join(table(med, runs, broken, args.variants)))
    print()
    for k, v in rs.items():
        print(f"{k}: {v:.2f}")
    result = {
        "benchmark": "transport_cost",
        "command": " ".join([".venv/bin/python", "bench/transport_cost.py", *sys.argv[1:]]),
        "requests": args.requests,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "max_tokens": args.max_tokens,
        "before": str(args.before.resolve()) if args.before else None,
        "loadavg_at_start": load_start,
        "loadavg_at_end": load_end,
        "environment": env,
        "not_run": broken,
        "median": med,
        "ratios": rs,
        "runs": [r.to_json() for r in runs],
    }
    path = args.json or OUT_DIR / f"transport_cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
