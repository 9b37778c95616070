"""Thread counts follow the CPUs a process may use, not the machine's count (issue 35).

Under ``taskset``, a container cpuset or a test worker pinned to one core, llama.cpp sized from
``os.cpu_count()`` runs more spinning threads than cores and slows many times over."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
from pathlib import Path
from clinieval.cpus import usable_cpus
from clinieval.models.llamacpp import LlamaCppModel
print(usable_cpus(), LlamaCppModel(Path(sys.argv[1])).n_threads)
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_the_embedded_model_uses_as_many_threads_as_cpus_it_may_run_on(smollm2_path: Path) -> None:
    first = min(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(smollm2_path)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_without_a_mask_every_allowed_cpu_is_used(smollm2_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(smollm2_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    allowed = str(len(os.sched_getaffinity(0)))
    assert done.stdout.split() == [allowed, allowed]
