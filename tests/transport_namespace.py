"""The proxy rows of the transport matrix, run inside a network namespace (``unshare -n``).

Why a namespace: loopback is never proxied, so a proxy is only used for an allowlisted host that
is not loopback, and no test may send traffic off this machine. Inside ``unshare -n`` the only
interface is ``lo``; tests/test_transport_matrix.py adds 10.77.0.1/32 to it, an address that is
not loopback yet reaches nothing outside the namespace. This module, run there as
``python -m tests.transport_namespace DIR``, starts its own nginx (TLS, ``gzip on``) on 10.77.0.1
and 127.0.0.1 and Debian's tinyproxy on 127.0.0.1 and on 10.77.0.2 (a proxy that is not loopback,
which the test adds to ``lo`` too), runs the real command line once per row, and
writes ``DIR/report.json`` for the test to check. The model is the session's real one: this nginx
reaches it through the unix socket of the gateway outside (``DIR/config.json`` names it), so one
model serves both sides and no model is loaded in here.

Each row reports the exit code, stdout, stderr, the records (text and error kind per item), the
proxies its manifest recorded, and how many chat completions nginx saw and which requests each
tinyproxy logged during that row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.real_servers import Certs, Listen, Nginx, Tinyproxy, gateway_conf

HOST = "10.77.0.1"
"""Not loopback, and inside the namespace only."""
TLS_PORT = 8443
PLAIN_PORT = 8080
BLOCKED_PORT = 8444
"""A TLS port tinyproxy does not allow CONNECT to (its ConnectPort list lacks it)."""
PROXY_PORT = 3128
AUTH_PROXY_PORT = 3129
DEAD_PROXY_PORT = 3130
"""Nothing listens there."""
FAR_PROXY = "10.77.0.2"
"""A proxy host that is not loopback (inside the namespace only): one nobody allowlisted."""
FAR_PROXY_PORT = 3131
PROXY_USER = "clinician:s3cret"
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY")
CLEAN_ENV = {*PROXY_VARS, *(v.lower() for v in PROXY_VARS), "SSL_CERT_FILE", "SSL_CERT_DIR"}
CLEAN_ENV |= {"CLINIEVAL_API_KEY", "CLINIEVAL_ALLOWED_HOSTS"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without proxies, CA overrides, keys or allowlists, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    return {**env, **extra}


def cli(items: Path, out: Path, url: str, *extra: str, model: str = "smol") -> list[str]:
    """``clinieval run`` of ``items`` against ``url``, as a user types it, one request at a time.

    One at a time because ``llama_cpp.server`` reuses the KV cache of the prompt before: a
    question asked right after itself is decoded from its last token only, and the tiny model's
    greedy answer can change with that. In a fixed order every row's question follows the same
    one, so "the same texts as straight from the server" is a fair check of the transport.
    """
    clinieval = Path(sys.executable).parent / "clinieval"
    head = [str(clinieval), "run", str(items), "-m", f"openai:{url}@{model}", "--out", str(out)]
    return [*head, "--no-progress", "--max-tokens", "8", "--retries", "0", "--concurrency", "1", *extra]


def outcome(cmd: list[str], env: dict[str, str], out: Path) -> dict[str, Any]:
    """Run ``cmd``; its exit code, output, time and records (``{id: [text, error_kind, message]}``)."""
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    return {
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "seconds": round(time.monotonic() - start, 2),
        "out_exists": out.exists(),
        "records": records(out),
        "proxies": recorded_proxies(out),
    }


def recorded_proxies(out: Path) -> list[Any] | None:
    """The ``proxies`` the run's manifest recorded (None: no manifest, or none recorded)."""
    manifest = out / "manifest.json"
    return json.loads(manifest.read_text()).get("proxies") if manifest.exists() else None


def records(out: Path) -> dict[str, list[Any]]:
    if not (out / "manifest.json").exists():
        return {}
    from clinieval.records.runs import RunDir

    found = {}
    for record in RunDir.open(out).iter_records():
        row = record.to_dict()
        output = row["output"] or {}
        found[row["sample_id"]] = [output.get("text"), output.get("error_kind"), output.get("error_message")]
    return found


@dataclass
class Servers:
    nginx: Nginx
    proxy: Tinyproxy
    auth_proxy: Tinyproxy
    far_proxy: Tinyproxy


@dataclass(frozen=True)
class Row:
    name: str
    url: str
    env: dict[str, str]
    flags: tuple[str, ...] = ()
    out: str = ""
    """The run folder's name (default: the row's name; a rerun names its first run's)."""


def rows(ca: Path) -> list[Row]:
    tls, plain = f"https://{HOST}:{TLS_PORT}/v1", f"http://{HOST}:{PLAIN_PORT}/v1"
    allow, trust = ("--allow-host", HOST), ("--ca-bundle", str(ca))
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    far_proxy = f"http://{PROXY_USER}@{FAR_PROXY}:{FAR_PROXY_PORT}"
    return [
        Row("connect", tls, clean_env(HTTPS_PROXY=proxy), (*allow, *trust)),
        Row("connect_again", tls, clean_env(HTTPS_PROXY=proxy), (*allow, *trust), out="connect"),
        Row(
            "proxy_down", tls, clean_env(HTTPS_PROXY=f"http://127.0.0.1:{DEAD_PROXY_PORT}"), (*allow, *trust)
        ),
        Row(
            "no_proxy_env",
            tls,
            clean_env(HTTPS_PROXY=proxy, NO_PROXY=f"example.org,{HOST}"),
            (*allow, *trust),
        ),
        Row("no_proxy_flag", tls, clean_env(HTTPS_PROXY=proxy), (*allow, *trust, "--no-proxy")),
        Row(
            "loopback_direct",
            f"https://127.0.0.1:{TLS_PORT}/v1",
            clean_env(HTTPS_PROXY=proxy, HTTP_PROXY=proxy),
            trust,
        ),
        Row("absolute_form", plain, clean_env(http_proxy=proxy), allow),
        Row(
            "connect_refused",
            f"https://{HOST}:{BLOCKED_PORT}/v1",
            clean_env(HTTPS_PROXY=proxy),
            (*allow, *trust),
        ),
        Row("not_allowlisted", tls, clean_env(HTTPS_PROXY=proxy), trust),
        Row(
            "proxy_auth",
            tls,
            clean_env(https_proxy=f"http://{PROXY_USER}@127.0.0.1:{AUTH_PROXY_PORT}"),
            (*allow, *trust),
        ),
        Row(
            "proxy_auth_wrong",
            tls,
            clean_env(https_proxy=f"http://clinician:wrong@127.0.0.1:{AUTH_PROXY_PORT}"),
            (*allow, *trust),
        ),
        # a proxy that is not loopback: over plain http it reads every prompt, so it must be
        # allowlisted as the endpoint is; through CONNECT it sees only the endpoint's host and port
        Row("forward_unopened", plain, clean_env(HTTP_PROXY=far_proxy), allow),
        Row("forward_opened", plain, clean_env(HTTP_PROXY=far_proxy), (*allow, "--allow-host", FAR_PROXY)),
        Row("connect_unopened", tls, clean_env(HTTPS_PROXY=far_proxy), (*allow, *trust)),
    ]


def start(folder: Path, config: dict[str, Any], stack: ExitStack) -> Servers:
    """nginx and both proxies, each stopped by ``stack`` however the rows end (or fail to start)."""
    certs = Certs(Path(config["ca"]), Path(config["cert"]), Path(config["key"]))
    listens = [
        Listen(f"{HOST}:{TLS_PORT}"),
        Listen(f"127.0.0.1:{TLS_PORT}"),
        Listen(f"{HOST}:{PLAIN_PORT}", tls=False),
        Listen(f"{HOST}:{BLOCKED_PORT}"),
    ]
    nginx = Nginx(
        folder / "nginx", gateway_conf(folder / "nginx", f"unix:{config['model_socket']}", listens, certs)
    )
    stack.callback(nginx.stop)
    nginx.start(ready=[(HOST, TLS_PORT), (HOST, PLAIN_PORT)])
    proxy = Tinyproxy(folder / "proxy", PROXY_PORT, [TLS_PORT])
    stack.callback(proxy.stop)
    proxy.start()
    auth = Tinyproxy(folder / "auth-proxy", AUTH_PROXY_PORT, [TLS_PORT], basic_auth=PROXY_USER)
    stack.callback(auth.stop)
    auth.start()
    far = Tinyproxy(folder / "far-proxy", FAR_PROXY_PORT, [TLS_PORT], basic_auth=PROXY_USER, listen=FAR_PROXY)
    stack.callback(far.stop)
    far.start()
    return Servers(nginx, proxy, auth, far)


def run_rows(folder: Path, servers: Servers, items: Path, ca: Path) -> dict[str, Any]:
    report: dict[str, Any] = {}
    logs: dict[str, Callable[[], list[str]]] = {
        "proxy": servers.proxy.requests,
        "auth_proxy": servers.auth_proxy.requests,
        "far_proxy": servers.far_proxy.requests,
    }
    for row in rows(ca):
        out = folder / "runs" / (row.out or row.name)
        asked, seen = servers.nginx.asked(), {name: len(log()) for name, log in logs.items()}
        result = outcome(cli(items, out, row.url, *row.flags), row.env, out)
        time.sleep(0.1)  # nginx and tinyproxy write their log lines as a request ends
        result["nginx_asked"] = servers.nginx.asked() - asked
        result["nginx_lines"] = servers.nginx.lines()[-6:]
        for name, log in logs.items():
            result[name] = log()[seen[name] :]
        report[row.name] = result
    return report


def main(folder: str) -> None:
    here = Path(folder)
    config = json.loads((here / "config.json").read_text())
    with ExitStack() as stack:
        servers = start(here, config, stack)
        report = run_rows(here, servers, Path(config["items"]), Path(config["ca"]))
    (here / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
