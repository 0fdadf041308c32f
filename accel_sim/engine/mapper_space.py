"""The mapper's search space and its fast bound.

A candidate is a step tile the unit offers, an outer loop order with a block of the outer
dimension, K innermost or above the block loop, and per on-chip level the keep position (and
buffer count) of each operand it stages (``mapping.py``). :class:`_Space` (``mapper_problem.py``)
holds what every candidate of one (architecture, op) shares; :func:`_tile_costs` what every
candidate of one step tile shares, with a lower bound on their rank; :func:`_evaluate` ranks one
loop nest (the slowest of compute, every port and the single-step windows' slots, plus fill and
bubbles) after choosing, outermost level first, the keep positions that minimise each parent
link's time within the level's capacity. :func:`candidates` enumerates the whole space (the
exhaustive search the mapper prunes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from accel_sim.arch.schema import Arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.mapper_problem import _Space
from accel_sim.engine.mapping import (
    Loop,
    Mapping,
    accumulator_position,
    nest,
    positions,
)
from accel_sim.engine.step_costs import step_busy_cycles

#: Simulation cost in the objective: a mapping's cycles count ``× (1 + steps / STEP_WEIGHT)``
#: (steps per instance, :func:`step_weight`), so of two mappings within ~0.1 % of each other the
#: one with far fewer steps (larger tiles, faster to simulate) wins; 4,000 steps weigh 0.1 %.
STEP_WEIGHT = 4_000_000


def step_weight(steps: int, count: int) -> float:
    """The rank's factor ``1 + steps per instance / STEP_WEIGHT`` of a mapping with ``steps``
    steps in all over ``count`` instances (the op's ``count``, its outermost loop): the DES
    collapses repeated instances, so an instance more costs the simulation little; counted in
    all, a model's 36 layers would weigh each step 36 times and choose a mapping many per cent
    slower to save steps."""
    return 1 + steps / count / STEP_WEIGHT


def _divisors(n: int, limit: int = 8) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    divs = sorted(set(small) | {n // d for d in small})
    if len(divs) <= limit:
        return divs
    picks = {divs[round(i * (len(divs) - 1) / (limit - 1))] for i in range(limit)}
    return sorted(picks)


@dataclass(frozen=True)
class _TileCosts:
    """What the search needs about one step tile that no loop order or block changes.

    Attributes:
        tile: the step tile; n: step tiles per dimension (m, k, n).
        steps: steps of the matmul (all instances).
        compute: cycles the unit is busy over all steps (edge steps at their exact time).
        fill: cycles of the first A or B tile's way from DRAM to the unit (the slower).
        tile_time: per (operand, level), cycles a one-tile window's slot is held per step (the
            tile's hop in from its parent and the parent's latency: Little's law).
        budget: per level, bytes left for A and B after its output staging.
        bound: a lower bound on the rank ``cycles × (1 + steps / STEP_WEIGHT)`` of every mapping
            with this tile: fill + the slowest of compute and every port when each operand
            crosses every link exactly once (it crosses at least once).
    """

    tile: StepTile
    n: dict
    steps: int
    compute: int
    fill: int
    tile_time: dict
    budget: dict
    bound: float


def _tile_costs(space: _Space, tile: StepTile) -> _TileCosts:
    op, mem = space.op, space.memory
    n = {d: math.ceil(space.size[d] / getattr(tile, f"t{d}")) for d in "mkn"}
    edge = {d: space.size[d] - (n[d] - 1) * getattr(tile, f"t{d}") for d in "mkn"}
    compute = 0
    for em in ((tile.tm, n["m"] - 1), (edge["m"], 1)):
        for ek in ((tile.tk, n["k"] - 1), (edge["k"], 1)):
            for en in ((tile.tn, n["n"] - 1), (edge["n"], 1)):
                if em[1] and ek[1] and en[1]:
                    c = step_busy_cycles(space.arch, mem, op, tile, space.rate, space.inner,
                                         em[0], ek[0], en[0])  # fmt: skip
                    compute += c * em[1] * ek[1] * en[1]
    compute *= op.count
    steps = op.count * n["m"] * n["k"] * n["n"]
    tile_time, fill, busy = {}, 0, dict(space.c_busy)
    for x in "AB":
        one = space.tile_bytes(x, tile, False)
        for src, dst in space.hops[x]:
            tile_time[(x, dst)] = mem.transfer_cycles(src, dst, one) + mem.latency(src)
            for port, cycles in mem.port_cycles(src, dst, space.total(x, tile.tk)):
                busy[port] = busy.get(port, 0) + cycles
        fill = max(fill, sum(tile_time[(x, dst)] for _, dst in space.hops[x]))
    budget = {level: space.arch.memory[level].capacity_bytes - space.c_staging(level, tile)
              for level, *_ in space.levels}  # fmt: skip
    bound = (fill + max([compute, *busy.values()])) * step_weight(steps, op.count)
    return _TileCosts(tile, n, steps, compute, fill, tile_time, budget, bound)


def _positions(space: _Space, tile: StepTile, loops: tuple[Loop, ...], x: str) -> list:
    """The keep positions of operand ``x`` worth considering in the nest ``loops``: of the
    positions p = len(loops) … 1 (innermost first, :func:`mapping.positions`) the innermost of
    each distinct (window loop, footprint bytes), as ``(p, footprint bytes, bytes crossing into a
    level keeping x at p, single-step window?, windows opened)``."""
    tk, piece, pieces, total = tile.tk, space.piece, space._pieces, space.total(x, tile.tk)
    out, seen = [], set()
    for p, rows, cols, r, sweeps, windows, single in positions(tile, loops, x, space.size):
        one = pieces.get((x, rows, cols, tk))
        if one is None:
            one = piece(x, rows, cols, tk)
        if (r, one) not in seen:
            seen.add((r, one))
            out.append((p, one, total * sweeps, single, windows))
    return out


def _options(space: _Space, costs: _TileCosts, positions: list, x: str, level: int,
             floor: int) -> list:  # fmt: skip
    """A level's choices for operand ``x`` as (position, buffers, bytes, parent link time, its
    entry of :func:`_positions`): every position from ``floor`` inward and buffer count. A
    single-step window's slots bound the link by Little's law; every count from 2 up is a
    choice (fewer leave room for the other operand). A longer window may also be
    single-buffered: it fits where two would not, at the price of a bubble (the first tile's way
    in) every time a window opens."""
    bandwidth = space.bandwidth[(x, level)]
    buffers = space.arch.memory[level].buffers
    tile_time = costs.tile_time[(x, level)]
    held = tile_time * costs.steps
    counts = range(2, buffers + 1)
    opts = []
    append = opts.append
    for pos in positions:
        p, one, cross, single, windows = pos
        if p < floor:
            break
        time = cross / bandwidth
        if single:
            if buffers < 2:
                append((p, buffers, buffers * one, max(time, math.ceil(held / buffers)), pos))
            for b in counts:
                append((p, b, b * one, max(time, math.ceil(held / b)), pos))
        else:
            append((p, 1, one, time + windows * tile_time, pos))
            for b in counts:
                append((p, b, b * one, time, pos))
    return opts


def _pick(opts: list[list], budget: int) -> tuple | None:
    """The choice (one option per operand) within ``budget`` bytes with the least total link
    time, then the fewest buffers, then the least room (ties: the first in product order);
    None when nothing fits. (The keys are compared field by field, as tuples compare.)"""
    best = None
    if len(opts) == 1:
        for o in opts[0]:
            if o[2] <= budget:
                key = (o[3], o[1], o[2])
                if best is None or key < best[0]:
                    best = (key, (o,))
        return None if best is None else best[1]
    top = None  # the best total link time so far
    for a in opts[0]:
        room, ta = budget - a[2], a[3]
        for b in opts[1]:
            if b[2] <= room:
                t = ta + b[3]
                if top is None or t < top or (t == top and (a[1] + b[1], a[2] + b[2]) < best):
                    top, best, pair = t, (a[1] + b[1], a[2] + b[2]), (a, b)
    return None if top is None else pair


def _evaluate(space: _Space, costs: _TileCosts, loops: tuple[Loop, ...],
              beat: float = math.inf):  # fmt: skip
    """The mapper's choice of keep positions for ``loops`` (per level, outermost first: the
    options of :func:`_options` minimising the parent links' time within the level's budget,
    never keeping more than the parent) and its rank by the fast closed-form bound, as
    ``((cycles × (1 + steps / STEP_WEIGHT), DRAM bytes), choices)`` (choices: per (operand,
    level) the option of :func:`_options`); None if a level cannot hold any choice, or once the
    rank's first field is bound to exceed ``beat`` (the ports of the hops chosen so far, fill
    included, already make it larger: the rest only adds).

    The bound: the slowest of the unit (every step at its exact time), every port (bytes
    crossing each link) and every window's slots (a single-step window's: each tile's way in
    and latency; a longer window's: its tiles' crossing and one latency, Little's law over its
    ``b`` slots), plus the first tiles' path to the unit and the bubbles of single-buffered
    windows."""
    budget = space.block_budget(costs.tile, loops, costs.budget)
    if budget is None:
        return None
    tile, steps, port_cycles = costs.tile, costs.steps, space.memory.port_cycles
    weight = step_weight(steps, space.op.count)
    positions = {"A": _positions(space, tile, loops, "A"), "B": _positions(space, tile, loops, "B")}
    floor = {"A": 1, "B": 1}
    chosen = {}
    acc = accumulator_position(loops)
    if acc is not None:  # the accumulator level keeps C at the K loop, in all its slots
        level = space.inner["C"]
        chosen[("C", level)] = (acc, space.arch.memory[level].buffers)
    busy = dict(space.c_busy)  # port cycles (integers: their sum has no order)
    for level, operands in space.levels:
        opts = [_options(space, costs, positions[x], x, level, floor[x]) for x in operands]
        choice = _pick(opts, budget[level])
        if choice is None:
            return None
        for x, c in zip(operands, choice):
            chosen[(x, level)] = c
            floor[x] = c[0]
            for port, cycles in port_cycles(space.parent[(x, level)], level, c[4][2]):
                busy[port] = busy.get(port, 0) + cycles
        if beat < math.inf and (costs.fill + max(costs.compute, *busy.values())) * weight > beat:
            return None
    tile_time = costs.tile_time
    slots, bubbles, dram = 0.0, 0, space.c_dram
    latency = space.memory.latency
    for x, src, dst in space.all_hops:
        _, b, _, time, (_, _, nbytes, single, windows) = chosen[(x, dst)]
        if single:
            slots = max(slots, tile_time[(x, dst)] * steps / b)
        elif b == 1:
            bubbles += windows * tile_time[(x, dst)]
        else:  # each window holds a slot for its tiles' way in and the source's latency
            slots = max(slots, (time + windows * latency(src)) / b)
        if src == 0:
            dram += nbytes
    cycles = costs.fill + max([costs.compute, slots, *busy.values()]) + bubbles
    return (cycles * weight, dram), chosen


def _keep(chosen: dict) -> tuple:
    """``Mapping.keep`` of the choices of :func:`_evaluate`."""
    return tuple(sorted((k, c[0], c[1]) for k, c in chosen.items()))


#: :func:`_tiles` per (unit content, op without its name, the levels' fit data): a sweep maps
#: the same op on architectures that differ only in timing
_TILES: dict[tuple, list[StepTile]] = {}


def _tiles(space: _Space) -> list[StepTile]:
    """:func:`_search_tiles`, memoised by everything it reads (its result is not modified)."""
    key = (space.unit.model_dump_json(), replace(space.op, name=""), tuple(space._fit_levels))
    hit = _TILES.get(key)
    if hit is None:
        if len(_TILES) >= 4096:
            _TILES.clear()
        hit = _TILES[key] = _search_tiles(space)
    return hit


def _search_tiles(space: _Space) -> list[StepTile]:
    """The fitting step tiles worth scoring: the maximal ones (no other fitting tile covers at
    least as much in every dimension, extents clipped to the GEMM), and each of those with K or
    the unit's streamed dimension (``ComputeUnit.streamed_dim``) halved or quartered: a shorter
    K step pipelines loads more finely, a shorter stream (M on a WS array, N on an IS one) lets a
    block of the streamed operand stay resident across the other dimension's tiles; a maximal
    tile that holds the whole output also with M and N halved or quartered (its C would leave
    only after the last step); of tiles with the same extents, the smallest."""
    op = space.op
    # per dimension: each extent (clipped to the GEMM) and the smallest step size giving it
    # (the unit's step tiles are every combination of its sizes per dimension)
    smallest = []
    dims = space.unit.step_dims(op.M, op.K, op.N, space.rate)
    for sizes, limit in zip(dims, (op.M, op.K, op.N)):
        ext: dict[int, int] = {}
        for size in sorted(sizes):
            ext.setdefault(min(size, limit), size)
        smallest.append(ext)
    grid = [list(ext) for ext in smallest]
    # whether a tile fits depends on its extents
    exts = [(grid[0][i], grid[1][j], grid[2][k])
            for i, j, k in np.argwhere(space.fits_grid(*grid)).tolist()]  # fmt: skip
    # a tile covered by another is covered by a maximal one, which comes first in this order
    maximal: list[tuple[int, int, int]] = []
    for e in sorted(exts, reverse=True):
        if not any(o[0] >= e[0] and o[1] >= e[1] and o[2] >= e[2] for o in maximal):
            maximal.append(e)
    # per dimension d: the extents available along d with the other two fixed
    along: list[dict[tuple[int, int], list[int]]] = [{}, {}, {}]
    for e in exts:
        for d in range(3):
            along[d].setdefault(e[:d] + e[d + 1 :], []).append(e[d])
    keep = set(maximal)
    dims = {1} | {"mkn".index(d) for d in (space.unit.streamed_dim(),) if d}
    for e in maximal:
        # a tile holding the whole output stores all of C after the last step; two or four
        # output tiles overlap the first tiles' stores with the next ones' compute
        whole = e[0] >= op.M and e[2] >= op.N
        for d in dims | ({0, 2} if whole else set()):
            rest = e[:d] + e[d + 1 :]
            for div in (2, 4):
                smaller = [v for v in along[d][rest] if v <= e[d] // div]
                if smaller:
                    keep.add(e[:d] + (max(smaller),) + e[d + 1 :])
    return [StepTile(smallest[0][m], smallest[1][k], smallest[2][n]) for m, k, n in sorted(keep)]


def _nests(space: _Space, costs: _TileCosts):
    """The loop nests of one step tile, in the search's order: both outer orders, and per
    order every block of the outer dimension (:func:`_divisors` of its tile count) with K
    innermost; then the same with K above the block loop (blocks of more than one tile, K of
    more than one step: otherwise the nest is one of the first)."""
    n, count = costs.n, space.op.count
    for k_above in (False, True):
        if k_above and n["k"] < 2:
            return
        for outer in ("mn", "nm"):
            x = outer[0]
            for block in _divisors(n[x]):
                if not k_above or block > 1:
                    yield nest(costs.tile, count, n, outer, outer, {x: block, outer[1]: 1},
                               k_above)  # fmt: skip


def candidates(arch: Arch, op: MatmulOp):
    """Every mapping of the search space in enumeration order, as (rank, enumeration key,
    mapping): the exhaustive search that :func:`_shortlist` prunes (the tests compare them)."""
    space = _Space(arch, op)
    for t, tile in enumerate(_tiles(space)):
        costs = _tile_costs(space, tile)
        for j, loops in enumerate(_nests(space, costs)):
            scored = _evaluate(space, costs, loops)
            if scored is not None:
                yield scored[0], (t, j), Mapping(tile, loops, _keep(scored[1]))
