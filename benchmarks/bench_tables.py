"""Wall time of the everyday jobs: every paper-table command, a model run, a 1,000-point sweep.

Run: ``python benchmarks/bench_tables.py``. Each job runs in a fresh process (as a user would
start it), so import and numba/JIT warm-up are included. Targets (engine issue): osc-table2
< 10 s; Qwen3-8B prefill of 2048 tokens × 4 dataflows < 5 s; 1,000 sweep points < 20 s on 2 cores.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe

from accel_sim.workers import default_workers

ROOT = Path(__file__).resolve().parents[1]
TABLES = ["osc-table2", "prefixquant-fig6", "ops-fig3", "muxq-overhead", "tweo-static"]
TARGETS = {"osc-table2": 10.0, "model qwen3-8b prefill 2048": 5.0, "sweep bench_1000": 20.0}
#: the model target's four dataflows: W8A8, OSC, MUXQ and OPS


def timed(label: str, args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "accel_sim.cli", *args], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    took = time.perf_counter() - start
    status = "ok" if proc.returncode == 0 else f"FAILED ({proc.stderr.strip()[-200:]})"
    target = TARGETS.get(label)
    verdict = ""
    if target is not None:
        verdict = f" (target < {target:.0f} s: {'met' if took < target else 'missed'})"
    print(f"  {label:<32} {took:7.2f} s  {status}{verdict}")
    return took


def main() -> None:
    print(describe())
    out = Path(tempfile.mkdtemp(prefix="accel-sim-bench-"))
    try:
        print("paper tables (accel-sim table NAME --out DIR):")
        for name in TABLES:
            timed(name, ["table", name, "--out", str(out / "tables")])
        print("model workload:")
        prefill = ["model", "qwen3-8b", "--phase", "prefill", "--tokens", "2048", "--dataflow"]
        # the four dataflows of the mission: W8A8, OSC, MUXQ, OPS (the target), then all nine
        timed("model qwen3-8b prefill 2048", [*prefill, "w8a8", "osc", "muxq", "ops"])
        timed("model qwen3-8b prefill 2048 (all)", [*prefill, "all"])
        print(f"sweep (fresh output directory, LocalCluster of {default_workers()} workers):")
        timed("sweep bench_1000", ["sweep", "workloads/sweeps/bench_1000.yaml", "--out",
                                   str(out / "sweep"), "--no-progress"])  # fmt: skip
        timed("sweep bench_1000 (resumed)", ["sweep", "workloads/sweeps/bench_1000.yaml", "--out",
                                             str(out / "sweep"), "--no-progress"])  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
