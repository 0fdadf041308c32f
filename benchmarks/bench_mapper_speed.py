"""How fast the mapper maps, and proof that a faster mapper chooses the same mappings.

Run: ``python benchmarks/bench_mapper_speed.py [--n 60] [--seed 8]`` prints the wall time per
mapping (ms, cache cleared) over a reference set of matmuls; ``--record FILE`` stores
``repr(map_matmul(arch, op))`` for every op of the set as JSON, ``--check FILE`` maps the set
again and counts the ops whose mapping differs from the stored one (exit status 1 if any does).
The speed-up ``--check`` prints divides by the seconds stored with the record, so it is only as
good as the two runs' machine load: to compare two versions, run this file from each checkout
(``PYTHONPATH`` at it) in alternation, a few times, and compare the CPU seconds.

The reference set: the five architectures shipped with the mapper (and edited copies of four:
more buffers, capacity and bandwidth, so that buffer counts 3 and 4 and large levels are
searched) × every precision of fp16/int8/int4/fp4/int16 the unit runs × ``--n`` seeded
log-uniform shapes 1…8192 per dimension (one in four with ``count`` > 1, one in four with
fractional operand widths and per-row/per-column scale streams), the matmuls the dataflows build
on the engine's agreement grid (``agreement.grid_ops``) and those of the ``osc-table2`` slice
M ∈ {16, 128} (W8A8 and OSC at every G on the cube), de-duplicated by the mapper's cache key.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import replace

from accel_sim.arch.load import arch_from_dict, load_arch
from accel_sim.dataflow.plan import MatmulOp, Scales
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine import mapper
from accel_sim.engine.agreement import grid_ops, more_hardware
from accel_sim.tables import osc_table2
from accel_sim.workload.gemm import Gemm

PRECISIONS = ("fp16", "int8", "int4", "fp4", "int16")
BITS = {"fp16": 16, "int8": 8, "int4": 4, "fp4": 4.25, "int16": 16}
#: The architectures of the set (pinned: an architecture added later must not change the set).
ARCHS = ("ascend_like_cube", "edge_npu_int8", "rtx3090_like", "systolic_128x128_os",
         "systolic_32x32_ws")  # fmt: skip
EDITS = (("buffers", 1), ("buffers", 2), ("capacity", 1), ("bandwidth", 0))


def _log_uniform(rng: random.Random, top: int = 8192) -> int:
    return int(round(math.exp(rng.uniform(0, math.log(top)))))


def reference_ops(n: int, seed: int) -> list[tuple[str, object, MatmulOp]]:
    """(label, arch, op) of the reference set, in a fixed order."""
    rng = random.Random(seed)
    archs = [(name, load_arch(name)) for name in ARCHS]
    for name, arch in list(archs)[:4]:
        for what, level in EDITS:
            data = json.loads(arch.model_dump_json())
            more_hardware(data, what, level)
            more_hardware(data, what, level)
            archs.append((f"{name}+{what}@{level}", arch_from_dict(data, "bench")))
    cases, seen = [], set()

    def add(label, arch, op):
        key = (arch.fingerprint, replace(op, name=""))
        if key not in seen:
            seen.add(key)
            cases.append((label, arch, op))

    for label, arch in archs:
        precisions = [p for p in PRECISIONS if arch.compute.rates.get(p, 0) > 0]
        edited = "+" in label
        for i in range(n // 4 if edited else n):
            prec = precisions[i % len(precisions)]
            M, K, N = (_log_uniform(rng) for _ in range(3))
            count = rng.choice((2, 3, 8, 32)) if rng.random() < 0.25 else 1
            a = b = BITS[prec]
            sa = sb = 0.0
            if rng.random() < 0.25:  # dataflow-like odd widths and scale streams
                a, b = a + rng.choice((0.0, 0.25, 8 / 128)), b + rng.choice((0.0, 0.25, 0.5))
                sa, sb = rng.choice((0.0, 16.0, 32.0)), rng.choice((0.0, 16.0, 32.0))
            op = MatmulOp("ref", M, K, N, prec, a, b, rng.choice((16.0, 32.0)),
                          epilogue_ops_per_output=rng.choice((0.0, 1.0)), count=count,
                          a_scales=Scales(sa) if sa else None,
                          b_scales=Scales(sb) if sb else None)  # fmt: skip
            add(label, arch, op)
    for arch_name, flow, arch, op in grid_ops(seed, n, archs=ARCHS, top=8192):
        add(f"{arch_name}/{flow}", arch, op)
    cube = load_arch(osc_table2.ARCH)
    for M in osc_table2.M_MEMORY[:1] + osc_table2.M_COMPUTE[:1]:
        for K in osc_table2.SIZES:
            for N in osc_table2.SIZES:
                for flow, knobs in [("w8a8", None)] + [("osc", {"G": G})
                                                       for G in osc_table2.GROUPS]:
                    df = get_dataflow(flow)
                    plan = df.build(Gemm(M, K, N), cube, None, df.resolve_knobs(knobs))
                    for op in plan.matmuls:
                        add(f"osc-table2/{flow}", cube, op)
    return cases


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="random shapes per shipped arch")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--record", help="store the mappings of the set in this JSON file")
    parser.add_argument("--check", help="compare the mappings with this JSON file")
    args = parser.parse_args()
    cases = reference_ops(args.n, args.seed)
    mapper._CACHE.clear()
    reprs, times = [], []
    cpu = time.process_time()
    for _, arch, op in cases:
        start = time.perf_counter()
        reprs.append(repr(mapper.map_matmul(arch, op)))
        times.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    total = sum(times)
    ms = sorted(t * 1e3 for t in times)
    print(f"{len(cases)} ops mapped in {total:.2f} s ({cpu:.2f} s CPU): "
          f"{1e3 * total / len(cases):.1f} ms per mapping (median {ms[len(ms) // 2]:.1f}, "
          f"p90 {ms[int(0.9 * len(ms))]:.1f}, max {ms[-1]:.1f} ms)")  # fmt: skip
    groups: dict[str, list[float]] = {}
    for (label, _, _), t in zip(cases, times):
        groups.setdefault(label.split("/")[0].split("+")[0], []).append(t)
    for name, ts in groups.items():
        print(f"  {name:<20} {len(ts):4} ops  {1e3 * sum(ts) / len(ts):6.1f} ms per mapping")
    if args.record:
        with open(args.record, "w") as f:
            json.dump({"n": args.n, "seed": args.seed, "seconds": total, "mappings": reprs}, f)
        print(f"recorded {len(reprs)} mappings in {args.record}")
    if args.check:
        with open(args.check) as f:
            ref = json.load(f)
        if (ref["n"], ref["seed"]) != (args.n, args.seed):
            sys.exit(f"{args.check} was recorded with --n {ref['n']} --seed {ref['seed']}")
        differ = [i for i, (a, b) in enumerate(zip(reprs, ref["mappings"])) if a != b]
        print(f"{len(reprs) - len(differ)} of {len(reprs)} mappings identical to {args.check}; "
              f"speed-up {ref['seconds'] / total:.2f}x ({1e3 * ref['seconds'] / len(reprs):.1f}"
              f" -> {1e3 * total / len(reprs):.1f} ms per mapping)")  # fmt: skip
        for i in differ[:10]:
            label, _, op = cases[i]
            print(f"  differs: {label} {op}\n    now {reprs[i]}\n    ref {ref['mappings'][i]}")
        if differ:
            sys.exit(1)


if __name__ == "__main__":
    main()
