"""What every candidate mapping of one (architecture, matmul) shares: the operands' paths through
the memory levels, the levels that stage A and B with their hop bandwidths, the output's fixed
port cycles and DRAM bytes, and the capacity checks of step tiles and accumulator blocks
(:class:`_Space`, used by the search in ``mapper_space.py``).
"""

from __future__ import annotations

import numpy as np

from accel_sim.arch.schema import Arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.mapping import OPERAND_DIMS, Loop, accumulator_position, footprint
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.step_costs import operand_bytes, scale_bytes, tile_bytes


class _Space:
    """Shared per-(arch, op) data of the search."""

    def __init__(self, arch: Arch, op: MatmulOp) -> None:
        self.arch, self.op = arch, op
        self.memory = MemorySystem(arch)
        self.unit = arch.compute
        self.rate = self.unit.rate(op.precision, arch.origin, op.name)
        self.size = {"b": op.count, "m": op.M, "k": op.K, "n": op.N}
        idx = self.memory.index
        self.path = {x: [idx[lv.name] for lv in arch.path(x)] for x in "ABC"}
        self.inner = {x: self.path[x][-1] for x in "ABC"}
        #: per on-chip level: (capacity, output buffers or 0, holds the accumulators, slots of
        #: A and B in a fit check or 0), for :meth:`fits`
        self._fit_levels = [
            (lv.capacity_bytes, lv.buffers if i in self.path["C"][1:] else 0,
             i == self.inner["C"], *(min(2, lv.buffers) if i in self.path[x][1:] else 0
                                     for x in "AB"))
            for i, lv in enumerate(arch.memory[1:], start=1)]  # fmt: skip
        mem = self.memory
        #: per (input operand, step tile depth): its bytes, all instances (:meth:`total`)
        self._total: dict[tuple[str, int], int] = {}
        #: per (operand, rows, cols, step tile depth): :func:`operand_bytes` (:meth:`piece`)
        self._pieces: dict[tuple[str, int, int, int], int] = {}
        #: each input operand's hops, outermost first
        self.hops = {x: list(zip(self.path[x], self.path[x][1:])) for x in "AB"}
        #: every input hop as (operand, src, dst): A's, then B's; per (operand, dst) its src
        self.all_hops = [(x, src, dst) for x in "AB" for src, dst in self.hops[x]]
        self.parent = {(x, dst): src for x, src, dst in self.all_hops}
        #: on-chip levels staging A or B, outermost first, as (level, operands), and the
        #: bandwidth (bytes/cycle) of each operand's hop into each of them
        self.levels = []
        self.bandwidth = {}
        for level in range(1, len(arch.memory)):
            operands = [x for x in "AB" if level in self.path[x][1:]]
            if operands:
                self.levels.append((level, operands))
            for x in operands:
                parent = self.path[x][self.path[x].index(level) - 1]
                self.bandwidth[(x, level)] = mem.hop_bandwidth(parent, level)
        #: the output's port cycles and DRAM bytes (every element stored once, whatever the
        #: mapping)
        c_path, c_bytes = self.path["C"], tile_bytes(op.M, op.N, op.c_bits) * op.count
        self.c_busy, self.c_dram = {}, 0
        for dst, src in reversed(list(zip(c_path, c_path[1:]))):
            if 0 in (src, dst):
                self.c_dram += c_bytes
            for port, cycles in mem.port_cycles(src, dst, c_bytes):
                self.c_busy[port] = self.c_busy.get(port, 0) + cycles

    def total(self, operand: str, tk: int) -> int:
        """Bytes of input ``operand`` (all instances, block scales included) as it crosses a
        hop once in step tiles ``tk`` deep."""
        key = (operand, tk)
        if key not in self._total:
            d0, d1 = OPERAND_DIMS[operand]
            size = self.size
            self._total[key] = self.op.count * operand_bytes(self.op, operand, size[d0],
                                                             size[d1], tk)  # fmt: skip
        return self._total[key]

    def piece(self, operand: str, rows: int, cols: int, tk: int) -> int:
        """Bytes of a rows×cols piece of ``operand`` in step tiles ``tk`` deep
        (:func:`operand_bytes`, memoised: the search sizes the same pieces over and over)."""
        key = (operand, rows, cols, tk)
        hit = self._pieces.get(key)
        if hit is None:
            hit = self._pieces[key] = operand_bytes(self.op, operand, rows, cols, tk)
        return hit

    def tile_bytes(self, operand: str, tile: StepTile, innermost: bool) -> int:
        """Bytes of one step tile of ``operand`` (clipped to the GEMM, block scales included;
        the accumulator width for C in its innermost level)."""
        ext = {"m": min(tile.tm, self.op.M), "k": min(tile.tk, self.op.K),
               "n": min(tile.tn, self.op.N)}  # fmt: skip
        d0, d1 = OPERAND_DIMS[operand]
        if operand == "C" and innermost:
            return tile_bytes(ext[d0], ext[d1], self.op.accumulator_bits)
        return operand_bytes(self.op, operand, ext[d0], ext[d1])

    def c_staging(self, level: int, tile: StepTile, acc: int | None = None) -> int:
        """Bytes a level reserves for output tiles (accumulators at the innermost C level):
        its buffers × one tile, or × ``acc`` bytes at the accumulator level when one slot holds
        several tiles (K above the inner block: :meth:`block_budget`)."""
        if level not in self.path["C"][1:]:
            return 0
        lv = self.arch.memory[level]
        if acc is not None and level == self.inner["C"]:
            return lv.buffers * acc
        return lv.buffers * self.tile_bytes("C", tile, level == self.inner["C"])

    def block_budget(self, tile: StepTile, loops: tuple[Loop, ...], budget: dict) -> dict | None:
        """Per level, the bytes left for A and B (``budget``: :attr:`_TileCosts.budget`) when
        the accumulator level keeps C at the K loop (:func:`mapping.accumulator_position`): each
        of its slots holds the accumulator-width C tiles of the loops inside K. None when they do
        not fit; ``budget`` itself when K is innermost."""
        p = accumulator_position(loops)
        if p is None:
            return budget
        level = self.inner["C"]
        rows, cols = footprint(tile, loops, "C", p, self.size)
        acc = tile_bytes(rows, cols, self.op.accumulator_bits)
        left = self.arch.memory[level].capacity_bytes - self.c_staging(level, tile, acc)
        if left < 0:
            return None
        return {**budget, level: left} if level in budget else budget

    def shortfall(self, tile: StepTile) -> tuple[str, int, int] | None:
        """The first on-chip level that cannot hold double-buffered step tiles of what it
        stages, as (name, bytes needed, capacity); None when every level can."""
        for i, level in enumerate(self.arch.memory[1:], start=1):
            need = self.c_staging(i, tile)
            for x in "AB":
                if i in self.path[x][1:]:
                    need += min(2, level.buffers) * self.tile_bytes(x, tile, False)
            if need > level.capacity_bytes:
                return level.name, need, level.capacity_bytes
        return None

    def fits_grid(self, ms: list[int], ks: list[int], ns: list[int]) -> np.ndarray:
        """Per extents ``m×k×n`` of the grid ``ms × ks × ns`` (clipped to the GEMM), whether
        every on-chip level holds double-buffered step tiles of what it stages (:meth:`shortfall`
        is None), as a boolean array of shape (len(ms), len(ks), len(ns)). Vectorised by
        broadcasting: the element bytes are :func:`tile_bytes`'s, in the same float operations,
        plus each tile's block scales (:func:`operand_bytes`), exact per extents."""
        m = np.array(ms, dtype=np.int64)[:, None, None]
        k = np.array(ks, dtype=np.int64)[None, :, None]
        n = np.array(ns, dtype=np.int64)[None, None, :]

        def nbytes(rows, cols, bits):  # tile_bytes, element-wise
            return np.ceil(rows * cols * bits / 8).astype(np.int64)

        def scales(operand, rows, cols):  # operand_bytes' block scales per (rows, cols)
            sc = self.op.scales(operand)
            if sc is None or not sc.block:
                return np.zeros((len(rows), len(cols)), dtype=np.int64)
            return np.array([[scale_bytes(self.op, operand, r, c) for c in cols] for r in rows],
                            dtype=np.int64)  # fmt: skip

        a = nbytes(m, k, self.op.a_bits) + scales("A", ms, ks)[:, :, None]
        b = nbytes(k, n, self.op.b_bits) + scales("B", ks, ns)[None, :, :]
        c, acc = nbytes(m, n, self.op.c_bits), nbytes(m, n, self.op.accumulator_bits)
        ok = np.ones((len(ms), len(ks), len(ns)), dtype=bool)
        for capacity, c_buffers, innermost_c, a_slots, b_slots in self._fit_levels:
            ok &= c_buffers * (acc if innermost_c else c) + a_slots * a + b_slots * b <= capacity
        return ok
