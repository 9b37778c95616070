"""How many CPUs this process may run on, which is what thread counts should follow.

``os.cpu_count()`` counts the machine's CPUs, not the ones a process is allowed: under ``taskset``,
a container's cpuset, a Slurm allocation or a test worker pinned to one core it overstates them,
and llama.cpp's threads, which spin while they wait for each other, then share cores and run many
times slower (an embedded-model test went from 16 s to 103 s with two workers on two cores).
The affinity mask is what the scheduler will honour, so thread counts are taken from it.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The number of CPUs in this process's affinity mask (at least 1); the machine's count where
    the platform has no affinity call (macOS, Windows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
