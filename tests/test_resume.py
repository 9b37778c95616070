"""Kill -9 in the middle of a run, run the same command again: it completes, nothing answered is
asked twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN
from tests.fault_server import FaultServer

N = 30
ANSWERED_BEFORE_KILL = 12


def write_items(path: Path) -> Path:
    with path.open("w") as f:
        for i in range(N):
            f.write(json.dumps({"id": f"s{i}", "input": f"question {i}?", "target": "yes"}) + "\n")
    return path


def cli(data: Path, url: str, out: Path) -> list[str]:
    return [
        str(BIN / "clinieval"),
        "run",
        str(data),
        "-m",
        f"openai:{url}@fault",
        "--out",
        str(out),
        "--concurrency",
        "4",
        "--no-progress",
    ]


def count_lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def test_kill9_then_rerun_completes_without_repeating_answered_requests(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl")
    out = tmp_path / "run"
    with FaultServer(delay_s=0.05, hold_after=ANSWERED_BEFORE_KILL) as server:
        proc = subprocess.Popen(
            cli(data, server.url, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while count_lines(out / "samples.jsonl") < ANSWERED_BEFORE_KILL:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        # Requests past the 12th are now held in flight by the server; kill the client hard.
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        answered_before = list(server.log.answered)
        in_flight = len(server.log.received) - len(answered_before)
        assert len(answered_before) == ANSWERED_BEFORE_KILL and in_flight >= 1
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "running"

        server.release()
        received_mark = len(server.log.received)
        done = subprocess.run(cli(data, server.url, out), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        after = server.log.received[received_mark:]

    assert set(after).isdisjoint(answered_before), "an answered request was sent again"
    assert len(after) == len(set(after)) == N - ANSWERED_BEFORE_KILL
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in records) == sorted(f"s{i}" for i in range(N))
    assert all(r["output"]["text"] == "yes" for r in records)
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    with sqlite3.connect(out / "cache.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == N
    assert "18 new, 12 resumed of 30; 18 model requests" in done.stdout


def test_rerun_of_finished_run_sends_nothing(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl")
    out = tmp_path / "run"
    with FaultServer() as server:
        first = subprocess.run(cli(data, server.url, out), capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        sent = len(server.log.received)
        again = subprocess.run(cli(data, server.url, out), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert len(server.log.received) == sent == N
    assert count_lines(out / "samples.jsonl") == N


def test_torn_last_line_is_repaired_on_resume(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl")
    out = tmp_path / "run"
    with FaultServer() as server:
        subprocess.run(cli(data, server.url, out), check=True, capture_output=True, timeout=120)
        samples = out / "samples.jsonl"
        lines = samples.read_text().splitlines(keepends=True)
        # Simulate a crash in the middle of writing the last record.
        samples.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
        sent = len(server.log.received)
        done = subprocess.run(cli(data, server.url, out), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(server.log.received) == sent  # the torn record's answer came from the cache
    records = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(records) == N
    assert "1 model requests" not in done.stdout and "0 model requests, 1 cache hits" in done.stdout


def test_shuffle_picks_a_seeded_slice(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl")
    picks = []
    with FaultServer() as server:
        for name in ("a", "b"):
            out = tmp_path / name
            cmd = [*cli(data, server.url, out), "--shuffle", "3", "--limit", "5"]
            subprocess.run(cmd, check=True, capture_output=True, timeout=120)
            picks.append(
                [json.loads(x)["sample_id"] for x in (out / "samples.jsonl").read_text().splitlines()]
            )
            assert json.loads((out / "manifest.json").read_text())["shuffle"] == 3
    assert sorted(picks[0]) == sorted(picks[1])
    assert len(picks[0]) == 5 and sorted(picks[0]) != [f"s{i}" for i in range(5)]


def test_patient_text_stays_out_of_info_logs(tmp_path: Path) -> None:
    secret = "Jane Roe MRN 0048213 metastatic"
    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({"id": "p1", "input": f"{secret} FAULT:500x2", "context": secret}) + "\n")
    with FaultServer() as server:
        done = subprocess.run(
            [*cli(data, server.url, tmp_path / "run"), "--verbose"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "retrying" in done.stderr  # INFO logging was on and said something
    assert "Jane Roe" not in done.stderr and "0048213" not in done.stderr
