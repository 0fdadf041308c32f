"""One line describing the machine a speed benchmark ran on, for comparing figures across runs.

Wall times depend on the machine as much as on the code: the same commit ran ``accel-sim table
osc-table2`` in 13.2 s on one 2-core machine and 31.5 s on another. So every speed benchmark
prints, before its figures, the CPU, the cores it may use, the Python, and the time of a fixed
pure-Python reference loop (10 million integer additions; the engine is mostly Python, so its
times scale roughly with this one). Compare two runs' figures only after comparing their
reference times.
"""

from __future__ import annotations

import os
import platform
import sys
import time

REFERENCE_ADDITIONS = 10_000_000


def reference_seconds(repeat: int = 3) -> float:
    """The best of ``repeat`` timings of the reference loop, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        total = 0
        for i in range(REFERENCE_ADDITIONS):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> str:
    """``machine: <cpu>, <n> cores usable, Python x.y.z; reference loop <s> s``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"machine: {cpu_name()}, {cores} cores usable, Python {platform.python_version()}; "
            f"reference loop ({REFERENCE_ADDITIONS:,} pure-Python additions) "
            f"{reference_seconds():.2f} s")  # fmt: skip


if __name__ == "__main__":
    print(describe())
    sys.exit(0)
