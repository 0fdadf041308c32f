"""Wall time of the everyday jobs: every paper-table command, a model run, a 1,000-point sweep.

Run: ``python benchmarks/bench_tables.py [--repeat R]``. Each job runs in a fresh process (as a
user would start it), so import and numba/JIT warm-up are included. Targets (engine issue):
osc-table2 < 10 s; Qwen3-8B prefill of 2048 tokens × 4 dataflows < 5 s; 1,000 sweep points < 20 s on
2 cores. The targets are judged on cold runs: the on-disk result cache
(``accel_sim/result_cache.py``) starts empty, in a directory of this run's own; the osc-table2
and model jobs then run again warm (the cache filled by their cold runs), as a user's second run
of them does. With ``--repeat R`` each cold job runs R times, each from an empty cache of its
own, and the line gives the median and the best; a target is judged on the median (on a shared
2-core machine one job's times spread by tens of per cent from run to run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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


def _run(args: list[str], cache: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "accel_sim.cli", *args], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "ACCEL_SIM_CACHE": str(cache)})  # fmt: skip
    took = time.perf_counter() - start
    return took, "ok" if proc.returncode == 0 else f"FAILED ({proc.stderr.strip()[-200:]})"


def timed(label: str, args, cache: Path, repeat: int = 1, fresh: Path | None = None) -> float:
    """Wall seconds of the command ``args`` (a list, or a function of the run's number giving
    one: a sweep needs a new output directory per cold run), printed with the verdict. With
    ``repeat`` > 1: the median of that many runs, the first with ``cache``, the others each with
    an empty cache of its own under ``fresh``, the best printed too."""
    runs = []
    for i in range(repeat):
        where = cache if i == 0 else fresh / f"{label}-{i}".replace(" ", "_")
        runs.append(_run(args(i) if callable(args) else args, where))
    took = statistics.median(t for t, _ in runs)
    failed = [status for _, status in runs if status != "ok"]
    status = failed[0] if failed else "ok"
    if repeat > 1:
        status += f" (median of {repeat}; best {min(t for t, _ in runs):.2f} s)"
    target = TARGETS.get(label)  # (a warm run's label has a suffix: no target)
    verdict = ""
    if target is not None:
        verdict = f" (target < {target:.0f} s: {'met' if took < target else 'missed'})"
    print(f"  {label:<36} {took:7.2f} s  {status}{verdict}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1,
                        help="cold runs per job (median and best printed; default 1)")
    repeat = max(1, parser.parse_args().repeat)
    print(describe())
    out = Path(tempfile.mkdtemp(prefix="accel-sim-bench-"))
    extra = out / "cache" / "repeats"  # the repeated cold runs' own caches

    def cache(job: str) -> Path:  # every cold job starts from an empty cache of its own
        return out / "cache" / job

    try:
        print("paper tables (accel-sim table NAME --out DIR; cold: an empty result cache):")
        for name in TABLES:
            times = repeat if name in TARGETS else 1
            timed(name, ["table", name, "--out", str(out / "tables")], cache(name), times, extra)
        table = ["table", "osc-table2", "--out", str(out / "tables")]
        timed("osc-table2 (warm)", table, cache("osc-table2"))
        print("model workload:")
        prefill = ["model", "qwen3-8b", "--phase", "prefill", "--tokens", "2048", "--dataflow"]
        # the four dataflows of the mission: W8A8, OSC, MUXQ, OPS (the target), then all nine
        four = [*prefill, "w8a8", "osc", "muxq", "ops"]
        timed("model qwen3-8b prefill 2048", four, cache("model"), repeat, extra)
        timed("model qwen3-8b prefill 2048 (all)", [*prefill, "all"], cache("model-all"))
        timed("model qwen3-8b prefill 2048 (warm)", four, cache("model"))
        print(f"sweep (fresh output directory, {default_workers()} forked local workers):")
        sweep = ["sweep", "workloads/sweeps/bench_1000.yaml", "--no-progress", "--out"]
        fresh_out = lambda i: [*sweep, str(out / ("sweep" if i == 0 else f"sweep-{i}"))]  # noqa: E731
        timed("sweep bench_1000", fresh_out, cache("sweep"), repeat, extra)
        timed("sweep bench_1000 (resumed)", [*sweep, str(out / "sweep")], cache("sweep"))
        timed("sweep bench_1000 (new out, warm)", [*sweep, str(out / "sweep2")], cache("sweep"))
    finally:
        shutil.rmtree(out, ignore_errors=True)

if __name__ == "__main__":
    main()
