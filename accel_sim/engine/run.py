"""Run an execution plan on an architecture: each operation in turn, timed and counted.

Matmuls go through the DES (or its closed-form twin); vector, comparator and transfer operations
are costed in closed form (they are single streaming passes with no tiling decisions):

* vector op: ``startup + max(ceil(ops / lanes), ceil(bytes / bandwidth))`` cycles, running from
  the first on-chip level when its operands fit there, else from DRAM;
* comparator op: ``latency + ceil(comparisons / comparators)`` cycles;
* transfer op: ``latency + ceil(bytes / read bandwidth)`` cycles of DRAM, or of the first
  on-chip level for data resident on chip.

On an architecture with ``efficiency["launch_us"]`` (GPU proxies) every instance of a matmul or
vector op is one GPU kernel and pays that fixed time on top, as the stall ``launch``.

Each operation is first costed alone. With ``overlap`` (the default) the plan's graph then runs
on concurrent units, row block by row block, with DRAM shared (``engine/schedule.py``); without
it, or on a GPU proxy (kernels launched one after another), the operations run one after another
in list order. A matmul with ``count`` > 1 runs its instances through one pipeline (the DES's
outermost loop); other ops with ``count`` > 1 run that many times back to back.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import ComparatorOp, MatmulOp, Plan, TransferOp, VectorOp, unit_of
from accel_sim.engine.chip import simulate_matmul, stream_view
from accel_sim.engine.counts import ActionCounts
from accel_sim.engine.gc_pause import gc_paused
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.schedule import Schedule, schedule_plan
from accel_sim.errors import UserInputError


@dataclass
class OpResult:
    name: str
    kind: str
    cycles: int
    compute_cycles: int = 0
    stalls: Counter = field(default_factory=Counter)
    counts: ActionCounts = field(default_factory=ActionCounts)
    unit_cycles: float = 0.0  # matrix-unit cycles at FP16-equivalent rate spent on useful MACs
    # as run in the plan (run_plan): cycles are the op's share of the run (one after another:
    # all of its own; overlapped: its time on the critical chain); alone = its cycles by itself,
    # busy = cycles its unit held it, [start, end) its first to its last cycle in the run
    unit: str = ""
    alone_cycles: int = 0
    busy_cycles: int = 0
    start: int = 0
    end: int = 0


@dataclass
class PlanResult:
    """A plan as run: ``ops`` in plan order; their ``cycles`` add up to the run's."""

    plan: Plan
    ops: list[OpResult]
    overlap: bool = False
    critical: tuple[str, ...] = ()  # the ops the run's cycles pass through, first one first
    overlap_cycles: int = 0  # cycles during which at least two units are busy
    schedule: Schedule | None = None  # the overlapped run's segments (engine/schedule.py)

    @property
    def cycles(self) -> int:
        return sum(op.cycles for op in self.ops)

    @property
    def sequential_cycles(self) -> int:
        """The same operations one after another."""
        return sum(op.alone_cycles for op in self.ops)

    def units_busy(self) -> dict[str, int]:
        """Cycles each unit is busy (``matrix``, ``vector``, ``comparator``, ``dma``)."""
        out = dict.fromkeys(("matrix", "vector", "comparator", "dma"), 0)
        for op in self.ops:
            out[op.unit] += op.busy_cycles
        return {unit: cycles for unit, cycles in out.items() if cycles}


_CACHE: dict[tuple, OpResult] = {}
_CACHE_LIMIT = 20000


def _matmul(arch: Arch, op: MatmulOp, engine: str, collapse: bool) -> OpResult:
    """One matmul through the engine (``engine/chip.py``: one core as it is, a chip partitioned
    across its cores), cached by content. ``unit_cycles`` counts every core's units, so the
    reported utilization is the chip's."""
    key = (arch.fingerprint, replace(op, name=""), engine, collapse)
    hit = _CACHE.get(key)
    if hit is None:
        run = simulate_matmul(arch, op, engine, collapse)
        hit = OpResult(op.name, "matmul", run.cycles, run.compute_cycles, run.stalls, run.counts,
                       unit_cycles=op.macs / (run.rate * arch.cores))  # fmt: skip
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = hit
    return _times(hit, op.name, 1)


def _times(result: OpResult, name: str, count: int) -> OpResult:
    counts = ActionCounts()
    counts.add(result.counts, count)
    return OpResult(
        name, result.kind, result.cycles * count, result.compute_cycles * count,
        Counter({k: v * count for k, v in result.stalls.items()}), counts,
        result.unit_cycles * count,
    )  # fmt: skip


def _vector(arch: Arch, op: VectorOp) -> OpResult:
    """A streaming pass; on a chip split evenly over every core's vector unit and per-core
    levels (``engine/chip.py``: ``stream_view``), shared levels as they are."""
    arch = stream_view(arch)
    lanes = arch.vector.lanes
    level = 1 if op.read_bytes + op.write_bytes <= arch.memory[1].capacity_bytes else 0
    work = math.ceil(op.elements * op.ops_per_element / lanes)
    traffic = MemorySystem(arch).access_cycles(level, op.read_bytes, op.write_bytes)
    cycles = arch.vector.startup_cycles + max(work, traffic)
    level = arch.memory[level]
    counts = ActionCounts(vector_ops=op.elements * op.ops_per_element)
    counts.bytes_read[level.name] += op.read_bytes
    counts.bytes_written[level.name] += op.write_bytes
    one = OpResult(op.name, "vector", cycles, 0, Counter({f"vector:{op.name}": cycles}), counts)
    return _times(one, op.name, op.count)


def _comparator(arch: Arch, op: ComparatorOp) -> OpResult:
    unit = arch.early_bird
    if unit is None:
        raise UserInputError(arch.origin, "this dataflow needs an early-bird comparator unit",
                             "early_bird")  # fmt: skip
    cycles = unit.latency_cycles + math.ceil(op.comparisons / unit.comparators)
    one = OpResult(op.name, "comparator", cycles, 0, Counter({f"comparator:{op.name}": cycles}),
                   ActionCounts(comparator_ops=op.comparisons))  # fmt: skip
    return _times(one, op.name, op.count)


def _transfer(arch: Arch, op: TransferOp) -> OpResult:
    """Extra bytes read; on a chip spread over every core's DMA as a vector pass is."""
    arch = stream_view(arch)
    index = 1 if op.resident else 0
    cycles = MemorySystem(arch).stream_cycles(index, op.read_bytes, 0)
    level = arch.memory[index]
    counts = ActionCounts()
    counts.bytes_read[level.name] += op.read_bytes
    if not op.resident:
        counts.bytes_written[arch.memory[1].name] += op.read_bytes
    one = OpResult(op.name, "transfer", cycles, 0, Counter({f"transfer:{op.name}": cycles}), counts)
    return _times(one, op.name, op.count)


def _derate(arch: Arch, result: OpResult, kernel: str) -> OpResult:
    """Apply the architecture's calibrated efficiency for ``kernel`` (``efficiency`` map of the
    file; absent = 1): the op takes ``ceil(cycles / efficiency)``; the extra cycles are reported
    as the stall ``efficiency:<kernel>``. (Matmuls are derated inside the engine instead:
    ``efficiency["matmul"]`` scales the unit's step time, ``efficiency["dram"]`` DRAM bandwidth.)"""
    factor = arch.efficiency.get(kernel)
    if factor is None or factor == 1:
        return result
    cycles = math.ceil(result.cycles / factor)
    stalls = Counter(result.stalls)
    stalls[f"efficiency:{kernel}"] += cycles - result.cycles
    return OpResult(result.name, result.kind, cycles, result.compute_cycles, stalls,
                    result.counts, result.unit_cycles)  # fmt: skip


#: Op kinds that are GPU kernels of their own (``efficiency["launch_us"]``): matmuls and vector
#: ops. Comparator and transfer ops belong to accelerators without a kernel launch.
KERNEL_KINDS = ("matmul", "vector")


def launch_cycles(arch: Arch) -> int:
    """Fixed cycles per GPU kernel, ``efficiency["launch_us"]`` at the clock (0 when absent)."""
    us = arch.efficiency.get("launch_us", 0.0)
    return math.ceil(us * 1e-6 * arch.clock_hz) if us else 0


def _launch(arch: Arch, result: OpResult, kernels: int) -> OpResult:
    """``result`` with ``kernels`` launches of :func:`launch_cycles` added as the stall
    ``launch`` (each instance of a matmul or vector op is one kernel; model runs batch
    attention's heads into one, ``model_run/simulate.py``)."""
    extra = kernels * launch_cycles(arch)
    if not extra:
        return result
    stalls = Counter(result.stalls)
    stalls["launch"] += extra
    return OpResult(result.name, result.kind, result.cycles + extra, result.compute_cycles,
                    stalls, result.counts, result.unit_cycles)  # fmt: skip


def run_plan(arch: Arch, plan: Plan, engine: str = "des", collapse: bool = True,
             overlap: bool = True) -> PlanResult:  # fmt: skip
    """Time and count every operation of ``plan`` on ``arch``.

    Args:
        engine: ``"des"`` (the simpy engine) or ``"twin"`` (closed form, for first passes).
        collapse: use the exact steady-state collapse (``False`` only for checking it).
        overlap: run the plan's graph on concurrent units (``engine/schedule.py``); ``False``
            runs the operations one after another (so do GPU proxies' kernels).
    """
    if engine not in ("des", "twin"):
        raise UserInputError("engine", f"must be 'des' or 'twin', got {engine!r}")
    with gc_paused():
        return _run_plan(arch, plan, engine, collapse, overlap)


def _run_plan(arch: Arch, plan: Plan, engine: str, collapse: bool, overlap: bool) -> PlanResult:
    results = []
    for op in plan.ops:
        if isinstance(op, MatmulOp):
            results.append(_launch(arch, _matmul(arch, op, engine, collapse), op.count))
        elif isinstance(op, VectorOp):
            results.append(_launch(arch, _derate(arch, _vector(arch, op), "vector"), op.count))
        elif isinstance(op, ComparatorOp):
            results.append(_comparator(arch, op))
        elif isinstance(op, TransferOp):
            results.append(_transfer(arch, op))
        else:  # pragma: no cover - a new op type without a cost model is a programming error
            raise TypeError(f"no cost model for {type(op).__name__}")
    if overlap and len(results) > 1 and not launch_cycles(arch):
        sched, placed = schedule_plan(arch, plan, results)
        ops = [replace(res, cycles=p.exposed, stalls=Counter(p.stalls), unit=unit_of(op),
                       alone_cycles=res.cycles, busy_cycles=p.busy, start=p.start, end=p.end)
               for op, res, p in zip(plan.ops, results, placed)]  # fmt: skip
        critical = tuple(dict.fromkeys(plan.ops[s.job].name for s in sched.critical))
        return PlanResult(plan, ops, True, critical, sched.overlap_cycles(), sched)
    ops, t = [], 0
    for op, res in zip(plan.ops, results):
        ops.append(replace(res, unit=unit_of(op), alone_cycles=res.cycles,
                           busy_cycles=res.cycles, start=t, end=t + res.cycles))  # fmt: skip
        t += res.cycles
    return PlanResult(plan, ops, False, tuple(op.name for op in plan.ops))
