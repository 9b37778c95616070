"""The check before a run, against answers that are not what they seem (tests/shape_server.py):
the first request tells "could not connect" from "answered, but not valid HTTP" from "answered,
and refused", so a user fixes the right thing. Every answer shape of the issue-28 table during a
run is in tests/test_transport_matrix.py (one run over all of them, and a rerun)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import free_port, run_cli
from tests.shape_server import MODEL, ShapeServer


def items(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "items.jsonl"
    rows = (json.dumps({"id": f"i{k}", "input": f"q {k}", "target": "yes"}) for k in range(n))
    path.write_text("".join(row + "\n" for row in rows))
    return path


def run(url: str, tmp_path: Path) -> tuple[int, str]:
    """Exit code and the last line of stderr of a run that should stop before its first item."""
    proc = run_cli(
        "run", str(items(tmp_path, 2)), "-m", f"openai:{url}@{MODEL}", "--out", str(tmp_path / "run")
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing left behind
    return proc.returncode, proc.stderr.strip().splitlines()[-1]


def test_a_garbled_first_answer_is_not_called_unreachable(tmp_path: Path) -> None:
    """``/models`` answered with Content-Length headers that disagree once read "cannot reach ...:
    is the server running and is the URL right?"."""
    with ShapeServer(models_shape="two_lengths") as server:
        code, line = run(server.url, tmp_path)
    assert code == 2
    assert f"{server.url} answered, but not a valid HTTP answer from 127.0.0.1:{server.port}: " in line
    assert "Content-Length headers that disagree" in line and "cannot reach" not in line


def test_a_request_the_server_refuses_stops_the_command_with_its_words(tmp_path: Path) -> None:
    """An Azure-style URL without ``?api-version`` (or http:// sent to a TLS port) is answered
    with a 400 on every route: once "every model call failed (bad_request=N)", reason hidden in
    samples.jsonl; now one line at the start, quoting the server."""
    with ShapeServer(models_shape="refused", plain_shape="refused") as server:
        code, line = run(server.url, tmp_path)
    assert code == 2
    assert (
        f"{server.url}: the server refuses requests (HTTP 400 on POST /chat/completions: "
        "'Missing required query parameter: api-version'; HTTP 400 on GET /models: "
        "'Missing required query parameter: api-version')"
    ) in line
    assert "?api-version=" in line
    assert dict(server.asked) == {"refused": 1}  # the one probe, no item


def test_nothing_listening_is_could_not_connect(tmp_path: Path) -> None:
    port = free_port()
    code, line = run(f"http://127.0.0.1:{port}/v1", tmp_path)
    assert code == 2
    assert line.endswith(
        f"cannot reach http://127.0.0.1:{port}/v1: cannot connect to 127.0.0.1:{port}: Connection refused; "
        "is the server running and is the URL right?"
    )


def test_bad_transport_settings_are_one_line_each_and_leave_nothing(tmp_path: Path) -> None:
    """A CA bundle that is missing or not PEM, and a proxy clinieval cannot speak to, are refused
    before any request, naming the option or variable; nothing is written."""
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    data, out = items(tmp_path, 1), tmp_path / "run"
    base = ("run", str(data), "-m", f"openai:http://127.0.0.1:{free_port()}/v1@{MODEL}", "--out", str(out))
    cases = [
        (str(tmp_path / "nope.pem"), f"--ca-bundle {tmp_path / 'nope.pem'}: no such file"),
        (str(not_pem), f"--ca-bundle {not_pem}: cannot be read as PEM CA certificates"),
    ]
    for bundle, expected in cases:
        proc = run_cli(*base, "--ca-bundle", bundle)
        assert proc.returncode == 2 and expected in proc.stderr.strip().splitlines()[-1], proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()
    # an allowlisted non-loopback endpoint (never reached: the proxy setting is refused first)
    far = ("run", str(data), "-m", f"openai:https://10.77.0.1:8443/v1@{MODEL}", "--allow-host", "10.77.0.1")
    proc = run_cli(*far, "--out", str(out), env={"HTTPS_PROXY": "socks5://proxy:1080"})
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "HTTPS_PROXY='socks5://proxy:1080': clinieval reaches endpoints" in line
    assert "--no-proxy" in line and not out.exists()
