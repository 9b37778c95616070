"""Real servers for the transport matrix: Debian's nginx as a TLS gateway and tinyproxy as a proxy.

Why real ones: a hand-written stand-in answers the way its author believes servers answer; nginx
with ``gzip on`` compresses the way hospital gateways do, its TLS is OpenSSL's, and tinyproxy speaks
CONNECT and absolute-form requests as forward proxies do. The model behind them is the real
embedded one under ``llama_cpp.server`` (the ``llama_server`` fixture of ``tests/conftest.py``).

What is here:
- :func:`make_certs`: a throwaway CA and a server certificate for 127.0.0.1, 10.77.0.1 and
  localhost, made with the ``openssl`` command (EC keys: milliseconds).
- :class:`Nginx`: one nginx in the foreground (``daemon off; master_process off``), with its prefix,
  pid, logs and temporary folders in a folder of its own; :func:`gateway_conf` writes its
  configuration: TLS, ``gzip on`` for JSON, ``/v1/`` proxied to the model, an Azure-style
  ``/openai/deployments/smol/`` that wants an ``api-key`` header (403 without) and an
  ``api-version`` argument (400 without), an access log line per request (method, path, status,
  ``Content-Encoding`` sent), and optionally a unix socket that reaches the model: a socket is a
  file, so a network namespace (``unshare -n``, see tests/transport_namespace.py) reaches the
  model through it without any traffic leaving that namespace.
- :class:`Tinyproxy`: one tinyproxy in the foreground whose log shows each CONNECT and request.
- :func:`start_gateway`: the nginx above in front of a model on 127.0.0.1, with the unix socket.

Without nginx, tinyproxy or openssl the tests are skipped with the reason, and fail instead under
``CI=true``, where the Makefile installs them (as tests/browser.py does for Chromium).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port, missing, stop_process

NGINX = Path(os.environ.get("CLINIEVAL_NGINX", "/usr/sbin/nginx"))
TINYPROXY = Path(os.environ.get("CLINIEVAL_TINYPROXY", "/usr/bin/tinyproxy"))
API_KEY = "test-key-5f3a"
"""The key the Azure-style location accepts (sent by the client from CLINIEVAL_API_KEY)."""
DEPLOYMENT = "smol"
API_VERSION = "2024-06-01"
START_TIMEOUT_S = 20.0


def need_programs() -> None:
    """nginx, tinyproxy and openssl, or a skip (a failure under CI=true) naming what to install."""
    if not NGINX.is_file():
        missing(f"{NGINX} is missing: install Debian's nginx (`make install`)")
    if not TINYPROXY.is_file():
        missing(f"{TINYPROXY} is missing: install Debian's tinyproxy-bin (`make install`)")
    if shutil.which("openssl") is None:
        missing("the openssl command is missing: install Debian's openssl")


# --- certificates -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certs:
    ca: Path
    """The CA certificate a client must trust (``--ca-bundle``, ``SSL_CERT_FILE``)."""
    cert: Path
    key: Path


_LEAF_EXT = """basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.77.0.1,DNS:localhost
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
"""


def make_certs(folder: Path) -> Certs:
    """A new CA and a server certificate it signed, valid for the addresses the tests use."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr = folder / "server.pem", folder / "server.key", folder / "server.csr"
    ext = folder / "leaf.ext"
    ext.write_text(_LEAF_EXT)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_ext = [
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]
    ca_subject = ["-subj", "/CN=clinieval test CA", *ca_ext]
    serial = ["-set_serial", str(time.time_ns())]
    steps = [
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", *ca_subject],
        ["req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        [
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            ca,
            "-CAkey",
            ca_key,
            *serial,
            "-out",
            cert,
            "-days",
            "2",
            "-extfile",
            ext,
        ],
    ]
    for step in steps:
        subprocess.run(["openssl", *map(str, step)], check=True, capture_output=True, timeout=30)
    return Certs(ca, cert, key)


# --- nginx ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listen:
    """One nginx server block: where it listens, whether with TLS, and what it serves."""

    address: str
    """``HOST:PORT`` or ``unix:PATH``."""
    tls: bool = True
    gzip: bool = True


def gateway_conf(folder: Path, upstream: str, listens: list[Listen], certs: Certs | None) -> str:
    """nginx.conf for a gateway in front of ``upstream`` (``HOST:PORT`` or ``unix:PATH``)."""
    temp = " ".join(f"{name}_temp_path {folder}/{name};" for name in ("client_body", "proxy"))
    temp += "".join(f" {name}_temp_path {folder}/{name};" for name in ("fastcgi", "uwsgi", "scgi"))
    servers = "\n".join(_server_block(listen, certs) for listen in listens)
    return f"""daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
  {temp}
  log_format matrix '$request_method $uri $status "$sent_http_content_encoding"';
  access_log {folder}/access.log matrix;
  default_type application/json;
  gzip_types application/json;
  gzip_min_length 0;
  gzip_proxied any;
  map $args $api_version {{ "~(?:^|&)api-version=[^&]" yes; default ""; }}
  upstream model {{ server {upstream}; keepalive 8; }}
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_read_timeout 300s;
{servers}
}}
"""


def _server_block(listen: Listen, certs: Certs | None) -> str:
    tls = ""
    if listen.tls:
        assert certs is not None, "a TLS listener needs certificates"
        tls = f"ssl_certificate {certs.cert}; ssl_certificate_key {certs.key};"
    return f"""  server {{
    listen {listen.address}{" ssl" if listen.tls else ""};
    {tls}
    gzip {"on" if listen.gzip else "off"};
    location /v1/ {{ proxy_pass http://model; }}
    location ~ ^/openai/deployments/{DEPLOYMENT}/(?<call>.*)$ {{
      if ($http_api_key != "{API_KEY}") {{
        return 403 '{{"error": {{"code": "401", "message": "Access denied: invalid key."}}}}';
      }}
      if ($api_version = "") {{
        return 400 '{{"error": {{"code": "404", "message": "Resource not found: api-version missing"}}}}';
      }}
      proxy_pass http://model/v1/$call$is_args$args;
    }}
  }}"""


class Nginx:
    """Debian's nginx in the foreground, everything it writes inside ``folder``."""

    def __init__(self, folder: Path, conf: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (folder / name).mkdir(exist_ok=True)
        self.conf = folder / "nginx.conf"
        self.conf.write_text(conf)
        self.access_log = folder / "access.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready: list[tuple[str, int]] | None = None, socket_path: Path | None = None) -> Nginx:
        cmd = [str(NGINX), "-p", str(self.folder), "-e", str(self.folder / "error.log"), "-c", str(self.conf)]
        check = subprocess.run([*cmd, "-t"], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for host, port in ready or []:
                wait_port(host, port, self.proc, self.folder / "error.log")
            if socket_path is not None:
                _wait(socket_path.exists, self.proc, self.folder / "error.log")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_process(self.proc)  # master_process off: SIGTERM is nginx's fast shutdown

    def lines(self) -> list[str]:
        """Every access-log line so far (``METHOD PATH STATUS "Content-Encoding"``)."""
        return self.access_log.read_text().splitlines() if self.access_log.exists() else []

    def asked(self) -> int:
        """How many chat completions reached nginx (the rerun checks count these)."""
        return sum(1 for line in self.lines() if line.startswith("POST ") and "/chat/completions" in line)


# --- tinyproxy ---------------------------------------------------------------------------------------


class Tinyproxy:
    """Debian's tinyproxy in the foreground on ``listen`` (127.0.0.1; another address only inside a
    test's network namespace), allowing CONNECT to ``connect_ports``."""

    def __init__(
        self,
        folder: Path,
        port: int,
        connect_ports: list[int],
        basic_auth: str | None = None,
        listen: str = "127.0.0.1",
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.listen = listen
        self.log = folder / "tinyproxy.log"
        self.conf = folder / "tinyproxy.conf"
        lines = [
            f"Port {port}",
            f"Listen {listen}",
            "Allow 127.0.0.1",
            *([f"Allow {listen}"] if listen != "127.0.0.1" else []),  # a local client's own address
            "Timeout 300",
            "MaxClients 64",
            f'LogFile "{self.log}"',
            "LogLevel Connect",
            f'PidFile "{folder}/tinyproxy.pid"',
            *(f"ConnectPort {p}" for p in connect_ports),
        ]
        if os.geteuid() == 0:  # tinyproxy drops root for the user it names; keep the files writable
            lines += ["User root", "Group root"]
        if basic_auth is not None:
            user, _, password = basic_auth.partition(":")
            lines.append(f"BasicAuth {user} {password}")
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.listen}:{self.port}"

    def start(self) -> Tinyproxy:
        self.proc = subprocess.Popen(
            [str(TINYPROXY), "-d", "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_port(self.listen, self.port, self.proc, self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def requests(self) -> list[str]:
        """The log's request lines: ``CONNECT HOST:PORT`` for tunnels, ``POST http://...`` otherwise."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text().splitlines():
            _, sep, request = line.partition("Request (file descriptor")
            if sep:
                found.append(request.split("): ", 1)[-1].strip())
        return found


# --- waiting -----------------------------------------------------------------------------------------


def wait_port(host: str, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    def accepts() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
        except OSError:
            return False
        return True

    _wait(accepts, proc, log)


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        said = log.read_text(errors="replace") if log.exists() else ""
        assert proc.poll() is None, f"{proc.args!r} exited with {proc.returncode}: {said[-2000:]}"
        assert time.monotonic() < deadline, f"{proc.args!r} did not start: {said[-2000:]}"
        time.sleep(0.05)


# --- the gateway in front of the model ---------------------------------------------------------------


@dataclass(frozen=True)
class Gateway:
    nginx: Nginx
    certs: Certs
    port: int
    model_socket: Path
    """A unix socket reaching the model in plain HTTP (for a network namespace's own nginx)."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/v1"

    @property
    def azure_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/openai/deployments/{DEPLOYMENT}?api-version={API_VERSION}"


def start_gateway(folder: Path, model_url: str) -> Gateway:
    """nginx with TLS and ``gzip on`` on 127.0.0.1 in front of the model at ``model_url`` (its /v1)."""
    need_programs()
    certs = make_certs(folder / "certs")
    port = free_port()
    sock = folder / "model.sock"
    upstream = model_url.removeprefix("http://").removesuffix("/v1")
    listens = [Listen(f"127.0.0.1:{port}"), Listen(f"unix:{sock}", tls=False, gzip=False)]
    nginx = Nginx(folder / "nginx", gateway_conf(folder / "nginx", upstream, listens, certs))
    nginx.start(ready=[("127.0.0.1", port)], socket_path=sock)
    return Gateway(nginx, certs, port, sock)
