"""Whole chips: a matmul partitioned across ``Arch.cores`` cores that share the outer levels.

A chip is ``cores`` copies of one core (compute unit, vector unit, every per-core memory level)
around the levels marked ``shared`` (L2 and DRAM on the shipped chips; capacities and bandwidths
of a shared level are the chip's totals). ``engine/chip_choice.py`` chooses how a matmul is split
(a grid ``gm × gn × gk``, a K split with its reduction: ``engine/chip_grid.py``); this module
runs it.

**Contention model** (docs/engine.md, "Whole chips"): each core's sub-GEMM is mapped and
simulated by the single-core engine on a *per-core view* of the chip — the per-core levels as
they are, every shared level with ``1/active`` of its capacity, its bandwidths and its DRAM
in-flight window (``active`` = the cores the partition keeps busy), except that in lockstep the
``gn`` cores of a grid row request the same A tiles at the same moments (a column's ``gm`` cores
the same B tiles) and a shared on-chip level next to DRAM fetches such a tile once for all of
them: the DRAM's share, a shared level's fill share and capacity grow by :func:`merge_factor`.
That is exact for equal sub-GEMMs running in lockstep under fair arbitration, up to weighting
the merge by each operand's bytes crossing once. The chip's cycles are the slowest core's (the
largest part in every dimension); action counts (hence energy) are the sum of every core's own
sub-GEMM, DRAM reads and fills of merged operands counted once per row or column. Not modelled:
cores that finish early handing their bandwidth to the others (remainder parts cost the slowest
core's time).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.chip_choice import partition
from accel_sim.engine.chip_grid import (
    Partition,
    Split,
    core_view,
    merge_factor,
    merged,
    reduce_cycles,
    view_for,
)
from accel_sim.engine.counts import ActionCounts, matmul_counts
from accel_sim.engine.des_check import des_timing
from accel_sim.engine.mapper import mapped_program
from accel_sim.engine.program import Program
from accel_sim.engine.twin import twin_cycles

__all__ = ["MatmulRun", "Partition", "Split", "core_view", "merge_factor", "merged", "partition",
           "reduce_cycles", "scope", "simulate_matmul", "slowest_core", "stream_view",
           "view_for"]  # fmt: skip


def slowest_core(arch: Arch, op: MatmulOp) -> tuple[Arch, MatmulOp]:
    """What the DES runs for ``op`` on ``arch``: ``(arch, op)`` on one core, else the slowest
    core's part on its per-core view (a timeline or explain view re-simulates this; the chip's
    cycles add the K split's reduction, :func:`reduce_cycles`)."""
    if arch.cores == 1:
        return arch, op
    p = partition(arch, op)
    return view_for(arch, op, p), p.largest(op)


def stream_view(arch: Arch) -> Arch:
    """``arch`` as one wide core for a streaming (vector or transfer) pass split evenly over
    all its cores: vector lanes and per-core levels' capacities and bandwidths × cores, shared
    levels as they are. Exact up to rounding for an even split; ``arch`` itself on one core."""
    if arch.cores == 1:
        return arch
    n = arch.cores
    levels = [
        level
        if level.shared
        else level.model_copy(
            update={
                "capacity_bytes": level.capacity_bytes * n,
                "read_bytes_per_cycle": level.read_bytes_per_cycle * n,
                "write_bytes_per_cycle": level.write_bytes_per_cycle * n,
            }
        )
        for level in arch.memory
    ]
    vector = arch.vector.model_copy(update={"bytes_per_cycle": arch.vector.bytes_per_cycle * n})
    return arch.model_copy(update={"cores": 1, "memory": levels, "vector": vector})


# ----------------------------------------------------------------------------- simulation
@dataclass
class MatmulRun:
    """One matmul on the chip: cycles (slowest core + reduction), that core's compute cycles
    and stalls, action counts summed over every core, and the partition (None on one core)."""

    cycles: int
    compute_cycles: int
    stalls: Counter
    counts: ActionCounts
    rate: int
    partition: Partition | None = None


def _core(
    arch: Arch, op: MatmulOp, engine: str, collapse: bool
) -> tuple[Program, int, int, Counter]:
    if engine == "twin":  # the model's choice, costed by the model
        program = mapped_program(arch, op)
        # (whole cycles, as the DES counts them: the model's estimate may be fractional)
        cycles, compute = round(twin_cycles(program)), program.compute_cycles
        stalls = Counter({"twin:memory": cycles - compute} if cycles > compute else {})
        return program, cycles, compute, stalls
    # the mapping the DES checked (engine/des_check.py; the partitioner may have run it already)
    program, timing = des_timing(arch, op, collapse)
    return program, timing.cycles, timing.compute_cycles, Counter(timing.stalls)


def simulate_matmul(
    arch: Arch, op: MatmulOp, engine: str = "des", collapse: bool = True
) -> MatmulRun:
    """``op`` on ``arch``: the single-core engine on one core, else partitioned (module
    docstring). ``engine`` is ``"des"`` or ``"twin"`` (closed form)."""
    if arch.cores == 1:
        program, cycles, compute, stalls = _core(arch, op, engine, collapse)
        return MatmulRun(cycles, compute, stalls, matmul_counts(program), program.rate)
    p = partition(arch, op)
    view = view_for(arch, op, p)
    largest = p.largest(op)
    program, cycles, compute, stalls = _core(view, largest, engine, collapse)
    counts = ActionCounts()
    share = {"A": p.grid[2], "B": p.grid[1]}  # cores one merged DRAM fetch serves
    for sub, n in p.parts(op):
        sub_program = program if sub == largest else mapped_program(view, sub)
        counts.add(matmul_counts(sub_program), n)
        for link, nbytes in zip(sub_program.links, sub_program.link_bytes):
            if link.src == 0 and link.operand in share and merged(arch)["AB".index(link.operand)]:
                saved = round(nbytes * n * (1 - 1 / share[link.operand]))
                counts.bytes_read[arch.memory[0].name] -= saved
                counts.bytes_written[arch.memory[link.dst].name] -= saved
    extra, reduce_counts = reduce_cycles(arch, op, p.grid[3], p.active)
    counts.add(reduce_counts)
    if extra:
        stalls["reduce:K-split"] += extra
    return MatmulRun(cycles + extra, compute, stalls, counts, program.rate, p)


def scope(arch: Arch) -> str:
    """One line for report headers: whether ``arch`` is one core or a whole chip."""
    if arch.cores == 1:
        return "single core (cores: 1)"
    shared = [level.name for level in arch.memory if level.shared]
    return f"whole chip: {arch.cores} cores" + (f" sharing {', '.join(shared)}" if shared else "")
