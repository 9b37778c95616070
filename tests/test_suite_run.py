"""``clinieval suite plan|run|report`` end to end against a real local server that counts requests
(issue 29, items 1 and 4): the plan's calls are the calls made; a bad model spec or data folder
stops the suite before any call; a rerun asks nothing again, an added model just runs, a changed
setting is refused (``--overwrite`` runs that cell again); a failing cell is recorded and the rest
run; the manifest records code, data hashes and settings; the report asks no model.

The models are a FaultServer on 127.0.0.1 (the suite cannot tell it from any OpenAI-compatible
server) and the commands run as a user runs them, through the installed ``clinieval``. About 25 s
on 2 cores.
"""

from __future__ import annotations

import hashlib
import html
import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.fault_server import FaultServer
from tests.suite_helpers import asked, pubmedqa_folder, reply, suite_text


class Failing(FaultServer):
    """A server whose every model call fails with HTTP 500 (its model list answers as usual)."""

    def handle(self, h: Any, body: dict[str, Any]) -> None:
        with self.log.lock:
            self.log.received.append(json.dumps(body))
        h._send(500, {"error": {"message": "boom"}})


@pytest.fixture
def server() -> FaultServer:
    with FaultServer(responder=reply) as s:
        yield s  # type: ignore[misc]


def _suite(tmp_path: Path, text: str) -> Path:
    if not (tmp_path / "pqa").exists():
        pubmedqa_folder(tmp_path / "pqa")
    path = tmp_path / "suite.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _planned_calls(path: Path, out: Path | None = None) -> int:
    args = ["suite", "plan", str(path)] + (["--out", str(out)] if out else [])
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    total = [line for line in done.stdout.splitlines() if "model calls in all" in line]
    assert len(total) == 1, done.stdout
    return int(total[0].split(", ")[1].split()[0].replace(",", ""))


def _manifest(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "suite.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_a_suite_asks_what_it_planned_then_nothing_again(server: FaultServer, tmp_path: Path) -> None:
    path = _suite(tmp_path, suite_text(server.url, ("a", "b"), limit=5))
    out = tmp_path / "out"
    planned = _planned_calls(path)
    assert planned == 10 and not server.log.received  # planning asks nothing

    done = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert len(server.log.received) == planned
    assert set(asked(server.log.received).values()) == {2}  # each item once per model
    assert "pubmedqa × a: complete" in done.stderr and "pubmedqa × b: complete" in done.stderr

    manifest = _manifest(out)
    assert manifest["suite"]["text"] == path.read_text(encoding="utf-8")
    assert manifest["suite"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert manifest["code"]["clinieval"] and "packages" in manifest["code"]
    data = manifest["benchmarks"]["pubmedqa"]["data"]
    ori = str(tmp_path / "pqa" / "ori_pqal.json")
    assert data[ori] == hashlib.sha256(Path(ori).read_bytes()).hexdigest()
    for model in ("a", "b"):
        cell = manifest["cells"][f"pubmedqa/{model}"]
        assert cell["status"] == "complete" and cell["planned_calls"] == 5 and cell["wall_s"] > 0
        assert cell["settings"]["limit"] == 5 and cell["settings"]["seed"] == 3
        assert len((out / "pubmedqa" / model / "samples.jsonl").read_text().splitlines()) == 5

    again = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert len(server.log.received) == planned  # nothing asked again
    assert "0 cells run, 2 already complete" in again.stderr
    plan_now = run_cli("suite", "plan", str(path), "--out", str(out))
    assert "0 still to ask" in plan_now.stdout and "complete" in plan_now.stdout

    # an added model runs alone; a changed setting is refused before anything is asked
    _suite(tmp_path, suite_text(server.url, ("a", "b", "c"), limit=5))
    assert _planned_calls(path) == 15
    added = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert added.returncode == 0, added.stderr
    assert len(server.log.received) == planned + 5
    assert "1 cells run, 2 already complete" in added.stderr

    _suite(tmp_path, suite_text(server.url, ("a", "b", "c"), limit=6))
    changed = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert changed.returncode == 2
    assert changed.stderr.strip().splitlines() == [
        f"error: {path}: [benchmarks.pubmedqa] × model a: limit was 5, now 6 since it ran into "
        f"{out / 'pubmedqa' / 'a'}; set it back, use another --out, or pass --overwrite to run the "
        "changed cells again from scratch"
    ]
    assert len(server.log.received) == planned + 5
    assert _manifest(out)["cells"]["pubmedqa/a"]["settings"]["limit"] == 5  # the manifest untouched

    before = len(server.log.received)
    overwritten = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--overwrite")
    assert overwritten.returncode == 0, overwritten.stderr
    assert len(server.log.received) - before == 3 * 6  # every cell asked afresh with the new limit


def test_a_bad_model_or_data_folder_stops_the_suite_before_any_call(
    server: FaultServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    bad_spec = suite_text(server.url, ("a",)) + ""
    bad_spec = bad_spec.replace("[endpoints]", 'z = "openai:http://127.0.0.1:9/v1"\n\n[endpoints]')
    for text, message in (
        (bad_spec, "[models] z: model spec 'openai:http://127.0.0.1:9/v1': expected URL@model-name"),
        (suite_text(server.url, ("a",)).replace('"pqa"', '"nowhere"'), "[benchmarks.pubmedqa] data: "),
    ):
        path = _suite(tmp_path, text)
        done = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
        assert not out.exists()
    assert not server.log.received


def test_a_failing_cell_is_recorded_and_the_others_run(server: FaultServer, tmp_path: Path) -> None:
    from tests.conftest import free_port

    text = suite_text(server.url, ("a", "b"), limit=4)
    dead = f"openai:http://127.0.0.1:{free_port()}/v1@fault"  # nothing listens there
    text = text.replace(f'a = "openai:{server.url}@fault"', f'a = "{dead}"')
    path = _suite(tmp_path, text)
    out = tmp_path / "out"
    # the pre-flight refuses the suite, naming the cell, before anything is asked or written
    refused = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert (
        refused.returncode == 2
        and "1 cell would be refused before the first model call: pubmedqa × a: " in (refused.stderr)
    )
    assert not out.exists() and not server.log.received
    done = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--skip-refused")
    assert done.returncode == 3, done.stderr
    assert "1 cells run, 0 already complete, 1 failed" in done.stderr
    assert "failed: pubmedqa × a: " in done.stderr
    cells = _manifest(out)["cells"]
    assert cells["pubmedqa/a"]["status"] == "failed" and "127.0.0.1" in cells["pubmedqa/a"]["error"]
    assert cells["pubmedqa/b"]["status"] == "complete"
    assert len(server.log.received) == 4  # b ran in full


def test_the_report_links_every_benchmark_and_asks_no_model(server: FaultServer, tmp_path: Path) -> None:
    from tests.conftest import free_port

    dead = f"openai:http://127.0.0.1:{free_port()}/v1@fault"  # nothing listens there
    with ExitStack() as stack:
        failing = stack.enter_context(Failing())
        _report_links_every_benchmark(server, failing, dead, tmp_path)


def _report_links_every_benchmark(
    server: FaultServer, failing: FaultServer, dead: str, tmp_path: Path
) -> None:
    text = suite_text(server.url, ("a", "b", "c", "d"), limit=6)
    text = text.replace(f'c = "openai:{server.url}@fault"', f'c = "{dead}"')
    text = text.replace(f'd = "openai:{server.url}@fault"', f'd = "openai:{failing.url}@fault"')
    path = _suite(tmp_path, text)
    out = tmp_path / "out"
    ran = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--skip-refused")
    assert ran.returncode == 3
    asked_before = len(server.log.received) + len(failing.log.received)
    done = run_cli("suite", "report", str(out))
    assert done.returncode == 0, done.stderr
    assert len(server.log.received) + len(failing.log.received) == asked_before  # no model asked
    assert "note: pubmedqa × c is left out: it failed (cannot reach" in done.stdout
    # every call of d failed: complete, but with no score it is left out, never scored 0
    assert "note: pubmedqa × d is left out: none of its items has a score (6 failed)" in done.stdout
    report = out / "report"
    board = json.loads((report / "leaderboard.json").read_text(encoding="utf-8"))
    assert "pubmedqa" in json.dumps(board)
    assert (report / "leaderboard.html").is_file() and (report / "leaderboard.md").is_file()
    assert (report / "pubmedqa" / "report.html").is_file()
    assert (report / "view" / "pubmedqa" / "index.html").is_file()
    page = (report / "leaderboard.html").read_text(encoding="utf-8")
    assert 'href="pubmedqa/report.html"' in page and 'href="view/pubmedqa/index.html"' in page
    own = json.loads((report / "pubmedqa" / "report.json").read_text(encoding="utf-8"))
    assert set(own["models"]) == {"a", "b", "d"} and own["models"]["a"]["scored"] == 6
    assert own["models"]["d"] == {**own["models"]["d"], "accuracy": None, "scored": 0, "failed": 6}
    assert board["benchmarks"][0]["margin"] is None

    # a clinical margin changes the report only: the rerun asks nothing, the pairs get their calls
    path.write_text(text + "margin = 0.05\n", encoding="utf-8")
    first = _manifest(out)["cells"]["pubmedqa/d"]
    assert first["attempts"] == 1 and first["wall_s"] > 0
    # d's server is still up: its calls fail again, so the cell is retried
    before = len(server.log.received)
    ran = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--skip-refused")
    assert ran.returncode == 3
    assert len(server.log.received) == before
    # d's failed items were asked again: its wall time adds this attempt's to the first's
    retried = _manifest(out)["cells"]["pubmedqa/d"]
    assert retried["attempts"] == 2 and retried["wall_s"] > first["wall_s"]
    assert run_cli("suite", "report", str(out)).returncode == 0
    board = json.loads((report / "leaderboard.json").read_text(encoding="utf-8"))
    (bench,) = board["benchmarks"]
    assert bench["margin"] == 0.05 and bench["pairs"]
    assert all(p["margin_call"] in {"equivalent", "a better", "b better", "neither"} for p in bench["pairs"])
    page = (report / "leaderboard.html").read_text(encoding="utf-8")
    assert "Margin ±0.050" in page
    # provenance on the page, not only in suite.json: code, data hashes, each model's fingerprint
    made = {p["what"]: p["value"] for p in board["provenance"]}
    ori = hashlib.sha256((tmp_path / "pqa" / "ori_pqal.json").read_bytes()).hexdigest()
    assert {"what": "pubmedqa data", "value": f"ori_pqal.json: sha256 {ori}"} in board["provenance"]
    assert ori in page
    assert made["clinieval"].startswith(_manifest(out)["code"]["clinieval"])
    assert set(made) >= {"model a", "model b", "model c", "model d", "suite file"}
    assert made["model c"] == "no fingerprint recorded"  # its server never answered
    assert made["model a"] != "no fingerprint recorded" and made["model a"] in html.unescape(page)

    # a suite where nothing finished has nothing to rank: one line, exit 2
    only_dead = _suite(
        tmp_path, suite_text(server.url, ("c",), limit=6).replace(f"openai:{server.url}@fault", dead)
    )
    empty = tmp_path / "empty"
    skipped = run_cli("suite", "run", str(only_dead), "--out", str(empty), "--no-progress", "--skip-refused")
    assert skipped.returncode == 3
    nothing = run_cli("suite", "report", str(empty))
    assert nothing.returncode == 2
    assert (
        nothing.stderr
        == f"error: {empty}: no cell is complete yet, so nothing to rank; run `clinieval suite run` first\n"
    )
    assert not (empty / "report").exists()


def test_the_progress_bar_follows_a_cells_result_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between cell ends the bar counts the lines the cell's runs append (texts.jsonl is not one),
    capped at the cell's planned calls; a finished cell counts its planned calls whole."""
    from clinieval.suite import progress

    monkeypatch.setattr(progress, "POLL_S", 0.02)
    bar = progress.Bar(total_calls=10, done_calls=4)
    cell = tmp_path / "cell" / "arm"
    cell.mkdir(parents=True)
    (cell / "texts.jsonl").write_text("t\n" * 50)
    bar.start("pubmedqa × a", 6, tmp_path / "cell")
    (cell / "samples.jsonl").write_text("r\n" * 2)

    def completed() -> float:
        return float(bar._bar.tasks[0].completed)

    deadline = time.monotonic() + 5
    while completed() != 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert completed() == 4 + 2
    (cell / "samples.jsonl").write_text("r\n" * 40)  # more lines than planned: capped
    deadline = time.monotonic() + 5
    while completed() != 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert completed() == 10
    bar.finish("pubmedqa × a", 6, "complete", 1.0)
    assert completed() == 10
    bar.close()


def test_changed_data_under_finished_cells_is_refused(server: FaultServer, tmp_path: Path) -> None:
    """Complete cells are skipped without being opened, so only the manifest's data hashes can
    tell that the data changed under them; the suite refuses rather than mix old and new."""
    path = _suite(tmp_path, suite_text(server.url, ("a",), limit=3))
    out = tmp_path / "out"
    assert run_cli("suite", "run", str(path), "--out", str(out), "--no-progress").returncode == 0
    ori = tmp_path / "pqa" / "ori_pqal.json"
    ori.write_text(ori.read_text(encoding="utf-8").replace("Outcomes improved.", "Outcomes worsened."))
    asked_before = len(server.log.received)
    done = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        f"error: {path}: [benchmarks.pubmedqa] data file {ori} changed since its cells ran"
    )
    assert "pass --overwrite to run the changed cells again from scratch" in line
    assert len(server.log.received) == asked_before
    again = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert len(server.log.received) == asked_before + 3  # asked again, on the new data
    assert any("Outcomes worsened." in p for p in server.log.received[asked_before:])
