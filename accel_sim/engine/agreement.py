"""Checks of the engine on random grids, shared by the benchmarks and the test suite: how
closely the closed-form model tracks the DES (``benchmarks/bench_engine.py``), and the hardware
perturbations of the monotonicity properties (``benchmarks/bench_mapper_properties.py``).

Each case is one matmul of a dataflow's plan (the plan's vector passes are closed form in both
engines, so comparing whole plans would dilute the gap): the DES's cycles and the twin's on the
mapping the mapper chose.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from accel_sim.arch.load import list_archs, load_arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapper import mapped_program
from accel_sim.engine.twin import twin_cycles
from accel_sim.workload.gemm import Gemm

#: The dataflows of the agreement grid (the issue's acceptance set).
GRID_DATAFLOWS = ("fp16", "w8a8", "w8a8_static", "w4a4_static")


@dataclass(frozen=True)
class Agreement:
    arch: str
    dataflow: str
    op: MatmulOp
    des: int
    twin: int

    @property
    def error(self) -> float:
        """(twin − DES) / DES."""
        return (self.twin - self.des) / self.des


def random_shape(rng: random.Random, top: int = 8192) -> tuple[int, int, int]:
    """M, K, N log-uniform in 1 … ``top``."""
    return tuple(int(round(math.exp(rng.uniform(0, math.log(top))))) for _ in range(3))


def grid_ops(seed: int, n: int, archs=None, dataflows=GRID_DATAFLOWS, top: int = 8192):
    """``n`` random (arch, dataflow, matmul op) cases; dataflows an arch cannot run are skipped.
    By default every shipped single-core architecture: a chip (``cores`` > 1) never runs a
    matmul as one core, its parts run on per-core views (``engine/chip.py``; their agreement is
    ``benchmarks/bench_chip.py --agreement``)."""
    rng = random.Random(seed)
    archs = list(archs or [name for name in list_archs() if load_arch(name).cores == 1])
    made = 0
    while made < n:
        arch_name, flow_name = rng.choice(archs), rng.choice(list(dataflows))
        arch = load_arch(arch_name)
        flow = get_dataflow(flow_name)
        M, K, N = random_shape(rng, top)
        plan = flow.build(Gemm(M, K, N), arch, None, flow.resolve_knobs(None))
        ops = [op for op in plan.matmuls if arch.compute.rates.get(op.precision, 0) > 0]
        if len(ops) != len(plan.matmuls):
            continue
        for op in ops:
            yield arch_name, flow_name, arch, op
        made += 1


def agreement(arch_name: str, flow: str, arch, op: MatmulOp) -> Agreement:
    program = mapped_program(arch, op)
    return Agreement(arch_name, flow, op, simulate_program(program).cycles, twin_cycles(program))


def knob_choices(dataflow: str, K: int) -> dict[str, tuple]:
    """Per knob, the values the monotonicity checks draw from for ``dataflow`` on a GEMM of
    depth ``K`` (``tests/test_mapper_properties.py``, ``benchmarks/bench_mapper_properties.py``):
    MUXQ's and LLM.int8's outlier channels, which their plans need and no trace gives there
    (0 … min(K, 64)), and OSC's group size; other dataflows run on their defaults."""
    if dataflow in ("muxq", "llm_int8"):
        return {"outlier_channels": tuple(range(min(K, 64) + 1))}
    if dataflow == "osc":
        return {"G": (16, 32, 64)}
    return {}


#: Resources :func:`more_hardware` can grow.
HARDWARE = ("capacity", "bandwidth", "buffers", "rate")


def more_hardware(data: dict, what: str, level: int) -> None:
    """Give an architecture (as a dict, edited in place) more of ``what``: level ``level``'s
    capacity ×2 (on-chip levels), its bandwidths ×2, one more buffer (up to 4), or every rate ×2."""
    mem = data["memory"]
    level = level % len(mem)
    if what == "capacity" and level > 0:
        mem[level]["capacity_bytes"] *= 2
    elif what == "bandwidth":
        mem[level]["read_bytes_per_cycle"] *= 2
        mem[level]["write_bytes_per_cycle"] *= 2
    elif what == "buffers" and level > 0:
        mem[level]["buffers"] = min(4, mem[level].get("buffers", 2) + 1)
    elif what == "rate":
        data["compute"]["rates"] = {k: 2 * v for k, v in data["compute"]["rates"].items()}

