"""A full disk and a read-only run folder (issue 13): one clear error, nothing finished lost.

As root the disk is real: a 400 KiB tmpfs that fills up in the middle of a run, and a run folder
bind-mounted read-only. Without root (or where mounting is refused) the full disk is a write error
injected into the results file — a stand-in, named so in the test id — and the read-only folder
is a folder without write permission.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BIN, missing
from tests.fault_server import FaultServer

N = 120
LONG = "word " * 800  # about 4 KB per answer: 400 KiB fills up after a few dozen


def _items(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(N):
            f.write(json.dumps({"id": f"s{i}", "input": f"question {i}?", "target": "yes"}) + "\n")
    return path


def _reply(prompt: str) -> str:
    return LONG + prompt


def _cmd(data: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [str(BIN / "clinieval"), "run", str(data), "-m", f"openai:{url}@fault", "--out", str(out),
            "--no-progress", *extra]  # fmt: skip


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _records(samples: bytes) -> list[tuple[str, str, str]]:
    """Id, output and scores of every record, sorted: what must not depend on the trouble."""
    out = []
    for line in samples.decode("utf-8").splitlines():
        r = json.loads(line)
        out.append((r["sample_id"], r["output"]["text"], json.dumps(r["scores"], sort_keys=True)))
    return sorted(out)


def _complete_lines(samples: Path) -> bytes:
    data = samples.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def _one_clear_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    for word in words:
        assert word in line, line


def _can_mount() -> bool:
    """Root on Linux with mount allowed (CLINIEVAL_TEST_NO_MOUNT=1 tries the stand-ins instead)."""
    if os.geteuid() != 0 or sys.platform != "linux" or os.environ.get("CLINIEVAL_TEST_NO_MOUNT") == "1":
        return False
    probe = Path("/tmp") / f"clinieval-mount-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        ok = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True
        )
        if ok.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    finally:
        probe.rmdir()


CAN_MOUNT = _can_mount()


def need_mount(why: str) -> None:
    """Go on only where a file system can be mounted: else a skip (the stand-ins run), or a
    failure under CI=true, where the tests run as root with mount (``missing``); asking for the
    stand-ins with CLINIEVAL_TEST_NO_MOUNT=1 is a plain skip."""
    if CAN_MOUNT:
        return
    if os.environ.get("CLINIEVAL_TEST_NO_MOUNT") == "1":
        pytest.skip("CLINIEVAL_TEST_NO_MOUNT=1: the stand-ins run instead")
    missing(f"{why}: needs root and mount (the stand-in test runs instead)")


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` read-only: a read-only bind mount as root, a folder without write permission else."""
    if CAN_MOUNT:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", "-l", str(path)], check=False)
    else:
        modes = {p: p.stat().st_mode for p in (path, *path.rglob("*"))}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    root = tmp_path_factory.mktemp("disk-ref")
    data = _items(root / "items.jsonl")
    with FaultServer(responder=_reply) as server:
        done = _run(_cmd(data, server.url, root / "run"))
        assert done.returncode == 0, done.stderr
    return _records((root / "run" / "samples.jsonl").read_bytes())


def test_a_full_disk_stops_with_one_line_and_the_rerun_resumes(
    tmp_path: Path, reference: list[tuple[str, str, str]]
) -> None:
    need_mount("a real full disk (tmpfs)")
    data = _items(tmp_path / "items.jsonl")
    with _tmpfs(tmp_path / "disk", "400k") as disk, FaultServer(responder=_reply) as server:
        out = disk / "run"
        full = _run(_cmd(data, server.url, out))
        _one_clear_line(full, "cannot write", str(out), "no space left", "run the same command again")
        kept = _complete_lines(out / "samples.jsonl")
        assert 0 < len(kept.splitlines()) < N
        assert json.loads((out / "manifest.json").read_text())["status"] != "complete"
        asked = list(server.log.received)
        subprocess.run(["mount", "-o", "remount,size=16m", str(disk)], check=True)
        done = _run(_cmd(data, server.url, out))
        assert done.returncode == 0, done.stderr
        samples = (out / "samples.jsonl").read_bytes()
        resent = server.log.received[len(asked) :]
    assert samples.startswith(kept), "a record finished before the disk filled up was changed"
    finished = {r[0] for r in _records(kept)}
    assert not {f"s{p.split()[1].rstrip('?')}" for p in resent} & finished, "a finished item was asked again"
    assert _records(samples) == reference


@pytest.mark.skipif(CAN_MOUNT, reason="the real full disk above runs instead")
def test_a_full_disk_stand_in_injected_write_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in for a full disk where no file system can be mounted: the 6th results line fails
    with ENOSPC, as a full disk would, inside the real command (in process, through ``main``)."""
    from clinieval.cli import main
    from clinieval.records import run_writer

    data = _items(tmp_path / "items.jsonl")
    real = run_writer._write
    calls = {"n": 0}

    def failing(f, lines):  # type: ignore[no-untyped-def]
        if not f.name.endswith("samples.jsonl"):
            return real(f, lines)
        for line in list(lines):  # a batch may hold several lines: the 6th one fails
            calls["n"] += 1
            if calls["n"] == 6:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real(f, [line])
        lines.clear()

    with FaultServer(responder=_reply) as server:
        out = tmp_path / "run"
        monkeypatch.setattr(run_writer, "_write", failing)
        monkeypatch.setattr(sys, "argv", _cmd(data, server.url, out, "--concurrency", "1"))
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 2
        kept = _complete_lines(out / "samples.jsonl")
        assert len(kept.splitlines()) == 5
        monkeypatch.setattr(run_writer, "_write", real)
        done = _run(_cmd(data, server.url, out))
        assert done.returncode == 0, done.stderr
    assert (out / "samples.jsonl").read_bytes().startswith(kept)


def test_a_read_only_run_folder_is_one_clear_error_and_stays_as_it_was(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # file permissions do not stop root: only a read-only mount does
        need_mount("a read-only run folder as root")
    data = _items(tmp_path / "items.jsonl")
    out = tmp_path / "run"
    with FaultServer(responder=_reply) as server:
        first = _run(_cmd(data, server.url, out, "--limit", "5"))
        assert first.returncode == 0, first.stderr
        before = _snapshot(out)
        with _read_only(out):
            more = _run(_cmd(data, server.url, out))
            after = _snapshot(out)
            shown = _run([str(BIN / "clinieval"), "summary", str(out)])
        reason = "read-only" if CAN_MOUNT else "permission denied"
        _one_clear_line(more, "cannot write", str(out), reason)
        assert after == before
        assert shown.returncode == 0, shown.stderr  # reading a read-only run still works
        asked = len(server.log.received)
        done = _run(_cmd(data, server.url, out))
        assert done.returncode == 0, done.stderr
        assert len(server.log.received) - asked == N - 5
    assert (out / "samples.jsonl").read_bytes().startswith(before["samples.jsonl"])


def test_the_request_cache_reports_a_read_only_disk_as_a_file_would(tmp_path: Path) -> None:
    """SQLite says "attempt to write a readonly database"; the cache turns it into the OSError a
    plain write gives, with its path, so the command line prints the same one line for it."""
    need_mount("a read-only file system")
    from clinieval.errors import storage_message
    from clinieval.records.cache import RequestCache

    folder = tmp_path / "run"
    folder.mkdir()
    RequestCache(folder / "cache.sqlite").close()
    with _read_only(folder), pytest.raises(OSError) as refused:
        cache = RequestCache(folder / "cache.sqlite")
        cache.put("k", "generate", {"text": "x"})
    assert refused.value.errno in (errno.EROFS, errno.EACCES)
    assert refused.value.filename == str(folder / "cache.sqlite")
    message = storage_message(refused.value)
    assert message is not None and message.startswith(f"cannot write {folder / 'cache.sqlite'}: ")
    assert storage_message(OSError(errno.ENOENT, "No such file", "x")) is None  # not disk trouble
