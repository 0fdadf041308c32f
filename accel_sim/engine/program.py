"""The step program of one mapped matmul: what every step computes and moves.

Steps are enumerated by the mapping's loop nest (``mapping.py``). Everything about a step — edge
extents, which operand tiles cross into which level, which footprint windows open or close,
whether it opens or closes an accumulator tile — depends only on whether each loop index is
*first*, *middle* or *last* (or *only*). So a step has one of at most 4^L *classes*; the program
stores per-class data and per-class multiplicities, never a per-step list. Memory stays flat in
the GEMM size, and totals (bytes, MACs, compute cycles) are exact sums over classes.

For a (operand, level) with keep position p and window loop R (``Mapping.window_loop``), at a step
whose loop classes are known:

* a window **opens** when every loop inside R is at its first index (R just changed);
* it **closes** when every loop inside R is at its last index (R changes next);
* the step's tile **crosses** into the level when every loop inside R that does *not* index the
  operand is at its first index (first touch of the tile within the window).

The accumulator level (the innermost C level) keeps C the same way, mirrored: its window (one
accumulator slot: one output tile when K is innermost, a block of them when K is above the
block loop) opens and closes as above; a step **starts** an output tile (no partial sum to read)
when every loop inside R that does not index C (K) is at its first index, and **completes** it
(the tile leaves over the C links, its epilogue runs) when every such loop is at its last index.
The slot is freed once the window's last tile has left the level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.mapping import OPERAND_DIMS, Mapping
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.program_periods import (
    FIRST,
    LAST,
    MIDDLE,
    ONLY,
    ClassPeriods,
    _class_counts,
    _class_of,
)
from accel_sim.engine.step_costs import operand_bytes, scale_bytes, step_busy_cycles


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
    """Everything the engine needs about a step of one class.

    Per link of :attr:`Program.links`: ``link_bytes`` crossing it at this step, ``opens`` (the
    destination opens a footprint window: a slot is taken) and ``closes_src`` (the source's
    window ends with this step: its slot is freed once the hop has read it; for the first C
    link, the accumulator window's). ``closes_l0`` per input operand frees the innermost slot
    after compute.
    """

    compute_cycles: int
    link_bytes: tuple[int, ...]
    opens: tuple[bool, ...]
    closes_src: tuple[bool, ...]
    closes_l0: tuple[bool, bool]  # A, B
    opens_accumulator: bool  # the accumulator window opens: the compute takes a slot
    closes_accumulator: bool  # the step completes an output tile (it leaves, epilogue runs)
    outputs: int  # output elements completed (for the epilogue)
    starts_tile: bool  # the output tile's first K step: no partial sum to read


class Program(ClassPeriods):
    """The step program of ``op`` on ``arch`` under ``mapping``."""

    def __init__(self, arch: Arch, op: MatmulOp, mapping: Mapping) -> None:
        self.arch, self.op, self.mapping = arch, op, mapping
        self.memory = MemorySystem(arch)
        self.unit = arch.compute
        self.rate = self.unit.rate(op.precision, arch.origin, op.name)
        t = mapping.tile
        self.size = {"b": op.count, "m": op.M, "k": op.K, "n": op.N}
        self.tile = {"b": 1, "m": t.tm, "k": t.tk, "n": t.tn}
        self.n_tiles = {d: math.ceil(self.size[d] / self.tile[d]) for d in self.size}
        self.loops = mapping.loops
        self.count = tuple(loop.count for loop in self.loops)
        L = len(self.loops)
        self._radix = tuple(4 ** (L - 1 - j) for j in range(L))
        self.n_steps = math.prod(self.count)
        self.links = self._links()
        self.inner = {x: self.memory.index[arch.path(x)[-1].name] for x in "ABC"}
        self._classes: dict[int, StepClass] = {}
        self._by_flags: dict[tuple[int, int, bool], StepClass] = {}
        self._interned: dict[StepClass, StepClass] = {}
        self._outer_codes: dict[int, int] = {}  # code() of the loops outside the innermost
        self._window: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}
        self._mismatch: dict[int, tuple[int, int]] = {}
        self._class_mismatch: dict[tuple[int, int, int], int] = {}
        self._match: dict[tuple[int, int], tuple[int, int]] = {}
        self._aligned_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._agree: dict[tuple, bool] = {}
        self._edges: dict[object, tuple] = {}
        self._digits: dict[int, tuple[int, ...]] = {}

    # ----------------------------------------------------------------- structure
    def _links(self) -> tuple[Link, ...]:
        index = self.memory.index
        links = []
        for operand in ("A", "B"):
            path = [index[lv.name] for lv in self.arch.path(operand)]
            links += [Link(operand, s, d) for s, d in zip(path, path[1:])]
        path = [index[lv.name] for lv in self.arch.path("C")]
        links += [Link("C", d, s) for s, d in reversed(list(zip(path, path[1:])))]
        return tuple(links)

    def buffers(self, operand: str, level: int) -> int:
        """Footprint slots of ``operand`` in ``level`` (the mapping's choice, else the level's)."""
        return self.mapping.buffers(operand, level, self.arch.memory[level].buffers)

    def window(self, operand: str, level: int) -> tuple[int, tuple[int, ...]]:
        """(window loop R, positions of the loops inside R that do not index ``operand`` and
        iterate) of ``operand`` kept in ``level`` (computed once per pair: a hot path)."""
        cached = self._window.get((operand, level))
        if cached is None:
            r = self.mapping.window_loop(operand, self.mapping.position(operand, level))
            others = tuple(i for i in range(r + 1, len(self.loops))
                           if self.count[i] > 1 and not self.loops[i].indexes(operand))  # fmt: skip
            cached = self._window[(operand, level)] = (r, others)
        return cached

    # ------------------------------------------------------------------- classes
    def decode(self, code: int) -> tuple[int, ...]:
        """Per loop, the class digit (FIRST/MIDDLE/LAST/ONLY) of a code, outermost first."""
        digits = self._digits.get(code)
        if digits is None:
            digits = self._digits[code] = tuple([(code // r) % 4 for r in self._radix])
        return digits

    def class_of(self, code: int) -> StepClass:
        cached = self._classes.get(code)
        if cached is None:
            # a class reads its loops' first/last flags only through a few masks
            # (:attr:`_relevant`): codes equal on those share one (built once)
            first, last = self._masks(code)
            on_first, on_last, everything = self._relevant
            key = (first & on_first, last & on_last, last == everything)
            cached = self._by_flags.get(key)
            if cached is None:  # equal classes are one object (a cheap key for the twin's memos)
                built = self._build_class(first, last)
                cached = self._by_flags[key] = self._interned.setdefault(built, built)
            self._classes[code] = cached
        return cached

    @cached_property
    def _relevant(self) -> tuple[int, int, int]:
        """(loops whose first-index flag :meth:`_build_class` reads, those whose last-index flag
        it reads, all loops): every test there is ``mask & ~first`` or ``mask & ~last`` for a
        mask of :attr:`_link_plan`, :attr:`_class_plan` or :attr:`_dim_masks` (the edge
        extents), plus whether every loop is at its last index (the once-per-matmul cycles)."""
        acc_in, k_loops, a_in, b_in, _ = self._class_plan
        on_first = on_last = acc_in | k_loops
        on_last |= a_in | b_in
        for operand, _, _, dst_in, others, src_in, _ in self._link_plan:
            if operand != "C":
                on_first |= dst_in | others
                if src_in is not None:
                    on_last |= src_in
        for mask in self._dim_masks:
            on_last |= mask
        return on_first, on_last, (1 << len(self.loops)) - 1

    def extents(self, code: int) -> dict[str, int]:
        """Actual step extents (elements) per dim: a dim's last tile is short when every loop
        over that dim is at its last index."""
        return self._edge_data(self._masks(code)[1])[0]

    def _masks(self, code: int) -> tuple[int, int]:
        """Bit masks of the loops (bit i: loop i, outermost first) at their first index and
        at their last index (ONLY is both) in class ``code``."""
        first = last = 0
        for i, c in enumerate(self.decode(code)):
            if c == FIRST or c == ONLY:
                first |= 1 << i
            if c == LAST or c == ONLY:
                last |= 1 << i
        return first, last

    def _inside(self, r: int) -> int:
        """Bit mask of the loops inside loop ``r`` (all loops for r = -1)."""
        return ((1 << len(self.loops)) - 1) & ~((1 << (r + 1)) - 1)

    @cached_property
    def _dim_masks(self) -> tuple[int, ...]:
        """Per dim (``size`` order), the bit mask of the loops over it; 0 when its last tile is
        a full one (the same extents either way: fewer distinct edge cases to cost)."""
        return tuple(0 if self.size[d] == self.n_tiles[d] * self.tile[d] else
                     sum(1 << i for i, lp in enumerate(self.loops) if lp.dim == d)
                     for d in self.size)  # fmt: skip

    def _edge_data(self, last: int) -> tuple:
        """What a step's extents decide, per combination of short (edge) dims (cached, also by
        ``last``: the mask of loops at their last index, :meth:`_masks`): (extents, per link the
        tile's bytes and its scale stream's bytes, the unit's busy cycles, output elements)."""
        hit = self._edges.get(last)  # (an int key; the combinations' keys are tuples)
        if hit is not None:
            return hit
        key = tuple([not (mask & ~last) for mask in self._dim_masks])
        hit = self._edges.get(key)
        if hit is None:
            ext = {d: self.size[d] - (self.n_tiles[d] - 1) * self.tile[d] if short
                   else self.tile[d] for d, short in zip(self.size, key)}  # fmt: skip
            # per link: the tile with its block scales, if any (they travel together: the same
            # bytes on every hop of the operand), and the epilogue scales crossing with it (read
            # once per output tile)
            op, tiles = self.op, {}
            for operand, d0, d1, *_ in self._link_plan:
                if operand not in tiles:
                    tiles[operand] = operand_bytes(op, operand, ext[d0], ext[d1])
            nbytes = tuple(
                (tiles[operand], scale_bytes(op, operand, ext[d0], ext[d1]) if epilogue else 0)
                for operand, d0, d1, _, _, _, epilogue in self._link_plan
            )  # fmt: skip
            hit = self._edges[key] = (ext, nbytes, self._step_cycles(ext),
                                      ext["m"] * ext["n"])  # fmt: skip
        self._edges[last] = hit
        return hit

    @cached_property
    def _link_plan(self) -> tuple:
        """Per link, what its step data depends on (computed once, for :meth:`_build_class`):
        (operand, its dims, the masks (:meth:`_inside`) of the loops inside the destination's
        window loop and of its crossing loops, that of the source's window loop or None for
        DRAM, whether epilogue scales cross it)."""
        op, plan = self.op, []
        for link in self.links:
            d0, d1 = OPERAND_DIMS[link.operand]
            if link.operand == "C":  # r_src "acc": the hop out of the accumulator level
                src = "acc" if link.src == self.inner["C"] else None
                plan.append(("C", d0, d1, None, None, src, False))
                continue
            r_dst, others = self.window(link.operand, link.dst)
            r_src = self.window(link.operand, link.src)[0] if link.src != 0 else None
            scales = op.scales(link.operand)
            epilogue = link.src == 0 and scales is not None and not scales.block
            plan.append((link.operand, d0, d1, self._inside(r_dst), sum(1 << i for i in others),
                         None if r_src is None else self._inside(r_src), epilogue))  # fmt: skip
        return tuple(plan)

    @cached_property
    def _class_plan(self) -> tuple:
        """The loop masks (:meth:`_inside`) :meth:`_build_class` reads (computed once): inside
        the accumulator's window loop, of the loops inside it that do not index C (K), inside
        the innermost A and B levels' window loops; and the once-per-matmul unit cycles."""
        inner = self.inner
        r_acc, k_loops = self.window("C", inner["C"])
        return (self._inside(r_acc), sum(1 << i for i in k_loops),
                self._inside(self.window("A", inner["A"])[0]),
                self._inside(self.window("B", inner["B"])[0]),
                self.unit.once_cycles(self.mapping.tile, self.rate))  # fmt: skip

    def _build_class(self, first: int, last: int) -> StepClass:
        # a set of loops is all at its first (last) index when its mask has no bit outside
        # ``first`` (``last``, masks of :meth:`_masks`); no loop inside the outermost: every loop
        ext, nbytes, cycles, outputs = self._edge_data(last)
        acc_in, k_loops, a_in, b_in, once = self._class_plan
        acc_open, acc_close = not (acc_in & ~first), not (acc_in & ~last)
        # an output tile starts at its first K step and is complete at its last
        starts, done = not (k_loops & ~first), not (k_loops & ~last)
        link_bytes, link_opens, link_closes = [], [], []
        for (operand, _, _, dst_in, others, src_in, _), (tile, scale) in zip(self._link_plan,
                                                                             nbytes):  # fmt: skip
            if operand == "C":
                link_bytes.append(tile if done else 0)
                link_opens.append(done)
                # the accumulator slot is freed after the window's last tile; a staging slot
                # further out after each tile
                link_closes.append(acc_close if src_in == "acc" else done)
                continue
            moved = 0 if others & ~first else tile
            if starts:  # epilogue scales (0 bytes on other links): once per output tile
                moved += scale
            link_bytes.append(moved)
            link_opens.append(not (dst_in & ~first))
            link_closes.append(src_in is not None and not (src_in & ~last))
        if last == (1 << len(self.loops)) - 1:
            cycles += once
        return StepClass(
            compute_cycles=max(cycles, 1),
            link_bytes=tuple(link_bytes),
            opens=tuple(link_opens),
            closes_src=tuple(link_closes),
            closes_l0=(not (a_in & ~last), not (b_in & ~last)),
            opens_accumulator=acc_open,
            closes_accumulator=done,
            outputs=outputs if done else 0,
            starts_tile=starts,
        )

    def _step_cycles(self, ext: dict[str, int]) -> int:
        return step_busy_cycles(self.arch, self.memory, self.op, self.mapping.tile, self.rate,
                                self.inner, ext["m"], ext["k"], ext["n"])  # fmt: skip

    def code(self, i: int) -> int:
        """Raw class code of step ``i`` (scalar twin of :meth:`codes_at`, for the hot path): the
        innermost loop's digit directly, the outer loops' digits once per sweep of it (every
        pipeline stage asks for the same steps, so recent sweeps are kept)."""
        n = self.count[-1]
        outer, inner = divmod(i, n)
        high = self._outer_codes.get(outer)
        if high is None:
            high, rest = 0, outer
            for m, radix in zip(reversed(self.count[:-1]), reversed(self._radix[:-1])):
                high += _class_of(rest % m, m) * radix
                rest //= m
            if len(self._outer_codes) > 8192:
                self._outer_codes.clear()
            self._outer_codes[outer] = high
        if inner == n - 1:
            return high + (ONLY if inner == 0 else LAST) * self._radix[-1]
        return high + (MIDDLE if inner else FIRST) * self._radix[-1]

    def step_at(self, i: int) -> StepClass:
        return self.class_of(self.code(i))

    @cached_property
    def multiplicity(self) -> dict[int, int]:
        """How many steps of each (raw) class the program has."""
        counts: dict[int, int] = {0: 1}
        for n, radix in zip(self.count, self._radix):
            counts = {
                code + cls * radix: k * m
                for code, k in counts.items()
                for cls, m in _class_counts(n).items()
            }
        return counts

    # -------------------------------------------------------------------- totals
    @cached_property
    def _class_counts(self) -> list[tuple[StepClass, int]]:
        """Each distinct step class (codes that share one, :meth:`class_of`) and its steps, in
        the order of their first code in :attr:`multiplicity`. Codes are folded loop by loop
        into the flags :meth:`class_of` keys its classes by (:attr:`_relevant`), so a loop whose
        flags no class reads adds no codes: the same list without enumerating every code."""
        on_first, on_last, _ = self._relevant
        # (first flags read, last flags read, every loop so far at its last index) ->
        # [steps, the first code with those flags]
        folded: dict[tuple[int, int, bool], list] = {(0, 0, True): [1, 0]}
        for i, (n, radix) in enumerate(zip(self.count, self._radix)):
            bit, nxt = 1 << i, {}
            for (first, last, at_end), (k, code) in folded.items():
                for cls, m in _class_counts(n).items():
                    ends = cls == LAST or cls == ONLY
                    key = (first | (bit & on_first if cls == FIRST or cls == ONLY else 0),
                           last | (bit & on_last if ends else 0), at_end and ends)  # fmt: skip
                    entry = nxt.get(key)
                    if entry is None:
                        nxt[key] = [k * m, code + cls * radix]
                    else:
                        entry[0] += k * m
            folded = nxt
        counts: dict[int, list] = {}
        for n, c in folded.values():
            cls = self.class_of(c)
            entry = counts.get(id(cls))
            if entry is None:
                counts[id(cls)] = [cls, n]
            else:
                entry[1] += n
        return [(cls, n) for cls, n in counts.values()]

    @cached_property
    def compute_cycles(self) -> int:
        return sum(n * cls.compute_cycles for cls, n in self._class_counts)

    @cached_property
    def link_bytes(self) -> tuple[int, ...]:
        """Total bytes over each link for the whole matmul."""
        totals = [0] * len(self.links)
        for cls, n in self._class_counts:
            for j, b in enumerate(cls.link_bytes):
                totals[j] += n * b
        return tuple(totals)
