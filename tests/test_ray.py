"""`--executor ray`: one run over Ray workers, written only by the driver; and every other command
that asks a model (a judge, a benchmark's arms) asking it on Ray workers, with the same results.

Ray's start-up probes cloud-metadata addresses and public DNS, and no test traffic may leave
loopback, so every test that starts Ray runs its part in a network namespace that has only a
loopback interface (``unshare -n``): this file, run as ``python -m tests.test_ray SCENARIO DIR``
inside the namespace, starts the OpenAI-compatible fault server there, runs the real command
line against it (a local run and a Ray run, a run killed and resumed, a Ray worker killed, a
cluster joined with ``--ray-address``; a judge pass and a benchmark's arms, locally and on Ray),
and leaves a JSON report in DIR for the test to check.

Without ``unshare``, ``ip`` or Ray, or where a namespace cannot be made, the tests are skipped with
the reason, and fail instead under ``CI=true`` (tests/browser.py's rule).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, REPO, free_port, in_loopback_namespace, missing
from tests.fault_server import FaultServer

N = 24
ANSWERED_BEFORE_KILL = 8
RAY_START_S = 180
RAY_AGENTS = {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}


# --- what runs inside the namespace ---------------------------------------------------------------


def write_items(path: Path, n: int = N) -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "input": f"question {i}?", "target": "yes"}) + "\n")
    return path


def answer(prompt: str) -> str:
    """A reply that depends on the question, so a record holding another item's answer shows."""
    return "yes" if sum(map(ord, prompt)) % 3 else f"no ({prompt.strip()[-4:]})"


def cli(data: Path, out: Path, model: str, *extra: str) -> list[str]:
    return [str(BIN / "clinieval"), "run", str(data), "-m", model, "--out", str(out), "--no-progress", *extra]


def run(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RAY_START_S, env=env)
    return {
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "seconds": time.monotonic() - start,
    }


def records(out: Path) -> list[dict[str, Any]]:
    """Every record of a run, decoded, in file order, without latencies (which differ run to run)."""
    from clinieval.records.runs import RunDir

    rows = [r.to_dict() for r in RunDir.open(out).iter_records()]
    for row in rows:
        if row["output"] is not None:
            row["output"].pop("latency_s")
    return rows


def count_lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def namespace_processes() -> dict[int, str]:
    """Every other process in this network namespace (so: started by this scenario), by pid, with
    its program name (Ray names its processes ``ray::Worker``, ``ray::DashboardAgent``, ...)."""
    here = os.readlink("/proc/self/ns/net")
    mine = _ancestors()
    found: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            if os.readlink(proc / "ns/net") == here:
                argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                found[int(proc.name)] = argv0.rsplit("/", 1)[-1]
        except OSError:
            continue
    return found


def _ancestors() -> set[int]:
    """This process and the ones that started it (a shell in front of it is no leftover)."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def settled_processes(allowed: set[str], limit: float = 20.0) -> list[str]:
    """The names of the processes left once only ``allowed`` ones remain (Ray's take a moment)."""
    deadline = time.monotonic() + limit
    while not set(left := namespace_processes().values()) <= allowed and time.monotonic() < deadline:
        time.sleep(0.2)
    return sorted(left)


def stop_leftovers() -> None:
    """End what this scenario started and left behind, by pid: TERM, then KILL."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 10.0)):
        for pid in namespace_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while namespace_processes() and time.monotonic() < deadline:
            time.sleep(0.1)


def worker_pids() -> list[int]:
    """Processes of clinieval's Ray actors (this namespace's only)."""
    return [pid for pid, name in namespace_processes().items() if name.startswith("ray::Worker")]


def wait_for(
    condition: Callable[[], bool], proc: subprocess.Popen[bytes], limit: float = RAY_START_S
) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert proc.poll() is None, f"the run ended early ({proc.returncode})"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def scenario_equal(tmp: Path) -> dict[str, Any]:
    """The same items through this process and through a local Ray: same records."""
    data = write_items(tmp / "items.jsonl")
    with FaultServer(delay_s=0.02, responder=answer) as server:
        model = f"openai:{server.url}@fault"
        local = run(cli(data, tmp / "local", model, "--concurrency", "4"))
        ray = run(cli(data, tmp / "ray", model, "--concurrency", "4", "--executor", "ray"))
        left = settled_processes(set())
        asked = dict(server.log.seen)
    return {
        "local": local,
        "ray": ray,
        "local_records": records(tmp / "local"),
        "ray_records": records(tmp / "ray"),
        "asked": asked,
        "left_after_run": left,
    }


def scenario_kill(tmp: Path) -> dict[str, Any]:
    """Kill -9 the driver while requests are in flight on a Ray worker, then run it again."""
    data = write_items(tmp / "items.jsonl")
    out = tmp / "run"
    with FaultServer(delay_s=0.02, responder=answer, hold_after=ANSWERED_BEFORE_KILL) as server:
        cmd = cli(data, out, f"openai:{server.url}@fault", "--concurrency", "4", "--executor", "ray")
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: count_lines(out / "samples.jsonl") >= ANSWERED_BEFORE_KILL, proc)
        wait_for(lambda: len(server.log.received) > ANSWERED_BEFORE_KILL, proc)  # some held in flight
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # what the killed run recorded, and whether the Ray it started went with it: Ray's two
        # agents outlive their node by a minute (they give up on its GCS), then exit by themselves
        recorded = [r["sample"]["input"] for r in records(out)]
        left_after_kill = settled_processes(RAY_AGENTS)
        stop_leftovers()
        received_before = len(server.log.received)
        server.release()
        again = run(cmd)
        after = server.log.received[received_before:]
    return {
        "recorded_before": recorded,
        "left_after_kill": left_after_kill,
        "in_flight_at_kill": received_before - len(recorded),
        "again": again,
        "asked_after": after,
        "records": records(out),
        "manifest": json.loads((out / "manifest.json").read_text()),
    }


def scenario_cluster(tmp: Path) -> dict[str, Any]:
    """Join a cluster started with `ray start --head`, two workers on it; kill one worker in the
    middle of a run (one clear error naming the item, finished work kept); then resume."""
    data = write_items(tmp / "items.jsonl")
    out = tmp / "run"
    port = free_port()
    # the cluster and the command share a token, as docs/distributed.md sets a cluster up
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **token}
    head = [str(BIN / "ray"), "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1"]
    head += ["--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats", "--block"]
    # --block keeps `ray start` in the foreground, so the cluster is ours to stop by its pid
    head_log = tmp / "head.log"
    with head_log.open("wb") as log:
        cluster = subprocess.Popen(head, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: b"block forever" in head_log.read_bytes(), cluster)
        with FaultServer(delay_s=0.02, responder=answer, hold_after=ANSWERED_BEFORE_KILL) as server:
            extra = ["--concurrency", "2", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]
            cmd = cli(data, out, f"openai:{server.url}@fault", *extra, "--ray-workers", "2")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            wait_for(lambda: count_lines(out / "samples.jsonl") >= ANSWERED_BEFORE_KILL, proc)
            wait_for(lambda: len(server.log.received) > ANSWERED_BEFORE_KILL, proc)
            workers = worker_pids()
            os.kill(workers[0], signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=RAY_START_S)
            crashed = {"rc": proc.returncode, "stdout": stdout.decode(), "stderr": stderr.decode()}
            recorded = [r["sample"]["input"] for r in records(out)]
            received_before = len(server.log.received)
            server.release()
            again = run(cmd, env)
            after = server.log.received[received_before:]
    finally:
        cluster.terminate()
        cluster.wait(timeout=60)
    return {
        "workers": len(workers),
        "crashed": crashed,
        "recorded_before": recorded,
        "again": again,
        "asked_after": after,
        "records": records(out),
    }


def scenario_embedded(tmp: Path) -> dict[str, Any]:
    """The embedded model, loaded by the Ray worker itself, answers as it does in this process."""
    data = write_items(tmp / "items.jsonl", 5)
    model = "llamacpp:smollm2-135m-instruct"
    flags = ["--limit", "3", "--max-tokens", "8"]
    local = run(cli(data, tmp / "local", model, *flags))
    ray = run(cli(data, tmp / "ray", model, *flags, "--executor", "ray"))
    return {
        "local": local,
        "ray": ray,
        "local_records": records(tmp / "local"),
        "ray_records": records(tmp / "ray"),
    }


def answer_or_verdict(prompt: str) -> str:
    """The model's answer, or a judge's verdict (the rubric asks for a ``Verdict:`` line) that
    depends on the prompt, so a score filed under another answer shows."""
    if "Verdict:" not in prompt:
        return answer(prompt)
    return f"Reason: as the reference says.\nVerdict: {'yes' if sum(map(ord, prompt)) % 2 else 'no'}"


def scores(run_dir: Path, rubric: str) -> list[dict[str, Any]]:
    """A judge pass's scores file, one decoded row a line (timings left out: they differ)."""
    rows = [json.loads(line) for line in (run_dir / "scores" / f"{rubric}.jsonl").read_text().splitlines()]
    for row in rows:
        for key in [k for k in row if "latency" in k or "elapsed" in k]:
            del row[key]
    return rows


def arm_records(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every arm's records under a benchmark's ``--out``, by the arm's folder name."""
    return {m.parent.name: records(m.parent) for m in sorted(out.rglob("manifest.json"))}


def arm_workers(out: Path) -> list[Any]:
    """Each arm's Ray workers' nodes as its summary.json records them (None: asked locally)."""
    return [
        json.loads((m.parent / "summary.json").read_text())["run"].get("ray_workers")
        for m in sorted(out.rglob("manifest.json"))
    ]


def scenario_commands(tmp: Path) -> dict[str, Any]:
    """One judge pass (`clinieval judge`) and one benchmark's arms (`clinieval medeval run`, on a
    pool of two servers), each locally and with ``--executor ray`` (requests answered on Ray
    workers): same scores, same records; then a judge pass that loses one of its two workers."""
    from clinieval.benchmarks.medeval.synth.writer import write_synthetic

    data = write_items(tmp / "items.jsonl", 8)
    corpus = tmp / "medeval"
    write_synthetic(corpus, seed=1, sentences=40, reports=20)
    with (
        FaultServer(delay_s=0.01, responder=answer_or_verdict) as server,
        FaultServer(delay_s=0.01, responder=answer_or_verdict) as second,
    ):
        model = f"openai:{server.url}@fault"
        pool = f"openai:{server.url},{second.url}@fault"  # the arms ask a pool of two servers
        answered = run(cli(data, tmp / "answers", model))
        for copy in ("judged-local", "judged-ray"):
            shutil.copytree(tmp / "answers", tmp / copy)
        judge = [str(BIN / "clinieval"), "judge", "--rubric", "reference_correct", "--repeats", "2"]
        judge += ["--no-progress"]
        judged_local = run([*judge, str(tmp / "judged-local"), "--judge", model, "--concurrency", "3"])
        before = len(server.log.received)
        judged_ray = run(
            [*judge, str(tmp / "judged-ray"), "--judge", model, "--concurrency", "3", "--executor", "ray"]
        )
        judge_requests_on_ray = len(server.log.received) - before
        arms = [str(BIN / "clinieval"), "medeval", "run", "--data", str(corpus), "-m", pool]
        arms += ["--task", "abnormality", "--shots", "0", "--limit", "6", "--no-progress"]
        arms_local = run([*arms, "--out", str(tmp / "arms-local")])
        arms_ray = run([*arms, "--out", str(tmp / "arms-ray"), "--executor", "ray", "--ray-workers", "2"])
        left = settled_processes(set())
        second_asked = len(second.log.received)
    shutil.copytree(tmp / "answers", tmp / "judged-kill")
    killed = judge_and_kill_a_worker(tmp / "judged-kill", judge)
    shutil.copytree(tmp / "answers", tmp / "judged-down")  # no server answers on the node
    down = run(
        [*judge, str(tmp / "judged-down"), "--judge", "openai:http://127.0.0.1:9/v1@m", "--executor", "ray"]
    )
    return {
        "answered": answered,
        "judged_local": judged_local,
        "judged_ray": judged_ray,
        "judge_requests_on_ray": judge_requests_on_ray,
        "scores_local": scores(tmp / "judged-local", "reference_correct"),
        "scores_ray": scores(tmp / "judged-ray", "reference_correct"),
        "arms_local": arms_local,
        "arms_ray": arms_ray,
        "arm_records_local": arm_records(tmp / "arms-local"),
        "arm_records_ray": arm_records(tmp / "arms-ray"),
        "arm_workers_local": arm_workers(tmp / "arms-local"),
        "arm_workers_ray": arm_workers(tmp / "arms-ray"),
        "left_after_run": left,
        "killed": killed,
        "down": down,
        "down_scores": sorted(str(p.name) for p in (tmp / "judged-down").glob("scores/*")),
        "second_asked": second_asked,
        "scores_killed": scores(tmp / "judged-kill", "reference_correct"),
    }


def judge_and_kill_a_worker(run_dir: Path, judge: list[str]) -> dict[str, Any]:
    """A judge pass on two Ray workers, one of them killed while it holds requests in flight."""
    with FaultServer(delay_s=0.01, responder=answer_or_verdict, hold_after=ANSWERED_BEFORE_KILL) as server:
        flags = ["--executor", "ray", "--ray-workers", "2", "--concurrency", "2"]
        cmd = [*judge, str(run_dir), "--judge", f"openai:{server.url}@fault", *flags]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: len(server.log.received) > ANSWERED_BEFORE_KILL + 2, proc)  # some held
        workers = [pid for pid, name in namespace_processes().items() if name.startswith("ray::ModelWorker")]
        os.kill(workers[0], signal.SIGKILL)
        time.sleep(1.0)  # the command sees the worker gone, and asks the other
        server.release()
        stdout, stderr = proc.communicate(timeout=RAY_START_S)
    return {"workers": len(workers), "rc": proc.returncode, "stdout": stdout, "stderr": stderr}


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "equal": scenario_equal,
    "kill": scenario_kill,
    "cluster": scenario_cluster,
    "embedded": scenario_embedded,
    "commands": scenario_commands,
}


def main(scenario: str, tmp: str) -> None:
    folder = Path(tmp)
    try:
        report = SCENARIOS[scenario](folder)
    finally:
        stop_leftovers()
    (folder / "report.json").write_text(json.dumps(report))


# --- the tests --------------------------------------------------------------------------------------


def in_namespace(scenario: str, tmp: Path, timeout: float = 300) -> dict[str, Any]:
    """Run ``scenario`` in a fresh network namespace with only loopback up; return its report."""
    try:
        import ray  # noqa: F401
    except ImportError:
        missing("the ray extra is not installed: pip install 'clinieval[ray]'")
    report: dict[str, Any] = in_loopback_namespace(
        "tests.test_ray", scenario, str(tmp), report=tmp, timeout=timeout
    )
    return report


def ok(result: dict[str, Any]) -> None:
    assert result["rc"] == 0, result["stdout"] + result["stderr"]


def by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["sample_id"], r["repeat"]): r for r in rows}


@pytest.mark.slow
def test_ray_run_equals_a_local_run(tmp_path: Path) -> None:
    report = in_namespace("equal", tmp_path)
    ok(report["local"])
    ok(report["ray"])
    local, ray = report["local_records"], report["ray_records"]
    assert len(local) == len(ray) == N
    assert by_key(ray) == by_key(local)  # same ids, prompts, outputs, scores
    assert sorted(report["asked"].values()) == [2] * N  # each prompt once per run
    assert f"{N} new, 0 resumed of {N}; {N} model requests" in report["ray"]["stdout"]
    assert report["left_after_run"] == [], "the local Ray the run started is still running"


@pytest.mark.slow
def test_killed_driver_resumes_without_losing_or_repeating_work(tmp_path: Path) -> None:
    report = in_namespace("kill", tmp_path)
    before = report["recorded_before"]
    assert len(before) >= ANSWERED_BEFORE_KILL and report["in_flight_at_kill"] >= 1
    assert set(report["left_after_kill"]) <= RAY_AGENTS, "Ray outlived the killed driver"
    ok(report["again"])
    after = report["asked_after"]
    assert set(after).isdisjoint(f"\n\n{q}" for q in before), "a recorded item was asked again"
    assert len(after) == len(set(after)) == N - len(before)
    rows = report["records"]
    assert sorted(r["sample_id"] for r in rows) == sorted(f"s{i}" for i in range(N))  # each exactly once
    assert all(r["output"]["text"] == answer(r["messages"][-1]["content"]) for r in rows)
    assert report["manifest"]["status"] == "complete"
    assert f"{N - len(before)} new, {len(before)} resumed of {N}" in report["again"]["stdout"]


@pytest.mark.slow
def test_joined_cluster_and_a_dead_worker(tmp_path: Path) -> None:
    report = in_namespace("cluster", tmp_path)
    assert report["workers"] == 2
    crashed = report["crashed"]
    assert crashed["rc"] == 2, crashed["stderr"]
    error = [line for line in crashed["stderr"].splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "died while evaluating sample 's" in error[0], crashed["stderr"]
    assert "run the same command again to resume" in error[0]
    assert "Traceback" not in crashed["stderr"]
    before = report["recorded_before"]
    assert len(before) >= ANSWERED_BEFORE_KILL  # finished work was written before the error
    ok(report["again"])
    assert set(report["asked_after"]).isdisjoint(f"\n\n{q}" for q in before)
    rows = report["records"]
    assert sorted(r["sample_id"] for r in rows) == sorted(f"s{i}" for i in range(N))


@pytest.mark.slow
def test_embedded_model_through_ray(tmp_path: Path, smollm2_path: Path) -> None:
    assert smollm2_path.is_file()
    report = in_namespace("embedded", tmp_path)
    ok(report["local"])
    ok(report["ray"])
    local, ray = by_key(report["local_records"]), by_key(report["ray_records"])
    assert len(ray) == 3 and ray == local
    assert all(r["output"]["text"] and r["output"]["error_kind"] is None for r in ray.values())


@pytest.mark.slow
def test_a_judge_and_benchmark_arms_on_ray_equal_local_ones(tmp_path: Path) -> None:
    report = in_namespace("commands", tmp_path)
    for name in ("answered", "judged_local", "judged_ray", "arms_local", "arms_ray"):
        ok(report[name])
    local, ray = report["scores_local"], report["scores_ray"]
    assert len(local) == 8 and ray == local  # same verdicts, on the same answers, in the same order
    assert {r["value"] for r in local} == {0.0, 1.0}, "the verdicts should differ"
    assert report["judge_requests_on_ray"] == 16  # nothing came from the first pass's cache
    arms_local, arms_ray = report["arm_records_local"], report["arm_records_ray"]
    assert list(arms_ray) == list(arms_local) and arms_local
    for arm, rows in arms_local.items():
        assert len(rows) == 6 and by_key(arms_ray[arm]) == by_key(rows), arm
    assert report["arm_workers_ray"] == [["127.0.0.1", "127.0.0.1"]] * len(arms_ray)  # asked on Ray
    assert report["arm_workers_local"] == [None] * len(arms_local)
    assert report["second_asked"] > 0  # the pool's second server answered too
    assert report["left_after_run"] == [], "a local Ray a command started is still running"
    killed = report["killed"]
    assert killed["workers"] == 2 and killed["rc"] == 0, killed["stderr"]
    assert "the Ray worker on 127.0.0.1 died" in killed["stderr"] and "asking the others" in killed["stderr"]
    assert [r["value"] for r in report["scores_killed"]] == [r["value"] for r in local]  # nothing lost
    down = report["down"]  # a node without its server: one line naming the node, nothing written
    errors = [line for line in down["stderr"].splitlines() if line.startswith("error: ")]
    assert down["rc"] == 2 and len(errors) == 1, down["stderr"]
    assert errors[0].startswith("error: on Ray node 127.0.0.1: ") and "127.0.0.1:9" in errors[0]
    assert "Traceback" not in down["stderr"] and report["down_scores"] == []


@pytest.mark.parametrize("ci", ["true", None])
def test_without_unshare_the_ray_tests_fail_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no unshare, no ip
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if ci == "true" else pytest.skip.Exception
    with pytest.raises(expected, match="needs unshare and ip"):
        in_namespace("equal", tmp_path)


def _cli_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in an interpreter where ``import ray`` fails, as it does without the extra
    (``sys.modules['ray'] = None`` is how Python marks a module unimportable)."""
    code = "import sys; sys.modules['ray'] = None; from clinieval.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_missing_ray_is_one_clear_error_and_leaves_no_run(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "run"
    done = _cli_without_ray(
        "run", str(data), "-m", "openai:http://127.0.0.1:9/v1@m", "--executor", "ray", "--out", str(out)
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "error: --executor ray needs Ray, which is not installed; install the ray extra: "
        "pip install 'clinieval[ray]'"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "spark"], "--executor 'spark' is unknown; choose from local, ray"),
        (["--ray-address", "10.0.0.1:6379"], "--ray-address needs --executor ray"),
        (["--ray-workers", "3"], "--ray-workers needs --executor ray"),
    ],
)
def test_executor_options_are_checked_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    data = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "run"
    done = subprocess.run(
        [*cli(data, out, "openai:http://127.0.0.1:9/v1@m"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not out.exists()


if __name__ == "__main__":
    main(*sys.argv[1:])
