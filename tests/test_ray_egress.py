"""No request leaves the machine when clinieval starts a local Ray (issue 35).

Ray's head looks up its cloud provider on every start, usage statistics off or not: GET
169.254.169.254/metadata/instance, metadata.google.internal/computeMetadata/v1 and
169.254.169.254/latest/meta-data/, through ``HTTP_PROXY`` when one is set. In a network namespace
with only loopback, a logging proxy named in ``HTTP_PROXY`` received those three requests from a
bare ``ray.init``; started through clinieval (``ray_model.sealed_proxies``) it receives none,
while a Ray worker still sees the command's proxy for the model endpoints it may reach.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import in_loopback_namespace


@pytest.mark.slow
def test_a_local_ray_started_by_clinieval_sends_nothing_through_the_proxy(tmp_path: Path) -> None:
    report = in_loopback_namespace("tests.ray_egress", str(tmp_path), report=tmp_path, timeout=240)
    assert report["seen"] == [], report["seen"]  # before: the three cloud-metadata GETs
    assert report["worker_proxy"] == report["proxy"]  # the workers keep the command's proxy
    assert report["driver_proxy"] == report["proxy"]  # and so does the command after Ray started
