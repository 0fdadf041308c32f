"""How often, and by how much, the DES breaks the mapper's monotonicity guarantees.

Run: ``python benchmarks/bench_mapper_properties.py [--n 150] [--seed 1] [--all-dataflows]``.
Draws random (arch, dataflow, GEMM ≤ 2048³) cases — the dataflows of the agreement grid (fp16,
w8a8, w8a8_static, w4a4_static), or with ``--all-dataflows`` every registered one, their knobs
drawn as the property tests draw them (``agreement.knob_choices``) — and, per case, either
doubles one hardware resource
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
from accel_sim.api import _as_gemm, get_dataflow
from accel_sim.arch.load import arch_from_dict, list_archs, load_arch
from accel_sim.dataflow.registry import dataflow_names
from accel_sim.engine.agreement import GRID_DATAFLOWS, HARDWARE, knob_choices, more_hardware
from accel_sim.errors import UserInputError


def _runs(arch: str, flow: str) -> bool:
    """Whether ``flow`` runs on ``arch``: its plan builds and every matmul has a rate (which
    matmuls a plan has, at which precisions, depends on neither the shape nor the knobs)."""
    knobs = {k: v[-1] for k, v in knob_choices(flow, 64).items()} or None
    try:
        plan = get_dataflow(flow).build(_as_gemm((64, 64, 64)), load_arch(arch), None,
                                        get_dataflow(flow).resolve_knobs(knobs))  # fmt: skip
    except UserInputError:
        return False
    rates = load_arch(arch).compute.rates
    return all(rates.get(op.precision, 0) > 0 for op in plan.matmuls)


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--all-dataflows", action="store_true",
                        help="every registered dataflow, not only the agreement grid's four")
    args = parser.parse_args()
    flows = dataflow_names() if args.all_dataflows else list(GRID_DATAFLOWS)
    rng = random.Random(args.seed)
    for kind in ("hardware", "work"):
        bad, total = [], 0
        while total < args.n:
            arch, flow = rng.choice(list_archs()), rng.choice(flows)
            if not _runs(arch, flow):
                continue
            total += 1
            shape = tuple(rng.randint(1, 2048) for _ in range(3))
            knobs = {k: rng.choice(v) for k, v in knob_choices(flow, shape[1]).items()} or None
            base = accel_sim.simulate(arch, shape, flow, knobs).cycles
            if kind == "hardware":
                what = rng.choice(HARDWARE)
                level = rng.randint(0, 7)
                data = json.loads(load_arch(arch).model_dump_json())
                more_hardware(data, what, level)
                other = accel_sim.simulate(arch_from_dict(data, "bench"), shape, flow, knobs).cycles
                wrong, tag = other / base - 1, f"{what} x2 @ level {level}"
            else:
                dim = rng.randrange(3)
                bigger = tuple(v + (i == dim) for i, v in enumerate(shape))
                other = accel_sim.simulate(arch, bigger, flow, knobs).cycles
                wrong, tag = 1 - other / base, f"{'MKN'[dim]}+1"
            if wrong > 0:
                name = flow + "".join(f" {k}={v}" for k, v in (knobs or {}).items())
                bad.append((wrong, arch, name, shape, tag, base, other))
        print(f"more {kind}: {len(bad)} of {total} cases moved the wrong way")
        for wrong, arch, flow, shape, tag, base, other in sorted(bad, reverse=True)[:10]:
            print(f"  {wrong:7.2%}  {arch:>20} {flow:>24} {'x'.join(map(str, shape)):>16} "
                  f"{tag:<24} {base:,} -> {other:,}")


if __name__ == "__main__":
    main()
