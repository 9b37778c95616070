"""Several servers for one model: the spec forms, balancing, failover, health checks, identity.

Real servers only: tests/fault_server.py's FaultServer on 127.0.0.1. A server here dies the way a
crashed process does (its listening socket and every open connection closed), so requests in
flight fail and new ones are refused, and it can come back on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from clinieval.errors import UserError
from clinieval.models.openai_http import OpenAIModel, RetryPolicy
from clinieval.models.pool import EndpointConfig, EndpointPool
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.types import ErrorKind, GenerationConfig, Message, ModelOutput
from tests.conftest import run_cli
from tests.fault_server import FaultServer

FAST = RetryPolicy(max_retries=4, base_delay_s=0.02, max_delay_s=0.2)
ASK = GenerationConfig(max_tokens=4)
U1, U2 = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"


class Server(FaultServer):
    """A FaultServer that counts requests in flight, can be killed, and can come back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.peak = 0
        self._now = 0
        self._conns: list[socket.socket] = []
        self._track()

    def _track(self) -> None:
        accept = self.httpd.get_request

        def get_request() -> tuple[socket.socket, Any]:
            conn, addr = accept()
            self._conns.append(conn)
            return conn, addr

        self.httpd.get_request = get_request  # type: ignore[method-assign]

    @property
    def held(self) -> int:
        with self.log.lock:
            return len(self.log.received) - self.admitted

    def handle(self, h: Any, body: dict[str, Any]) -> None:
        with self.log.lock:
            self._now += 1
            self.peak = max(self.peak, self._now)
        try:
            super().handle(h, body)
        finally:
            with self.log.lock:
                self._now -= 1

    def kill(self) -> None:
        """Stop listening, drop held requests unanswered, and cut every open connection."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.release()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._conns.clear()

    def restart(self) -> None:
        port = self.httpd.server_address[1]
        self.httpd = type(self.httpd)(("127.0.0.1", port), self.httpd.RequestHandlerClass)
        self.httpd.daemon_threads = True
        self._track()
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()


def pool_of(*endpoints: Server | EndpointConfig, **kwargs: Any) -> EndpointPool:
    configs = [e if isinstance(e, EndpointConfig) else EndpointConfig(e.url, 2) for e in endpoints]
    kwargs = {"retry": FAST, "probe_interval_s": 0.05, "timeout_s": 5.0} | kwargs
    return EndpointPool("fault", configs, **kwargs)


async def ask(pool: EndpointPool, *prompts: str) -> list[ModelOutput]:
    return list(await asyncio.gather(*(pool.generate([Message("user", p)], ASK) for p in prompts)))


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def healthy(pool: EndpointPool) -> list[bool]:
    return [e["healthy"] for e in pool.stats()["endpoints"]]


def items_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"i{k}", "input": f"question {k}", "target": "yes"}) + "\n" for k in range(n)
        )
    )
    return path


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


# -- spec forms ---------------------------------------------------------------------------------


def test_a_comma_list_builds_a_pool_and_one_url_stays_a_plain_model() -> None:
    pool = parse_model_spec(f"openai:{U1}, {U2}@m")
    assert isinstance(pool, EndpointPool)
    assert pool.max_concurrency == 32  # 16 per server, as for one server
    assert [e["url"] for e in pool.stats()["endpoints"]] == [U1, U2]
    assert pool.identity == {"backend": "openai", "api": "chat", "model": "m"}
    capped = parse_model_spec(f"openai-completions:{U1},{U2}@m", BackendOptions(concurrency=3))
    assert capped.max_concurrency == 6
    assert capped.identity["api"] == "completions"
    single = parse_model_spec(f"openai:{U1}@m", BackendOptions(concurrency=3))
    assert isinstance(single, OpenAIModel)
    assert single.identity == {"backend": "openai", "api": "chat", "base_url": U1, "model": "m"}
    assert single.max_concurrency == 3


def test_an_endpoints_file_builds_a_pool(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        f"model: smol\napi: completions\nendpoints:\n  - {U1}\n  - url: {U2}\n    concurrency: 2\n"
    )
    pool = parse_model_spec(f"openai:{path}", BackendOptions(concurrency=4))
    assert isinstance(pool, EndpointPool)
    assert pool.name == "smol"
    assert pool.identity == {"backend": "openai", "api": "completions", "model": "smol"}
    assert pool.max_concurrency == 4 + 2  # the default for U1, its own limit for U2
    assert parse_model_spec(f"openai-completions:{path}").identity["api"] == "completions"
    with pytest.raises(UserError, match="says api: completions, but openai-chat: asks for chat"):
        parse_model_spec(f"openai-chat:{path}")


def test_the_identity_does_not_depend_on_which_servers_serve(tmp_path: Path) -> None:
    """A resumed run (and its request cache) stays valid when servers are added or removed."""
    one, two = tmp_path / "one.yml", tmp_path / "two.yaml"
    one.write_text(f"model: m\nendpoints: [{U2}]\n")
    two.write_text(f"model: m\nendpoints: [{U1}, {U2}]\n")
    identities = [
        parse_model_spec(spec).identity for spec in (f"openai:{one}", f"openai:{two}", f"openai:{U1},{U2}@m")
    ]
    assert identities[0] == identities[1] == identities[2]
    assert parse_model_spec(f"openai:{U2}@m").identity != identities[0]  # one URL: as before


BAD_FILES = [
    (f"- {U1}\n", 1, "expected the file to be a mapping of model, api, endpoints"),
    (f"endpoints: [{U1}]\n", None, "no model: field"),
    ("model: m\n", None, "no endpoints: field"),
    (f"model:\nendpoints: [{U1}]\n", 1, "model: expected the model name the servers serve"),
    (f"models: m\nendpoints: [{U1}]\n", 1, "unknown field 'models'; the file takes model, api, endpoints"),
    (f"model: m\nmodel: n\nendpoints: [{U1}]\n", 2, "model: repeats line 1"),
    (f"model: m\napi: json\nendpoints: [{U1}]\n", 2, "api: expected chat or completions, not 'json'"),
    ("model: m\nendpoints: []\n", 2, "endpoints: expected a list of at least one URL"),
    ("model: m\nendpoints:\n", 2, "endpoints: expected a list"),
    (
        f"model: m\nendpoints:\n  - url: {U1}\n    weight: 2\n",
        4,
        "unknown field 'weight'; an endpoint takes url",
    ),
    ("model: m\nendpoints:\n  - concurrency: 2\n", 3, "endpoint: no url: field"),
    ("model: m\nendpoints:\n  - [a, b]\n", 3, "expected an endpoint to be a mapping of url, concurrency"),
    (f"model: m\nendpoints:\n  - url: {U1}\n    concurrency: 0\n", 4, "concurrency: expected a whole number"),
    (f"model: m\nendpoints:\n  - url: {U1}\n    concurrency: many\n", 4, "of 1 or more, not 'many'"),
    (f"model: m\nendpoints:\n  - {U1}\n  - {U1}/\n", 4, f"endpoint {U1}/ repeats line 3"),
    (f"model: m\nendpoints:\n  - {U1}\n  - 127.0.0.1:9/v1\n", 4, "expected an http(s) URL"),
    (
        f"model: m\nendpoints:\n  - {U1}\n  - https://gpu7.example.org/v1\n",
        4,
        "--allow-host gpu7.example.org",
    ),
    ("model: m\nendpoints: [http://a\n", 3, "not valid YAML (while parsing a flow sequence; expected ','"),
    ("", None, "the file is empty"),
]


@pytest.mark.parametrize(("text", "line", "expected"), BAD_FILES)
def test_each_mistake_in_an_endpoints_file_is_one_error_at_its_line(
    tmp_path: Path, text: str, line: int | None, expected: str
) -> None:
    path = tmp_path / "endpoints.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as e:
        parse_model_spec(f"openai:{path}")
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(e.value).startswith(where), str(e.value)
    assert expected in str(e.value)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (f"openai:{U1},,{U2}@m", "an empty URL in the comma-separated list"),
        (f"openai:{U1},{U1}/@m", f"{U1}/ is listed twice"),
        (f"openai:{U1},https://gpu7.example.org/v1@m", "not loopback; patient data stays local"),
        (f"openai:{U1},127.0.0.1:9/v1@m", "expected an http(s) URL"),
        ("openai:endpoints.yaml@m", "the model name goes in the endpoints file (model: m)"),
        ("openai:/no/such/endpoints.yml", "no endpoints file at /no/such/endpoints.yml"),
    ],
)
def test_bad_pool_specs(spec: str, expected: str) -> None:
    with pytest.raises(UserError) as e:
        parse_model_spec(spec)
    assert expected in str(e.value)


def test_an_allowlisted_host_may_join_a_pool() -> None:
    pool = parse_model_spec(
        f"openai:{U1},https://gpu7.example.org/v1@m", BackendOptions(allow_hosts=("gpu7.example.org",))
    )
    assert isinstance(pool, EndpointPool)


def test_the_cli_refuses_a_non_loopback_server_in_the_list(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(
        "run",
        str(items_file(tmp_path, 1)),
        "-m",
        f"openai:{U1},https://gpu7.example.org/v1@m",
        "--out",
        str(out),
    )
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "not loopback" in lines[0] and "--allow-host gpu7.example.org" in lines[0]
    assert not out.exists()


# -- balancing ------------------------------------------------------------------------------------


def test_requests_go_to_the_server_with_the_fewest_in_flight() -> None:
    async def go(a: Server, b: Server) -> list[ModelOutput]:
        pool = pool_of(a, b)
        try:
            return await ask(pool, *(f"q{i}" for i in range(4)))
        finally:
            await pool.aclose()

    with Server(delay_s=0.3) as a, Server(delay_s=0.3) as b:
        outs = asyncio.run(go(a, b))
    assert all(o.ok and o.text == "yes" for o in outs)
    assert sorted(a.log.received) == ["q0", "q2"]  # alternating: each takes the next while busy
    assert sorted(b.log.received) == ["q1", "q3"]


def test_each_server_keeps_to_its_own_concurrency() -> None:
    async def go(a: Server, b: Server) -> tuple[list[ModelOutput], int]:
        pool = pool_of(EndpointConfig(a.url, 1), EndpointConfig(b.url, 3))
        try:
            return await ask(pool, *(f"q{i}" for i in range(16))), pool.max_concurrency
        finally:
            await pool.aclose()

    with Server(delay_s=0.1) as a, Server(delay_s=0.1) as b:
        outs, limit = asyncio.run(go(a, b))
    assert limit == 4
    assert all(o.ok for o in outs)
    assert (a.peak, b.peak) == (1, 3)  # each limit reached, neither exceeded
    assert len(a.log.received) + len(b.log.received) == 16
    assert len(b.log.received) > 2 * len(a.log.received) > 0


def test_requests_wait_for_a_free_slot_rather_than_queue_at_a_slow_server() -> None:
    """Least in flight with slots: the slow server takes what it can run, the fast one the rest."""

    async def go(a: Server, b: Server) -> list[ModelOutput]:
        pool = pool_of(EndpointConfig(a.url, 1), EndpointConfig(b.url, 1))
        try:
            return await ask(pool, *(f"q{i}" for i in range(10)))
        finally:
            await pool.aclose()

    with Server(delay_s=1.0) as slow, Server(delay_s=0.01) as fast:
        outs = asyncio.run(go(slow, fast))
    assert all(o.ok for o in outs)
    assert len(slow.log.received) <= 2 and len(fast.log.received) >= 8


# -- failover and health ------------------------------------------------------------------------


def test_a_server_that_dies_mid_run_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """The real CLI, two servers; one dies holding requests: each item gets exactly one answer."""
    n = 24
    items, out = items_file(tmp_path, n), tmp_path / "run"
    with Server(hold_after=2) as a, Server(delay_s=0.02) as b:
        spec = f"openai:{a.url},{b.url}@fault"
        args = ("run", str(items), "-m", spec, "--out", str(out), "--no-progress", "--concurrency", "4")
        with ThreadPoolExecutor(1) as pool:
            cli = pool.submit(run_cli, *args, timeout=120)
            deadline = time.monotonic() + 60
            while a.held < 2 and not cli.done() and time.monotonic() < deadline:
                time.sleep(0.02)
            held = a.held
            a.kill()
            proc = cli.result()
    assert held >= 2, proc.stderr
    assert proc.returncode == 0, proc.stderr
    recs = records(out)
    assert sorted(r["sample_id"] for r in recs) == sorted(f"i{k}" for k in range(n))
    assert all(r["output"]["text"] == "yes" and r["output"]["error_kind"] is None for r in recs)
    answered_a, answered_b = a.log.answered, b.log.answered
    assert len(answered_a) == 2 and not set(answered_a) & set(answered_b)
    assert len(answered_a) + len(answered_b) == n  # each prompt answered once, by one server
    assert set(a.log.received) - set(answered_a) <= set(answered_b)  # the held ones moved to b
    assert f"{a.url} left the pool after a connection failure" in proc.stderr
    stats = json.loads((out / "summary.json").read_text())["run"]["endpoints"]
    by_url = {e["url"]: e for e in stats["endpoints"]}
    assert by_url[b.url]["requests"] == len(answered_b) and by_url[b.url]["healthy"]
    assert stats["failovers"] >= held  # every held request was re-sent to b


def test_servers_in_an_endpoints_file_may_change_between_resumes(tmp_path: Path) -> None:
    items, out, path = items_file(tmp_path, 6), tmp_path / "run", tmp_path / "endpoints.yaml"
    with Server() as a, Server() as b:
        path.write_text(f"model: fault\nendpoints:\n  - {a.url}\n  - {b.url}\n")
        args = ("run", str(items), "-m", f"openai:{path}", "--out", str(out), "--no-progress")
        first = run_cli(*args, "--limit", "3")
        path.write_text(f"model: fault\nendpoints:\n  - {b.url}\n")
        second = run_cli(*args)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    assert "3 new, 3 resumed of 6" in " ".join(second.stdout.split())
    assert len(a.log.received) + len(b.log.received) == 6
    assert sorted(r["sample_id"] for r in records(out)) == [f"i{k}" for k in range(6)]


def test_a_server_that_comes_back_rejoins_after_a_health_check() -> None:
    async def go(a: Server, b: Server) -> None:
        a.kill()
        pool = pool_of(a, b)
        try:
            [first] = await ask(pool, "first")  # a is listed first: refused, re-sent to b
            assert first.ok and b.log.answered == ["first"]
            assert healthy(pool) == [False, True] and pool.stats()["failovers"] == 1
            a.restart()
            await until(lambda: healthy(pool) == [True, True])
            outs = await ask(pool, *(f"q{i}" for i in range(4)))
            assert all(o.ok for o in outs)
            assert sorted(a.log.answered) == ["q0", "q2"]
        finally:
            await pool.aclose()

    with Server(delay_s=0.2) as a, Server(delay_s=0.2) as b:
        asyncio.run(go(a, b))


def test_with_every_server_down_a_request_waits_for_one_to_come_back() -> None:
    async def go(a: Server) -> None:
        a.kill()
        pool = pool_of(a, retry=RetryPolicy(max_retries=8, base_delay_s=0.1, max_delay_s=0.4))
        try:
            pending = asyncio.ensure_future(pool.generate([Message("user", "patient")], ASK))
            await asyncio.sleep(0.5)
            assert not pending.done()
            a.restart()
            out = await asyncio.wait_for(pending, 10)
        finally:
            await pool.aclose()
        assert out.ok and a.log.answered == ["patient"]

    with Server() as a:
        asyncio.run(go(a))


def test_with_every_server_down_for_good_the_transient_failure_is_returned() -> None:
    async def go(a: Server, b: Server) -> tuple[ModelOutput, float]:
        a.kill()
        b.kill()
        pool = pool_of(a, b, retry=RetryPolicy(max_retries=2, base_delay_s=0.02))
        start = time.monotonic()
        try:
            [out] = await ask(pool, "q")
            return out, time.monotonic() - start
        finally:
            await pool.aclose()

    with Server() as a, Server() as b:
        out, took = asyncio.run(go(a, b))
    assert out.error_kind is ErrorKind.CONNECTION and out.text == ""
    assert took < 3


def test_a_5xx_moves_the_request_and_the_server_rejoins() -> None:
    async def go(a: Server, b: Server) -> None:
        # Both servers are out after the second try, so the third waits for a health check; a
        # waiting request wakes when one rejoins, so a roomy budget costs nothing when all is well
        # and keeps a loaded CI machine (FAST's ~0.2 s in all) from returning the 500 instead.
        pool = pool_of(a, b, retry=RetryPolicy(max_retries=4, base_delay_s=0.5, max_delay_s=5.0))
        try:
            [out] = await ask(pool, "q FAULT:500x1")  # each server fails it once
            assert out.ok and out.text == "yes"
            assert pool.stats()["failovers"] == 2
            await until(lambda: healthy(pool) == [True, True])
        finally:
            await pool.aclose()

    with Server() as a, Server() as b:
        asyncio.run(go(a, b))
    assert a.log.seen["q FAULT:500x1"] + b.log.seen["q FAULT:500x1"] == 3
    assert len(a.log.answered) + len(b.log.answered) == 1


def test_a_429_backs_off_without_taking_the_server_out(caplog: pytest.LogCaptureFixture) -> None:
    async def go(a: Server, b: Server) -> None:
        pool = pool_of(a, b)
        try:
            [out] = await ask(pool, "q FAULT:429x1")
            assert out.ok
            assert healthy(pool) == [True, True] and pool.stats()["failovers"] == 2
        finally:
            await pool.aclose()

    with caplog.at_level(logging.WARNING), Server() as a, Server() as b:
        asyncio.run(go(a, b))
    assert "left the pool" not in caplog.text


def test_a_lasting_failure_is_returned_once_and_not_sent_elsewhere() -> None:
    async def go(a: Server, b: Server) -> ModelOutput:
        pool = pool_of(a, b)
        try:
            [out] = await ask(pool, "q FAULT:FILTER")
            return out
        finally:
            await pool.aclose()

    with Server() as a, Server() as b:
        out = asyncio.run(go(a, b))
    assert out.error_kind is ErrorKind.CONTENT_FILTER
    assert len(a.log.received) + len(b.log.received) == 1


def test_loglikelihood_fails_over_too() -> None:
    async def go(a: Server, b: Server) -> Any:
        a.kill()
        pool = pool_of(a, b, api="completions")
        try:
            return await pool.loglikelihood("Answer:", [" yes"])
        finally:
            await pool.aclose()

    with Server() as a, Server() as b:
        out = asyncio.run(go(a, b))
    # The fault server does not echo logprobs: b's lasting answer, not a's refused connection.
    assert out.error_kind is ErrorKind.BAD_REQUEST
    assert b.log.received == ["Answer: yes"]


def test_check_warns_about_unusable_servers_and_fails_only_when_none_is_usable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def one_down(a: Server, b: Server) -> None:
        pool = pool_of(a, b)
        try:
            with caplog.at_level(logging.WARNING):
                await pool.check()
            assert healthy(pool) == [False, True]
            assert all(o.ok for o in await ask(pool, "q1", "q2", "q3"))
        finally:
            await pool.aclose()

    async def all_down(a: Server, b: Server) -> None:
        pool = pool_of(a, b)
        try:
            with pytest.raises(UserError, match="none of the 2 endpoints can be used") as e:
                await pool.check()
            assert a.url in str(e.value) and b.url in str(e.value)
        finally:
            await pool.aclose()

    with Server() as a, Server() as b:
        a.kill()
        asyncio.run(one_down(a, b))
        assert "1 of 2 endpoints cannot be used yet" in caplog.text and a.url in caplog.text
        assert b.url not in caplog.text
        assert sorted(b.log.answered) == ["q1", "q2", "q3"]
        b.kill()
        asyncio.run(all_down(a, b))
