"""Where the DES's time goes on the osc-table2 shapes: simulated steps, simpy events per step by
type, fingerprints, wall time per simulated step, and how many simulated steps lie in stretches
where the collapse waits for a drifting lead (docs/engine.md, "What still costs time").

Run: ``python benchmarks/bench_des_steps.py [--m 16 64 256 1024 2048] [--stride 8]``. Counts
are exact and machine-independent; the microseconds depend on the machine (run it on a quiet
one).

A *lead-growth stretch* is a whole innermost sweep (one output tile's steps), simulated step by
step, between whose start and end no process fell back relative to the compute step and at least
one moved further ahead: the transient a constant-drift jump could skip at best.
"""

from __future__ import annotations

import argparse
import collections
import os
import time

import simpy

from accel_sim.api import simulate
from accel_sim.arch.load import load_arch
from accel_sim.engine import des
from accel_sim.tables.osc_table2 import SIZES

COUNTS: collections.Counter = collections.Counter()
EVENTS: collections.Counter = collections.Counter()


def _instrument() -> None:
    """Count every simpy event processed, every simulated step and fingerprint, and the leads
    of every process at the start of each innermost sweep (monkeypatching, benchmark only)."""
    step, after, run = simpy.Environment.step, des._Engine.after_step, des._Engine.run

    def counted_step(env):
        if COUNTS["inside"]:  # the matmul DES only, not the plan scheduler's events
            EVENTS[type(env._queue[0][3]).__name__ if env._queue else "-"] += 1
        return step(env)

    def recorded_after(engine, j):
        inner = next((n for n in reversed(engine.program.count) if n > 1), 1)
        if j % inner == 0:
            leads = tuple(None if p.phase == "get" else p.idx - j for p in engine.procs)
            engine.bench_leads = getattr(engine, "bench_leads", []) + [(j, engine.simulated, leads)]
        return after(engine, j)

    def counted_run(engine):
        start = time.perf_counter()
        COUNTS["inside"] = 1
        result = run(engine)
        COUNTS["inside"] = 0
        COUNTS["des_seconds_x1e6"] += round(1e6 * (time.perf_counter() - start))
        COUNTS["simulated"] += engine.simulated
        COUNTS["steps"] += engine.program.n_steps
        COUNTS["fingerprints"] += len(engine.trail_steps)
        COUNTS["growth"] += _growth_steps(getattr(engine, "bench_leads", []))
        return result

    simpy.Environment.step = counted_step
    des._Engine.after_step = recorded_after
    des._Engine.run = counted_run


def _growth_steps(marks: list) -> int:
    """Simulated steps in whole sweeps over which leads only grew (and at least one did)."""
    total = 0
    for (j0, s0, l0), (j1, s1, l1) in zip(marks, marks[1:]):
        if s1 - s0 != j1 - j0:
            continue  # the engine jumped in between
        moves = [b - a for a, b in zip(l0, l1) if a is not None and b is not None]
        if moves and min(moves) >= 0 and max(moves) > 0:
            total += s1 - s0
    return total


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, nargs="+", default=[16, 64, 256, 1024, 2048])
    parser.add_argument("--stride", type=int, default=des.STRIDE,
                        help=f"steps between fingerprints in long loops (default {des.STRIDE}; "
                             "1 = every step, as before; results are identical)")  # fmt: skip
    args = parser.parse_args()
    des.STRIDE = args.stride
    arch = load_arch("ascend_like_cube")
    simulate(arch, (64, 512, 512), "w8a8")  # warm up (numba, imports) before counting
    _instrument()
    cases = [((M, K, N), flow, knobs) for M in args.m for K in SIZES for N in SIZES
             for flow, knobs in (("w8a8", None), ("osc", {"G": 32}))]  # fmt: skip
    start = time.perf_counter()
    for gemm, flow, knobs in cases:
        simulate(arch, gemm, flow, knobs)
    wall = time.perf_counter() - start
    sim, des_s = COUNTS["simulated"], COUNTS["des_seconds_x1e6"] / 1e6
    print(f"{len(cases)} simulations (M in {args.m}, K, N in {list(SIZES)}; W8A8 and OSC G=32 on "
          f"ascend_like_cube): wall {wall:.1f} s, of which DES {des_s:.1f} s")
    print(f"  steps {COUNTS['steps']:,}, simulated {sim:,} ({sim / COUNTS['steps']:.1%}), "
          f"fingerprints {COUNTS['fingerprints']:,}")
    print(f"  DES time per simulated step: {1e6 * des_s / sim:.0f} us; simpy events per "
          f"simulated step: {sum(EVENTS.values()) / sim:.1f}")
    print("  by type: " + ", ".join(f"{k} {v / sim:.1f}" for k, v in EVENTS.most_common(8)))
    print(f"  simulated steps in lead-growth stretches: {COUNTS['growth']:,} "
          f"({COUNTS['growth'] / sim:.1%}; the most a drift jump could skip)")


if __name__ == "__main__":
    main()
