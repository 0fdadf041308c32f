"""The mapper: for each matmul, search step tiles, loop orders, block sizes and what every level
keeps, and pick the mapping with the fewest estimated cycles (then the fewest DRAM bytes).

Search space (``mapping.py``): every step tile the unit offers (``ComputeUnit.step_tiles``) whose
tiles fit the innermost buffers; both outer orders (m or n outermost); blocks of the outer
dimension in every divisor of its tile count (a block of 1 is the plain nest, a block of all
tiles the other order); and per on-chip level the keep position of each operand it stages,
chosen outermost level first so that an inner level never keeps more of an operand than its
parent (it can only hold what came through). A level's choice minimises the time its parent
link spends bringing data in (bytes crossing ÷ hop bandwidth), among the choices whose
double-buffered footprints fit its capacity; more capacity only adds choices.

Score: the closed-form cycle bound of :func:`estimate` (the slowest of compute and every port,
plus the pipeline's fill and drain). Mappings are cached by (architecture content, op shape,
precision and operand widths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from accel_sim.arch.schema import Arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.mapping import OPERAND_DIMS, Loop, Mapping, nest
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.program import Program, step_busy_cycles, tile_bytes
from accel_sim.engine.twin import twin_cycles
from accel_sim.errors import UserInputError


def _divisors(n: int, limit: int = 8) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    divs = sorted(set(small) | {n // d for d in small})
    if len(divs) <= limit:
        return divs
    picks = {divs[round(i * (len(divs) - 1) / (limit - 1))] for i in range(limit)}
    return sorted(picks)


@dataclass(frozen=True)
class Estimate:
    """Closed-form costs of one mapping (cycles and bytes)."""

    cycles: int
    compute_cycles: int
    port_cycles: dict
    link_bytes: tuple[int, ...]
    dram_bytes: int
    bound: str  # what binds: "compute" or a port label


class _Space:
    """Shared per-(arch, op) data of the search."""

    def __init__(self, arch: Arch, op: MatmulOp) -> None:
        self.arch, self.op = arch, op
        self.memory = MemorySystem(arch)
        self.unit = arch.compute
        self.rate = self.unit.rate(op.precision, arch.origin, op.name)
        self.size = {"b": op.count, "m": op.M, "k": op.K, "n": op.N}
        self.bits = {"A": op.a_bits, "B": op.b_bits, "C": op.c_bits}
        idx = self.memory.index
        self.path = {x: [idx[lv.name] for lv in arch.path(x)] for x in "ABC"}
        self.inner = {x: self.path[x][-1] for x in "ABC"}

    def tile_bytes(self, operand: str, tile: StepTile, innermost: bool) -> int:
        ext = {"m": min(tile.tm, self.op.M), "k": min(tile.tk, self.op.K),
               "n": min(tile.tn, self.op.N)}  # fmt: skip
        d0, d1 = OPERAND_DIMS[operand]
        bits = self.op.accumulator_bits if operand == "C" and innermost else self.bits[operand]
        return tile_bytes(ext[d0], ext[d1], bits)

    def c_staging(self, level: int, tile: StepTile) -> int:
        """Bytes a level reserves for output tiles (accumulators at the innermost C level)."""
        if level not in self.path["C"][1:]:
            return 0
        lv = self.arch.memory[level]
        return lv.buffers * self.tile_bytes("C", tile, level == self.inner["C"])

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

    def fits_innermost(self, tile: StepTile) -> bool:
        return self.shortfall(tile) is None


def _crossing_bytes(space: _Space, mapping: Mapping, operand: str, p: int) -> int:
    """Bytes of ``operand`` crossing into a level that keeps it at position ``p``: each tile
    once per window, and the windows re-sweep the operand once per iteration of every loop
    outside the window loop that does not index it."""
    r = mapping.window_loop(operand, p)
    sweeps = math.prod(lp.count for lp in mapping.loops[: max(r, 0)]
                       if not lp.indexes(operand))  # fmt: skip
    if r < 0:
        sweeps = 1
    d0, d1 = OPERAND_DIMS[operand]
    total = tile_bytes(space.size[d0], space.size[d1], space.bits[operand]) * space.op.count
    return total * sweeps


def _single_step(mapping: Mapping, operand: str, p: int) -> bool:
    """True when a level keeping ``operand`` at ``p`` opens a new window every step."""
    r = mapping.window_loop(operand, p)
    return r >= 0 and all(lp.count == 1 for lp in mapping.loops[r + 1:])


def _windows(mapping: Mapping, operand: str, p: int) -> int:
    """How many windows a level keeping ``operand`` at ``p`` opens over the matmul."""
    r = mapping.window_loop(operand, p)
    return math.prod(lp.count for lp in mapping.loops[: r + 1]) if r >= 0 else 1


def _tile_time(space: _Space, mapping: Mapping, operand: str, src: int, dst: int) -> int:
    """Cycles a single-step window's slot is held per step: the tile's transfer in, the source
    latency, and its way on (Little's law, as in the twin)."""
    tile = space.tile_bytes(operand, mapping.tile, False)
    return space.memory.transfer_cycles(src, dst, tile) + space.memory.latency(src)


def _choose_keep(space: _Space, loops: tuple[Loop, ...], tile: StepTile) -> Mapping | None:
    """Keep positions per on-chip level, outermost first (see the module docstring)."""
    mapping = Mapping(tile, loops)
    L = len(loops)
    steps = math.prod(lp.count for lp in loops)
    keep: dict[tuple[str, int], int] = {}
    floor = {"A": 1, "B": 1}
    for level in range(1, len(space.arch.memory)):
        operands = [x for x in "AB" if level in space.path[x][1:]]
        if not operands:
            continue
        lv = space.arch.memory[level]
        budget = lv.capacity_bytes - space.c_staging(level, tile)
        parent = {x: space.path[x][space.path[x].index(level) - 1] for x in operands}
        options = {}
        for x in operands:
            bandwidth = space.memory.hop_bandwidth(parent[x], level)
            held = _tile_time(space, mapping, x, parent[x], level) * steps
            seen = {}
            for p in range(L, floor[x] - 1, -1):  # innermost first: smaller footprints first
                rows, cols = mapping.footprint(x, p, space.size)
                one = tile_bytes(rows, cols, space.bits[x])
                key = (mapping.window_loop(x, p), one)
                if key in seen:
                    continue
                time = _crossing_bytes(space, mapping, x, p) / bandwidth
                if _single_step(mapping, x, p):
                    # the level offers ``buffers`` slots; fewer (double buffering) leave room
                    # for other operands, so every count from 2 up is a choice
                    seen[key] = [(p, b, b * one, max(time, math.ceil(held / b)))
                                 for b in range(min(2, lv.buffers), lv.buffers + 1)]  # fmt: skip
                    continue
                # a long window may also be kept single-buffered: it fits where two would not,
                # at the price of not prefetching the next window: a bubble (the first tile's
                # way in) every time a window opens
                bubble = _windows(mapping, x, p) * _tile_time(space, mapping, x, parent[x], level)
                seen[key] = [(p, b, b * one, time + (bubble if b == 1 else 0))
                             for b in range(1, lv.buffers + 1)]  # fmt: skip
            options[x] = [o for group in seen.values() for o in group]
        best = None
        for choice in _product(options, operands):
            need = sum(c[2] for c in choice)
            if need > budget:
                continue
            # ties go to fewer buffers, then less room: the choices a smaller level also has
            key = (sum(c[3] for c in choice), sum(c[1] for c in choice), need)
            if best is None or key < best[0]:
                best = (key, choice)
        if best is None:
            return None
        for x, c in zip(operands, best[1]):
            keep[(x, level)] = (c[0], c[1])
            floor[x] = c[0]
    return Mapping(tile, loops, tuple(sorted((k, p, b) for k, (p, b) in keep.items())))


def _product(options: dict, operands: list[str]):
    if len(operands) == 1:
        return [(c,) for c in options[operands[0]]]
    return [(a, b) for a in options[operands[0]] for b in options[operands[1]]]


def quick_estimate(space: _Space, mapping: Mapping) -> tuple[float, int, int]:
    """A fast closed-form bound used to rank candidates before the twin: (cycles, DRAM bytes,
    steps).

    The slowest of the unit (every step at its exact time), every port (bytes crossing each link
    from :func:`_crossing_bytes`) and every single-step window's slots, plus the first tiles' path
    to the unit."""
    op, mem, tile = space.op, space.memory, mapping.tile
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
    steps = math.prod(lp.count for lp in mapping.loops)
    busy: dict = {}
    slots = 0.0
    bubbles = 0
    fill = 0
    dram = 0
    for x in "ABC":
        path = space.path[x]
        hops = list(zip(path, path[1:])) if x != "C" else [(d, s) for s, d in
                                                           reversed(list(zip(path, path[1:])))]
        first_path = 0
        for src, dst in hops:
            if x == "C":
                nbytes = tile_bytes(op.M, op.N, op.c_bits) * op.count
            else:
                nbytes = _crossing_bytes(space, mapping, x, mapping.position(x, dst))
                first_path += (mem.transfer_cycles(src, dst, space.tile_bytes(x, tile, False))
                               + mem.latency(src))  # fmt: skip
                p = mapping.position(x, dst)
                if _single_step(mapping, x, p):
                    held = _tile_time(space, mapping, x, src, dst)
                    b = mapping.buffers(x, dst, space.arch.memory[dst].buffers)
                    slots = max(slots, held * steps / b)
                elif mapping.buffers(x, dst, space.arch.memory[dst].buffers) == 1:
                    bubbles += _windows(mapping, x, p) * _tile_time(space, mapping, x, src, dst)
            if 0 in (src, dst):
                dram += nbytes
            for port, cycles in mem.port_cycles(src, dst, nbytes):
                busy[port] = busy.get(port, 0) + cycles
        fill = max(fill, first_path)
    body = max([compute, slots, *busy.values()])
    return fill + body + bubbles, dram, steps


def estimate(arch: Arch, op: MatmulOp, mapping: Mapping) -> Estimate:
    """The closed-form model of a mapping (the twin, ``twin.py``) with its byte totals and the
    resource that binds (the one with the most busy cycles)."""
    prog = Program(arch, op, mapping)
    mem = prog.memory
    busy: dict = {}
    for link, nbytes in zip(prog.links, prog.link_bytes):
        for port, cycles in mem.port_cycles(link.src, link.dst, nbytes):
            label = f"{arch.memory[port[0]].name}:{port[1]}"
            busy[label] = busy.get(label, 0) + cycles
    compute = prog.compute_cycles
    slowest = max(busy.items(), key=lambda kv: kv[1], default=("compute", 0))
    bound = slowest[0] if slowest[1] > compute else "compute"
    dram = sum(b for ln, b in zip(prog.links, prog.link_bytes) if 0 in (ln.src, ln.dst))
    return Estimate(twin_cycles(prog), compute, busy, prog.link_bytes, dram, bound)


def _useful_tiles(tiles: list[StepTile], op: MatmulOp) -> list[StepTile]:
    """The fitting step tiles worth scoring: the maximal ones (no other fitting tile covers at
    least as much in every dimension, extents clipped to the GEMM), and each of those with K
    halved or quartered (shorter steps pipeline loads more finely)."""
    def ext(t: StepTile) -> tuple[int, int, int]:
        return (min(t.tm, op.M), min(t.tk, op.K), min(t.tn, op.N))

    by_ext: dict[tuple[int, int, int], StepTile] = {}
    for t in sorted(tiles, key=lambda t: (t.tm, t.tk, t.tn)):
        by_ext.setdefault(ext(t), t)  # the smallest tile with these extents
    exts = list(by_ext)
    maximal = [e for e in exts
               if not any(o != e and all(a >= b for a, b in zip(o, e)) for o in exts)]  # fmt: skip
    keep = set(maximal)
    for m, k, n in maximal:
        for div in (2, 4):
            smaller = [e for e in exts if e[0] == m and e[2] == n and e[1] <= k // div]
            if smaller:
                keep.add(max(smaller))
    return [by_ext[e] for e in sorted(keep)]


def candidates(arch: Arch, op: MatmulOp, space: _Space | None = None):
    """Every mapping of the search space (a generator)."""
    space = space or _Space(arch, op)
    tiles = _useful_tiles([t for t in space.unit.step_tiles(op.M, op.K, op.N, space.rate)
                           if space.fits_innermost(t)], op)  # fmt: skip
    for tile in tiles:
        n_tiles = {d: math.ceil(space.size[d] / getattr(tile, f"t{d}")) for d in "mkn"}
        for outer in ("mn", "nm"):
            x = outer[0]
            for block in _divisors(n_tiles[x]):
                blocks = {x: block, outer[1]: 1}
                loops = nest(tile, op.count, n_tiles, outer, outer, blocks)
                mapping = _choose_keep(space, loops, tile)
                if mapping is not None:
                    yield mapping


_CACHE: dict[tuple[str, MatmulOp], Mapping] = {}
_CACHE_LIMIT = 20000


#: Simulation cost in the objective: a mapping's cycles count ``× (1 + steps / STEP_WEIGHT)``,
#: so of two mappings within ~0.1 % of each other the one with far fewer steps (larger tiles,
#: faster to simulate) wins; 4,000 steps weigh 0.1 %.
STEP_WEIGHT = 4_000_000

#: How many step tiles (their best-ranked candidate each, by :func:`quick_estimate`) the
#: closed-form model re-scores.
RESCORE = 6


def _best(arch: Arch, op: MatmulOp) -> Mapping:
    space = _Space(arch, op)
    def rank(mapping: Mapping) -> tuple:
        cycles, dram, steps = quick_estimate(space, mapping)
        return (cycles * (1 + steps / STEP_WEIGHT), dram)

    ranked = sorted(
        ((rank(m), i, m) for i, m in enumerate(candidates(arch, op, space))),
        key=lambda t: (t[0], t[1]),
    )
    if not ranked:
        tiles = space.unit.step_tiles(op.M, op.K, op.N, space.rate)
        smallest = min(tiles, key=lambda t: t.tm * t.tk + t.tk * t.tn + t.tm * t.tn)
        name, need, capacity = space.shortfall(smallest) or ("?", 0, 0)
        raise UserInputError(
            arch.origin,
            f"{op.M}x{op.K}x{op.N} {op.precision}: not even the smallest step tile of the "
            f"{arch.compute.kind} unit ({smallest.tm}x{smallest.tk}x{smallest.tn}) fits: level "
            f"{name} needs {need} B for its double-buffered tiles but has {capacity} B",
            "memory",
        )
    # the twin re-scores the best-ranked candidate of each of the first RESCORE step tiles: the
    # fast bound ranks tiles less reliably than it ranks loop orders for one tile
    shortlist, tiles = [], set()
    for entry in ranked:
        if entry[2].tile not in tiles:
            tiles.add(entry[2].tile)
            shortlist.append(entry)
            if len(shortlist) == RESCORE:
                break
    best = None
    for _, i, mapping in shortlist:
        est = estimate(arch, op, mapping)
        steps = math.prod(lp.count for lp in mapping.loops)
        key = (est.cycles * (1 + steps / STEP_WEIGHT), est.dram_bytes, steps, i)
        if best is None or key < best[0]:
            best = (key, mapping)
    return best[1]


def map_matmul(arch: Arch, op: MatmulOp) -> Mapping:
    """The chosen mapping of ``op`` on ``arch``, cached by content (the architecture's fields,
    the op's shape, precision and widths — not its name)."""
    key = (arch.fingerprint, replace(op, name=""))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _best(arch, op)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = hit
    return hit


def mapped_program(arch: Arch, op: MatmulOp) -> Program:
    """The step program of ``op`` under the mapper's chosen mapping."""
    return Program(arch, op, map_matmul(arch, op))
