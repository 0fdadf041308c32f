"""Sequential-chain bounds of the closed-form twin (``twin.py``): work that must run in order
whatever the overlap — every load on a port then the last step's way in and out (or the
last output tile's last steps', :func:`_suffix_extra`), every epilogue,
every store after the first output tile, and the accumulator slots taken and freed in tile order
(tiles ``t, t + b, …`` hold one slot in turn); the first pass of the outermost loop is
``twin_first_pass.py``'s. Cycles throughout.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import (
    _chain,
    _downstream,
    _epilogue,
    _inside_k,
    _last_tiles,
    _plan,
    _store_ports,
    _tile_code,
    _tile_steps,
    _way_out,
    first_arrivals,
    output_tiles,
    step_busy,
)
from accel_sim.engine.twin_tiles import streamed_input, tile_pipeline


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
    n = program.n_steps
    last = program.step_at(n - 1)
    arrival: dict = {}  # when the last tile reaches each port of its way out (after its compute)
    out_last = _way_out(program, last, _epilogue(program, last.outputs), {}, arrival)
    best = -math.inf
    loads = _port_totals(program)[0]
    tails, leads = _port_tails(program, last)
    finish = last.compute_cycles + out_last
    # a port that also stores serves every store but the last tile's around its loads; the
    # last load's way in, the last compute and the way out up to this port run while the
    # port serves the stores queued after that load, so the port's last store starts after
    # the longer of the two
    stores = _port_totals(program)[1]
    last_out = _store_ports(program, last, {}) if last.closes_accumulator else {}  # its ports
    heads = _heads(program)
    for port, tail in tails.items():
        other = stores.get(port, 0) - last_out.get(port, 0)
        reach = last.compute_cycles + arrival.get(port, 0)
        late = 0
        if other and port in arrival:
            lead = min(_lead(program, *hop) for hop in leads[port])
            late = _late_stores(program, port, lead, tail + reach, other)
        best = max(best, heads.get(port, 0) + loads[port] + other - late
                   + max(late, tail + reach) + finish - reach)  # fmt: skip
    for port, extra in _suffix_extra(program).items():
        best = max(best, heads.get(port, 0) + loads[port] + _latency_tail(program, port)
                   + finish + extra)  # fmt: skip
    program.__dict__["_twin_load_bound"] = best
    return best


def _port_tails(program: Program, step) -> tuple[dict, dict]:
    """(per port, the shortest way of ``step``'s data from the end of a transfer on the port to
    its arrival in the innermost level — the source latencies and the transfers of the hops
    after it —; per port, the hops of ``step`` on it as (operand, index in its chain))."""
    mem = program.memory
    tails: dict[object, int] = {}
    leads: dict[object, list] = {}
    for operand in "AB":
        chain = _chain(program, operand)
        way = 0  # from the end of a hop's transfer to the data's arrival in the innermost level
        for k in range(len(chain) - 1, -1, -1):
            j = chain[k]
            link = program.links[j]
            if not step.link_bytes[j]:
                continue
            way += mem.latency(link.src)
            for port in mem.hop_ports(link.src, link.dst):
                tails[port] = min(tails.get(port, way), way)
                leads.setdefault(port, []).append((operand, k))
            way += mem.transfer_cycles(link.src, link.dst, step.link_bytes[j])
    return tails, leads


def _heads(program: Program) -> dict:
    """Per port, the earliest cycle it can serve a load (:func:`twin_steps.first_arrivals`, the
    least over the hops that use the port; 0 on DRAM's own port). No store can come earlier
    either: it follows a compute, which waits for the first step's data."""
    mem, heads = program.memory, {}
    for j, at in first_arrivals(program).items():
        for port in mem.hop_ports(program.links[j].src, program.links[j].dst):
            heads[port] = min(heads.get(port, at), at)
    return heads


#: Steps before the last that :func:`_suffix_extra` considers (at most one output tile's).
SUFFIX = 8


def _suffix_extra(program: Program) -> dict:
    """Per load port, what a suffix of the last output tile adds to its chain: step i computes
    only after every load of steps 0 … i on the port (both operands' movers take their steps in
    order), then steps i … n−1 compute in turn; against the last step alone (i = n − 1) that is
    Σ_{j=i}^{n−2} compute_j − Σ_{j=i+1}^{n−1} loads_j more, largest over i (≥ 0). A short last
    step (an edge of K) leaves an earlier step's loads on the critical path: 180×535×19 W4A4 on
    the edge NPU, 3 K steps of which the last is 23 deep."""
    n = program.n_steps
    extra: dict = {}
    run: dict = defaultdict(int)
    later = _step_loads(program, program.step_at(n - 1))
    for i in range(n - 2, max(n - 2 - min(_tile_steps(program), SUFFIX), -1), -1):
        step = program.step_at(i)
        for port in later.keys() | run.keys():
            run[port] += step.compute_cycles - later.get(port, 0)
            extra[port] = max(extra.get(port, 0), run[port])
        later = _step_loads(program, step)
    return {port: cycles for port, cycles in extra.items() if cycles > 0}


def _step_loads(program: Program, step) -> dict:
    """Cycles one step's A and B transfers hold each port."""
    mem, out = program.memory, defaultdict(int)
    for j, link in enumerate(program.links):
        if link.operand != "C" and step.link_bytes[j]:
            for port, cycles in mem.port_cycles(link.src, link.dst, step.link_bytes[j]):
                out[port] += cycles
    return out


def _latency_tail(program: Program, port) -> int:
    """The least latency between a load on ``port`` and its data's use: the source latencies
    of the hops from there inwards, the smaller over the operands whose way in uses the port."""
    mem, best = program.memory, None
    for operand in "AB":
        chain, way = _chain(program, operand), 0
        for j in reversed(chain):
            link = program.links[j]
            way += mem.latency(link.src)
            if port in mem.hop_ports(link.src, link.dst):
                best = way if best is None else min(best, way)
                break
    return best or 0


def _lead(program: Program, operand: str, k: int) -> int:
    """Steps the mover of ``operand``'s ``k``-th hop can run ahead of the compute: the slots on
    its way in (each level's slots × steps per window, at most a token queue's depth each)."""
    slots = {hop[0]: hop[4] for hop in _plan(program)[1]}  # per input link, its slots
    lead = 0
    for j in _chain(program, operand)[k:]:
        r = program.window(operand, program.links[j].dst)[0]
        lead += min(slots[j] * math.prod(program.count[r + 1 :]), program.arch.dma_queue_steps)
    return lead


def _late_stores(program: Program, port, lead: int, way: int, other: int) -> float:
    """Cycles on ``port`` of the stores of the output tiles (but the last; ``other``: all of
    theirs) that reach the port after its last load was requested, so that they overlap that
    load's way in instead of delaying it (:func:`late_tiles`, at the port's average load per
    step)."""
    per_step = _port_totals(program)[0][port] / program.n_steps
    tiles = sum(
        k for c, k in program.multiplicity.items() if program.class_of(c).closes_accumulator
    )
    late = late_tiles(program, lead, way, per_step, tiles)
    return other * late / (tiles - 1) if late > 0 else 0


def late_tiles(program: Program, lead: int, way: int, per_step: float, tiles: int) -> int:
    """Of ``tiles`` output tiles, how many but the last reach a port after its last load was
    requested: that load is requested at most ``lead`` steps before the last compute (its mover
    runs ahead by the slots on its way in), and a tile reaches the port after it was if the
    loads between its closing step's and the last one, which start before the last, are
    shorter than ``way`` (the last load's way in, the last compute and the way out to the port;
    ``per_step`` cycles of the port a step): a tile ``d`` steps before the last, if ``(d − 1) ×
    per_step < way``. (Counting the last load too, ``d × per_step < way``, missed the tile
    closing ``ceil(way / per_step)`` steps before: 39×336×4826 W4A4-static on rtx3090_like,
    two output tiles of 6 steps, 167.5 cycles of GDDR6X a step and an 898-cycle way: +13.2 % →
    +0.4 %.)"""
    steps = min(lead, math.ceil(way / per_step)) if per_step else lead
    if steps <= 0:
        return 0
    # of the other output tiles, those closing ``steps`` or fewer steps before the last
    inside = _inside_k(program)
    if inside > 1:
        return min(tiles - 1, inside - 1, steps)
    return min(tiles - 1, steps // _tile_steps(program))


def _queued(program: Program, code: int) -> int:
    """Cycles from the end of the compute of a one-step output tile (closing step of class
    ``code``) until its first C hop can take its ports, beyond its epilogue: loads on those
    ports requested during the epilogue go first (first come, first served). A step's compute
    frees the slot of each innermost input window it closes, and the window that waits for
    that slot is requested at once: kept for one step, one tile per step computed meanwhile
    (``J`` of them, every ``compute`` cycles: ``L`` each); kept longer, one window's first tile
    when the tile closes it (``S``). The port is done with them ``max(S + J × L, (J − 1) ×
    compute + L)`` after the compute (an A tile from DRAM per step on the store's DRAM port:
    1532-cycle loads against a 2176-cycle epilogue on the edge NPU)."""
    step = program.class_of(code)
    epilogue, compute = _epilogue(program, step.outputs), step.compute_cycles
    if not epilogue or not compute:
        return 0
    mem, links = program.memory, program.links
    c0 = _chain(program, "C")[0]
    c_ports = set(mem.hop_ports(links[c0].src, links[c0].dst))
    single: dict = defaultdict(int)  # per port: windows of several steps, requested at once
    each: dict = defaultdict(int)  # per port: one-step windows, one per step computed
    digits = program.decode(code)
    for l0, operand in enumerate("AB"):
        j = _chain(program, operand)[-1]
        if not step.closes_l0[l0]:
            continue
        nbytes, into = step.link_bytes[j], each
        if not step.opens[j]:  # the window's first step (its loads inside R at their first)
            r = program.window(operand, links[j].dst)[0]
            first = sum((0 if program.count[i] > 1 else 3) * program._radix[i] if i > r
                        else digits[i] * program._radix[i] for i in range(len(digits)))  # fmt: skip
            nbytes, into = program.class_of(first).link_bytes[j], single
        for port, cycles in mem.port_cycles(links[j].src, links[j].dst, nbytes):
            if port in c_ports:
                into[port] += cycles
    n = (epilogue - 1) // compute + 1
    done = max([epilogue] + [max(single[p] + n * each[p], (n - 1) * compute + each[p]
                                 if each[p] else 0) for p in set(single) | set(each)])  # fmt: skip
    return done - epilogue


def _unmodeled(program: Program, j: int) -> int:
    """Cycles the loads other than link ``j``'s (the streamed input's) spend on that link's
    ports: what the tile pipeline leaves out."""
    mem, link = program.memory, program.links[j]
    ports = set(mem.hop_ports(link.src, link.dst))
    mine = dict(mem.port_cycles(link.src, link.dst, program.link_bytes[j]))
    loads = _port_totals(program)[0]
    return max(loads.get(p, 0) - mine.get(p, 0) for p in ports)


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
      the average ``Σ holds / b`` of the per-group model misses). With K innermost these
      chains are the tile pipeline's (``twin_tiles.py``), which also sees the stores and the
      loads queued on one port and the vector unit together.

    With an input streamed over the stores' port (``twin_tiles.streamed_input``) the pipeline
    schedules every transfer on that port but the other inputs', so ``floor`` (the per-group
    estimate) is capped at the pipeline plus those (cycles throughout).
    """
    mem = program.memory
    n = program.n_steps
    last = program.step_at(n - 1)
    c0 = _chain(program, "C")[0]
    first_c = program.links[c0]
    e_last = _epilogue(program, last.outputs)
    out_last = _way_out(program, last, e_last, {})  # the last tile's epilogue and way out
    after = out_last - e_last - mem.transfer_cycles(first_c.src, first_c.dst,
                                                    last.link_bytes[c0])  # fmt: skip
    stream = _inside_k(program) == 1 and streamed_input(program)
    if stream:
        # the pipeline of tiles with the streamed input schedules every transfer on the
        # stores' port but the other inputs': the per-group estimate can exceed it by at most
        # those (its slot turnovers and bursts are the pipeline's own). A stream into an outer
        # level passes the inner levels' slots, which the pipeline does not bound: no cap
        pipe = tile_pipeline(program, fill, {}, 0, max(0, after))
        inner = _chain(program, program.links[stream[1]].operand)[-1] == stream[1]
        cap = pipe + _unmodeled(program, stream[1]) if inner else floor
        floor = max(pipe, min(floor, cap))
    best = max(floor, load_bound(program))
    if stream:
        return best
    spt = _tile_steps(program)
    n_tiles = n // spt
    b = _plan(program)[3]  # accumulator slots
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
    # tiles of one step: the steps computed during a tile's epilogue are the next tiles', whose
    # loads are those of their class; the last `ahead` tiles' prefetch has nothing to load
    queued, ahead = {}, 0
    if spt == 1:
        r = program.window("C", program.inner["C"])[0]  # the loops inside it run once: ONLY
        only = sum(3 * program._radix[i] for i in range(r + 1, len(program.count)))
        queued = {o: _queued(program, o + only) for o in tiles}
        ahead = max(hop[4] for hop in _plan(program)[1] if hop[1] is None)  # innermost slots
    stores = sum(
        mem.transfer_cycles(first_c.src, first_c.dst, tiles[o][2].link_bytes[c0])
        for o in {_tile_code(program, t) for t in range(n_tiles - b, n_tiles)}
    )
    # no chain can exceed every tile's hold (a class's tiles can all fall on one slot: tiles
    # alternating big and small under an outer loop put every big one on the same slot)
    if (
        fill + sum((h + queued.get(o, 0)) * tiles[o][0] for o, h in holds.items()) + stores + after
        <= best
    ):
        return best
    if _inside_k(program) == 1:  # the tiles' way out as a pipeline (twin_tiles.py)
        return max(best, tile_pipeline(program, fill, queued, ahead, max(0, after)))
    chains = [0] * b
    for outer, h in holds.items():
        for res, count in enumerate(_residues(program, outer, b)):
            chains[res] += (h + queued.get(outer, 0)) * count
    for t in range(max(0, n_tiles - ahead), n_tiles):
        chains[t % b] -= queued[_tile_code(program, t)]
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
    group's loads on each port from when the first data reach it, then the way in the fill's
    tiles took and that step's compute), its epilogue, then the C hops before the port; after
    which the port still has every store (and whatever loads it has not finished) to serve.
    Binds when outputs dominate the traffic (small K: the GEMM is a stream of output tiles)."""
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
    heads = _heads(program)  # (no load on a port before the first data reach it)
    done = max(fill + compute,
               *(heads.get(r, 0) + c + fill - ports[r] + last_compute
                 for r, c in first_loads.items()))  # fmt: skip
    closing = program.step_at(group - 1)
    if program.op.epilogue_ops_per_output:
        lanes = arch.vector.lanes
        done += math.ceil(closing.outputs * program.op.epilogue_ops_per_output / lanes)
    arrival: dict = {}
    _way_out(program, closing, done, {}, arrival)  # the first tile's way out queues on nothing
    bound = 0
    for port, store in stores.items():
        if store:
            bound = max(bound, arrival.get(port, done) + store, loads.get(port, 0) + store)
    return bound
