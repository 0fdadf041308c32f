"""A mapping: how one matmul runs on the hardware — the unit's step tile, the loop nest over
steps, and how much of each operand every memory level keeps.

Loop nest (outermost first)::

    for b  in instances:          # the op's ``count`` independent matrices (heads, experts)
      for X1 in blocks of X:        # X, Y = m, n or n, m: the outer order
        for Y1 in blocks of Y:
          for X0 in step tiles of X within the block:   # inner order, chosen independently
            for Y0 in step tiles of Y within the block:
              for k in step tiles of K:                   # innermost: partial sums stay put
                step: C[tm×tn] += A[tm×tk] · B[tk×tn]

or, with **K above the inner block** (``nest(..., k_above=True)``), ``b, X1, Y1, k, X0, Y0``:
the accumulator level then holds the partial sums of the whole block (X0 × Y0 tiles) across the
K loop, and an input tile that the inner loops do not index (A when the block runs over n) is
reused across the block instead of crossing again for every output tile. The accumulator level
keeps C at the K loop's position (:func:`accumulator_position`); an output tile is complete when
the K loop is at its last index (``program.py``).

A block is a whole number of step tiles that divides the dimension's tile count, so the nest is
regular (every loop has a fixed trip count) and only the very last tile of a dimension is short.

**What a level keeps** is a *position* ``p`` in the nest: the level holds the part of the operand
that the loops at positions ≥ p touch (its *footprint*), for as long as the loops outside ``p``
that index the operand stay put (a *window*). Within a window each tile crosses into the level
once, on first touch; a new window needs a free footprint slot (``buffers`` of them: double
buffering prefetches the next window while the current one is consumed). ``p = len(loops)``
keeps one step tile (plain streaming, stationary reuse only). This is the Timeloop/ZigZag notion
of a temporal loop boundary per memory level, restricted to one boundary per (operand, level).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accel_sim.arch.units.base import StepTile

#: Dimensions of each operand; "b" (instance) indexes every operand.
OPERAND_DIMS = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}


@dataclass(frozen=True)
class Loop:
    """One loop of the nest: the dimension it walks and its trip count."""

    dim: str  # "b", "m", "n" or "k"
    count: int

    def indexes(self, operand: str) -> bool:
        return self.dim == "b" or self.dim in OPERAND_DIMS[operand]


@dataclass(frozen=True)
class Mapping:
    """Step tile, loop nest and per-level keep positions of one matmul.

    Attributes:
        tile: elements per step in m, k, n.
        loops: the nest, outermost first (``b, X1, Y1, X0, Y0, k``).
        keep: ``((operand, level index), position, buffers)``; a level not listed keeps one
            tile with the level's own ``buffers``. ``buffers`` is the number of footprint slots
            (1 = no prefetch of the next window, 2 = double buffering).
    """

    tile: StepTile
    loops: tuple[Loop, ...]
    keep: tuple[tuple[tuple[str, int], int, int], ...] = ()
    #: window_loop(operand, p) for every operand and position, computed once (a hot path)
    _windows: dict = field(init=False, repr=False, compare=False, hash=False, default=None)
    #: (position, buffers) per (operand, level) listed in ``keep`` (the first entry of each)
    _keep: dict = field(init=False, repr=False, compare=False, hash=False, default=None)

    def __post_init__(self) -> None:
        table = {}
        for operand in OPERAND_DIMS:
            row, last = [], -1
            for loop_index, loop in enumerate(self.loops):
                row.append(last)  # position p = loop_index: loops strictly outside p
                if loop.count > 1 and loop.indexes(operand):
                    last = loop_index
            row.append(last)
            table[operand] = row
        object.__setattr__(self, "_windows", table)
        keep: dict = {}
        for key, p, n in self.keep:
            keep.setdefault(key, (p, n))
        object.__setattr__(self, "_keep", keep)

    def position(self, operand: str, level: int) -> int:
        hit = self._keep.get((operand, level))
        return len(self.loops) if hit is None else hit[0]

    def buffers(self, operand: str, level: int, default: int) -> int:
        hit = self._keep.get((operand, level))
        return default if hit is None else hit[1]

    def window_loop(self, operand: str, p: int) -> int:
        """The innermost loop outside position ``p`` that indexes ``operand`` and iterates
        (count > 1): a new value of it starts a new window. -1 if there is none."""
        row = self._windows[operand]
        return row[min(p, len(row) - 1)] if p >= 0 else -1

    def footprint(self, operand: str, p: int, size: dict[str, int]) -> tuple[int, int]:
        """(rows, cols) in elements of ``operand``'s footprint at position ``p``."""
        return footprint(self.tile, self.loops, operand, p, size)

    def describe_loops(self) -> list[str]:
        """Loop names, outermost first: ``b`` for instances, then ``m1 n1 m0 n0 k0`` (the digit
        counts from the innermost loop over that dimension)."""
        names = []
        seen: dict[str, int] = {}
        for loop in reversed(self.loops):
            level = seen.get(loop.dim, 0)
            seen[loop.dim] = level + 1
            names.append(loop.dim if loop.dim == "b" else f"{loop.dim}{level}")
        return names[::-1]


def footprint(tile: StepTile, loops: tuple[Loop, ...], operand: str, p: int,
              size: dict[str, int]) -> tuple[int, int]:  # fmt: skip
    """(rows, cols) in elements of ``operand``'s footprint at position ``p`` of ``loops``: a
    step tile grown by every loop at positions ≥ p over its dimensions, clipped to ``size``."""
    ext = {"m": tile.tm, "k": tile.tk, "n": tile.tn}
    for loop in loops[p:]:
        if loop.dim in ext:
            ext[loop.dim] *= loop.count
    d0, d1 = OPERAND_DIMS[operand]
    return min(ext[d0], size[d0]), min(ext[d1], size[d1])


def nest(tile: StepTile, count: int, n_tiles: dict[str, int], outer: str, inner: str,
         block: dict[str, int], k_above: bool = False) -> tuple[Loop, ...]:  # fmt: skip
    """The loop nest for ``outer``/``inner`` orders ("mn" or "nm") and blocks of ``block[d]``
    step tiles (which must divide ``n_tiles[d]``); the K loop innermost, or with ``k_above``
    just above the inner block loops."""
    loops = [Loop("b", count)]
    loops += [Loop(d, n_tiles[d] // block[d]) for d in outer]
    k = [Loop("k", n_tiles["k"])]
    loops += (k if k_above else []) + [Loop(d, block[d]) for d in inner]
    return tuple(loops + ([] if k_above else k))


def accumulator_position(loops: tuple[Loop, ...]) -> int | None:
    """Where the accumulator level keeps C when K is not innermost: the position of the K loop
    (its footprint is the C tiles of the loops inside it); None when K is innermost (or has one
    trip, or nothing inside it iterates): one output tile at a time, the level's default."""
    k = next((j for j, loop in enumerate(loops) if loop.dim == "k"), None)
    if k is None or loops[k].count < 2 or all(loop.count < 2 for loop in loops[k + 1 :]):
        return None
    return k


def positions(tile: StepTile, loops: tuple[Loop, ...], operand: str,
              size: dict[str, int]) -> list[tuple[int, int, int, int, int, int, bool]]:  # fmt: skip
    """What a level keeping ``operand`` at each position p = len(loops) … 1 (innermost first)
    of the nest ``loops`` holds and moves, without building a :class:`Mapping` (the mapper's
    hot path): ``(p, rows, cols, window loop, sweeps, windows, single)``.

    rows × cols: the footprint (elements, clipped to ``size``); window loop: as
    :meth:`Mapping.window_loop`; sweeps: how often the windows sweep the whole operand (once per
    iteration of every loop outside the window loop that does not index it), so that
    ``sweeps × operand bytes`` cross into the level; windows: how many windows open; single:
    a new window opens every step (only one-trip loops inside the window loop)."""
    d0, d1 = OPERAND_DIMS[operand]
    window, last, sweeps, windows, last_iter = [], -1, [1], [1], -1
    sweep = count_all = 1
    for j, loop in enumerate(loops):  # per position p = j: the loops strictly outside p
        window.append(last)
        dim, count = loop.dim, loop.count
        indexes = dim == "b" or dim == d0 or dim == d1  # Loop.indexes
        if count > 1:
            last_iter = j
            if indexes:
                last = j
        if not indexes:
            sweep *= count
        count_all *= count
        sweeps.append(sweep)
        windows.append(count_all)
    window.append(last)
    ext = {"b": 1, "m": tile.tm, "k": tile.tk, "n": tile.tn}
    s0, s1 = size[d0], size[d1]
    out = []
    for p in range(len(loops), 0, -1):
        if p < len(loops):
            ext[loops[p].dim] *= loops[p].count
        rows, cols, r = min(ext[d0], s0), min(ext[d1], s1), window[p]
        if r < 0:
            out.append((p, rows, cols, r, 1, 1, False))
        else:
            out.append((p, rows, cols, r, sweeps[r], windows[r + 1], last_iter <= r))
    return out

