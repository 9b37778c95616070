"""A suite killed with ``kill -9`` at seeded moments resumes as a whole (issue 29, item 4).

The real ``clinieval suite run`` (two models x PubMedQA against a counting server on 127.0.0.1)
is killed at moments drawn from a seeded generator, as tests/kill_loop.py does for a single run,
and started again each time; then it runs to the end. After every kill, what the dead process
had recorded (each cell's complete result lines) is read, and the requests sent after it are
checked: an item already recorded in both cells is never asked again, and one recorded in one
cell is asked at most once more (for the other). At the end every item is recorded once per
model, every cell is complete in suite.json, and the requests re-sent are bounded by what can be
in flight at a kill (kills x concurrency): an answer the server sent but the killed process had
not yet written is the only thing a kill may cost. About 20 s on 2 cores.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from tests.conftest import BIN
from tests.fault_server import FaultServer
from tests.kill_loop import kill_loop
from tests.suite_helpers import asked, item_of, pubmedqa_folder, reply, suite_text

KILLS = 5
CONCURRENCY = 2
ITEMS = 36


def _recorded(out: Path) -> Counter[str]:
    """In how many cells each item has a complete result line."""
    seen: Counter[str] = Counter()
    for samples in out.glob("pubmedqa/*/samples.jsonl"):
        text = samples.read_text(encoding="utf-8")
        complete = text.split("\n")[:-1]  # a torn last line is not a record
        seen.update({json.loads(line)["sample_id"] for line in complete})
    return seen


def _settled(server: FaultServer, out: Path) -> tuple[int, Counter[str]]:
    """Where the server's log stands after a kill, and what the dead process recorded. A request
    the process wrote just before it died may reach the server's log a moment later; waiting
    first puts it before the mark, so it is not taken for a request of the next start."""
    time.sleep(0.3)
    return len(server.log.received), _recorded(out)


def test_a_suite_killed_at_seeded_moments_finishes_without_asking_again(tmp_path: Path) -> None:
    pubmedqa_folder(tmp_path / "pqa", n=ITEMS)
    path = tmp_path / "suite.toml"
    path.write_text(suite_text("URL", ("a", "b"), limit=ITEMS), encoding="utf-8")
    out = tmp_path / "out"
    marks: list[tuple[int, Counter[str]]] = []
    with FaultServer(responder=reply, delay_s=0.05) as server:
        path.write_text(suite_text(server.url, ("a", "b"), limit=ITEMS), encoding="utf-8")
        cmd = [str(BIN / "clinieval"), "suite", "run", str(path), "--out", str(out), "--no-progress"]
        loop = kill_loop(
            cmd,
            server,
            kills=KILLS,
            seed=29,
            log=tmp_path / "stderr.log",
            after_request=(0.0, 0.5),
            startup=(0.3, 2.0),
            after_kill=lambda: marks.append(_settled(server, out)),
        )
        sent = list(server.log.received)
    stderr = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert loop.kills == KILLS, [a.moment for a in loop.attempts]
    assert loop.final.returncode == 0, stderr
    assert loop.kills_among_requests >= 2, [a.moment for a in loop.attempts]

    for mark, recorded in marks:
        later = Counter(item_of(p) for p in sent[mark:])
        for item, cells_done in recorded.items():
            assert later[item] <= 2 - cells_done, (
                f"item {item} recorded in {cells_done} cells was asked again"
            )
    assert _recorded(out) == Counter({str(1000 + i): 2 for i in range(ITEMS)})
    needed = 2 * ITEMS
    assert set(asked(sent)) == {str(1000 + i) for i in range(ITEMS)}
    assert needed <= len(sent) <= needed + loop.kills * CONCURRENCY
    cells = json.loads((out / "suite.json").read_text(encoding="utf-8"))["cells"]
    assert {k: c["status"] for k, c in cells.items()} == {"pubmedqa/a": "complete", "pubmedqa/b": "complete"}
    print(
        f"\n[suite kill loop] {loop.kills} kills ({loop.kills_among_requests} with requests in flight), "
        f"{len(loop.attempts)} starts, {len(sent)} requests for {needed} needed"
    )
