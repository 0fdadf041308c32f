"""Seeded fuzz: the steady-state collapse is exact (cycles and the whole stall breakdown) on
schema-valid edits of the cube's bandwidths, latencies, buffers, capacities and bursts × shapes ×
counts.

The edits mirror what a design-space sweep does to an architecture file; the original engine's
collapse differed here by up to 0.9 % (a store get already granted but not yet resumed was
neither fingerprinted nor shifted, see ``engine/simpy_adapter.py``). About half of the cases
(34 of 60) jump at least once on a reused self-map (a period learnt in an earlier block or
instance, ``engine/des.py``) and compare step classes across blocks (``Program.match_end``).
A second fuzz edits every shipped single-core architecture the same way and runs the matmuls of
every registered dataflow's plan, with their scale, block-scale and index streams
(``docs/engine.md``, "Metadata streams").
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from accel_sim.api import _as_gemm, get_dataflow
from accel_sim.arch.load import arch_from_dict, list_archs, load_arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.dataflow.registry import dataflow_names
from accel_sim.engine.agreement import knob_choices
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapper import mapped_program

BITS = {"fp16": 16, "int8": 8, "int4": 4}
CASES = 60
PLAN_CASES = 24
SINGLE_CORE = [name for name in list_archs() if load_arch(name).cores == 1]


def _edit(rng: random.Random, base: dict) -> dict:
    data = json.loads(json.dumps(base))
    aligned = rng.random() < 0.5  # round numbers make simultaneous events (the hard case) likely
    for i, level in enumerate(data["memory"]):
        if rng.random() < 0.5:
            level["latency_cycles"] = rng.choice([0, 10, 32, 100, 256, 500] if aligned
                                                 else [0, 1, 3, 37, 250, rng.randint(0, 1500)])
        for key in ("read_bytes_per_cycle", "write_bytes_per_cycle"):
            if rng.random() < 0.4:
                level[key] = rng.choice([16, 32, 64, 128, 256, 512, 1024] if aligned
                                        else [8, 37, 100, rng.uniform(4, 1024)])
        if i > 0 and rng.random() < 0.5:
            level["buffers"] = rng.randint(1, 4)
        if i > 0 and rng.random() < 0.3:
            level["capacity_bytes"] *= rng.choice([2, 4])  # larger only: every GEMM maps
    return data


def _bursts(rng: random.Random, data: dict) -> dict:
    """In half of the cases, some levels grant their ports a burst at a time (``burst_bytes``:
    a transfer is then several grants, and the mover's state carries the bursts left). Drawn
    from a generator of its own, so the other edits and the shapes stay those of the seed."""
    if rng.random() < 0.5:
        for level in data["memory"]:
            if rng.random() < 0.5:
                level["burst_bytes"] = rng.choice([512, 1000, 4096])
    return data


@pytest.mark.parametrize("seed", range(CASES))
def test_collapse_on_off_identical(seed):
    rng = random.Random(seed)
    base = json.loads(load_arch("ascend_like_cube").model_dump_json())
    data = _bursts(random.Random(f"bursts-{seed}"), _edit(rng, base))
    arch = arch_from_dict(data, f"fuzz-{seed}")
    precision = rng.choice(list(BITS))
    M, K, N = (rng.randint(1, 2048) for _ in range(3))
    op = MatmulOp("fuzz", M, K, N, precision, BITS[precision], BITS[precision],
                  epilogue_ops_per_output=rng.choice([0.0, 2.0]), count=rng.randint(1, 3))
    program = mapped_program(arch, op)
    fast = simulate_program(program, collapse=True)
    slow = simulate_program(program, collapse=False)
    assert (fast.cycles, fast.stalls) == (slow.cycles, slow.stalls)


@pytest.mark.parametrize("seed", range(PLAN_CASES))
def test_collapse_on_off_identical_on_every_dataflow(seed):
    """The matmuls of a random dataflow's plan (knobs as the monotonicity properties draw them)
    on an edited single-core architecture: collapse on and off agree, metadata streams and all.
    A dataflow that does not run on the drawn architecture (OSC without FP4) draws again."""
    rng = random.Random(f"plans-{seed}")
    while True:
        name, flow = rng.choice(SINGLE_CORE), rng.choice(dataflow_names())
        data = _bursts(random.Random(f"plan-bursts-{seed}"),
                       _edit(rng, json.loads(load_arch(name).model_dump_json())))  # fmt: skip
        arch = arch_from_dict(data, f"fuzz-{name}-{seed}")
        M, K, N = (rng.randint(128, 2048) for _ in range(3))  # (enough steps to collapse)
        knobs = {k: rng.choice(v) for k, v in knob_choices(flow, K).items()} or None
        dataflow = get_dataflow(flow)
        rates = arch.compute.rates
        if flow == "osc" and not (rates.get("fp4") and rates.get("fp16")):
            continue
        plan = dataflow.build(_as_gemm((M, K, N)), arch, None, dataflow.resolve_knobs(knobs))
        if all(rates.get(op.precision, 0) > 0 for op in plan.matmuls):
            break
    for op in plan.matmuls:
        program = mapped_program(arch, replace(op, count=rng.randint(1, 3)))
        fast = simulate_program(program, collapse=True)
        slow = simulate_program(program, collapse=False)
        assert (fast.cycles, fast.stalls) == (slow.cycles, slow.stalls), (name, flow, op)
