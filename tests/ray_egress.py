"""Run by tests/test_ray_egress.py inside a loopback-only network namespace: start a local Ray the
way clinieval does, with a logging proxy named in ``HTTP_PROXY``, and report what reached the
proxy and what proxy a Ray worker sees.

    python -m tests.ray_egress REPORT_DIR
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def main(report: Path) -> None:
    seen: list[str] = []

    class Logging(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # a proxy is sent the whole URL: the request line says where to
            seen.append(self.requestline)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_POST = do_GET

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Logging)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{proxy.server_address[1]}"
    os.environ["HTTP_PROXY"] = os.environ["HTTPS_PROXY"] = url

    from clinieval.models import ray_model

    ray = ray_model.import_ray()
    ray_model._init(ray, None)

    @ray.remote
    def worker_proxy() -> str | None:
        import clinieval.models.ray_model  # noqa: F401  (restores the command's proxies)

        return os.environ.get("HTTP_PROXY")

    worker = ray.get(worker_proxy.remote())
    time.sleep(5)  # the head's lookups run in its first seconds
    ray.shutdown()
    result = {
        "seen": seen,
        "worker_proxy": worker,
        "proxy": url,
        "driver_proxy": os.environ.get("HTTP_PROXY"),
    }
    (report / "report.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
