"""The grid of a matmul on a chip (``engine/chip.py``): how it is split across the cores, and
the per-core views (:func:`core_view`, :func:`view_for`) its parts are mapped and run on.

A matmul is split on a grid ``gm × gn × gk`` (rows of A, columns of B, the reduction dimension);
each core runs one sub-GEMM with all of the op's instances (``count``: never split, since a
model's layers are instances and depend on each other). Splits are aligned to the unit's step
granule (a cube block, an array side).

**K split.** With ``gk > 1`` every core writes its partial sums (at the accumulator width) out
through its C path to DRAM, then the active cores' vector units add the ``gk`` partials and
apply the epilogue, costed as one streaming pass over DRAM by :class:`MemorySystem` (``reduce``).

How the grid is chosen: ``chip_choice.py``. Units: cycles of the architecture's clock, bytes.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.counts import ActionCounts
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.step_costs import scale_bytes, tile_bytes

#: Dimensions a matmul is split along, in the order of :attr:`Partition.grid`.
DIMS = ("count", "M", "N", "K")


@dataclass(frozen=True)
class Split:
    """One dimension of ``size`` elements cut into parts of ``part`` (the last one ``last``)."""

    size: int
    part: int

    @property
    def parts(self) -> int:
        return -(-self.size // self.part)

    @property
    def last(self) -> int:
        return self.size - (self.parts - 1) * self.part

    def sizes(self) -> dict[int, int]:
        """Part size → how many parts have it."""
        out = Counter({self.part: self.parts - 1})
        out[self.last] += 1
        return {s: n for s, n in out.items() if n}


@dataclass(frozen=True)
class Partition:
    """A matmul's split across cores: one :class:`Split` per dimension of :data:`DIMS`."""

    splits: tuple[Split, Split, Split, Split]
    bound_cycles: float = 0.0

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(s.parts for s in self.splits)

    @property
    def active(self) -> int:
        """Cores that run a sub-GEMM (the others idle)."""
        return math.prod(self.grid)

    def largest(self, op: MatmulOp) -> MatmulOp:
        """The sub-GEMM of the slowest core: the largest part in every dimension."""
        return sub_op(op, *(s.part for s in self.splits), self.grid[3])

    def parts(self, op: MatmulOp) -> list[tuple[MatmulOp, int]]:
        """Every distinct sub-GEMM and how many cores run it (their MACs add up to ``op``'s)."""
        out: list[tuple[MatmulOp, int]] = []
        b, m, n, k = (s.sizes() for s in self.splits)
        for cb, nb in b.items():
            for cm, nm in m.items():
                for cn, nn in n.items():
                    for ck, nk in k.items():
                        out.append((sub_op(op, cb, cm, cn, ck, self.grid[3]), nb * nm * nn * nk))
        return out

    def describe(self) -> str:
        names = ("instances", "M", "N", "K")
        cut = [
            f"{name} {s.size} in {s.parts} x {s.part}"
            + (f" (last {s.last})" if s.last != s.part else "")
            for name, s in zip(names, self.splits)
            if s.parts > 1
        ]
        return " · ".join(cut) if cut else "not split"


def sub_op(op: MatmulOp, count: int, M: int, N: int, K: int, gk: int) -> MatmulOp:
    """One core's part of ``op``; with a K split (``gk > 1``) it writes partial sums at the
    accumulator width and leaves the epilogue to the reduction."""
    if gk == 1:
        return replace(op, count=count, M=M, N=N, K=K)
    return replace(
        op,
        count=count,
        M=M,
        N=N,
        K=K,
        c_bits=float(op.accumulator_bits),
        epilogue_ops_per_output=0.0,
    )


def merged(arch: Arch) -> tuple[bool, bool]:
    """Whether A and B are staged in a shared on-chip level next to DRAM, where a tile several
    cores request at the same moment is fetched from DRAM once for all of them."""
    return tuple(len(arch.path(x)) > 1 and arch.path(x)[1].shared for x in "AB")


def merge_factor(arch: Arch, op: MatmulOp, p: Partition) -> float:
    """Per-core DRAM bytes per chip DRAM byte in lockstep: the ``gn`` cores of a grid row read
    the same A tiles at the same moments (the ``gm`` of a column the same B tiles), fetched once
    where :func:`merged`; weighted by the slowest core's operand bytes (each crossing once)."""
    _, sm, sn, sk = p.splits
    a, b, c = _operand_bytes(op, sm.part, sn.part, sk.part)
    merge_a, merge_b = merged(arch)
    unique = (a / sn.parts if merge_a else a) + (b / sm.parts if merge_b else b) + c
    return (a + b + c) / unique if unique else 1.0


# ----------------------------------------------------------------------------- views
_VIEWS: dict[tuple, Arch] = {}


def core_view(arch: Arch, active: int, merge: float = 1.0) -> Arch:
    """One core of ``arch`` with ``1/active`` of every shared level's capacity, bandwidths and
    in-flight window (a single-core :class:`Arch` the engine runs as it is). ``merge`` ≥ 1 (from
    :func:`merge_factor`) is how many cores' requests one DRAM fetch serves on average: the
    DRAM's share, a shared on-chip level's write (fill) share and capacity are ``merge`` times
    larger; a shared level's reads stay ``1/active`` (each core reads its own copy)."""
    if arch.cores == 1:
        return arch
    merge = round(min(max(merge, 1.0), active), 4)
    key = (arch.fingerprint, active, merge)
    view = _VIEWS.get(key)
    if view is None:
        levels = []
        for i, level in enumerate(arch.memory):
            if level.shared and active > 1:
                fill = active / merge
                read = fill if i == 0 else active
                update = {
                    "capacity_bytes": max(1, int(level.capacity_bytes // fill)),
                    "read_bytes_per_cycle": level.read_bytes_per_cycle / read,
                    "write_bytes_per_cycle": level.write_bytes_per_cycle / fill,
                }
                if level.max_inflight_bytes is not None:
                    update["max_inflight_bytes"] = max(1, int(level.max_inflight_bytes // fill))
                level = level.model_copy(update=update)
            levels.append(level)
        view = arch.model_copy(update={"cores": 1, "memory": levels})
        if len(_VIEWS) >= 512:
            _VIEWS.clear()
        _VIEWS[key] = view
    return view


def view_for(arch: Arch, op: MatmulOp, p: Partition) -> Arch:
    """The per-core view the slowest core of ``p`` runs on."""
    return core_view(arch, p.active, merge_factor(arch, op, p))


def reduce_cycles(arch: Arch, op: MatmulOp, gk: int, active: int) -> tuple[int, ActionCounts]:
    """The K split's reduction: ``gk`` partials per output read from DRAM at the accumulator
    width, added (``gk − 1`` ops) and finished (the epilogue) on ``active`` vector units, the
    result written to DRAM at ``c_bits``. (cycles, action counts)."""
    if gk <= 1:
        return 0, ActionCounts()
    outputs = op.M * op.N * op.count
    read = math.ceil(outputs * gk * op.accumulator_bits / 8)
    write = math.ceil(outputs * op.c_bits / 8)
    ops = outputs * (gk - 1 + op.epilogue_ops_per_output)
    lanes = arch.vector.lanes * active
    cycles = arch.vector.startup_cycles + max(
        math.ceil(ops / lanes), MemorySystem(arch).stream_cycles(0, read, write)
    )
    counts = ActionCounts(vector_ops=ops)
    counts.bytes_read[arch.dram.name] += read
    counts.bytes_written[arch.dram.name] += write
    return cycles, counts


def _operand_bytes(op: MatmulOp, M: int, N: int, K: int) -> tuple[int, int, int]:
    """Bytes of A, B and C of ``op``'s ``M×K×N`` part (all instances; A and B with their scale
    streams, each scale once)."""
    a = tile_bytes(M, K, op.a_bits) + scale_bytes(op, "A", M, K)
    b = tile_bytes(K, N, op.b_bits) + scale_bytes(op, "B", K, N)
    c = tile_bytes(M, N, op.accumulator_bits if K < op.K else op.c_bits)
    return a * op.count, b * op.count, c * op.count
