"""The transport matrix against real servers: every row through the real ``clinieval run``.

A hospital serves its models behind what it already runs: a TLS gateway with its own CA that
compresses answers (Debian's nginx, ``gzip on``), an Azure-style deployment URL that wants an
``api-key`` and an ``api-version``, and a forward proxy between the evaluation machine and the
gateway (Debian's tinyproxy). Each row here starts those real servers in front of the real
embedded model (``llama_cpp.server``, the ``llama_server`` fixture), runs the command a user
types, and checks its outcome (exit code), the error kind or message, and, for a row that
worked, that its answers are the model's own (the same texts as straight from
``llama_cpp.server``) and that running it again asks nothing already recorded.

The proxy rows need an endpoint that is not loopback (loopback is never proxied) and must not
send traffic off the machine, so they run in one network namespace (tests/transport_namespace.py)
and report back; the rest run here on 127.0.0.1. The servers are in tests/real_servers.py. The
table's malformed and unusual answers (two Content-Lengths, a body cut short, a 70 KiB head, bare
``\\n``, deflate, silence) come byte for byte from a raw socket server (tests/shape_server.py),
since nginx never sends them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, in_loopback_namespace
from tests.real_servers import API_KEY, Gateway, start_gateway
from tests.shape_server import MODEL as SHAPES_MODEL
from tests.shape_server import ShapeServer, answer_text
from tests.transport_namespace import FAR_PROXY, FAR_PROXY_PORT, HOST, clean_env, cli, outcome

pytestmark = pytest.mark.slow

QUESTIONS = {"t1": "What is 2+2?", "t2": "Name a color.", "t3": "Is water wet? Answer yes or no."}


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("matrix") / "items.jsonl"
    path.write_text(
        "".join(json.dumps({"id": k, "input": q, "target": "x"}) + "\n" for k, q in QUESTIONS.items())
    )
    return path


@pytest.fixture(scope="module")
def gateway(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """Debian's nginx, TLS and ``gzip on``, in front of the session's real ``llama_cpp.server``."""
    started = start_gateway(tmp_path_factory.mktemp("gateway"), llama_server)
    try:
        yield started
    finally:
        started.nginx.stop()


@pytest.fixture(scope="module")
def reference(llama_server: str, items: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the model answers straight from ``llama_cpp.server`` (no gateway): item id -> text.

    Asked twice, and the second answers kept: the first leaves the server's cache as every
    later row finds it (the last question asked), whatever other tests asked before.
    """
    folder = tmp_path_factory.mktemp("reference")
    succeeded(outcome(cli(items, folder / "warm", llama_server), clean_env(), folder / "warm"))
    out = folder / "run"
    result = outcome(cli(items, out, llama_server), clean_env(), out)
    succeeded(result)
    return {k: v[0] for k, v in result["records"].items()}


def succeeded(result: dict[str, Any], new: int = len(QUESTIONS)) -> None:
    """Exit 0, ``new`` items asked, every record an answer (no error kind)."""
    assert result["rc"] == 0, result["stdout"] + result["stderr"]
    assert f"{new} new, {len(QUESTIONS) - new} resumed of {len(QUESTIONS)}" in result["stdout"], result[
        "stdout"
    ]
    assert sorted(result["records"]) == sorted(QUESTIONS)
    assert all(kind is None for _, kind, _ in result["records"].values()), result["records"]


def texts(result: dict[str, Any]) -> dict[str, str]:
    return {k: v[0] for k, v in result["records"].items()}


def one_error(result: dict[str, Any], *needles: str) -> str:
    """Exit 2 with one ``error:`` line holding every needle, and no run folder left behind."""
    assert result["rc"] == 2, result["stdout"] + result["stderr"]
    lines = [x for x in result["stderr"].splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result["stderr"]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not result["out_exists"], "a run that could not start left a run folder"
    return lines[0]


# --- TLS with gzip, on 127.0.0.1 ------------------------------------------------------------------


def test_tls_gateway_with_gzip_and_ca_bundle(
    gateway: Gateway, items: Path, reference: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    cmd = cli(items, out, gateway.url, "--ca-bundle", str(gateway.certs.ca))
    before = len(gateway.nginx.lines())
    first = outcome(cmd, clean_env(), out)
    succeeded(first)
    assert texts(first) == reference
    chats = [x for x in gateway.nginx.lines()[before:] if "/chat/completions" in x]
    assert len(chats) == len(QUESTIONS) and all(x.endswith('200 "gzip"') for x in chats), chats

    asked = gateway.nginx.asked()
    again = outcome(cmd, clean_env(), out)
    succeeded(again, new=0)
    assert gateway.nginx.asked() == asked, "a recorded item was asked again"
    assert texts(again) == reference


def test_tls_gateway_trusted_through_ssl_cert_file(
    gateway: Gateway, items: Path, reference: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = outcome(cli(items, out, gateway.url), clean_env(SSL_CERT_FILE=str(gateway.certs.ca)), out)
    succeeded(result)
    assert texts(result) == reference


def test_tls_gateway_without_its_ca_is_one_clear_error(gateway: Gateway, items: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    asked = gateway.nginx.asked()
    result = outcome(cli(items, out, gateway.url), clean_env(), out)
    one_error(result, "certificate", "--ca-bundle", f"127.0.0.1:{gateway.port}")
    assert gateway.nginx.asked() == asked


# --- Azure-style deployment URL ---------------------------------------------------------------------


def test_azure_style_deployment_with_api_key(
    gateway: Gateway, items: Path, reference: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    cmd = cli(items, out, gateway.azure_url, "--ca-bundle", str(gateway.certs.ca))
    env = clean_env(CLINIEVAL_API_KEY=API_KEY)
    before = len(gateway.nginx.lines())
    first = outcome(cmd, env, out)
    succeeded(first)
    assert texts(first) == reference
    chats = [x for x in gateway.nginx.lines()[before:] if "/chat/completions" in x]
    assert chats == ['POST /openai/deployments/smol/chat/completions 200 "gzip"'] * len(QUESTIONS)

    asked = gateway.nginx.asked()
    again = outcome(cmd, env, out)
    succeeded(again, new=0)
    assert gateway.nginx.asked() == asked


@pytest.mark.parametrize("key", [None, "not-the-key"])
def test_azure_style_deployment_refuses_a_missing_or_wrong_key(
    gateway: Gateway, items: Path, tmp_path: Path, key: str | None
) -> None:
    out = tmp_path / "run"
    env = clean_env() if key is None else clean_env(CLINIEVAL_API_KEY=key)
    result = outcome(cli(items, out, gateway.azure_url, "--ca-bundle", str(gateway.certs.ca)), env, out)
    one_error(result, "refused the credentials (HTTP 403)", "CLINIEVAL_API_KEY")


# --- through a forward proxy, in a network namespace ------------------------------------------------


@pytest.fixture(scope="module")
def proxied(gateway: Gateway, items: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every proxy row, run once in one network namespace (see tests/transport_namespace.py)."""
    folder = tmp_path_factory.mktemp("proxied")
    config = {
        "ca": str(gateway.certs.ca),
        "cert": str(gateway.certs.cert),
        "key": str(gateway.certs.key),
        "model_socket": str(gateway.model_socket),
        "items": str(items),
    }
    (folder / "config.json").write_text(json.dumps(config))
    report: dict[str, Any] = in_loopback_namespace(
        "tests.transport_namespace",
        str(folder),
        report=folder,
        setup=f"ip addr add {HOST}/32 dev lo && ip addr add {FAR_PROXY}/32 dev lo",
        timeout=400,
    )
    return report


def test_https_through_the_proxy_uses_connect_and_reruns_ask_nothing(
    proxied: dict[str, Any], reference: dict[str, str]
) -> None:
    first = proxied["connect"]
    succeeded(first)
    assert texts(first) == reference
    assert first["nginx_asked"] == len(QUESTIONS)
    assert first["proxy"] and set(first["proxy"]) == {f"CONNECT {HOST}:8443 HTTP/1.1"}, first["proxy"]
    assert first["proxies"] == [
        {"endpoint": f"https://{HOST}:8443/v1", "proxy": "http://127.0.0.1:3128", "source": "HTTPS_PROXY",
         "via": "connect"}
    ]  # fmt: skip
    chats = [x for x in first["nginx_lines"] if "/chat/completions" in x]
    assert chats and all(x.endswith('200 "gzip"') for x in chats), chats
    again = proxied["connect_again"]
    succeeded(again, new=0)
    assert again["nginx_asked"] == 0, "a recorded item was asked again"


def test_a_proxy_that_is_down_fails_the_run(proxied: dict[str, Any]) -> None:
    """Proves the proxy is really used: the same row with nothing at the proxy's address fails."""
    result = proxied["proxy_down"]
    one_error(result, "cannot connect to the proxy 127.0.0.1:3130")
    assert result["nginx_asked"] == 0


@pytest.mark.parametrize("row", ["no_proxy_env", "no_proxy_flag", "loopback_direct"])
def test_no_proxy_and_loopback_go_direct(
    proxied: dict[str, Any], reference: dict[str, str], row: str
) -> None:
    result = proxied[row]
    succeeded(result)
    assert texts(result) == reference
    assert result["nginx_asked"] == len(QUESTIONS)
    assert result["proxy"] == [], f"{row} went through the proxy: {result['proxy']}"


def test_http_through_the_proxy_uses_absolute_form(
    proxied: dict[str, Any], reference: dict[str, str]
) -> None:
    result = proxied["absolute_form"]
    succeeded(result)
    assert texts(result) == reference
    posts = [x for x in result["proxy"] if x.startswith("POST ")]
    assert posts == [f"POST http://{HOST}:8080/v1/chat/completions HTTP/1.1"] * len(QUESTIONS), result[
        "proxy"
    ]
    assert not any(x.startswith("CONNECT") for x in result["proxy"])
    # a loopback proxy needs no allowlisting; the manifest says the requests went through it
    assert result["proxies"] == [
        {"endpoint": f"http://{HOST}:8080/v1", "proxy": "http://127.0.0.1:3128", "source": "http_proxy",
         "via": "forward"}
    ]  # fmt: skip


def test_a_proxy_refusing_connect_is_named_with_its_status(proxied: dict[str, Any]) -> None:
    line = one_error(proxied["connect_refused"], "the proxy 127.0.0.1:3128 refused to connect to", "403")
    assert f"{HOST}:8444" in line
    assert proxied["connect_refused"]["proxy"] == [f"CONNECT {HOST}:8444 HTTP/1.1"]


def test_the_egress_guard_decides_before_any_proxy(proxied: dict[str, Any]) -> None:
    result = proxied["not_allowlisted"]
    one_error(result, "not loopback", f"--allow-host {HOST}")
    assert result["proxy"] == [] and result["nginx_asked"] == 0


def test_proxy_credentials_from_the_proxy_url(proxied: dict[str, Any], reference: dict[str, str]) -> None:
    result = proxied["proxy_auth"]
    succeeded(result)
    assert texts(result) == reference
    assert set(result["auth_proxy"]) == {f"CONNECT {HOST}:8443 HTTP/1.1"}, result["auth_proxy"]
    wrong = proxied["proxy_auth_wrong"]
    # tinyproxy answers a CONNECT with bad credentials 401 (RFC 9110 says 407): the status is passed on
    line = one_error(wrong, "the proxy 127.0.0.1:3129 refused to connect to", "HTTP 401")
    assert "s3cret" not in line and ":wrong@" not in line, "the proxy password was printed"


def test_a_plain_http_endpoint_through_a_proxy_nobody_allowed_is_refused(proxied: dict[str, Any]) -> None:
    """Over http the proxy reads every prompt: a proxy that is neither loopback nor allowlisted
    is refused before anything is sent (issue 35: it used to get all the prompts, exit 0)."""
    result = proxied["forward_unopened"]
    line = one_error(
        result,
        f"through the proxy {FAR_PROXY}:{FAR_PROXY_PORT} (from HTTP_PROXY)",
        "neither loopback nor allowlisted",
        f"--allow-host {FAR_PROXY}",
        "--no-proxy",
    )
    assert "s3cret" not in line and "clinician" not in line, "the proxy's credentials were printed"
    assert result["far_proxy"] == [] and result["nginx_asked"] == 0


def test_the_same_proxy_allowlisted_carries_the_run_and_is_recorded(
    proxied: dict[str, Any], reference: dict[str, str]
) -> None:
    result = proxied["forward_opened"]
    succeeded(result)
    assert texts(result) == reference
    posts = [x for x in result["far_proxy"] if x.startswith("POST ")]
    assert posts == [f"POST http://{HOST}:8080/v1/chat/completions HTTP/1.1"] * len(QUESTIONS), result[
        "far_proxy"
    ]
    assert result["proxies"] == [
        {"endpoint": f"http://{HOST}:8080/v1", "proxy": f"http://{FAR_PROXY}:{FAR_PROXY_PORT}",
         "source": "HTTP_PROXY", "via": "forward"}
    ]  # fmt: skip


def test_connect_through_a_proxy_nobody_allowed_is_unchanged(
    proxied: dict[str, Any], reference: dict[str, str]
) -> None:
    """Through CONNECT the proxy sees the endpoint's host and port, then TLS: the allowlisted https
    endpoint is what counts, as before."""
    result = proxied["connect_unopened"]
    succeeded(result)
    assert texts(result) == reference
    assert result["far_proxy"] and set(result["far_proxy"]) == {f"CONNECT {HOST}:8443 HTTP/1.1"}
    assert [p["via"] for p in result["proxies"]] == ["connect"]


def test_no_row_leaks_the_api_key_or_patient_text(proxied: dict[str, Any]) -> None:
    for name, row in proxied.items():
        said = row["stdout"] + row["stderr"]
        assert API_KEY not in said, name
        assert not any(q in said for q in QUESTIONS.values()), name
        assert "s3cret" not in json.dumps(row["proxies"]), f"{name}: a proxy password in the manifest"


# --- the table's answer shapes, from a raw socket server ---------------------------------------------

WELL_FORMED = ("plain", "gzip", "deflate", "bare_lf", "chunked_ext", "http10", "continue_first")
INVALID = ("two_lengths", "huge_head", "brotli")
FAILING = (*INVALID, "short_body", "hang")


def test_answer_shapes_of_the_table(tmp_path: Path) -> None:
    """Compressed and bare-``\\n`` answers are read; invalid ones are recorded as the server's
    fault naming what was wrong, a body cut short as a lost connection; a silent server times out
    saying what was awaited. On a rerun, only the failed items are asked again."""
    shapes = [*WELL_FORMED, *FAILING]
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(json.dumps({"id": s, "input": f"SHAPE:{s}", "target": "x"}) + "\n" for s in shapes)
    )
    out = tmp_path / "run"
    with ShapeServer() as server:
        cmd = cli(items, out, server.url, "--timeout", "2", model=SHAPES_MODEL)
        first = outcome(cmd, clean_env(), out)
        asked_first = dict(server.asked)
        again = outcome(cmd, clean_env(), out)
        asked_again = {
            k: v - asked_first.get(k, 0) for k, v in server.asked.items() if v > asked_first.get(k, 0)
        }
    host = f"127.0.0.1:{server.port}"
    assert first["rc"] == 3, first["stdout"] + first["stderr"]  # finished, but items failed
    records = first["records"]
    for shape in WELL_FORMED:
        assert records[shape] == [answer_text(shape), None, None], (shape, records[shape])
    for shape in INVALID:
        _, kind, message = records[shape]
        assert kind == "server_error", (shape, records[shape])
        assert f"not a valid HTTP answer from {host}" in message, (shape, message)
        assert "cannot reach" not in message and "is the server running" not in message, (shape, message)
    # a body cut short by a closed connection is a lost connection (retried, as the fault matrix's
    # CUT row), named as such with what was missing; not "cannot reach"
    _, kind, message = records["short_body"]
    assert kind == "connection" and host in message and "Content-Length" in message, records["short_body"]
    assert "cannot reach" not in message and "is the server running" not in message, message
    _, kind, message = records["hang"]
    assert kind == "timeout" and "timed out after 2 s waiting for" in message, records["hang"]
    assert asked_first == dict.fromkeys(shapes, 1)
    # the rerun asks the failed items again (a failure is never kept as an answer), nothing else
    assert again["rc"] == 3, again["stdout"] + again["stderr"]
    assert asked_again == dict.fromkeys(FAILING, 1), asked_again
    assert all(again["records"][s][0] == answer_text(s) for s in WELL_FORMED)


def test_nothing_listening_is_a_connect_error(items: Path, tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "run"
    result = outcome(cli(items, out, f"http://127.0.0.1:{port}/v1"), clean_env(), out)
    one_error(result, f"cannot connect to 127.0.0.1:{port}")
