"""The measurements and the report of bench/client_throughput.py (split out so neither file grows past
600 lines): one :class:`Measurement` per timed tool run, the median :class:`Row` per tool and size,
items/s ratios, the markdown table and the JSON results.

Ratios are taken for every clinieval tool against every other tool, so a run with ``--before TREE``
(tools ``clinieval-before`` and ``clinieval``) gives clinieval-before ÷ bare, clinieval ÷ bare and
clinieval ÷ clinieval-before from the same sitting.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

CLINIEVAL_TOOLS = ("clinieval", "clinieval-before")
"""The tools that run a clinieval source tree (``--before TREE`` adds the second)."""


@dataclass(slots=True)
class Measurement:
    tool: str
    n: int
    round: int
    wall_s: float = 0.0
    returncode: int = 0
    user_s: float = 0.0
    sys_s: float = 0.0
    maxrss_mib: float = 0.0
    out_bytes: int = 0  # files the tool wrote in its output directory
    scratch_bytes: int = 0  # everything else in its scratch dir (caches it was pointed at; inputs excluded)
    stub_requests: int = 0  # completions the stub answered during this run
    stub_cpu_s: float = 0.0
    stub_connections: int = 0  # TCP connections the client opened to the stub
    in_loop_items_per_s: float | None = None
    loadavg_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    error: str = ""
    command: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.error and self.returncode == 0 and self.stub_requests == self.n

    @property
    def items_per_s(self) -> float:
        return self.n / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_s_per_1k(self) -> float:
        return (self.user_s + self.sys_s) / self.n * 1000

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "valid": self.valid,
            "items_per_s": self.items_per_s,
            "cpu_s_per_1k_items": self.cpu_s_per_1k,
            "out_bytes_per_item": self.out_bytes / self.n,
            "stub_cpu_us_per_request": self.stub_cpu_s / self.stub_requests * 1e6
            if self.stub_requests
            else None,
        }


@dataclass(slots=True)
class Row:
    """The median round of one tool at one size."""

    tool: str
    n: int
    rounds: list[Measurement]

    @property
    def valid(self) -> bool:
        return bool(self.rounds) and all(m.valid for m in self.rounds)

    def median(self, get: Callable[[Measurement], float]) -> float:
        return statistics.median(get(m) for m in self.rounds)

    def to_json(self) -> dict[str, object]:
        loops = [m.in_loop_items_per_s for m in self.rounds if m.in_loop_items_per_s is not None]
        return {
            "tool": self.tool,
            "n": self.n,
            "valid": self.valid,
            "rounds": len(self.rounds),
            "wall_s": self.median(lambda m: m.wall_s),
            "items_per_s": self.median(lambda m: m.items_per_s),
            "in_loop_items_per_s": statistics.median(loops) if loops else None,
            "cpu_s_per_1k_items": self.median(lambda m: m.cpu_s_per_1k),
            "maxrss_mib": self.median(lambda m: m.maxrss_mib),
            "out_bytes_per_item": self.median(lambda m: m.out_bytes / m.n),
            "stub_requests": [m.stub_requests for m in self.rounds],
            "stub_cpu_us_per_request": self.median(lambda m: m.stub_cpu_s / max(m.stub_requests, 1) * 1e6),
        }


def rows(measurements: list[Measurement], tools: list[str], sizes: list[int]) -> list[Row]:
    return [
        Row(t, n, [m for m in measurements if m.tool == t and m.n == n])
        for n in sizes
        for t in tools
        if any(m.tool == t and m.n == n for m in measurements)
    ]


def ratios(table: list[Row]) -> dict[str, dict[str, float]]:
    """Per size: each clinieval tool's items/s divided by each other tool's (valid rows only)."""
    out: dict[str, dict[str, float]] = {}
    for n in sorted({r.n for r in table}):
        by_tool = {r.tool: r.median(lambda m: m.items_per_s) for r in table if r.n == n and r.valid}
        pairs = {
            f"{a}/{b}": by_tool[a] / v
            for a in CLINIEVAL_TOOLS
            if a in by_tool
            for b, v in by_tool.items()
            if b != a and not (a == "clinieval-before" and b == "clinieval")
        }
        if pairs:
            out[str(n)] = pairs
    return out


HEADER = (
    "| tool | N | wall s | items/s | in-loop items/s | CPU s /1k items | peak RSS MiB | out bytes/item "
    "| stub requests | stub CPU µs/req | clinieval ÷ tool |"
)


def cell(text: str, limit: int = 400) -> str:
    """``text`` made safe for one markdown table cell."""
    return " ".join(text.split()).replace("|", "/")[:limit]


def table_lines(
    table: list[Row], broken: dict[str, str], sizes: list[int], ratio: dict[str, dict[str, float]]
) -> list[str]:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for r in table:
        j = r.to_json()
        loop = f"{j['in_loop_items_per_s']:.1f}" if j["in_loop_items_per_s"] is not None else "–"
        vs = ratio.get(str(r.n), {}).get(f"clinieval/{r.tool}")
        vs_s = f"{vs:.3f}" if vs is not None else ("1" if r.tool == "clinieval" and r.valid else "–")
        reqs = "/".join(map(str, j["stub_requests"])) if isinstance(j["stub_requests"], list) else ""
        flag = "" if r.valid else f" INVALID: {cell('; '.join(m.error for m in r.rounds if m.error))}"
        lines.append(
            f"| {r.tool} | {r.n} | {j['wall_s']:.2f} | {j['items_per_s']:.1f} | {loop} "
            f"| {j['cpu_s_per_1k_items']:.2f} | {j['maxrss_mib']:.0f} | {j['out_bytes_per_item']:.0f} "
            f"| {reqs}{flag} | {j['stub_cpu_us_per_request']:.0f} | {vs_s} |"
        )
    for tool, why in broken.items():
        for n in sizes:
            lines.append(f"| {tool} | {n} | not run: {cell(why)} |" + " |" * 8)
    return lines


def report(
    args: argparse.Namespace,
    measurements: list[Measurement],
    broken: dict[str, str],
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
    versions: dict[str, str],
    stub_final: dict[str, float],
    sources: dict[str, str],
) -> dict[str, object]:
    """Print the table and ratios; the JSON results (``load``: loadavg at start and at the end)."""
    table = rows(measurements, args.tools, args.sizes)
    ratio = ratios(table)
    start, end = load
    print()
    print(
        f"concurrency {args.concurrency}, max_tokens {args.max_tokens}, median of {args.rounds} round(s); "
        f"loadavg at start {start[0]:.2f} {start[1]:.2f} {start[2]:.2f}, at the end "
        f"{end[0]:.2f} {end[1]:.2f} {end[2]:.2f}; {os.cpu_count()} CPUs"
    )
    print("versions: " + ", ".join(f"{t} {v}" for t, v in versions.items()))
    for tool, where in sources.items():
        print(f"{tool} imported {where}")
    print()
    print("\n".join(table_lines(table, broken, args.sizes, ratio)))
    print()
    for n, rs in ratio.items():
        print(f"N={n}: " + ", ".join(f"{k} = {v:.3f}" for k, v in rs.items()))
    return {
        **header(args),
        "loadavg_at_start": start,
        "loadavg_at_end": end,
        "cpu_count": os.cpu_count(),
        "versions": versions,
        "clinieval_sources": sources,
        "tools_not_run": broken,
        "rows": [r.to_json() for r in table],
        "ratios_items_per_s": ratio,
        "stub_final": stub_final,
        "measurements": [m.to_json() for m in measurements],
        "settings": {
            "inspect": "--display none --no-log-realtime --temperature 0; other options default",
            "lmeval": "as bench/vs_lm_eval.py: --apply_chat_template --batch_size 1 --log_samples",
            "clinieval": "--no-progress; other options default",
            "clinieval-before": "the same command, PYTHONPATH=TREE/src (--before TREE)",
            "clinieval --after TREE": "the same command, PYTHONPATH=TREE/src",
        },
    }


def header(args: argparse.Namespace) -> dict[str, object]:
    """bench/_server.py's result_header (benchmark, command, n, concurrency, ...) with n = sizes."""
    from _server import result_header

    ns = argparse.Namespace(**vars(args) | {"n": args.sizes})
    extra = {
        "sizes": args.sizes,
        "tools": args.tools,
        "before": str(args.before) if args.before else None,
        "after": str(args.after) if args.after else None,
    }
    return result_header("client_throughput", ns) | extra
