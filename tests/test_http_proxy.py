"""Reaching an allowlisted endpoint through the HTTP proxy the environment names.

The rules (which variable, NO_PROXY, loopback never) are checked as plain functions; the wire
format (the whole URL to a proxy for http, CONNECT and then TLS to the endpoint for https,
Proxy-Authorization, a refusal, an unreachable proxy) against real sockets on 127.0.0.1 that play
the proxy. The endpoint address 10.77.0.1 is never connected to: with a proxy the client talks
only to the proxy, which here relays to a local server. tests/test_transport_matrix.py runs the
same cases against Debian's tinyproxy and nginx.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from clinieval.engine.server_fit import proxies_used
from clinieval.errors import UserError
from clinieval.models.http1 import ConnectError, ConnectOptions, Http1Client
from clinieval.models.http_proxy import Proxy, bypassed, parse_proxy, proxy_for
from clinieval.models.openai_http import OpenAIModel
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.suite.layout import in_suite_terms
from tests.test_http1 import OK, ScriptedServer, length_reply, serving

FAR = "10.77.0.1"  # not loopback; never connected to (the proxy is)


def env(**values: str) -> dict[str, str]:
    return dict(values)


# --- which proxy --------------------------------------------------------------------------------


def test_loopback_is_never_proxied_whatever_the_environment_says() -> None:
    every = env(HTTPS_PROXY="http://p:3128", HTTP_PROXY="http://p:3128", ALL_PROXY="http://p:3128")
    for host in ("127.0.0.1", "127.8.9.10", "::1", "localhost"):
        for scheme in ("http", "https"):
            assert proxy_for(scheme, host, 8080, use_env=True, environ=every) is None


def test_the_scheme_picks_the_variable_lower_case_first_then_all_proxy() -> None:
    e = env(HTTPS_PROXY="http://upper:1", https_proxy="http://lower:2", HTTP_PROXY="http://plain:3")
    assert proxy_for("https", FAR, 443, use_env=True, environ=e) == Proxy("lower", 2, None, "https_proxy")
    assert proxy_for("http", FAR, 80, use_env=True, environ=e) == Proxy("plain", 3, None, "HTTP_PROXY")
    fallback = env(ALL_PROXY="proxy.hospital:3128")  # no scheme: an HTTP proxy
    assert proxy_for("https", FAR, 443, use_env=True, environ=fallback) == Proxy(
        "proxy.hospital", 3128, None, "ALL_PROXY"
    )
    assert proxy_for("https", FAR, 443, use_env=True, environ={}) is None


def test_no_proxy_option_ignores_the_environment() -> None:
    assert proxy_for("https", FAR, 443, use_env=False, environ=env(HTTPS_PROXY="http://p:1")) is None


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        ("*", "api.example.org", 443, True),
        ("example.org", "api.example.org", 443, True),
        ("example.org", "example.org", 443, True),
        (".example.org", "api.example.org", 443, True),
        ("example.org", "badexample.org", 443, False),
        ("10.0.0.0/8", "10.77.0.1", 443, True),
        ("10.0.0.0/8", "11.0.0.1", 443, False),
        ("10.77.0.1:8443", "10.77.0.1", 8443, True),
        ("10.77.0.1:8443", "10.77.0.1", 443, False),
        ("other, 10.77.0.1", "10.77.0.1", 443, True),
        ("[fd00::1]:443", "fd00::1", 443, True),
        ("fd00::/8", "fd00::1", 443, True),
        ("", "api.example.org", 443, False),
    ],
)
def test_no_proxy_entries(no_proxy: str, host: str, port: int, direct: bool) -> None:
    assert bypassed(host, port, no_proxy) is direct
    e = env(HTTPS_PROXY="http://p:1", NO_PROXY=no_proxy)
    assert (proxy_for("https", host, port, use_env=True, environ=e) is None) is direct


def test_a_proxy_url_with_credentials_and_the_ones_refused() -> None:
    proxy = parse_proxy("http://ward%40h:p%3Ass@proxy:3128", "HTTPS_PROXY")
    assert proxy.authorization == "Basic " + base64.b64encode(b"ward@h:p:ss").decode()
    for bad, why in [
        ("https://proxy:3128", "HTTP proxies only"),
        ("socks5://proxy:1080", "HTTP proxies only"),
        ("http://proxy:99999", "not a number from 1 to 65535"),
        ("http://:3128", "no proxy host"),
    ]:
        with pytest.raises(UserError, match=why) as caught:
            parse_proxy(bad, "HTTPS_PROXY")
        assert str(caught.value).startswith(f"HTTPS_PROXY={bad!r}: ")


# --- on the wire ----------------------------------------------------------------------------------


def far_client(scheme: str, port: int, connect: ConnectOptions | None = None) -> Http1Client:
    return Http1Client(
        f"{scheme}://{FAR}:{port}/v1",
        timeout_s=5.0,
        connect_timeout_s=2.0,
        headers={"Content-Type": "application/json"},
        max_idle=2,
        connect=connect,
    )


def post(http: Http1Client, url: str, n: int = 1) -> list[bytes]:
    async def go() -> list[bytes]:
        try:
            return [(await http.request("POST", url, b"{}")).body for _ in range(n)]
        finally:
            http.close()

    return asyncio.run(go())


def test_plain_http_goes_to_the_proxy_with_the_whole_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(lambda n: [length_reply()]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://ward:secret@127.0.0.1:{proxy.port}")
        http = far_client("http", 8080)
        assert post(http, f"http://{FAR}:8080/v1/chat/completions", 2) == [OK, OK]
    first = proxy.requests[0].decode()
    assert first.startswith(f"POST http://{FAR}:8080/v1/chat/completions HTTP/1.1\r\n")
    assert f"\r\nHost: {FAR}:8080\r\n" in first
    assert "\r\nProxy-Authorization: Basic " + base64.b64encode(b"ward:secret").decode() in first
    # a connection per request through a forward proxy: one that closes after each answer without
    # saying so (tinyproxy) would otherwise leave a POST unanswered, and a POST is never sent again
    assert proxy.connections == 2


@pytest.mark.parametrize(
    ("answer", "message", "hint"),
    [
        (
            b"HTTP/1.1 403 Forbidden\r\n\r\n",
            "the proxy 127.0.0.1:{port} refused to connect to 10.77.0.1:443 (HTTP 403 Forbidden; "
            "the proxy is HTTPS_PROXY's)",
            "does the proxy allow this host and port?",
        ),
        (
            b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n",
            "the proxy 127.0.0.1:{port} (from HTTPS_PROXY) wants credentials to connect to 10.77.0.1:443 "
            "(HTTP 407)",
            "put them in HTTPS_PROXY: http://USER:PASSWORD@127.0.0.1:{port}",
        ),
    ],
)
def test_a_proxy_that_will_not_connect_says_so(
    monkeypatch: pytest.MonkeyPatch, answer: bytes, message: str, hint: str
) -> None:
    with serving(lambda n: [answer]) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(ConnectError) as caught:
            post(far_client("https", 443), f"https://{FAR}/v1/models")
    assert str(caught.value) == message.format(port=proxy.port)
    assert caught.value.hint.startswith(hint.format(port=proxy.port))
    assert proxy.requests[0].startswith(b"CONNECT 10.77.0.1:443 HTTP/1.1\r\n")


def test_an_unreachable_proxy_is_named_with_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectError) as caught:
        post(far_client("https", 443), f"https://{FAR}/v1/models")
    assert (
        str(caught.value)
        == f"cannot connect to the proxy 127.0.0.1:{port} (from HTTPS_PROXY): Connection refused"
    )
    assert "--no-proxy" in caught.value.hint


def test_the_egress_guard_decides_before_any_proxy_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(lambda n: [length_reply()]) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(UserError, match="is not loopback"):
            OpenAIModel(f"https://{FAR}/v1", "m")
    assert proxy.connections == 0


class ConnectProxy(ScriptedServer):
    """A forward proxy that answers CONNECT with 200 and relays bytes to one local port (whatever
    host the client named), counting the CONNECT lines it saw. The scripted server's listening
    and accepting, with a tunnel instead of scripted replies."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.connects: list[bytes] = []
        super().__init__(lambda n: [])

    def _serve(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            if not data:
                conn.close()
                return
            head += data
        self.connects.append(head.split(b"\r\n")[0])
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
        _pipe(conn, upstream)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@contextmanager
def tls_for_far_host(tmp_path: Path) -> Iterator[tuple[ssl.SSLContext, Path]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={FAR}",
         "-addext", f"subjectAltName=IP:{FAR}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    yield server_side, cert


def test_https_is_tunnelled_with_connect_and_verified_against_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS runs end to end inside the tunnel: the certificate checked is the endpoint's (issued
    for 10.77.0.1), which the proxy never sees in the clear."""
    with (
        tls_for_far_host(tmp_path) as (server_side, cert),
        serving(lambda n: [length_reply()], wrap=server_side) as server,
    ):
        proxy = ConnectProxy(server.port)
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        try:
            http = far_client("https", 8443, ConnectOptions(ca_bundle=str(cert)))
            assert post(http, f"https://{FAR}:8443/v1/chat/completions", 3) == [OK] * 3
            untrusted = far_client("https", 8443)  # the same tunnel, without the endpoint's CA
            with pytest.raises(ConnectError, match="its TLS certificate is not trusted"):
                post(untrusted, f"https://{FAR}:8443/v1/chat/completions")
        finally:
            proxy.close()
    assert proxy.connects[0] == f"CONNECT {FAR}:8443 HTTP/1.1".encode()
    assert len(proxy.connects) == 2  # one tunnel kept alive for three requests, then the refused one
    assert server.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")


# --- which proxy may carry patient text (issue 35) ----------------------------------------------------

OTHER = "10.77.0.2"  # a proxy host that is not loopback; never connected to
FAR_PROXY = f"http://ward:secret@{OTHER}:3128"


def test_an_http_endpoint_through_a_proxy_nobody_allowed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over plain http the proxy reads every prompt: one that is neither loopback nor allowlisted
    is refused when the model is built, before anything is written or sent, naming the proxy
    (never its password), the variable that set it and the options that allow or avoid it."""
    monkeypatch.delenv("CLINIEVAL_ALLOWED_HOSTS", raising=False)
    monkeypatch.setenv("HTTP_PROXY", FAR_PROXY)
    with pytest.raises(UserError) as caught:
        OpenAIModel(f"http://{FAR}:8080/v1", "m", allow_hosts=[FAR])
    assert str(caught.value) == (
        f"endpoint 'http://{FAR}:8080/v1' would be reached through the proxy {OTHER}:3128 (from HTTP_PROXY), "
        "which is neither loopback nor allowlisted, and over plain http the proxy reads every prompt; allow "
        f"the proxy with --allow-host {OTHER} (or CLINIEVAL_ALLOWED_HOSTS={OTHER}), go direct with "
        f"--no-proxy (or NO_PROXY={FAR}), or use the endpoint's https URL (the proxy then sees only CONNECT)"
    )
    # a suite has no command-line options: its error names the [endpoints] keys instead
    suite = in_suite_terms(str(caught.value))
    assert f'[endpoints] allow_host = ["{OTHER}"]' in suite and "[endpoints] no_proxy (or" in suite


@pytest.mark.parametrize(
    ("url", "environ", "allow", "connect", "via"),
    [
        ("http", {"HTTP_PROXY": FAR_PROXY}, [FAR, OTHER], None, "forward"),  # --allow-host PROXY
        ("http", {"HTTP_PROXY": FAR_PROXY, "CLINIEVAL_ALLOWED_HOSTS": OTHER}, [FAR], None, "forward"),
        ("http", {"http_proxy": "http://127.0.0.1:3128"}, [FAR], None, "forward"),  # a loopback proxy
        ("https", {"HTTPS_PROXY": FAR_PROXY}, [FAR], None, "connect"),  # the proxy sees only CONNECT
        ("http", {"HTTP_PROXY": FAR_PROXY}, [FAR], ConnectOptions(use_env_proxy=False), None),  # --no-proxy
        ("http", {"HTTP_PROXY": FAR_PROXY, "NO_PROXY": FAR}, [FAR], None, None),
    ],
)
def test_the_proxies_a_user_opened_and_what_the_manifest_records(
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    environ: dict[str, str],
    allow: list[str],
    connect: ConnectOptions | None,
    via: str | None,
) -> None:
    monkeypatch.delenv("CLINIEVAL_ALLOWED_HOSTS", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    model = OpenAIModel(f"{url}://{FAR}:8080/v1", "m", allow_hosts=allow, connect=connect)
    record = model.proxy_record
    if via is None:
        assert record is None and proxies_used(model) == []
        return
    assert record is not None and record["via"] == via
    assert record["endpoint"] == f"{url}://{FAR}:8080/v1"
    assert record["source"] == next(iter(environ))
    assert "secret" not in str(record) and "ward:" not in str(record)
    assert proxies_used(model) == [record]


def test_a_proxy_set_after_the_model_was_built_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The connections are made on first use and read the environment again: a proxy that
    appeared in between goes through the same guard."""
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("CLINIEVAL_ALLOWED_HOSTS", raising=False)
    model = OpenAIModel(f"http://{FAR}:8080/v1", "m", allow_hosts=[FAR])
    assert model.proxy is None
    monkeypatch.setenv("HTTP_PROXY", FAR_PROXY)
    with pytest.raises(UserError, match=f"through the proxy {OTHER}:3128 .from HTTP_PROXY."):
        asyncio.run(model.check())


def test_a_pool_records_each_proxied_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "10.77.0.3")
    pool = parse_model_spec(
        f"openai:http://{FAR}:8080/v1,http://10.77.0.3:8080/v1@m",
        BackendOptions(allow_hosts=(FAR, "10.77.0.3")),
    )
    assert [(r["endpoint"], r["proxy"]) for r in proxies_used(pool)] == [
        (f"http://{FAR}:8080/v1", "http://127.0.0.1:3128")
    ]
