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
from accel_sim.errors import UserInputError


def _bytes(rows: int, cols: int, bits: float) -> int:
    return math.ceil(rows * cols * bits / 8)


def _divisors(n: int, limit: int = 12) -> list[int]:
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
        return _bytes(ext[d0], ext[d1], bits)

    def c_staging(self, level: int, tile: StepTile) -> int:
        """Bytes a level reserves for output tiles (accumulators at the innermost C level)."""
        if level not in self.path["C"][1:]:
            return 0
        lv = self.arch.memory[level]
        return lv.buffers * self.tile_bytes("C", tile, level == self.inner["C"])

    def fits_innermost(self, tile: StepTile) -> bool:
        """Every on-chip level can hold double-buffered step tiles of what it stages."""
        for i, level in enumerate(self.arch.memory[1:], start=1):
            need = self.c_staging(i, tile)
            for x in "AB":
                if i in self.path[x][1:]:
                    need += level.buffers * self.tile_bytes(x, tile, False)
            if need > level.capacity_bytes:
                return False
        return True


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
    total = _bytes(space.size[d0], space.size[d1], space.bits[operand]) * space.op.count
    return total * sweeps


def _choose_keep(space: _Space, loops: tuple[Loop, ...], tile: StepTile) -> Mapping | None:
    """Keep positions per on-chip level, outermost first (see the module docstring)."""
    mapping = Mapping(tile, loops)
    L = len(loops)
    keep: dict[tuple[str, int], int] = {}
    floor = {"A": 1, "B": 1}
    for level in range(1, len(space.arch.memory)):
        operands = [x for x in "AB" if level in space.path[x][1:] and level != space.inner[x]]
        if not operands:
            continue
        lv = space.arch.memory[level]
        budget = lv.capacity_bytes - space.c_staging(level, tile)
        for x in "AB":  # operands kept one tile deep here still need their slots
            if level in space.path[x][1:] and x not in operands:
                budget -= lv.buffers * space.tile_bytes(x, tile, False)
        options = {}
        for x in operands:
            seen = {}
            for p in range(L, floor[x] - 1, -1):  # innermost first: smaller footprints first
                rows, cols = mapping.footprint(x, p, space.size)
                foot = lv.buffers * _bytes(rows, cols, space.bits[x])
                key = (mapping.window_loop(x, p), foot)
                if key not in seen:
                    seen[key] = (p, foot, _crossing_bytes(space, mapping, x, p))
            options[x] = list(seen.values())
        best = None
        parent = {x: space.path[x][space.path[x].index(level) - 1] for x in operands}
        for choice in _product(options, operands):
            need = sum(c[1] for c in choice)
            if need > budget:
                continue
            cost = sum(c[2] / space.memory.hop_bandwidth(parent[x], level)
                       for x, c in zip(operands, choice))  # fmt: skip
            key = (cost, need)
            if best is None or key < best[0]:
                best = (key, choice)
        if best is None:
            return None
        for x, c in zip(operands, best[1]):
            keep[(x, level)] = c[0]
            floor[x] = c[0]
    return Mapping(tile, loops, tuple(sorted(keep.items())))


def _product(options: dict, operands: list[str]):
    if len(operands) == 1:
        return [(c,) for c in options[operands[0]]]
    return [(a, b) for a in options[operands[0]] for b in options[operands[1]]]


def estimate(arch: Arch, op: MatmulOp, mapping: Mapping) -> Estimate:
    """Closed-form cycles of ``op`` under ``mapping``: the busiest resource (the unit, or a
    port with every transfer it carries) plus the first step's fill and the last tile's drain."""
    from accel_sim.engine.program import Program

    prog = Program(arch, op, mapping)
    mem = prog.memory
    busy: dict = {}
    for link, nbytes in zip(prog.links, prog.link_bytes):
        for port in mem.hop_ports(link.src, link.dst):
            busy[port] = busy.get(port, 0) + mem.transfer_cycles(link.src, link.dst, nbytes)
    compute = prog.compute_cycles
    first, last = prog.step_at(0), prog.step_at(prog.n_steps - 1)
    fill = 0
    for operand in "AB":
        chain = [j for j, ln in enumerate(prog.links) if ln.operand == operand]
        fill = max(fill, sum(mem.transfer_cycles(prog.links[j].src, prog.links[j].dst,
                                                 first.link_bytes[j])
                             + mem.latency(prog.links[j].src) for j in chain))  # fmt: skip
    drain = 0
    if op.epilogue_ops_per_output:
        lanes = arch.vector.bytes_per_cycle // 2
        drain += math.ceil(last.outputs * op.epilogue_ops_per_output / lanes)
    for j, link in enumerate(prog.links):
        if link.operand == "C":
            drain += mem.transfer_cycles(link.src, link.dst, last.link_bytes[j])
    slowest = max(busy.items(), key=lambda kv: kv[1], default=(None, 0))
    bound = "compute"
    body = compute
    if slowest[1] > compute:
        level, kind = slowest[0]
        bound, body = f"{arch.memory[level].name}:{kind}", slowest[1]
    dram = sum(b for ln, b in zip(prog.links, prog.link_bytes) if 0 in (ln.src, ln.dst))
    return Estimate(fill + body + drain, compute, busy, prog.link_bytes, dram, bound)


def candidates(arch: Arch, op: MatmulOp):
    """Every mapping of the search space (a generator)."""
    space = _Space(arch, op)
    tiles = [t for t in space.unit.step_tiles(op.M, op.K, op.N, space.rate)
             if space.fits_innermost(t)]  # fmt: skip
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


def _best(arch: Arch, op: MatmulOp) -> Mapping:
    best = None
    for mapping in candidates(arch, op):
        est = estimate(arch, op, mapping)
        key = (est.cycles, est.dram_bytes, sum(est.link_bytes))
        if best is None or key < best[0]:
            best = (key, mapping)
    if best is None:
        unit = arch.compute
        raise UserInputError(
            arch.origin,
            f"{op.name} ({op.M}x{op.K}x{op.N} {op.precision}): not even the smallest step tile "
            f"of the {unit.kind} unit fits the buffers with their double buffering",
            "memory",
        )
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
