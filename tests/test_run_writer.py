"""The batched results writer and the once-per-run text store (issue 17): what is written, when,
in which order, and that every record reads back exactly as it was."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest

from clinieval.errors import UserError
from clinieval.records.record_codec import MIN_SHARED, TextTable, text_id
from clinieval.records.run_writer import RunWriter
from clinieval.records.runs import RunDir
from clinieval.records.sample_record import SampleRecord
from clinieval.types import Message, ModelOutput, Sample
from tests.conftest import run_cli
from tests.fault_server import FaultServer

LONG = "The patient was admitted with chest pain. " * 40  # well over MIN_SHARED
NOTE = "DISCHARGE SUMMARY. " * 60


def record(
    sid: str = "a", repeat: int = 0, *, context: str = NOTE, question: str = "Which drug?"
) -> SampleRecord:
    sample = Sample(id=sid, input=question, context=context, target="x", metadata={"k": 1})
    prompt = f"Read the record.\n\n{context}\n\nQuestion: {question}\nAnswer:"
    return SampleRecord(
        sample, repeat, [Message("system", "You are careful."), Message("user", prompt)], {"policy": "full"},
        output=ModelOutput(text="metoprolol", prompt_tokens=3),
    )  # fmt: skip


def roundtrip(table: TextTable, rec: SampleRecord) -> tuple[SampleRecord, dict, list[tuple[str, str]]]:  # type: ignore[type-arg]
    encoded, new = table.encode(rec.to_dict())
    line = json.loads(json.dumps(encoded))
    return SampleRecord.from_dict(table.decode(json.loads(json.dumps(line)))), line, new


def test_a_record_reads_back_exactly_and_its_context_is_stored_once() -> None:
    table = TextTable()
    rec = record()
    back, line, new = roundtrip(table, rec)
    assert back.to_dict() == rec.to_dict()
    assert new == [(text_id(NOTE), NOTE)]  # the context once; the prompt refers to it
    assert line["sample"]["context"] == {"$text": text_id(NOTE)}
    before, ref, after = line["messages"][1]["content"]["$join"]
    assert (
        ref == {"$text": text_id(NOTE)}
        and before == "Read the record.\n\n"
        and after.startswith("\n\nQuestion")
    )
    assert line["messages"][0]["content"] == "You are careful."  # short texts stay inline
    assert line["sample"]["input"] == "Which drug?"
    # the same record again (a repeat) adds no text at all
    again, _, new_again = roundtrip(table, record(repeat=1))
    assert new_again == [] and again.messages == rec.messages


def test_a_long_prompt_without_the_record_in_it_is_stored_once_too() -> None:
    table = TextTable()
    rec = record(context="")
    rec.messages = [Message("user", LONG)]
    _, line, new = roundtrip(table, rec)
    assert line["messages"][0]["content"] == {"$text": text_id(LONG)} and new == [(text_id(LONG), LONG)]
    assert roundtrip(table, rec)[2] == []


def test_texts_just_under_the_threshold_stay_inline() -> None:
    short = "y" * (MIN_SHARED - 1)
    rec = record(context=short)
    _, line, new = roundtrip(TextTable(), rec)
    assert line["sample"]["context"] == short
    # the prompt around it is over the threshold: stored whole, as the only new text
    assert new == [(text_id(rec.messages[1].content), rec.messages[1].content)]


def _run_dir(tmp_path: Path) -> RunDir:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "manifest.json").write_text("{}")
    return RunDir(tmp_path)


def test_a_line_written_before_texts_existed_still_reads(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    rec = record()
    run.samples_path.write_text(json.dumps(rec.to_dict()) + "\n")
    assert [r.to_dict() for r in run.iter_records()] == [rec.to_dict()]


def test_a_record_whose_text_is_missing_is_one_clear_error(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    encoded, _ = TextTable().encode(record().to_dict())
    run.samples_path.write_text(json.dumps(encoded) + "\n")
    with pytest.raises(UserError, match=r"samples.jsonl:1: refers to text .* missing from texts.jsonl"):
        list(run.iter_records())


def test_a_worker_moves_on_only_once_its_record_is_on_disk(tmp_path: Path) -> None:
    """The durability promise: when ``write`` returns, the record and the answers queued before
    it are written, so a kill loses only what workers are still busy with."""
    run = _run_dir(tmp_path)

    async def go() -> None:
        cache = run.cache()
        writer = RunWriter(run, cache)
        writer.put("k1", "generate", {"text": "x"})
        await writer.write(record())
        assert run.samples_path.read_text().count("\n") == 1
        other = sqlite3.connect(run.path / "cache.sqlite")  # another reader sees the commit
        assert other.execute("SELECT COUNT(*) FROM requests").fetchone() == (1,)
        other.close()
        writer.close()
        cache.close()

    asyncio.run(go())
    assert [r.messages for r in run.iter_records()] == [record().messages]


def test_records_finished_together_share_one_commit(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)

    async def go() -> int:
        cache = run.cache()
        writer = RunWriter(run, cache)
        await asyncio.gather(*(writer.write(record(sid=f"s{i}")) for i in range(8)))
        commits = writer.commits
        writer.close()
        cache.close()
        return commits

    assert asyncio.run(go()) == 1
    assert run.samples_path.read_text().count("\n") == 8
    # texts are written before the records that refer to them, and once
    texts = [json.loads(line) for line in run.texts_path.read_text().splitlines()]
    assert [t["id"] for t in texts] == [text_id(NOTE)]


def test_pending_answers_are_served_before_they_are_written(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)

    async def go() -> None:
        cache = run.cache()
        writer = RunWriter(run, cache)
        writer.put("k", "generate", {"text": "y"})
        assert writer.get("k") == {"text": "y"} and writer.hits == 1
        assert writer.get("other") is None
        writer.close()
        cache.close()

    asyncio.run(go())


def test_a_failed_write_fails_every_waiting_worker_and_then_stops_the_run(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)

    async def go() -> None:
        cache = run.cache()
        writer = RunWriter(run, cache)
        real = writer._records.write

        def full(data: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        writer._records.write = full  # type: ignore[method-assign]
        try:
            results = await asyncio.gather(
                writer.write(record()), writer.write(record(sid="b")), return_exceptions=True
            )
            assert all(isinstance(r, OSError) and str(run.samples_path) in str(r) for r in results)
            with pytest.raises(OSError, match="No space left"):
                await writer.write(record(sid="c"))  # nothing more is queued after a failure
        finally:
            writer._records.write = real  # type: ignore[method-assign]
            writer.abandon()
            cache.close()

    asyncio.run(go())
    assert run.samples_path.read_text() == ""


def test_a_run_over_long_records_writes_each_text_once_and_reads_back_whole(tmp_path: Path) -> None:
    contexts = [f"Record {i}. " + NOTE for i in range(3)]
    rows = [{"id": f"q{i}", "input": f"Question {i}? " + contexts[i], "target": "yes"} for i in range(3)]
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    with FaultServer(answer="yes") as server:
        done = run_cli("run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out),
                       "--repeats", "3", "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    texts = [json.loads(line) for line in (out / "texts.jsonl").read_text().splitlines()]
    assert sorted(t["text"] for t in texts) == sorted(r["input"] for r in rows)  # once each, 9 records
    records = RunDir(out).records()
    assert len(records) == 9
    for r in records:
        source = next(row for row in rows if row["id"] == r.sample.id)
        assert r.sample.input == source["input"] and source["input"] in r.messages[-1].content
    raw = (out / "samples.jsonl").stat().st_size + (out / "texts.jsonl").stat().st_size
    assert raw < 9 * len(rows[0]["input"])  # the old layout held each input twice per record
    summary = run_cli("summary", str(out))
    assert summary.returncode == 0 and "exact_match" in summary.stdout


def test_an_answer_written_earlier_in_a_fresh_run_is_still_found(tmp_path: Path) -> None:
    """A fresh run skips SQLite reads, but not for keys it has itself written (two samples with
    the same prompt share one request)."""
    run = _run_dir(tmp_path)

    async def go() -> None:
        cache = run.cache()
        writer = RunWriter(run, cache)
        writer.put("k", "generate", {"text": "z"})
        writer.flush()
        assert writer.get("k") == {"text": "z"} and writer.hits == 1
        writer.close()
        cache.close()

    asyncio.run(go())


def test_the_records_a_run_holds_stay_out_of_its_stats_repr() -> None:
    """asyncio.run (3.11) formats its main task's result when it ends: a repr holding every
    record cost a second per 10,000 items at the end of each run."""
    from clinieval.engine.runner import RunStats

    stats = RunStats(1, 0, 1, 0, 0, 1, 0.1, records=[record()] * 1000)
    assert "records" not in repr(stats) and len(repr(stats)) < 300


def test_after_a_refused_write_closing_reports_the_named_error_not_a_second_nameless_one(
    tmp_path: Path,
) -> None:
    """A file object can keep part of a refused write in its buffer and raise again, without a
    file name, when closed; CI's full-disk test then printed "cannot write a file"."""
    run = _run_dir(tmp_path)

    class Refusing:
        name = str(run.samples_path)

        def write(self, data: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self) -> None: ...

        def close(self) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # no file name

    async def go() -> None:
        cache = run.cache()
        writer = RunWriter(run, cache)
        writer._records.close()
        writer._records = Refusing()  # type: ignore[assignment]
        try:
            with pytest.raises(OSError) as first:
                await writer.write(record())
            with pytest.raises(OSError) as closing:
                writer.close()
            assert str(run.samples_path) in str(first.value) and closing.value is first.value
        finally:
            cache.close()

    asyncio.run(go())
