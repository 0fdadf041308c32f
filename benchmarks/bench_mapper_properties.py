"""How often, and by how much, the DES breaks the mapper's monotonicity guarantees.

Run: ``python benchmarks/bench_mapper_properties.py [--n 150] [--seed 1]``. Draws random
(arch, dataflow, GEMM ≤ 2048³) cases and, per case, either doubles one hardware resource
(a level's capacity or bandwidth, one more buffer, the rate table ×2) or adds one to M, K or N,
and prints the cases where cycles moved the wrong way, worst first. The mapper's objective only
gains choices with more hardware; the DES can still order two mappings differently from the
closed-form model that ranked them (tests/test_mapper_properties.py allows that SLACK).
"""

from __future__ import annotations

import argparse
import json
import os
import random

import accel_sim
from accel_sim.arch.load import arch_from_dict, list_archs, load_arch
from accel_sim.engine.agreement import HARDWARE, more_hardware

PRECISION = {"fp16": "fp16", "w8a8": "int8", "w8a8_static": "int8", "w4a4_static": "int4"}


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for kind in ("hardware", "work"):
        bad, total = [], 0
        while total < args.n:
            arch, flow = rng.choice(list_archs()), rng.choice(list(PRECISION))
            if not load_arch(arch).compute.rates.get(PRECISION[flow]):
                continue
            total += 1
            shape = tuple(rng.randint(1, 2048) for _ in range(3))
            base = accel_sim.simulate(arch, shape, flow).cycles
            if kind == "hardware":
                what = rng.choice(HARDWARE)
                level = rng.randint(0, 7)
                data = json.loads(load_arch(arch).model_dump_json())
                more_hardware(data, what, level)
                other = accel_sim.simulate(arch_from_dict(data, "bench"), shape, flow).cycles
                wrong, tag = other / base - 1, f"{what} x2 @ level {level}"
            else:
                dim = rng.randrange(3)
                bigger = tuple(v + (i == dim) for i, v in enumerate(shape))
                other = accel_sim.simulate(arch, bigger, flow).cycles
                wrong, tag = 1 - other / base, f"{'MKN'[dim]}+1"
            if wrong > 0:
                bad.append((wrong, arch, flow, shape, tag, base, other))
        print(f"more {kind}: {len(bad)} of {total} cases moved the wrong way")
        for wrong, arch, flow, shape, tag, base, other in sorted(bad, reverse=True)[:10]:
            print(f"  {wrong:7.2%}  {arch:>20} {flow:>12} {'x'.join(map(str, shape)):>16} "
                  f"{tag:<24} {base:,} -> {other:,}")


if __name__ == "__main__":
    main()
