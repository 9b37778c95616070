"""Reliability defects found by trying clinieval as a new user would (issue 13), each with the test
that failed before its fix: a local OpenAI-compatible server (tests/fault_server.py) misbehaves
on request, and the installed command is run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conftest import run_cli
from tests.fault_server import FaultServer


def _strict_json(path: Path) -> object:
    """Parse as a strict parser would: NaN / Infinity tokens are an error, not a float."""

    def refuse(token: str) -> object:
        raise ValueError(f"{path}: {token} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def _items(tmp_path: Path, prompts: list[str]) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"x{i}", "input": p}) + "\n" for i, p in enumerate(prompts)))
    return path


def test_a_rerun_after_an_outage_asks_the_failed_items_again(tmp_path: Path) -> None:
    # Two items fail once with a 500 and no retries; the third answers. The rerun (server healthy
    # again) asks exactly the two failed items, and only then is the run complete.
    data = _items(tmp_path, ["q0 FAULT:500x1", "q1 FAULT:500x1", "q2"])
    out = tmp_path / "run"
    with FaultServer(answer="ok") as server:
        model = f"openai:{server.url}@fault"
        args = ["run", str(data), "-m", model, "--retries", "0", "--out", str(out), "--no-progress"]
        first = run_cli(*args)
        assert first.returncode == 3, first.stderr  # finished, with failed items
        assert json.loads((out / "manifest.json").read_text())["status"] == "incomplete"
        summary = _strict_json(out / "summary.json")
        run_info = summary["run"]  # type: ignore[index]
        assert {k: run_info[k] for k in ("retried", "transient_failures_left", "changed", "removed")} == {
            "retried": 0,
            "transient_failures_left": 2,
            "changed": 0,
            "removed": 0,
        }
        assert run_info["failed_items"] == {"count": 2, "kinds": {"server_error": 2}}
        asked_before = len(server.log.received)
        second = run_cli(*args)
        assert second.returncode == 0, second.stderr
        assert len(server.log.received) - asked_before == 2
    assert "2 new (2 asked again after a transient failure), 1 resumed of 3" in second.stdout
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    run_info = _strict_json(out / "summary.json")["run"]  # type: ignore[index]
    assert run_info["failed_items"] == {"count": 0, "kinds": {}}
    assert {k: run_info[k] for k in ("retried", "transient_failures_left", "changed", "removed")} == {
        "retried": 2,
        "transient_failures_left": 0,
        "changed": 0,
        "removed": 0,
    }
    latest = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        latest[record["sample_id"]] = record
    assert all(r["output"]["error_kind"] is None for r in latest.values())


def test_a_lasting_failure_is_not_asked_again(tmp_path: Path) -> None:
    data = _items(tmp_path, ["q0 FAULT:FILTER"])
    out = tmp_path / "run"
    with FaultServer() as server:
        args = ["run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress"]
        run_cli(*args)
        asked = len(server.log.received)
        again = run_cli(*args)
        assert len(server.log.received) == asked
    assert "0 new, 1 resumed of 1; 0 model requests" in again.stdout


def test_summary_of_an_all_failed_run_is_strict_json(tmp_path: Path) -> None:
    data = _items(tmp_path, ["q0 FAULT:FILTER", "q1 FAULT:FILTER"])
    out = tmp_path / "run"
    with FaultServer() as server:
        run_cli("run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress")
    summary = _strict_json(out / "summary.json")
    [exact] = summary["summaries"]  # type: ignore[index]
    assert exact["scored"] == 0
    assert exact["mean"] is None and exact["ci_low"] is None and exact["ci_high"] is None


def test_a_local_backend_error_is_not_cached(tmp_path: Path) -> None:
    import asyncio

    from clinieval.engine.runner import CachedCalls
    from clinieval.records.cache import RequestCache
    from clinieval.types import ErrorKind, ModelOutput

    class _Named:  # only what CachedCalls reads of a model: its identity, for the cache key
        identity: ClassVar[dict[str, str]] = {"backend": "llamacpp", "file": "x.gguf"}

    cache = RequestCache(tmp_path / "cache.sqlite")
    calls = CachedCalls(_Named(), cache)  # type: ignore[arg-type]
    failed = ModelOutput.failure(ErrorKind.BACKEND, "llama_decode returned -3", 0.1).to_dict()

    async def ask() -> dict[str, object]:
        return failed

    for _ in range(2):
        asyncio.run(calls.through("generate", {}, "prompt", 0, ask))
    assert calls.requests == 2 and cache.hits == 0  # asked both times: nothing was cached
    cache.close()


@pytest.mark.parametrize(
    "text",
    ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "'=1", "''+x", "'plain", "plain", "", "a=b", "''"],
)
def test_spreadsheet_cells_are_inert_and_read_back_exactly(text: str) -> None:
    from clinieval.fsutil import FORMULA_STARTS, spreadsheet_cell, spreadsheet_text

    cell = spreadsheet_cell(text)
    assert isinstance(cell, str) and not cell.startswith(FORMULA_STARTS)
    assert spreadsheet_text(cell) == text


def test_ehrnoteqa_review_csv_holds_no_live_formula(tmp_path: Path) -> None:
    from clinieval.benchmarks.ehrnoteqa.build.review import REVIEW_COLUMNS, read_review, write_review

    row = {c: "" for c in REVIEW_COLUMNS} | {
        "item_id": "1-1",
        "patient_id": "1",
        "num_notes": 1,
        "question": "=cmd|' /C calc'!A0",
        "choice_A": "+1",
        "choice_B": "-2 mg",
        "choice_C": "@SUM(A1:A9)",
        "choice_D": "\tTab",
        "choice_E": "plain",
        "answer": "A",
    }
    path = tmp_path / "review.csv"
    write_review(path, [row])
    raw = path.read_text(encoding="utf-8").splitlines()[1]
    assert "'=cmd" in raw and ",'+1," in raw and ",'-2 mg," in raw and "'@SUM" in raw
    [back] = read_review(path).rows
    for column in ("question", "choice_A", "choice_B", "choice_C", "choice_D", "choice_E"):
        assert back.cells[column] == row[column]


def test_judge_repeats_get_their_own_seeds_and_identical_repeats_are_flagged(tmp_path: Path) -> None:
    from tests.test_benchmarks import _inline

    arm = tmp_path / "arm"
    # "Yes.": the judge's verdict too (a copy of the answer it judges would be no verdict, issue 34)
    with FaultServer(answer="Yes.") as server:
        model = f"openai:{server.url}@fault"
        made = run_cli(
            "run", "ehrnoteqa", "--data", str(_inline(tmp_path)), "-m", model, "--scorer", "letter_extract",
            "--out", str(arm), "--no-progress",
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        before = len(server.log.bodies)
        judged = run_cli(
            "ehrnoteqa", "judge", str(arm), "--judge", model, "--repeats", "3", "--judge-temperature", "0.7",
            "--no-progress",
        )  # fmt: skip
        asked = server.log.bodies[before:]
    assert judged.returncode == 0, judged.stderr
    assert sorted(b["seed"] for b in asked) == [0, 1, 2]  # seed + repeat index
    assert {b["temperature"] for b in asked} == {0.7}
    # the server answers every repeat alike: the summary counts it and says so
    assert "1 of 1 items got the same reply in every repeat" in judged.stderr
    summary = json.loads(next((arm / "scores").glob("*.summary.json")).read_text())
    assert summary["identical_repeats"] == 1 and summary["generation"]["temperature"] == 0.7


# The egress table: each URL is allowed only when it certainly reaches this machine, or its host
# was allowlisted by name. Tricks that an HTTP client may read as loopback are refused too.
EGRESS: list[tuple[str, bool]] = [
    ("http://127.0.0.1:8000/v1", True),
    ("http://127.255.255.254/v1", True),
    ("http://[::1]:8000/v1", True),
    ("http://localhost:8000/v1", True),
    ("http://LOCALHOST:8000/v1", True),
    ("http://localhost.:8000/v1", True),
    ("https://localhost/v1", True),
    ("http://10.0.0.1/v1", False),
    ("http://192.168.1.10:8000/v1", False),
    ("http://172.16.0.1/v1", False),
    ("http://169.254.169.254/latest/meta-data", False),
    ("http://0.0.0.0:8000/v1", False),
    ("http://[::]:8000/v1", False),
    ("http://127.0.0.1@evil.example/v1", False),
    ("http://localhost:8000@evil.example/v1", False),
    ("http://evil.example#@127.0.0.1/v1", False),
    ("http://localhost.evil.example/v1", False),
    ("http://127.0.0.1.evil.example/v1", False),
    ("http://2130706433/v1", False),
    ("http://0x7f000001/v1", False),
    ("http://0177.0.0.1/v1", False),
    ("http://127.1/v1", False),
    ("http://[::ffff:127.0.0.1]/v1", False),
    ("http://[::ffff:10.0.0.1]/v1", False),
    ("http://[fe80::1]/v1", False),
    ("http://localhost\\@evil.example/v1", False),
    ("ftp://127.0.0.1/v1", False),
    ("file:///etc/passwd", False),
    ("http:///v1", False),
    ("gateway.example.org/v1", False),
]


@pytest.mark.parametrize(("url", "allowed"), EGRESS)
def test_egress_table(url: str, allowed: bool) -> None:
    from clinieval.errors import UserError
    from clinieval.privacy import check_endpoint

    if allowed:
        check_endpoint(url)
    else:
        with pytest.raises(UserError):
            check_endpoint(url)


def test_egress_table_is_large_enough() -> None:
    assert len(EGRESS) >= 25 and sum(not ok for _, ok in EGRESS) >= 20


def test_localhost_is_trusted_only_when_it_resolves_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hosts file that points ``localhost`` elsewhere (simulated: the test cannot edit the
    machine's) must not turn the name into a way out."""
    import socket

    from clinieval.errors import UserError
    from clinieval.privacy import check_endpoint

    def elsewhere(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.20.30.40", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", elsewhere)
    with pytest.raises(UserError, match="not loopback"):
        check_endpoint("http://localhost:8000/v1")
    check_endpoint("http://127.0.0.1:8000/v1")  # an address needs no resolving
    check_endpoint("http://localhost:8000/v1", allow=["localhost"])  # the user's explicit choice


def test_a_failing_item_stops_the_other_workers_before_the_files_close(tmp_path: Path) -> None:
    """One item's scorer raises while the others wait on the server: execute re-raises, no worker
    is left running to write into the closed results file or cache, and what finished is kept."""
    import asyncio
    from dataclasses import dataclass

    from clinieval.engine.runner import execute
    from clinieval.models.spec import BackendOptions, parse_model_spec
    from clinieval.records.runs import RunDir, build_manifest
    from clinieval.records.sample_record import SampleRecord
    from clinieval.scoring.scorers import ExactMatch, Needs
    from clinieval.task import PromptTemplate, Task
    from clinieval.types import Sample, Score

    @dataclass(frozen=True)
    class Explodes:  # a scorer with a bug, on the item that comes back first
        name: str = "explodes"
        needs: Needs = "generate"
        needs_choices: bool = False

        def score(self, record: SampleRecord) -> Score:
            if record.sample.id == "boom":
                raise RuntimeError("scorer bug")
            return ExactMatch().score(record)

    # "boom" is answered at once; the others hang at the server (5 s), so they are in flight when
    # the scorer raises, whatever order the requests arrive in
    samples = [
        Sample(id="boom", input="q0"),
        *(Sample(id=f"s{i}", input=f"q{i} FAULT:HANGx1") for i in range(1, 4)),
    ]
    task = Task(name="t", load=lambda: samples, prompt=PromptTemplate(user="{input}"), scorers=[Explodes()])
    run = RunDir.create_or_resume(tmp_path / "run", build_manifest({"t": 1}, []))

    async def scenario(server: FaultServer) -> list[asyncio.Task[object]]:
        model = parse_model_spec(f"openai:{server.url}@fault", BackendOptions())
        try:
            with pytest.raises(RuntimeError, match="scorer bug"):
                await execute(task, model, run, samples, concurrency=4, progress=False)
            await asyncio.sleep(0.3)  # a worker still alive would be waiting on its request here
            return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        finally:
            await model.aclose()

    with FaultServer(answer="ok") as server:
        left = asyncio.run(scenario(server))
    assert left == []
    assert run.records() == []  # the only answered item raised before it was written


def test_null_content_is_a_failure_and_truncation_is_counted(tmp_path: Path) -> None:
    # q0: a reasoning model's reply with content null; q1: an answer cut at the token limit;
    # q2: a normal answer. Targets are "yes" throughout and every reply text is "yes".
    path = tmp_path / "items.jsonl"
    prompts = ["q FAULT:NULL", "q FAULT:LENGTH", "q"]
    items = [{"id": f"x{i}", "input": p, "target": "yes"} for i, p in enumerate(prompts)]
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    out = tmp_path / "run"
    with FaultServer(answer="yes") as server:
        model = f"openai:{server.url}@fault"
        proc = run_cli("run", str(path), "-m", model, "--out", str(out), "--no-progress")
    assert proc.returncode == 3, proc.stderr  # the null reply is a failed item...
    assert "no_content: 1 — raise --max-tokens" in proc.stderr  # ...with its fix
    [exact] = _strict_json(out / "summary.json")["summaries"]  # type: ignore[index]
    assert exact["errors"] == {"no_content": 1} and exact["scored"] == 2
    assert exact["truncated"] == 1
    assert exact["mean"] == 1.0  # both scored answers say yes
    assert exact["mean_failures_as_wrong"] == 1 / 3  # the null reply and the cut answer count as wrong
    assert "truncated" in proc.stdout
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    null = next(r for r in records if r["sample_id"] == "x0")
    assert null["output"]["error_kind"] == "no_content" and "--max-tokens" in null["output"]["error_message"]


def test_a_rerun_over_changed_data_stops_unless_asked_to_rerun_the_changes(tmp_path: Path) -> None:
    def write(inputs: list[str]) -> Path:
        path = tmp_path / "items.jsonl"
        rows = [{"id": f"x{i}", "input": text, "target": "ok"} for i, text in enumerate(inputs)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    out = tmp_path / "run"
    with FaultServer(answer="ok") as server:
        model = f"openai:{server.url}@fault"
        data = write(["q0", "q1", "q2"])
        args = ["run", str(data), "-m", model, "--out", str(out), "--no-progress"]
        assert run_cli(*args).returncode == 0
        write(["q0", "q1 edited", "q2 edited"])  # same ids, new content
        refused = run_cli(*args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert f"{data}: sample 'x1' (and 1 more) changed since it was recorded" in refused.stderr
        asked = len(server.log.received)
        again = run_cli(*args, "--rerun-changed")
        assert again.returncode == 0, again.stderr
        # exactly the changed ones, each once; concurrent requests reach the server in any order
        assert sorted(p.strip() for p in server.log.received[asked:]) == ["q1 edited", "q2 edited"]
        assert "2 new (2 asked again because their sample changed), 1 resumed of 3" in again.stdout
        assert run_cli(*args).returncode == 0  # now the run matches its data again
        write(["q0", "q1 edited"])  # x2 removed from the data
        fewer = run_cli(*args)
    assert fewer.returncode == 0, fewer.stderr
    assert "1 recorded samples are no longer in the data and are left out" in fewer.stdout
    summary = _strict_json(out / "summary.json")
    assert summary["run"]["removed"] == 1 and summary["summaries"][0]["samples"] == 2  # type: ignore[index]


def test_changed_samples_are_named_in_the_data_order_not_the_order_calls_finished() -> None:
    """Concurrent calls finish in any order, so records do too; the refusal names the first
    changed sample of the data, which CI once saw flip between x1 and x2."""
    from clinieval.engine.runner import changed_samples
    from clinieval.records.sample_record import SampleRecord
    from clinieval.types import Message, Sample

    old = [Sample(id=f"x{i}", input=f"q{i}", target="ok") for i in range(4)]
    new = [old[0]] + [Sample(id=s.id, input=s.input + " edited", target="ok") for s in old[1:]]
    finished = [SampleRecord(old[i], 0, [Message("user", old[i].input)]) for i in (3, 0, 2, 1)]
    assert changed_samples(new, finished) == ["x1", "x2", "x3"]
