"""Sequential-chain bounds of the closed-form twin (``twin.py``): work that must run in order
whatever the overlap — every load on a port then the last step's way in and out, every epilogue,
every store after the first output tile, and the accumulator slots taken and freed in tile order
(tiles ``t, t + b, …`` hold one slot in turn). Cycles throughout.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import (
    _acc_buffers,
    _chain,
    _downstream,
    _epilogue,
    _inside_k,
    _last_tiles,
    _store_ports,
    _tile_code,
    _tile_steps,
    _way_out,
    output_tiles,
    step_busy,
)


def _residues(program: Program, outer: int, b: int) -> list[int]:
    """How many output tiles of class ``outer`` have a sequence index ≡ 0 … b−1 (mod b)."""
    r = program.window("C", program.inner["C"])[0]
    digits = program.decode(outer)
    dist = [1] + [0] * (b - 1)
    weight = 1
    for i in range(r, -1, -1):
        n, d = program.count[i], digits[i]
        values = {0: (0, 0), 1: (1, n - 2), 2: (n - 1, n - 1), 3: (0, 0)}[d]
        here = [0] * b
        for a in range(b):  # indices in [lo, hi] that are ≡ a (mod b)
            lo, hi = values
            first = lo + (a - lo) % b
            if first <= hi:
                here[a * weight % b] += (hi - first) // b + 1
        dist = [sum(dist[x] * here[(y - x) % b] for x in range(b)) for y in range(b)]
        weight *= n
    return dist


def _port_totals(program: Program) -> tuple[dict, dict]:
    """(load cycles, store cycles) per port over the whole matmul (cached)."""
    totals = program.__dict__.get("_twin_ports")
    if totals is None:
        mem = program.memory
        loads: dict[object, int] = defaultdict(int)
        stores: dict[object, int] = defaultdict(int)
        for link, nbytes in zip(program.links, program.link_bytes):
            for port, cycles in mem.port_cycles(link.src, link.dst, nbytes):
                (stores if link.operand == "C" else loads)[port] += cycles
        totals = program.__dict__["_twin_ports"] = (dict(loads), dict(stores))
    return totals


def load_bound(program: Program) -> float:
    """The load ports' chains of :func:`_bounds` (-inf without loads): a lower bound on the
    twin's cycles that needs no group sums (computed once per program)."""
    cached = program.__dict__.get("_twin_load_bound")
    if cached is not None:
        return cached
    mem = program.memory
    n = program.n_steps
    last = program.step_at(n - 1)
    out_last = _way_out(program, last, _epilogue(program, last.outputs), {})
    best = -math.inf
    loads = _port_totals(program)[0]
    tails: dict[object, int] = {}
    for operand in "AB":
        chain = _chain(program, operand)
        way = 0  # from the end of a hop's transfer to the data's arrival in the innermost level
        for k in range(len(chain) - 1, -1, -1):
            j = chain[k]
            link = program.links[j]
            if not last.link_bytes[j]:
                continue
            way += mem.latency(link.src)
            for port in mem.hop_ports(link.src, link.dst):
                tails[port] = min(tails.get(port, way), way)
            way += mem.transfer_cycles(link.src, link.dst, last.link_bytes[j])
    finish = last.compute_cycles + out_last
    # a port that also stores serves every store but the last tile's (which is in the way
    # out) around its loads
    stores = _port_totals(program)[1]
    last_out = _store_ports(program, last, {}) if last.closes_accumulator else {}  # its ports
    for port, tail in tails.items():
        other = stores.get(port, 0) - last_out.get(port, 0)
        best = max(best, loads[port] + other + tail + finish)
    program.__dict__["_twin_load_bound"] = best
    return best


def _bounds(program: Program, fill: int, floor: int) -> int:
    """The largest of these lower bounds (or ``floor``), each a chain of work that must happen
    in sequence:

    * **load ports**: every load on the port (and every store it also carries but the last
      tile's), then the last step's inputs' way in (latencies, inner hops), its compute and the
      last tile's way out;
    * **vector unit**: from the first output tile's compute, every epilogue, then the last two
      tiles' way out;
    * **accumulator slots**: an output tile holds one of ``b`` accumulator slots from its first
      step's compute until its first store hop has read it (its compute, epilogue and that hop);
      slots are taken and freed in tile order, so tiles ``t, t + b, t + 2b, …`` hold the same
      slot one after another: the run lasts at least the longest of those ``b`` chains (when the
      tiles alternate big and small — a short last row — one chain gets every big tile, which
      the average ``Σ holds / b`` of the per-group model misses).
    """
    mem = program.memory
    n = program.n_steps
    last = program.step_at(n - 1)
    c0 = _chain(program, "C")[0]
    first_c = program.links[c0]
    e_last = _epilogue(program, last.outputs)
    out_last = _way_out(program, last, e_last, {})  # the last tile's epilogue and way out
    best = max(floor, load_bound(program))
    spt = _tile_steps(program)
    n_tiles = n // spt
    b = _acc_buffers(program)
    if not program.op.epilogue_ops_per_output and (b == 1 or n_tiles <= b):
        return best
    tiles = output_tiles(program)
    # the vector unit
    if program.op.epilogue_ops_per_output:
        work = sum(entry[0] * _epilogue(program, entry[2].outputs) for entry in tiles.values())
        free: dict = {}
        before = _last_tiles(program)
        if len(before) > 1:
            _way_out(program, program.step_at(before[-2]), -e_last, free)
        best = max(best, fill + tiles[_tile_code(program, 0)][1] + work
                   + _way_out(program, last, 0, free))  # fmt: skip
    # accumulator slot chains
    if b == 1 or n_tiles <= b:
        return best
    holds = {outer: compute + _epilogue(program, step.outputs)
             + mem.transfer_cycles(first_c.src, first_c.dst, step.link_bytes[c0])
             for outer, (_, compute, step) in tiles.items()}  # fmt: skip
    after = out_last - e_last - mem.transfer_cycles(first_c.src, first_c.dst,
                                                    last.link_bytes[c0])  # fmt: skip
    stores = sum(
        mem.transfer_cycles(first_c.src, first_c.dst, tiles[o][2].link_bytes[c0])
        for o in {_tile_code(program, t) for t in range(n_tiles - b, n_tiles)}
    )
    # no chain can exceed every class's tiles split as unevenly as b slots allow
    if fill + sum(h * -(-tiles[o][0] // b) for o, h in holds.items()) + stores + after <= best:
        return best
    chains = [0] * b
    for outer, h in holds.items():
        for res, count in enumerate(_residues(program, outer, b)):
            chains[res] += h * count
    for res in range(b):
        tail = 0
        for t in range(n_tiles - 1 - (n_tiles - 1 - res) % b + 1, n_tiles):
            step = tiles[_tile_code(program, t)][2]
            tail += mem.transfer_cycles(first_c.src, first_c.dst, step.link_bytes[c0])
        best = max(best, fill + chains[res] + tail + max(0, after))
    return best


def _store_bound(program: Program, fill: int, ports: dict | None = None) -> int:
    """A port that carries outputs cannot start storing before the first output tile reaches it:
    the first tile's last compute (after the fill, and after its last input tile arrived: the
    group's loads on each port from time 0, then the way in the fill's tiles took and that step's
    compute), its epilogue, then the C hops before the port; after which the port still has every
    store (and whatever loads it has not finished) to serve. Binds when outputs dominate the
    traffic (small K: the GEMM is a stream of output tiles)."""
    arch, n = program.arch, program.n_steps
    loads, stores = _port_totals(program)
    if not any(stores.values()):
        return 0
    ports = ports or {}
    compute, first_loads = 0, defaultdict(int)
    if _inside_k(program) > 1:
        # K above the block loop: the first tile closes in the window's last K iteration, after
        # every step before it
        k_loops = program.window("C", program.inner["C"])[1]
        group = 1 + sum((program.count[i] - 1) * math.prod(program.count[i + 1 :])
                        for i in k_loops)  # fmt: skip
        classes = Counter(program.codes_at(np.arange(group), canonical=False).tolist())
    else:
        group = min(program.count[-1], n)  # the K steps of the first output tile
        # the group's steps by class: the innermost digit first, middle (group − 2), last
        first = program.code(0)
        classes = {first: 1} if group == 1 else {first: 1, first + 1: group - 2, first + 2: 1}
    for code, times in classes.items():
        if not times:
            continue
        down = _downstream(program, code)
        for resource, cycles in step_busy(program, code).items():
            if resource == "compute":
                compute += cycles * times
            elif resource in ports:
                first_loads[resource] += (cycles - down.get(resource, 0)) * times
    last_compute = program.step_at(group - 1).compute_cycles
    done = max(
        fill + compute, *(c + fill - ports[r] + last_compute for r, c in first_loads.items())
    )
    closing = program.step_at(group - 1)
    if program.op.epilogue_ops_per_output:
        lanes = arch.vector.bytes_per_cycle // 2
        done += math.ceil(closing.outputs * program.op.epilogue_ops_per_output / lanes)
    arrival: dict = {}
    _way_out(program, closing, done, {}, arrival)  # the first tile's way out queues on nothing
    bound = 0
    for port, store in stores.items():
        if store:
            bound = max(bound, arrival.get(port, done) + store, loads.get(port, 0) + store)
    return bound
