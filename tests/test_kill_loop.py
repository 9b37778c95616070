"""kill -9 at 20+ seeded moments, for a run, a judge pass and a dataset build (issue 13).

Each loop kills the real command (a subprocess talking to a real local server on 127.0.0.1) at
seeded random moments, reruns it each time, and compares what it finally wrote with an
uninterrupted run of the same command against a fresh server: same ids, same outputs, same
scores, no torn line. A request whose answer had been recorded before a kill is never sent again;
what a kill can cost is the requests in flight at that moment (answered by the server but not yet
stored), so the extra requests are bounded by kills x concurrency and counted in the report
printed with ``-s`` (the figures in docs/reliability.md).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clinieval.benchmarks.ehrnoteqa.build.prompts import CHOICES_PROMPT, QUESTION_PROMPT
from clinieval.ehr.notes import DISCHARGE_HEADER
from tests.conftest import BIN
from tests.fault_server import FaultServer
from tests.kill_loop import KillLoop, kill_loop

KILLS = 22
CONCURRENCY = 2


def _verdict(prompt: str, yes: str = "yes", no: str = "no") -> str:
    """A deterministic reply that varies with the prompt (crc32 is stable across processes)."""
    return yes if zlib.crc32(prompt.encode()) % 3 else no


def _request_key(body: dict[str, Any]) -> str:
    """What makes two requests the same request: the messages and the sampling settings."""
    return json.dumps({k: body.get(k) for k in ("messages", "prompt", "seed", "temperature")}, sort_keys=True)


def _keys(server: FaultServer, start: int = 0) -> list[str]:
    return [_request_key(b) for b in server.log.bodies[start:]]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _report(name: str, loop: KillLoop, needed: int, sent: int) -> None:
    print(
        f"\n[kill loop] {name}: {loop.kills} kills ({loop.kills_among_requests} with requests in flight,"
        f" {loop.kills_at_startup_draws} at a time drawn from process start), {len(loop.attempts)} starts,"
        f" {sent} requests for {needed} needed ({sent - needed} re-sent)"
    )


def _assert_loop(loop: KillLoop, needed: int, sent: int) -> None:
    assert loop.kills >= 20, [a.moment for a in loop.attempts]
    assert loop.kills_among_requests >= 10, "too few kills landed while requests were in flight"
    assert loop.final.returncode == 0
    # a kill loses at most the requests in flight, never the recorded ones
    assert needed <= sent <= needed + loop.kills * CONCURRENCY


# --- a run ------------------------------------------------------------------------------------

N_ITEMS = 150


def _items(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(N_ITEMS):
            f.write(json.dumps({"id": f"s{i}", "input": f"question {i}?", "target": "yes"}) + "\n")
    return path


def _run_cmd(data: Path, url: str, out: Path) -> list[str]:
    return [
        str(BIN / "clinieval"), "run", str(data), "-m", f"openai:{url}@fault", "--out", str(out),
        "--concurrency", str(CONCURRENCY), "--no-progress",
    ]  # fmt: skip


def _records(path: Path) -> list[tuple[str, int, str | None, str]]:
    """What must not depend on kills: id, repeat, output and scores of every record, sorted."""
    out = []
    for line in _lines(path):
        r = json.loads(line)
        text = r["output"]["text"] if r.get("output") else None
        out.append((r["sample_id"], r["repeat"], text, json.dumps(r["scores"], sort_keys=True)))
    return sorted(out)


def _committed(samples: Path) -> tuple[set[str], int]:
    """Sample ids whose record line is complete, and whether a torn last line was left (0/1)."""
    if not samples.exists():
        return set(), 0
    text = samples.read_text(encoding="utf-8")
    lines = text.split("\n")
    torn = int(lines[-1] != "")
    done = set()
    for line in lines[:-1]:
        done.add(json.loads(line)["sample_id"])  # every complete line parses
    return done, torn


@pytest.mark.slow
def test_a_run_killed_22_times_ends_as_an_uninterrupted_run(tmp_path: Path) -> None:
    data = _items(tmp_path / "items.jsonl")
    with FaultServer(responder=_verdict) as server:
        done = subprocess.run(_run_cmd(data, server.url, tmp_path / "ref"), capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
    reference = _records(tmp_path / "ref" / "samples.jsonl")
    assert len(reference) == N_ITEMS

    out = tmp_path / "run"
    samples = out / "samples.jsonl"
    recorded_at_kill: list[tuple[int, set[str]]] = []
    torn_seen = 0
    with FaultServer(responder=_verdict, delay_s=0.04) as server:

        def after_kill() -> None:
            nonlocal torn_seen
            committed, torn = _committed(samples)
            torn_seen += torn
            recorded_at_kill.append((len(server.log.received), committed))

        loop = kill_loop(
            _run_cmd(data, server.url, out), server, kills=KILLS, seed=13, log=tmp_path / "stderr.log",
            after_request=(0.0, 0.12), after_kill=after_kill,
        )  # fmt: skip
        sent = list(server.log.received)

    ask = re.compile(r"question (\d+)\?")
    for mark, committed in recorded_at_kill:
        later = {f"s{m.group(1)}" for p in sent[mark:] if (m := ask.search(p))}
        assert not later & committed, "a recorded answer was asked again"
    assert _records(samples) == reference  # same ids, outputs and scores; every line parses
    assert samples.read_text(encoding="utf-8").endswith("\n")
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    _assert_loop(loop, N_ITEMS, len(sent))
    _report("run", loop, N_ITEMS, len(sent))
    print(f"[kill loop] run: a torn last line was left by {torn_seen} kills and repaired on resume")


# --- a judge pass -----------------------------------------------------------------------------

N_QUESTIONS = 30
REPEATS = 5
NOTE = "DISCHARGE SUMMARY\nPRINCIPAL DIAGNOSIS: atrial fibrillation.\nDISCHARGE MEDICATIONS:\n- Metoprolol"


def _questions(path: Path) -> Path:
    items = [
        {
            "id": f"q{i}",
            "patient_id": str(i),
            "question": f"Which rate-control drug was the patient discharged on? ({i})",
            "choices": ["Aspirin", f"Metoprolol {i + 1} mg", "Heparin drip", "Warfarin", "Clopidogrel"],
            "answer": "B",
            "notes": [NOTE],
        }
        for i in range(N_QUESTIONS)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


def _judge_cmd(arm: Path, url: str) -> list[str]:
    return [
        str(BIN / "clinieval"), "ehrnoteqa", "judge", str(arm), "--judge", f"openai:{url}@fault",
        "--repeats", str(REPEATS), "--concurrency", str(CONCURRENCY), "--no-progress",
    ]  # fmt: skip


def _judged(arm: Path) -> list[str]:
    """The judge's scores file without wall-clock fields."""
    out = []
    for line in _lines(arm / "scores" / "ehrnoteqa_judge.jsonl"):
        obj = json.loads(line)
        out.append(json.dumps(_without_timing(obj), sort_keys=True))
    return out


def _without_timing(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_timing(v) for k, v in obj.items() if k not in {"latency_s", "created", "seconds"}}
    if isinstance(obj, list):
        return [_without_timing(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One EHRNoteQA multiple-choice arm answered by a local server (letters vary by question)."""
    root = tmp_path_factory.mktemp("judge-loop")
    qa = _questions(root / "qa.jsonl")
    with FaultServer(responder=lambda p: _verdict(p, "B. Metoprolol", "A. Aspirin")) as model:
        cmd = [
            str(BIN / "clinieval"), "ehrnoteqa", "run", "--inline", str(qa), "-m",
            f"openai:{model.url}@fault", "--format", "mc", "--no-loglik", "--out", str(root / "arms"),
            "--no-progress",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
    [path] = list((root / "arms").iterdir())
    yield path


@pytest.mark.slow
def test_a_judge_pass_killed_22_times_ends_as_an_uninterrupted_one(arm: Path, tmp_path: Path) -> None:
    reference, killed = (Path(shutil.copytree(arm, tmp_path / name)) for name in ("ref", "killed"))

    def judge_reply(prompt: str) -> str:
        return _verdict(prompt, "Yes.", "No.")

    # one server for both, so the judge's identity (its URL) is the same in both scores files
    with FaultServer(responder=judge_reply) as server:
        done = subprocess.run(_judge_cmd(reference, server.url), capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
        needed = len(server.log.received)
        server.delay_s = 0.04  # requests stay in flight long enough for kills to land among them
        loop = kill_loop(
            _judge_cmd(killed, server.url), server, kills=KILLS, seed=14, log=tmp_path / "stderr.log",
            after_request=(0.0, 0.12),
        )  # fmt: skip
        keys = _keys(server, needed)
    assert needed == N_QUESTIONS * REPEATS
    assert _judged(killed) == _judged(reference)
    summary = json.loads((killed / "scores" / "ehrnoteqa_judge.summary.json").read_text())
    assert summary["parsed"] == N_QUESTIONS * REPEATS and summary["parse_failures"] == 0
    assert len(set(keys)) == needed  # every distinct judge request was asked
    _assert_loop(loop, needed, len(keys))
    _report("judge pass", loop, needed, len(keys))


# --- a dataset build --------------------------------------------------------------------------

N_PATIENTS = 60


def _notes(folder: Path) -> tuple[Path, Path]:
    notes, ids = folder / "discharge.csv", folder / "ids.txt"
    with notes.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(DISCHARGE_HEADER)
        for i in range(N_PATIENTS):
            chart = f"2150-{1 + i % 12:02d}-{1 + i % 27:02d} 00:00:00"
            text = f"Admission for atrial fibrillation ({i}). Started drug{i}."
            w.writerow([f"{i}-DS-1", str(100 + i), str(2000 + i), "DS", 1, chart, chart, text])
    ids.write_text("".join(f"{100 + i}\n" for i in range(N_PATIENTS)), encoding="utf-8")
    return notes, ids


def _generator(prompt: str) -> str:
    """Step 1 writes a question about the patient; step 2 the five options around it."""
    pid = re.search(r"Patient ID : (\w+)", prompt)
    assert pid is not None
    if prompt.startswith(QUESTION_PROMPT):
        return (
            f"- Question : Which drug was started for patient {pid.group(1)}?\n- Answer : Drug{pid.group(1)}"
        )
    assert prompt.startswith(CHOICES_PROMPT)
    q = re.search(r"^- Question : (.*)$", prompt, re.M)
    assert q is not None
    return (
        f"- Question: {q.group(1)} - Answer Choices: A: Warfarin B: Drug{pid.group(1)} C: Heparin "
        "D: Aspirin E: Clopidogrel - Correct Answer: B - Reason: per the note"
    )


def _build_cmd(notes: Path, ids: Path, url: str, out: Path) -> list[str]:
    return [
        str(BIN / "clinieval"), "ehrnoteqa", "build", "generate", "--notes", str(notes), "--patients",
        str(ids), "--model", f"openai:{url}@fault", "--out", str(out), "--concurrency", str(CONCURRENCY),
        "--no-progress",
    ]  # fmt: skip


def _built(out: Path) -> dict[str, object]:
    """Every file of a finished build but its summary (which counts requests and cache hits), with
    each call's ``cached`` flag left out: which answers came from the cache is what kills change."""
    files: dict[str, object] = {}
    for p in sorted(out.rglob("*")):
        if not p.is_file() or p.name == "build_summary.json" or p.name.startswith("cache.sqlite"):
            continue
        if p.suffix == ".jsonl":
            files[str(p.relative_to(out))] = [_without(json.loads(line), "cached") for line in _lines(p)]
        else:
            files[str(p.relative_to(out))] = p.read_bytes()
    return files


def _without(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return {k: _without(v, key) for k, v in obj.items() if k != key}
    return obj


@pytest.mark.slow
def test_a_dataset_build_killed_22_times_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    notes, ids = _notes(tmp_path)
    out = tmp_path / "build"
    with FaultServer(responder=_generator) as server:
        done = subprocess.run(
            _build_cmd(notes, ids, server.url, tmp_path / "ref"), capture_output=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        needed = len(server.log.received)
        server.delay_s = 0.04
        loop = kill_loop(
            _build_cmd(notes, ids, server.url, out), server, kills=KILLS, seed=15,
            log=tmp_path / "stderr.log", after_request=(0.0, 0.12),
        )  # fmt: skip
        keys = _keys(server, needed)
    assert needed == 2 * N_PATIENTS
    reference = _built(tmp_path / "ref")
    assert set(reference) >= {"review.csv"}
    assert _built(out) == reference
    assert len(set(keys)) == needed
    _assert_loop(loop, needed, len(keys))
    _report("dataset build", loop, needed, len(keys))
