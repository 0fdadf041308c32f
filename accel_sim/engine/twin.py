"""Closed-form twin of the DES: the same step program, costed without simulation.

For a pipeline whose stages are the hops, the compute unit, the epilogue and the store hops,
each step occupies every port and the compute unit for a known time (its *busy* times, from
:class:`~accel_sim.engine.memory.MemorySystem`). In steady state a step leaves the pipeline once
per ``period = max over resources of busy`` — the slowest resource sets the pace — so

    cycles ≈ fill + Σ_groups period(group) + drain

where a group is one sweep of the innermost iterating loop; ``fill`` is when the first step's
inputs are usable (its A and B hops list-scheduled on the ports they share), the first group's
loads start at time 0 (the fill is their first part), and ``drain`` is the last two output
tiles' way out (epilogue, every C hop) as a two-job flow shop. A level whose window is a single
step also bounds the period by its slots (Little's law), and a group ending in a short step
idles the port until the slot of the full step before comes free (:func:`_turnover`).

The answer is the larger of that and a few chains of work that must run in sequence
(:func:`_bounds`, :func:`_store_bound`): every load on a port then the last step's way in and
out; every epilogue; every store after the first output tile; and the accumulator slots, taken
and freed in tile order, so tiles ``t, t + b, …`` hold one slot in turn. ``docs/engine.md``
lists the regimes where the model and the DES still differ and why.
"""

from __future__ import annotations

import math
from collections import defaultdict

from accel_sim.engine.program import Program, _class_of


def _chain(program: Program, operand: str) -> list[int]:
    """Indices of ``operand``'s links in ``program.links``, outermost hop first (cached)."""
    cache = program.__dict__.setdefault("_twin_chains", {})
    chain = cache.get(operand)
    if chain is None:
        chain = cache[operand] = [j for j, ln in enumerate(program.links) if ln.operand == operand]
    return chain


def step_busy(program: Program, code: int) -> dict[object, int]:
    """Cycles a step of class ``code`` occupies each resource: the unit, every port, the vector
    unit, (Little's law) the slots of every level whose window is that single step, and under
    ``"bubble"`` the serial refill of :func:`_bubble` (computed once per class: the caller must
    not change the answer)."""
    cache = program.__dict__.setdefault("_twin_busy", {})
    busy = cache.get(code)
    if busy is None:
        busy = cache[code] = _step_busy(program, code)
        bubble = _bubble(program, code)
        if bubble:
            busy[_BUBBLE] = bubble
    return busy


def _plan(program: Program) -> tuple:
    """What :func:`_step_busy` needs about the program's links, computed once: per link its
    (src, dst, port rates); per input hop (link, next link or None, innermost-slot index,
    source latency, destination slots); the C links; the accumulator slots; per staged C hop
    (link, next link, source latency, destination slots); epilogue lanes."""
    plan = program.__dict__.get("_twin_plan")
    if plan is None:
        mem = program.memory
        links = tuple((ln.src, ln.dst) for ln in program.links)
        hops = []
        for operand, l0 in (("A", 0), ("B", 1)):
            chain = _chain(program, operand)
            for k, j in enumerate(chain):
                nxt = chain[k + 1] if k + 1 < len(chain) else None
                ln = program.links[j]
                hops.append((j, nxt, l0, mem.latency(ln.src), program.buffers(operand, ln.dst)))
        c_chain = _chain(program, "C")
        staged = tuple((j, c_chain[k + 1], mem.latency(program.links[j].src),
                        program.buffers("C", program.links[j].dst))
                       for k, j in enumerate(c_chain[:-1]))  # fmt: skip
        plan = program.__dict__["_twin_plan"] = (
            links, tuple(hops), c_chain[0], _acc_buffers(program), staged,
            program.arch.vector.bytes_per_cycle // 2)  # fmt: skip
    return plan


def _step_busy(program: Program, code: int) -> dict[object, int]:
    step = program.class_of(code)
    mem = program.memory
    links, hops, c0, acc_slots, staged, lanes = _plan(program)
    busy: dict[object, int] = {"compute": step.compute_cycles}
    hop = []
    for (src, dst), nbytes in zip(links, step.link_bytes):
        hop.append(mem.transfer_cycles(src, dst, nbytes))
        for port, cycles in mem.port_cycles(src, dst, nbytes):
            busy[port] = busy.get(port, 0) + cycles
    for j, nxt, l0, latency, slots in hops:
        closes = step.closes_src[nxt] if nxt is not None else step.closes_l0[l0]
        if not (step.opens[j] and closes and step.link_bytes[j]):
            continue  # a window longer than one step: its slots amortise over the window
        held = hop[j] + latency + (hop[nxt] if nxt is not None else step.compute_cycles)
        busy[("slots", j)] = math.ceil(held / slots)
    epilogue = 0
    if program.op.epilogue_ops_per_output and step.outputs:
        epilogue = math.ceil(step.outputs * program.op.epilogue_ops_per_output / lanes)
        busy["vector"] = epilogue
    # output slots (Little's law): an accumulator tile is held from its first K step through
    # the epilogue and its store; an output tile staged in a level, from its arrival until it
    # has left for the next one
    acc = step.compute_cycles
    if step.closes_accumulator:
        acc += epilogue + hop[c0]
    busy[("acc",)] = math.ceil(acc / acc_slots)
    for j, nxt, latency, slots in staged:
        if step.link_bytes[j]:
            busy[("cslots", j)] = math.ceil((hop[j] + latency + hop[nxt]) / slots)
    return busy


def _group_loop(program: Program) -> int:
    """The innermost loop that iterates: one sweep of it is a *group* of steps."""
    for i in range(len(program.count) - 1, -1, -1):
        if program.count[i] > 1:
            return i
    return -1


def body_cycles(program: Program, fill: int = 0, ports: dict | None = None) -> int:
    """Σ over groups of the busiest resource's total within the group.

    Within one sweep of the innermost iterating loop (e.g. the K steps of one output tile) the
    token queues and double buffers let resources overlap freely, so the group takes as long as
    its busiest resource; between groups nothing is carried over (a conservative cut). The last
    output tile's way out (its epilogue, accumulator hold and stores) follows the last compute
    and is the drain's (:func:`_drain`), not the last group's. The first group starts with the
    fill (``fill``, and ``ports``: when each port finished its part of it, :func:`_fill`): its
    loads from time 0, its compute after the fill; the answer is counted from the fill's end."""
    g = _group_loop(program)
    radix = program._radix[g] if g >= 0 else 1
    groups: dict[int, tuple[int, dict]] = {}
    for code, n in program.multiplicity.items():
        digit = (code // radix) % 4 if g >= 0 else 0
        outer = code - digit * radix
        per_group = n if g < 0 else n // _digit_count(program.count[g], digit)
        total, busy = groups.get(outer, (per_group, defaultdict(int)))
        times = 1 if g < 0 else _digit_count(program.count[g], digit)
        for resource, cycles in step_busy(program, code).items():
            busy[resource] += cycles * times
        groups[outer] = (total, busy)
    if g >= 0 and program.count[g] > 1:
        for outer, (_, busy) in groups.items():
            for port, idle in _turnover(program, g, radix, outer).items():
                busy[port] += idle

    def span(busy):
        return max(c for r, c in busy.items() if r != _BUBBLE) + busy.get(_BUBBLE, 0)

    n, spt = program.n_steps, _tile_steps(program)

    def outer_of(code: int) -> int:
        return code - ((code // radix) % 4 if g >= 0 else 0) * radix

    # the last two output tiles' way out is the drain's (:func:`_drain`)
    adjusted: dict[int, dict] = {}
    for step in (n - 1, n - 1 - spt) if n > spt else (n - 1,):
        code = program.code(step)
        busy = adjusted.setdefault(outer_of(code), dict(groups[outer_of(code)][1]))
        for resource, cycles in _downstream(program, code).items():
            busy[resource] -= cycles
    # the first group: its loads start at time 0 (the fill is their first part), its compute
    # after the fill, its way out after its first output tile
    first = outer_of(program.code(0))
    busy = adjusted.get(first, groups[first][1])
    down: dict = defaultdict(int)
    for code in _group_codes(program, g, radix, first):
        times = 1 if g < 0 else _digit_count(program.count[g], (code // radix) % 4)
        for resource, cycles in _downstream(program, code).items():
            down[resource] += cycles * times
    for resource, cycles in groups[first][1].items():  # already the drain's
        down[resource] -= cycles - busy[resource]
    loads = {r: c - down.get(r, 0) for r, c in busy.items() if r not in (_BUBBLE, "compute")}
    compute = busy["compute"] + busy.get(_BUBBLE, 0)
    first_compute = program.step_at(0).compute_cycles
    # a load port's last tile of the group takes the way in the first took: from the end of
    # its transfer to the start of the compute, then that step's compute
    ports = ports or {}
    group_steps = program.count[g] if g >= 0 else 1
    last_compute = program.step_at(min(group_steps, n) - 1).compute_cycles
    loads = {r: c + (fill - ports[r] + last_compute if r in ports else 0) for r, c in loads.items()}
    head = max(
        fill + compute,
        max(loads.values(), default=0),
        fill + first_compute + max(down.values(), default=0),
    )
    total = head + sum(span(b) - span(groups[o][1]) for o, b in adjusted.items() if o != first)
    total += sum(k * span(b) for o, (k, b) in groups.items()) - span(groups[first][1])
    return total - fill


def _group_codes(program: Program, g: int, radix: int, outer: int) -> list[int]:
    """Every class code of the steps of one group of class ``outer``."""
    if g < 0:
        return [outer]
    count = program.count[g]
    digits = (0, 2) if count == 2 else (0, 1, 2) if count > 2 else (3,)
    return [outer + d * radix for d in digits]


def _downstream(program: Program, code: int) -> dict[object, int]:
    """The part of :func:`step_busy` that serves the output a step closes (epilogue, stores,
    output slots): it follows the step's compute (cached per class)."""
    cache = program.__dict__.setdefault("_twin_down", {})
    down = cache.get(code)
    if down is not None:
        return down
    step = program.class_of(code)
    down = cache[code] = {}
    if not step.closes_accumulator:
        return down
    busy = step_busy(program, code)
    mem = program.memory
    for r in busy:
        if r == "vector" or (isinstance(r, tuple) and r[0] in ("acc", "cslots")):
            down[r] = busy[r]
    if ("acc",) in busy:  # only the hold beyond the step's own compute
        down[("acc",)] = busy[("acc",)] - math.ceil(step.compute_cycles / _acc_buffers(program))
    for j in _chain(program, "C"):
        link = program.links[j]
        for port, cycles in mem.port_cycles(link.src, link.dst, step.link_bytes[j]):
            down[port] = down.get(port, 0) + cycles
    return down


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


def _acc_buffers(program: Program) -> int:
    c_chain = _chain(program, "C")
    return program.buffers("C", program.links[c_chain[0]].src)


_BUBBLE = "bubble"


def _bubble(program: Program, code: int) -> int:
    """A single-buffered window spanning several steps cannot prefetch its successor: when
    the step opens such a window, its first tile's way in (transfer + latency) is serial."""
    step = program.class_of(code)
    links, hops = _plan(program)[:2]
    delay = 0
    for j, nxt, l0, latency, slots in hops:
        if slots != 1 or not step.opens[j]:
            continue
        if step.closes_src[nxt] if nxt is not None else step.closes_l0[l0]:
            continue  # a one-step window: the Little's-law slot bound covers it
        src, dst = links[j]
        delay = max(delay, program.memory.transfer_cycles(src, dst, step.link_bytes[j]) + latency)
    return delay


def _turnover(program: Program, g: int, radix: int, outer: int) -> dict[object, int]:
    """Per port, the cycles it idles at the end of a group of class ``outer`` waiting for a slot.

    A one-step window's slots are freed in step order. When a group ends in a short step (the
    edge tile of its loop) after a full one, the port moves the short tile at once and then
    idles until the full step's slot — held for its transfer, the source latency and the next
    hop — comes free: ``held(full) − transfer(full) − transfer(short)`` (two slots; with ``b``
    slots, the step ``b`` back and the ``b`` transfers since), which the group's Little's-law
    average (Σ held / b) hides. It costs time only where the port paces the group."""
    count = program.count[g]
    links, hops = _plan(program)[:2]
    mem = program.memory
    idle: dict[object, int] = {}
    for j, nxt, l0, latency, slots in hops:
        if slots < 2 or slots > count:
            continue
        steps = [program.class_of(outer + _class_of(i, count) * radix)
                 for i in range(count - slots, count)]  # fmt: skip
        head = steps[0]
        closes = head.closes_src[nxt] if nxt is not None else head.closes_l0[l0]
        if not (head.opens[j] and closes and head.link_bytes[j]):
            continue
        src, dst = links[j]
        hop = [mem.transfer_cycles(src, dst, s.link_bytes[j]) for s in steps]
        after = head.compute_cycles if nxt is None else mem.transfer_cycles(
            *links[nxt], head.link_bytes[nxt])  # fmt: skip
        wait = hop[0] + latency + after - sum(hop)
        if wait > 0:
            for port in mem.hop_ports(src, dst):
                idle[port] = max(idle.get(port, 0), wait)
    return idle


def _digit_count(count: int, digit: int) -> int:
    """Steps of one sweep of a loop of ``count`` iterations whose index class is ``digit``."""
    return {0: 1, 1: count - 2, 2: 1, 3: 1}[digit]


def _fill(program: Program) -> tuple[int, dict]:
    """When step 0's inputs are usable: every hop of A and B (tile and scale stream) list-scheduled
    in the DES's order — requests served first come first, A before B at equal times — on the
    ports they share (the A and B tiles of the first step queue on one DRAM port), each hop
    starting once the previous hop's data is usable (its transfer plus the source latency).
    Also returns when each port finished its part."""
    mem, first = program.memory, program.step_at(0)
    chains = [_chain(program, x) for x in "AB"]
    free: dict = {}
    ready, pos = [0, 0], [0, 0]
    while True:
        pending = [c for c in (0, 1) if pos[c] < len(chains[c])]
        if not pending:
            return max(ready), free
        c = min(pending, key=lambda c: (ready[c], c))
        j = chains[c][pos[c]]
        pos[c] += 1
        nbytes = first.link_bytes[j]
        if not nbytes:
            continue
        link = program.links[j]
        ports = mem.port_cycles(link.src, link.dst, nbytes)
        start = max(ready[c], *(free.get(p, 0) for p, _ in ports))
        for p, cycles in ports:
            free[p] = start + cycles
        ready[c] = start + mem.transfer_cycles(link.src, link.dst, nbytes) + mem.latency(link.src)


def _epilogue(program: Program, outputs: int) -> int:
    if not (program.op.epilogue_ops_per_output and outputs):
        return 0
    lanes = program.arch.vector.bytes_per_cycle // 2
    return math.ceil(outputs * program.op.epilogue_ops_per_output / lanes)


def _way_out(program: Program, step, start: int, free: dict) -> int:
    """When an output tile closed by ``step`` at ``start`` (its epilogue done) has left through
    every C hop, queueing on ports busy until ``free`` (updated)."""
    mem = program.memory
    t = start
    c_chain = _chain(program, "C")
    for k, j in enumerate(c_chain):
        link, nbytes = program.links[j], step.link_bytes[j]
        if not nbytes:
            continue
        ports = mem.port_cycles(link.src, link.dst, nbytes)
        t = max(t, *(free.get(p, t) for p, _ in ports))
        for p, cycles in ports:
            free[p] = t + cycles
        t += mem.transfer_cycles(link.src, link.dst, nbytes)
        if k < len(c_chain) - 1:
            t += mem.latency(link.src)
    return t


def _tile_steps(program: Program) -> int:
    """Steps of one output tile (the loops inside the accumulator's window)."""
    r_acc = program.window("C", program.inner["C"])[0]
    return math.prod(program.count[r_acc + 1 :])


def _drain(program: Program) -> int:
    """From the end of the last step's compute to the end: the last two output tiles' way out
    (epilogue, then every C hop) as a two-job flow shop — the previous tile, closed one output
    tile earlier (the last tile's busiest resource: its compute, or its loads), may still hold
    the vector unit or a store port."""
    n, spt = program.n_steps, _tile_steps(program)
    last = program.step_at(n - 1)
    free: dict = {}
    t_vec = 0
    if n - 1 - spt >= 0:
        prev = program.step_at(n - 1 - spt)
        if spt <= 8:  # the last tile's steps pace as their busiest resource
            span: dict = defaultdict(int)
            for i in range(n - spt, n):
                for resource, cycles in step_busy(program, program.code(i)).items():
                    span[resource] += cycles
            for resource, cycles in _downstream(program, program.code(n - 1)).items():
                span[resource] -= cycles
            group = max(span.values())
        else:
            group = output_tiles(program)[_tile_code(program, n // spt - 1)][1]
        t_vec = _epilogue(program, prev.outputs) - group
        _way_out(program, prev, t_vec, free)
    done = max(0, t_vec) + _epilogue(program, last.outputs)
    return _way_out(program, last, done, free)


def twin_cycles(program: Program) -> int:
    """Closed-form estimate of :func:`accel_sim.engine.des.simulate_program`'s cycles."""
    fill, ports = _fill(program)
    drain = _drain(program)
    # step 0 is on the critical path as fill + its compute; later steps add their share of the
    # busiest resource of their group
    estimate = fill + body_cycles(program, fill, ports) + drain
    return _bounds(program, fill, max(estimate, _store_bound(program, fill)))


def _inner_count(program: Program, code: int, r: int) -> int:
    """Steps per window of loop ``r`` whose loops inside ``r`` have the digits of ``code``."""
    digits = program.decode(code)
    return math.prod(_digit_count(program.count[i], digits[i]) if program.count[i] > 1 else 1
                     for i in range(r + 1, len(program.count)))  # fmt: skip


def output_tiles(program: Program) -> dict[int, tuple[int, int, object]]:
    """Per class of output tile (the digits of the loops outside the accumulator's window, as a
    code with the inner digits zeroed): (how many tiles, compute cycles of one tile's steps, the
    class of its closing step). Computed once per program."""
    cached = program.__dict__.get("_twin_tiles")
    if cached is None:
        cached = program.__dict__["_twin_tiles"] = _output_tiles(program)
    return cached


def _output_tiles(program: Program) -> dict[int, tuple[int, int, object]]:
    r = program.window("C", program.inner["C"])[0]
    inner = program._radix[r] if r >= 0 else 4 ** len(program.count)
    tiles: dict[int, list] = {}
    for code, n in program.multiplicity.items():
        outer = code - code % inner
        per_tile = _inner_count(program, code, r)
        step = program.class_of(code)
        entry = tiles.setdefault(outer, [n // per_tile, 0, None])
        entry[1] += step.compute_cycles * per_tile
        if step.closes_accumulator:
            entry[2] = step
    return {k: tuple(v) for k, v in tiles.items()}


def _tile_code(program: Program, t: int) -> int:
    """The output-tile class (see :func:`output_tiles`) of the ``t``-th output tile."""
    r = program.window("C", program.inner["C"])[0]
    code = 0
    for i in range(r, -1, -1):
        n = program.count[i]
        code += _class_of(t % n, n) * program._radix[i]
        t //= n
    return code


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
    best = floor
    # load ports
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
    last_out = _downstream(program, program.code(n - 1))
    for port, tail in tails.items():
        other = stores.get(port, 0) - last_out.get(port, 0)
        best = max(best, loads[port] + other + tail + finish)
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
        if n > spt:
            _way_out(program, program.step_at(n - 1 - spt), -e_last, free)
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


def _store_bound(program: Program, fill: int) -> int:
    """A port that carries outputs cannot start storing before the first output tile is done:
    ``fill + compute of the first group + its epilogue``, after which it still has every store
    (and whatever loads it has not finished) to serve. Binds when outputs dominate the traffic
    (small K: the GEMM is a stream of output tiles)."""
    arch = program.arch
    loads, stores = _port_totals(program)
    first_group = program.count[-1]  # the K steps of the first output tile (k is innermost)
    first = program.step_at(0)
    first_done = fill + first.compute_cycles * first_group
    if program.op.epilogue_ops_per_output:
        closing = program.step_at(first_group - 1)
        lanes = arch.vector.bytes_per_cycle // 2
        first_done += math.ceil(closing.outputs * program.op.epilogue_ops_per_output / lanes)
    bound = 0
    for port, store in stores.items():
        if store:
            bound = max(bound, first_done + store, loads.get(port, 0) + store)
    return bound
