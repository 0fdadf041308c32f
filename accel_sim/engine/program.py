"""The step program of one matmul: what every tile step computes and moves.

Steps are enumerated by a loop nest (outer, middle, k). Everything about a step — edge tile sizes,
which operand tiles must be (re)loaded into each level, whether it opens or closes an accumulator
tile — depends only on whether each loop index is *first*, *middle* or *last*. So a step has one of
at most 4⁴ = 256 *classes* (the outermost loop runs over the op's ``count`` instances); the
program stores per-class data and per-class multiplicities, never a per-step list. Memory stays
flat in the GEMM size, and totals (bytes, MACs, compute cycles) are exact sums over classes.

Reuse (retention): a level keeps an operand's tiles for the whole matmul when its reuse working
set fits in what the level has left after the double-buffer slots of every operand it stages:
A's working set is its row panel (tm×K) under an m-outer order and all of A otherwise; B's is its
column panel (K×tn) under an n-outer order and all of B otherwise. A retained operand crosses
the link into that level only on first touch; otherwise a tile crosses whenever its index differs
from the previous step's (stationary reuse only).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.tiling import (
    Tiling,
    choose_tiling,
    step_compute_cycles,
    tile_bytes,
    unit_rate,
)
from accel_sim.errors import UserInputError

FIRST, MIDDLE, LAST, ONLY = 0, 1, 2, 3  # index class within one loop (ONLY = first and last)
OPERAND_DIMS = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}


@dataclass(frozen=True)
class Link:
    """One hop of an operand between two memory levels (indices into ``arch.memory``)."""

    operand: str
    src: int
    dst: int

    def label(self, arch: Arch) -> str:
        return f"{arch.memory[self.src].name}->{arch.memory[self.dst].name}"


@dataclass(frozen=True)
class StepClass:
    """Everything the engine needs about a step of one class."""

    compute_cycles: int
    link_bytes: tuple[int, ...]  # per link of Program.links
    opens_accumulator: bool  # k is first: needs a free accumulator tile
    closes_accumulator: bool  # k is last: the output tile is complete and is stored
    outputs: int  # output elements completed (for the epilogue)


def _class_counts(count: int) -> dict[int, int]:
    if count == 1:
        return {ONLY: 1}
    if count == 2:
        return {FIRST: 1, LAST: 1}
    return {FIRST: 1, MIDDLE: count - 2, LAST: 1}


def hop_bandwidth(program: Program, link_index: int) -> float:
    """Bytes per cycle of a hop: the slower of the source's read and the destination's write
    bandwidth, times the architecture's ``efficiency["dram"]`` when the hop touches DRAM."""
    link = program.links[link_index]
    arch = program.arch
    src, dst = arch.memory[link.src], arch.memory[link.dst]
    bandwidth = min(src.read_bytes_per_cycle, dst.write_bytes_per_cycle)
    if 0 in (link.src, link.dst):
        bandwidth *= arch.efficiency.get("dram", 1.0)
    return bandwidth


def port_of(program: Program, link_index: int) -> tuple[int, str]:
    """The one port a hop occupies: that of its outer (DRAM-side) level — the source's read port
    for loads, the destination's write port for stores; a ``shared_port`` level has a single port
    for both. The inner level's bandwidth still caps the hop's rate. Holding one port per hop
    means no hop ever holds one port while waiting for another."""
    link = program.links[link_index]
    if link.operand == "C":
        level, kind = link.dst, "w"
    else:
        level, kind = link.src, "r"
    return (level, "r" if program.arch.memory[level].shared_port else kind)


def _class_of(index: int, count: int) -> int:
    if index == count - 1:
        return ONLY if index == 0 else LAST
    return FIRST if index == 0 else MIDDLE


def _classes_of(index: np.ndarray, count: int) -> np.ndarray:
    cls = np.where(index == 0, FIRST, MIDDLE)
    cls = np.where(index == count - 1, np.where(index == 0, ONLY, LAST), cls)
    return cls


class Program:
    """The step program of ``op`` on ``arch``."""

    def __init__(self, arch: Arch, op: MatmulOp, tiling: Tiling | None = None) -> None:
        self.arch = arch
        self.op = op
        self.rate = unit_rate(arch, op)
        if tiling is None:
            tiling = choose_tiling(arch, op)
            if tiling.fold_cycles == 0:  # cube: the loop order is ours to choose
                tiling = self._cheaper_order(arch, op, tiling)
        self.tiling = tiling
        t = self.tiling
        # "b" loops over the op's ``count`` independent instances (heads, experts): different
        # matrices, one pipeline, so instance i+1's loads overlap instance i's compute
        self.size = {"b": op.count, "m": op.M, "k": op.K, "n": op.N}
        self.tile = {"b": 1, "m": t.tm, "k": t.tk, "n": t.tn}
        self.count = {"b": op.count, **t.counts(op)}
        self.dims = ("b", t.order[0], t.order[1], "k")  # outermost first
        self._radix = tuple(4 ** (len(self.dims) - 1 - j) for j in range(len(self.dims)))
        self.n_steps = math.prod(self.count.values())
        self.links = self._links()
        self.retained = self._retention()
        self._classes: dict[int, StepClass] = {}
        self._mismatch: dict[int, tuple[int, int]] = {}

    @staticmethod
    def _cheaper_order(arch: Arch, op: MatmulOp, tiling: Tiling) -> Tiling:
        """Of the two loop orders (m or n outermost), the one that moves fewer bytes over DRAM
        once retention is accounted for (then fewer bytes over all hops; then m outermost)."""
        best = None
        for order in (("m", "n"), ("n", "m")):
            candidate = Program(arch, op, dataclasses.replace(tiling, order=order))
            dram = sum(b for ln, b in zip(candidate.links, candidate.link_bytes)
                       if 0 in (ln.src, ln.dst))  # fmt: skip
            key = (dram, sum(candidate.link_bytes))
            if best is None or key < best[0]:
                best = (key, candidate.tiling)
        return best[1]

    # ----------------------------------------------------------------- structure
    def _links(self) -> tuple[Link, ...]:
        index = {level.name: i for i, level in enumerate(self.arch.memory)}
        links = []
        for operand in ("A", "B"):
            path = [index[lv.name] for lv in self.arch.path(operand)]
            links += [Link(operand, s, d) for s, d in zip(path, path[1:])]
        path = [index[lv.name] for lv in self.arch.path("C")]
        links += [Link("C", d, s) for s, d in reversed(list(zip(path, path[1:])))]
        return tuple(links)

    def operand_bits(self, operand: str) -> float:
        return {"A": self.op.a_bits, "B": self.op.b_bits, "C": self.op.c_bits}[operand]

    def full_tile_bytes(self, operand: str, innermost: bool = False) -> int:
        d0, d1 = OPERAND_DIMS[operand]
        bits = self.op.accumulator_bits if (operand == "C" and innermost) else None
        rows, cols = min(self.tile[d0], self.size[d0]), min(self.tile[d1], self.size[d1])
        return tile_bytes(rows, cols, bits or self.operand_bits(operand))

    def _retention(self) -> frozenset[tuple[str, int]]:
        """(operand, level index) pairs whose level keeps that operand for the whole matmul."""
        retained = set()
        outer = self.tiling.order[0]  # outermost tile loop (inside the instance loop)
        working = {
            "A": tile_bytes(min(self.tile["m"], self.op.M) if outer == "m" else self.op.M,
                            self.op.K, self.op.a_bits),
            "B": tile_bytes(self.op.K,
                            min(self.tile["n"], self.op.N) if outer == "n" else self.op.N,
                            self.op.b_bits),
        }  # fmt: skip
        innermost = {lv.name: lv for lv in (self.arch.path(x)[-1] for x in "ABC")}
        for i, level in enumerate(self.arch.memory[1:], start=1):
            slots = sum(
                level.buffers * self.full_tile_bytes(x, x == "C" and level.name in innermost)
                for x in level.holds
            )
            free = level.capacity_bytes - slots
            if free < 0:
                raise UserInputError(
                    self.arch.origin,
                    f"{self.op.name} ({self.op.M}x{self.op.K}x{self.op.N}): level {level.name} "
                    f"needs {slots} B for its double-buffered tiles but has "
                    f"{level.capacity_bytes} B; the GEMM cannot be tiled into the buffers",
                    "memory",
                )
            # the operand reused across the middle loop first (its panel is the smaller set)
            first = "A" if outer == "m" else "B"
            for operand in (first, "B" if first == "A" else "A"):
                if operand in level.holds and working[operand] <= free:
                    retained.add((operand, i))
                    free -= working[operand]
        return frozenset(retained)

    # ------------------------------------------------------------------- classes
    def decode(self, code: int) -> dict[str, int]:
        """Per loop, the class digit (FIRST/MIDDLE/LAST/ONLY) of a code: one base-4 digit per
        loop, outermost first."""
        return {d: (code // r) % 4 for d, r in zip(self.dims, self._radix)}

    def class_of(self, code: int) -> StepClass:
        cached = self._classes.get(code)
        if cached is None:
            cached = self._classes[code] = self._build_class(code)
        return cached

    def extents(self, code: int) -> dict[str, int]:
        """Actual tile size (elements) per dim of a step of class ``code`` (edges are smaller)."""
        cls = self.decode(code)
        return {
            d: (self.size[d] - (self.count[d] - 1) * self.tile[d])
            if cls[d] in (LAST, ONLY)
            else self.tile[d]
            for d in self.dims
        }

    def _build_class(self, code: int) -> StepClass:
        cls = self.decode(code)
        is_first = {d: c in (FIRST, ONLY) for d, c in cls.items()}
        is_last = {d: c in (LAST, ONLY) for d, c in cls.items()}
        extent = self.extents(code)
        # which loop indices changed from the previous step (step 0: all of them)
        # a loop's index changed from the previous step iff every loop inside it wrapped (or it
        # is the innermost) and it has more than one iteration; step 0 changes everything
        step0 = all(is_first.values())
        changed, wrapped = {}, True
        for d in reversed(self.dims):
            changed[d] = step0 or (wrapped and self.count[d] > 1)
            wrapped = wrapped and is_first[d]
        link_bytes = []
        for link in self.links:
            d0, d1 = OPERAND_DIMS[link.operand]
            nbytes = tile_bytes(extent[d0], extent[d1], self.operand_bits(link.operand))
            if link.operand == "C":
                link_bytes.append(nbytes if is_last["k"] else 0)
                continue
            other = ({"m", "n", "k"} - {d0, d1}).pop()
            # every operand belongs to one instance: a new instance means new tiles
            if (link.operand, link.dst) in self.retained:
                load = is_first[other] and (changed[d0] or changed[d1] or changed["b"])
            else:
                load = changed[d0] or changed[d1] or changed["b"]
            link_bytes.append(nbytes if load else 0)
        cycles = step_compute_cycles(
            self.arch, self.tiling, self.rate, extent["m"], extent["k"], extent["n"]
        )
        if all(is_last.values()):
            cycles += self.tiling.last_step_adjust
        return StepClass(
            compute_cycles=cycles,
            link_bytes=tuple(link_bytes),
            opens_accumulator=is_first["k"],
            closes_accumulator=is_last["k"],
            outputs=extent["m"] * extent["n"] if is_last["k"] else 0,
        )

    def codes(self, lo: int, hi: int) -> np.ndarray:
        """Class codes of steps ``lo..hi-1`` (vectorised)."""
        return self.codes_at(np.arange(lo, hi, dtype=np.int64))

    def codes_at(self, steps: np.ndarray) -> np.ndarray:
        """Canonical class codes of the given step indices (vectorised)."""
        rest = np.array(steps, dtype=np.int64)
        raw = np.zeros_like(rest)
        for d, radix in zip(reversed(self.dims), reversed(self._radix)):
            n = self.count[d]
            raw += _classes_of(rest % n, n) * radix
            rest //= n
        return self.canonical[raw]

    @cached_property
    def canonical(self) -> np.ndarray:
        """Maps each raw class code to the smallest code with an identical :class:`StepClass`.

        The engine only ever looks at a step's :class:`StepClass`, so steps of equal classes are
        interchangeable; comparing canonical codes lets the collapse see e.g. a last m-block of
        full size as the same as a middle one."""
        seen: dict[StepClass, int] = {}
        table = np.arange(4 ** len(self.dims), dtype=np.int64)
        for code in range(table.size):
            if self._valid(code):
                table[code] = seen.setdefault(self.class_of(code), code)
        return table

    def _valid(self, code: int) -> bool:
        for dim, cls in self.decode(code).items():
            n = self.count[dim]
            if (n == 1) != (cls == ONLY) or (n == 2 and cls == MIDDLE):
                return False
        return True

    def code(self, i: int) -> int:
        """Class code of step ``i`` (scalar twin of :meth:`codes`, for the hot path)."""
        code = 0
        for d, radix in zip(reversed(self.dims), reversed(self._radix)):
            n = self.count[d]
            code += _class_of(i % n, n) * radix
            i //= n
        return code

    def step_at(self, i: int) -> StepClass:
        return self.class_of(self.code(i))

    def first_mismatch(self, lo: int, period: int) -> int:
        """Smallest ``x ≥ lo`` with ``code(x) != code(x - period)``, or ``n_steps``.

        The answer f found from some lo₀ holds for every lo in [lo₀, f], and the engine asks with
        growing lo, so the last answer per period is remembered."""
        cached = self._mismatch.get(period)
        if cached is not None and cached[0] <= lo <= cached[1]:
            return cached[1]
        found = self._first_mismatch(lo, period)
        self._mismatch[period] = (lo, found)
        return found

    def _change_points(self, a: int, b: int) -> np.ndarray:
        """Steps p in (a, b) whose class may differ from step p−1's: where some loop index
        enters or leaves its first or last value (at most three per sweep of that loop)."""
        points = []
        stride = 1
        for d in reversed(self.dims):
            n = self.count[d]
            if n > 1:
                # index(p) = (p // stride) % n changes class when it becomes 0, 1 or n−1
                lo_m, hi_m = a // stride + 1, (b - 1) // stride
                if hi_m >= lo_m:
                    for residue in {0, 1, n - 1}:
                        first = lo_m + (residue - lo_m) % n
                        points.append(np.arange(first, hi_m + 1, n, dtype=np.int64) * stride)
            stride *= n
        return np.concatenate(points) if points else np.empty(0, dtype=np.int64)

    def _first_mismatch(self, lo: int, period: int) -> int:
        """Both code(x) and code(x − period) are constant between their change points, so only
        ``lo`` and those points need comparing — O(boundaries), not O(steps)."""
        x = max(lo, period)
        chunk = 256  # the next boundary is usually near: start small, grow fast
        while x < self.n_steps:
            hi = min(self.n_steps, x + chunk)
            candidates = np.sort(np.concatenate((
                np.array([x], dtype=np.int64),
                self._change_points(x, hi),
                self._change_points(x - period, hi - period) + period,
            )))  # fmt: skip
            diff = np.nonzero(self.codes_at(candidates) != self.codes_at(candidates - period))[0]
            if diff.size:
                return int(candidates[diff[0]])
            x, chunk = hi, chunk * 8
        return self.n_steps

    @cached_property
    def multiplicity(self) -> dict[int, int]:
        """How many steps of each class the program has."""
        counts: dict[int, int] = {0: 1}
        for d, radix in zip(self.dims, self._radix):
            counts = {
                code + cls * radix: n * m
                for code, n in counts.items()
                for cls, m in _class_counts(self.count[d]).items()
            }
        return counts

    # -------------------------------------------------------------------- totals
    @cached_property
    def compute_cycles(self) -> int:
        return sum(n * self.class_of(c).compute_cycles for c, n in self.multiplicity.items())

    @cached_property
    def link_bytes(self) -> tuple[int, ...]:
        """Total bytes over each link for the whole matmul."""
        totals = [0] * len(self.links)
        for c, n in self.multiplicity.items():
            for j, b in enumerate(self.class_of(c).link_bytes):
                totals[j] += n * b
        return tuple(totals)
