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
idles the port until the slot of the full step before comes free (:func:`_turnover`). Loads of
windows spanning groups may start groups early (``twin_prefetch.py``: a recurrence over the
groups gives back what the plain sum over-counts). Cycles throughout.

The answer is the larger of that and a few chains of work that must run in sequence
(:func:`_bounds`, :func:`_store_bound`, ``twin_windows.py``): every load on a
port then the last step's way in and out; every epilogue; every store after the first output
tile; the accumulator slots, taken and freed in tile order, so tiles ``t, t + b, …`` hold one
slot in turn; and likewise each input window's slots (its tiles' way in and the source's
latency, windows ``w, w + b, …`` on one slot); and, as an estimate, the first pass of the
outermost loop when it loads a panel the later passes keep (``twin_first_pass.py``:
its loads and most of its stores on a port, then every later step on the unit). ``docs/engine.md``
lists the regimes where the model and the DES still differ and why.
"""

from __future__ import annotations

import math
from collections import defaultdict

from accel_sim.engine.program import Program
from accel_sim.engine.twin_chains import _bounds, _heads, _store_bound, load_bound
from accel_sim.engine.twin_first_pass import first_pass_estimate
from accel_sim.engine.twin_groups import (
    _prefetch_idle,
    _slot_chains,
    _store_ahead,
    _turnover,
    _write_block,
)
from accel_sim.engine.twin_prefetch import prefetch_saving
from accel_sim.engine.twin_steps import (  # noqa: F401 - step_busy, output_tiles: public here too
    _BUBBLE,
    _acc_buffers,
    _chain,
    _digit_count,
    _downstream,
    _epilogue,
    _group_classes,
    _group_codes,
    _group_loop,
    _inside_k,
    _last_tiles,
    _tile_code,
    _tile_steps,
    _way_out,
    output_tiles,
    step_busy,
)
from accel_sim.engine.twin_windows import window_chains, window_slot_bound


def body_cycles(program: Program, fill: int = 0, ports: dict | None = None) -> int:
    """Σ over groups of the busiest resource's total within the group.

    Within one sweep of the innermost iterating loop (e.g. the K steps of one output tile) the
    token queues and double buffers let resources overlap freely, so the group takes as long as
    its busiest resource; between groups only what windows spanning groups load ahead, and with
    K above the block loop the outputs' lagging way out, is carried over (less the sum by
    :func:`twin_prefetch.prefetch_saving`'s recurrence). The last
    output tile's way out (its epilogue, accumulator hold and stores) follows the last compute
    and is the drain's (:func:`_drain`), not the last group's. The first group starts with the
    fill (``fill``, and ``ports``: when each port finished its part of it, :func:`_fill`): its
    loads from time 0, its compute after the fill; the answer is counted from the fill's end."""
    g = _group_loop(program)
    radix = program._radix[g] if g >= 0 else 1
    groups: dict[int, tuple[int, dict]] = {}
    for code, n in program.multiplicity.items():
        digit = (code // radix) % 4 if g >= 0 else 0
        times = 1 if g < 0 else _digit_count(program.count[g], digit)
        entry = groups.get(code - digit * radix)
        if entry is None:  # (groups of this class: the first code's count per group, busy)
            entry = groups[code - digit * radix] = (n // times, defaultdict(int))
        busy = entry[1]
        for resource, cycles in step_busy(program, code).items():
            busy[resource] += cycles * times
    turnovers: dict[int, dict] = {}
    stores_ahead: dict[int, int] = {}
    blocked_moves: dict[int, dict] = {}  # per group class, a port's idle per output tile moved
    if g >= 0 and program.count[g] > 1:
        # a group's turnovers and slot chains read only its steps' classes: groups of the same
        # classes (shared class objects, ``Program.class_of``) share them
        memo: dict[tuple, tuple] = {}
        for outer, (_, busy) in groups.items():
            extra = _prefetch_idle(program, g, radix, outer, busy)  # on the group's own work
            key = _group_classes(program, g, radix, outer)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = (_turnover(program, g, radix, outer),
                                   _slot_chains(program, g, radix, outer),
                                   _store_ahead(program, g, radix, outer),
                                   _write_block(program, g, radix, outer))  # fmt: skip
            turnovers[outer] = hit[0]
            stores_ahead[outer] = hit[2]
            blocked_moves[outer] = hit[3][0]
            for port, idle in hit[3][0].items():
                busy[port] += idle * hit[3][1]
            busy["compute"] += hit[2]
            for port, idle in hit[0].items():
                busy[port] += idle
            for slots, chain in hit[1].items():
                busy[slots] = max(busy[slots], chain)
            for resource, idle in extra.items():
                busy[resource] += idle
    spill = _carry_spills(program, g, groups)

    def span(busy):
        return max(c for r, c in busy.items() if r != _BUBBLE) + busy.get(_BUBBLE, 0)

    n = program.n_steps

    def outer_of(code: int) -> int:
        return code - ((code // radix) % 4 if g >= 0 else 0) * radix

    # the last two output tiles' way out is the drain's (:func:`_drain`): the last group's
    # spill left with it (no successor); the tile before's way out is in the last group now
    last_group = outer_of(program.code(n - 1))
    adjusted: dict[int, dict] = {}
    for i in _last_tiles(program)[:-1]:  # K above the block loop: every tile of the last window
        busy = adjusted.setdefault(last_group, dict(groups[last_group][1]))
        for resource, cycles in _downstream(program, program.code(i)).items():
            busy[resource] -= cycles
    # the last group: no next group's tile waits for a slot (the head's loads, if it is first)
    last_turnover = turnovers.get(last_group, {})
    if last_turnover and last_group != outer_of(program.code(0)):
        busy = adjusted.setdefault(last_group, dict(groups[last_group][1]))
        for port, idle in last_turnover.items():
            busy[port] -= idle
    if blocked_moves.get(last_group):  # nor behind the last tile's move
        busy = adjusted.setdefault(last_group, dict(groups[last_group][1]))
        for port, idle in blocked_moves[last_group].items():
            busy[port] -= idle
    if stores_ahead.get(last_group):  # nor does an input tile follow the last tile's store
        busy = adjusted.setdefault(last_group, dict(groups[last_group][1]))
        busy["compute"] -= stores_ahead[last_group]
    if not spill:  # no group loop: the last step's way out is still in its group
        busy = adjusted.setdefault(last_group, dict(groups[last_group][1]))
        for resource, cycles in _downstream(program, program.code(n - 1)).items():
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
    for resource, cycles in spill.get(first, {}).items():  # already the next group's
        down[resource] -= cycles
    loads = {r: c - down.get(r, 0) for r, c in busy.items() if r not in (_BUBBLE, "compute")}
    if first == last_group:
        for port, idle in last_turnover.items():
            loads[port] -= idle
    compute = busy["compute"] + busy.get(_BUBBLE, 0)
    first_compute = program.step_at(0).compute_cycles
    # a load port's last tile of the group takes the way in the first took: from the end of
    # its transfer to the start of the compute, then that step's compute
    ports = ports or {}
    group_steps = program.count[g] if g >= 0 else 1
    last_compute = program.step_at(min(group_steps, n) - 1).compute_cycles
    # and no port serves a load before the first data reach it (``twin_chains._heads``): the
    # group's loads on an inner port start after the first tile's way to the port's source
    heads = _heads(program)
    loads = {r: c + heads.get(r, 0) + (fill - ports[r] + last_compute if r in ports else 0)
             for r, c in loads.items()}  # fmt: skip
    head = max(
        fill + compute,
        max(loads.values(), default=0),
        fill + first_compute + max(down.values(), default=0),
    )
    total = head + sum(span(b) - span(groups[o][1]) for o, b in adjusted.items() if o != first)
    total += sum(k * span(b) for o, (k, b) in groups.items()) - span(groups[first][1])
    total -= prefetch_saving(program, g, radix, groups, adjusted, first)
    return total - fill


def _carry_spills(program: Program, g: int, groups: dict) -> dict[int, dict]:
    """Move each group's *spill* — the way out of the output tile its last step closes
    (epilogue, stores: :func:`_downstream`), which runs after that step's compute — into the
    group that follows it, where it overlaps that group's work (a group that ends with a large
    store and is followed by a compute-bound one takes max(loads, compute) + nothing, not
    + the store). A group's successor is found from the loop digits: the innermost loop outside
    ``g`` that has not reached its last index advances, the loops inside it restart; middle
    instances go to middle or last successors in proportion. Returns the spills moved, per
    group class (the final group's spill leaves with it: the drain's)."""
    if g <= 0 or program.count[g] < 1:
        return {}
    radix, count = program._radix, program.count
    last_digit = 2 if count[g] > 1 else 3
    spill: dict[int, dict] = {}
    for outer, (k, busy) in list(groups.items()):
        out = _downstream(program, outer + last_digit * radix[g])
        if not out:
            continue
        digits = [(outer // radix[i]) % 4 for i in range(g)]
        j = next((i for i in range(g - 1, -1, -1) if count[i] > 1 and digits[i] in (0, 1)), -1)
        for resource, cycles in out.items():
            busy[resource] -= cycles
        spill[outer] = out
        if j < 0:
            continue  # the final group
        base = outer - sum(digits[i] * radix[i] for i in range(j, g))
        base += sum((0 if count[i] > 1 else 3) * radix[i] for i in range(j + 1, g))
        if digits[j] == 0:
            nexts = [(1 if count[j] > 2 else 2, 1.0)]
        else:
            middle = count[j] - 2
            nexts = [(1, (middle - 1) / middle), (2, 1 / middle)]
        for digit, frac in nexts:
            succ = base + digit * radix[j]
            if frac and succ in groups:
                k_succ, target = groups[succ]
                for resource, cycles in out.items():
                    target[resource] = target.get(resource, 0) + cycles * frac * k / k_succ
    return spill


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


def _drain(program: Program) -> int:
    """From the end of the last step's compute to the end: the last two output tiles' way out
    (epilogue, then every C hop) as a two-job flow shop — the previous tile, closed one output
    tile earlier (the last tile's busiest resource: its compute, or its loads), may still hold
    the vector unit or a store port. With K above the block loop, every tile of the last window
    (:func:`_last_tiles`), one closing per step, each step paced by its busiest resource."""
    n, spt = program.n_steps, _tile_steps(program)
    jobs = _last_tiles(program)
    if _inside_k(program) > 1:
        closes = [0]  # when each job's step ends, relative to the last one's, latest first
        for i in reversed(jobs[1:]):
            busy = dict(step_busy(program, program.code(i)))
            for resource, cycles in _downstream(program, program.code(i)).items():
                busy[resource] -= cycles
            closes.append(closes[-1] - max(busy.values()))
        free: dict = {}
        t_vec = end = -math.inf
        for i, close in zip(jobs, reversed(closes)):
            step = program.step_at(i)
            t_vec = max(t_vec, close) + _epilogue(program, step.outputs)
            end = _way_out(program, step, t_vec, free)
        return max(0, end)
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


#: A hop's input window chains are enumerated (``twin_windows.window_chains``, numpy over every
#: step) only when their mean plus the last chain's tail is at least this share of the estimate:
#: they exceed it by a mover's lead-in and uneven windows, a few per cent where they bind.
CHAINS_WHEN = 0.75


def blocked_stores(program: Program) -> int:
    """Cycles the unit stalls because output stores wait behind long window loads on their port.

    With one-step output tiles each step ends with a store on the first C hop. A window of
    several steps loads its tile at its first step; where that load crosses a port of the C
    hop, the stores queued behind it wait (first come, first served, no preemption), each
    holding its accumulator slot. The unit fills the other ``b − 1`` slots, one step each,
    then waits for the first store: ``load − (b − 1) × compute − store`` per window load (at
    least 0). 1442×325×1430 W8A8-static on rtx3090_chip (112×325×240 per core): B's 5.2 KB
    window tile takes 290 cycles of the DRAM port every 7 steps of 82 cycles, and each time
    the unit waits ~180 cycles for an accumulator slot."""
    if _tile_steps(program) != 1:
        return 0
    mem, links = program.memory, program.links
    slots = _acc_buffers(program)
    c0 = _chain(program, "C")[0]
    c_ports = set(mem.hop_ports(links[c0].src, links[c0].dst))
    total, first = 0, program.step_at(0)  # (step 0's loads precede every store)
    for j, link in enumerate(links):
        if link.operand == "C" or not c_ports & set(mem.hop_ports(link.src, link.dst)):
            continue
        r = program.window(link.operand, link.dst)[0]
        if math.prod(program.count[r + 1 :]) < 2:
            continue  # one-step windows: loaded every step, queued ahead of the stores (_queued)
        for step, n in program._class_counts:
            if not (step.opens[j] and step.link_bytes[j]):
                continue
            # (a level with ``burst_bytes`` makes the stores wait one burst of it, not all)
            load = max(c for port, c in mem.bursts(link.src, link.dst, step.link_bytes[j])[0]
                       if port in c_ports)  # fmt: skip
            store = mem.transfer_cycles(links[c0].src, links[c0].dst, step.link_bytes[c0])
            count = n - 1 if step is first else n
            total += count * max(0, load - (slots - 1) * step.compute_cycles - store)
    return total


def twin_cycles(program: Program) -> int:
    """Closed-form estimate of :func:`accel_sim.engine.des.simulate_program`'s cycles
    (memoised on the program, which holds only memoised data)."""
    cached = program.__dict__.get("_twin_cycles")
    if cached is None:
        cached = program.__dict__["_twin_cycles"] = _twin_cycles(program)
    return cached


def _twin_cycles(program: Program) -> int:
    fill, ports = _fill(program)
    drain = _drain(program)
    # step 0 is on the critical path as fill + its compute; later steps add their share of the
    # busiest resource of their group
    estimate = fill + body_cycles(program, fill, ports) + drain
    blocked = blocked_stores(program)
    if blocked:  # the unit's own chain: its compute and its stalls behind blocked stores
        estimate = max(estimate, fill + program.compute_cycles + blocked + drain)
    slots = window_slot_bound(program)
    estimate = max(estimate, _store_bound(program, fill, ports), slots)
    # (the enumerated chains exceed their mean a little: only hops whose mean is close count)
    estimate = max(estimate, window_chains(program, CHAINS_WHEN * estimate, True, drain))
    return max(_bounds(program, fill, estimate), first_pass_estimate(program))


def twin_floor(program: Program) -> float:
    """A lower bound on :func:`twin_cycles` that needs no group sums: the largest of the load
    ports' chains (part of :func:`_bounds`, which is at least each of them), the windows' slot
    chains' mean (:func:`twin_windows.window_slot_bound`, part of the estimate) and the compute
    cycles. The latter holds because no adjustment of :func:`body_cycles` touches a group's
    compute: every group instance's span is at least its compute, so the body is at least
    Σ compute − the fill and the estimate fill + body + drain at least the compute cycles."""
    return max(load_bound(program), window_slot_bound(program), program.compute_cycles)
