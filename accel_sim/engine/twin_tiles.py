"""Output-tile pipeline of the closed-form twin (``twin.py``): the way out of every output tile
as a (max, +) recurrence over tiles, in tile order, with K innermost. Cycles throughout.

A tile's compute needs one of the ``b`` accumulator slots, freed by the tile ``b`` earlier once
its first C hop has read it; its epilogue queues on the vector unit; that C hop queues on its
port (first come, first served) behind the stores of earlier tiles and the input tiles requested
during the epilogue (:func:`twin_chains._queued`). Bounding each of these resources alone misses
their cycle: with two slots and stores that take longer than a tile's compute, two tiles compute
back to back, both stores follow one another on the port, and only then can the next tile
compute, so the port idles for a compute and an epilogue once per two tiles (966×4×268
W4A4-static on ops_bitslice: the per-resource bounds gave 21.2 k cycles, the DES 25.9 k).

An input kept for exactly one output tile (its window is the tile's K steps) or one step in the
level that feeds the unit, loaded over the stores' port, joins the cycle step by step: its
window ``s`` tiles (steps) later is requested when the compute frees the slot and the window
before has passed, one step's tile after the other, queues on the port with the stores in
request order, and each step computes only after its tile has arrived (478×36×962 FP16 on the
32×32 WS: the B window behind two stores, −13.3 % before; 44×126×2025 W8A8 on ops_bitslice,
B one step per slot: −14.7 % before). So does an input streamed into an outer level over the
DRAM port the stores leave by (the GPU proxy's B through L2), with its inner hops' transfers and
latencies on its way in and the slots of every level on that way as its lead (5659×333×2874
W8A8-static on rtx3090_like: −11.5 % before).

The recurrence is shift-invariant, so runs of tiles of one class — and runs of whole rows of
tiles that repeat — are simulated until the state (every time relative to the last compute's
end) recurs, then jumped over (exact once it recurs; after a few runs without recurrence, the
last runs' increment is extrapolated).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import _chain, _epilogue, _plan, _tile_code, output_tiles
from accel_sim.engine.twin_walk import walk

#: Runs of one repeated sequence simulated before the last runs' increment is extrapolated.
_TRIES = 8

#: Steps of a tile simulated one by one (longer tiles: first, middle and last step lumped).
_STEPS = 64


def streamed_input(program: Program) -> tuple | None:
    """The input loaded over a port of the first C hop into the level that feeds the unit and
    kept there for exactly one output tile (``"tile"``) or one step (``"step"``, with a tile
    of at most ``_STEPS`` steps of one loop): (kind, its hop's index, slots), or None."""
    cached = program.__dict__.get("_twin_stream", False)
    if cached is not False:
        return cached
    program.__dict__["_twin_stream"] = found = _streamed_input(program)
    return found


def _streamed_input(program: Program) -> tuple | None:
    mem, links, count = program.memory, program.links, program.count
    c0 = links[_chain(program, "C")[0]]
    ports = set(mem.hop_ports(c0.src, c0.dst))
    r = program.window("C", program.inner["C"])[0]
    inner = [i for i in range(r + 1, len(count)) if count[i] > 1]
    found = None
    for j, nxt, _, _, slots, _ in _plan(program)[1]:
        operand = links[j].operand
        shared = ports & set(mem.hop_ports(links[j].src, links[j].dst))
        if not shared or (nxt is not None and all(p[0] != 0 for p in shared)):
            continue  # an outer level's hop only over the DRAM port the stores leave by
        w = program.window(operand, links[j].dst)[0]
        if w == r:
            return "tile", j, _lead(program, j, slots, math.prod(count[r + 1 :]))
        if len(inner) == 1 and count[inner[0]] <= _STEPS and math.prod(count[w + 1 :]) == 1:
            found = found or ("step", j, _lead(program, j, slots, 1))
    return found


def _lead(program: Program, j: int, slots: int, window: int) -> int:
    """Windows of ``window`` steps the mover of hop ``j`` can load ahead of the compute: its
    destination's ``slots``, and for an outer level's hop the slots of every level on the way
    in too (a slot frees when the next hop has moved the window on, not when it is computed),
    each level at most a token queue's depth of steps ahead of the next."""
    links, chain = program.links, _chain(program, program.links[j].operand)
    if chain[-1] == j:
        return slots
    steps = 0
    for k in chain[chain.index(j) :]:
        dst = links[k].dst
        w = program.window(links[k].operand, dst)[0]
        per = math.prod(program.count[w + 1 :])
        steps += min(program.buffers(links[k].operand, dst) * per, program.arch.dma_queue_steps)
    return max(slots, steps // window)


def _way_in(program: Program, j: int) -> int:
    """Cycles from the end of the streamed hop ``j``'s transfer until its data is usable by the
    unit: its source's latency, then every inner hop of its operand (transfer of the first
    step's bytes and source latency)."""
    mem, links, first = program.memory, program.links, program.step_at(0)
    chain = _chain(program, links[j].operand)
    way = mem.latency(links[j].src)
    for k in chain[chain.index(j) + 1 :]:
        way += mem.transfer_cycles(links[k].src, links[k].dst, first.link_bytes[k])
        way += mem.latency(links[k].src)
    return way


def _steps(program: Program, r: int, j: int | None) -> dict[int, tuple]:
    """Per output-tile class, its steps in order as (compute, the stream's cycles on the C
    hop's port, steps) — one by one when the tile is one loop of at most ``_STEPS`` steps, else
    its first step, the middle ones lumped and its last."""
    mem, links, count = program.memory, program.links, program.count
    c0 = links[_chain(program, "C")[0]]
    port = set(mem.hop_ports(c0.src, c0.dst))

    def load(step) -> int:
        if j is None or not step.link_bytes[j]:
            return 0
        cycles = mem.port_cycles(links[j].src, links[j].dst, step.link_bytes[j])
        return max((c for p, c in cycles if p in port), default=0)

    inner = [i for i in range(r + 1, len(count)) if count[i] > 1]
    once = sum(3 * program._radix[i] for i in range(r + 1, len(count)) if count[i] == 1)
    out: dict[int, tuple] = {}
    for outer in output_tiles(program):
        if len(inner) == 1 and count[inner[0]] <= _STEPS:
            k, radix = count[inner[0]], program._radix[inner[0]]
            first, middle, last = (program.class_of(outer + once + d * radix) for d in (0, 1, 2))
            first, middle, last = ((c.compute_cycles, load(c), 1) for c in (first, middle, last))
            out[outer] = (first, *[middle] * (k - 2), last)
        else:
            out[outer] = None
    if any(v is None for v in out.values()):  # lumped: first, middle, last
        r_radix = program._radix[r] if r >= 0 else 4 ** len(count)
        sums: dict = defaultdict(lambda: [[0, 0, 0], [0, 0, 0], [0, 0, 0]])
        for code, m in program.multiplicity.items():
            step = program.class_of(code)
            part = 0 if step.starts_tile else 2 if step.closes_accumulator else 1
            entry = sums[code - code % r_radix][part]
            entry[0] += m * step.compute_cycles
            entry[1] += m * load(step)
            entry[2] += m
        tiles = output_tiles(program)
        out = {o: tuple((c // max(1, tiles[o][0]), x // max(1, tiles[o][0]),
                         max(1, k // max(1, tiles[o][0]))) for c, x, k in parts if k)
               for o, parts in sums.items()}  # fmt: skip
    return out


def tile_pipeline(program: Program, fill: int, queued: dict[int, int], ahead: int,
                  after: int) -> int:  # fmt: skip
    """When the last output tile has left: the recurrence from ``fill`` (the first compute's
    start), ``queued`` (per output-tile class, the loads ahead of its C hop beyond its
    epilogue; none for the last ``ahead`` tiles, whose inputs' successors do not exist) and
    ``after`` (the last tile's way out beyond its first C hop)."""
    mem, links = program.memory, program.links
    c_hop = _chain(program, "C")[0]
    c0 = links[c_hop]
    b = _plan(program)[3]  # accumulator slots
    stream = streamed_input(program)
    r = program.window("C", program.inner["C"])[0]
    steps = _steps(program, r, stream[1] if stream else None) if stream else {}
    cost = {}
    for outer, (_, compute, step) in output_tiles(program).items():
        nbytes = step.link_bytes[c_hop]
        port = max((c for _, c in mem.port_cycles(c0.src, c0.dst, nbytes)), default=0)
        cost[outer] = (compute, _epilogue(program, step.outputs),
                       0 if stream else queued.get(outer, 0),
                       mem.transfer_cycles(c0.src, c0.dst, nbytes), port,
                       steps.get(outer, ()), len(mem.bursts(c0.src, c0.dst, nbytes)))  # fmt: skip
    n_tiles = program.n_steps // math.prod(program.count[r + 1 :])
    kind, slots = (stream[0], stream[2]) if stream else (None, 0)
    latency = _way_in(program, stream[1]) if stream else 0
    # state: compute end, vector end, port free, the last b served C hops' ends (oldest
    # first), tiles left before the last `ahead`, the arrivals of the stream's steps loaded
    # and not yet computed, the port requests not yet served (time, kind: 0 load / 1 store,
    # cycles on the port, transfer, the window's further steps), the stream's latency, tiles
    # left, the stream's slots, when its mover is free, the windows waiting for it (request,
    # steps), the steps of the tile that leaves ``k`` tiles, the stream's kind, when each of
    # the last windows frees its slot in the stream's destination and (that level's slots,
    # cycles from a window's last transfer until it frees its slot) for a stream into an outer
    # level, else None (:func:`_held`)
    state = [fill, fill, 0, [0] * b, n_tiles - ahead, [], [], latency, n_tiles, slots, 0, [],
             _ahead(program, cost, n_tiles), kind, [], _held(program, stream)]  # fmt: skip
    per = len(state[12](n_tiles)) if kind == "tile" else 1  # steps of a window
    first: list = []  # the first windows' steps, loaded from time 0
    for t in range(n_tiles if kind else 0):
        first += [x for _, x, _ in state[12](n_tiles - t)]
        if len(first) >= slots * per:
            break
    # the windows the destination takes at once load back to back from time 0; the rest of
    # the lead waits for their slots, queued on the port with the first stores
    preload = slots if state[15] is None else min(slots, state[15][0])
    for i, x in enumerate(first[: preload * per]):
        state[2] += x
        state[5].append(state[2] + (latency if x else 0))
        if i % per == per - 1:
            _passed(state, state[2])
    state[10] = state[2]
    for w in range(preload, slots):
        window = tuple(first[w * per : (w + 1) * per])
        if window:
            _window(state, 0, window)
    once = sum(3 * program._radix[i] for i in range(r + 1) if program.count[i] == 1)
    loops = [i for i in range(r + 1) if program.count[i] > 1]
    walk(program, loops, once, lambda code: _tile(state, cost[code]), _runs(state))
    _serve(state, math.inf)
    return state[3][-1] + after


def _ahead(program: Program, cost: dict, n_tiles: int):
    """The steps of the tile that leaves ``k`` tiles, by ``k`` (memoised: few distinct)."""
    memo: dict[int, tuple] = {}

    def steps(k: int) -> tuple:
        hit = memo.get(k)
        if hit is None:
            hit = memo[k] = cost[_tile_code(program, n_tiles - k)][5]
        return hit

    return steps


def _serve(state: list, until: float) -> None:
    """Serve the pending port requests made up to ``until``, in request order."""
    pending = state[6]
    while pending:
        pending.sort()
        if pending[0][0] > until:
            break
        req, kind, port, transfer, rest = pending.pop(0)
        if kind and rest[0] > 1:  # a store granted a burst at a time queues again for the rest
            start, share = max(req, state[2]), (port // rest[0], transfer // rest[0])
            state[2] = start + share[0]
            pending.append((state[2], 1, port - share[0], transfer - share[1], (rest[0] - 1,)))
            continue
        start = max(req, state[2]) if port else req  # (no bytes: no port, no latency)
        state[2] = start + port if port else state[2]
        if kind:  # a store: frees its accumulator slot once read
            state[3].pop(0)
            state[3].append(start + transfer)
        else:
            state[5].append(start + transfer + (state[7] if port else 0))
            if rest:  # the window's next step, requested once this one has passed
                pending.append((start + transfer, 0, rest[0], rest[0], rest[1:]))
            else:  # the window has passed; the mover takes the next one
                state[10] = start + transfer
                _passed(state, start + transfer)
                if state[11]:
                    _request(state, *state[11].pop(0))


def _tile(state: list, cost: tuple) -> None:
    """One output tile of ``cost`` (compute, epilogue, queued loads, its first C hop's transfer
    and port cycles, its steps) through the recurrence, ``state`` updated (cycles)."""
    compute, epilogue, queued, transfer, port, steps, bursts = cost
    left, remaining = state[4], state[8]
    state[4], state[8] = left - 1, remaining - 1
    if left <= 0:
        queued = 0
    if not state[9]:  # no streamed input: the stores are served in tile order at once
        slots = state[3]
        c_end = max(state[0], slots[0]) + compute
        v_end = max(c_end, state[1]) + epilogue
        start = max(v_end, c_end + epilogue + queued, state[2])
        state[0], state[1], state[2] = c_end, v_end, start + port
        slots.pop(0)
        slots.append(start + transfer)
        return
    # the slot of the tile b back: served once fewer than b stores wait
    while _stores(state) >= len(state[3]):
        _serve(state, min(p[0] for p in state[6] if p[1]))
    c_end = max(state[0], state[3][_stores(state)])
    ahead, per_step = state[9], state[13] == "step"
    for k, (cycles, _, lumped) in enumerate(steps):
        while not state[5] and state[6]:  # its tile of the stream must have been served
            _serve(state, min(p[0] for p in state[6]))
        # (middle steps lumped: their computes overlap their loads but the last one's)
        arrived = state[5].pop(0) if state[5] else 0
        c_end = max(c_end + cycles, arrived + cycles // lumped)
        if per_step:  # its slot frees: the step `slots` later is requested
            tile, pos = divmod(k + ahead, len(steps))
            if remaining - tile > 0:
                _window(state, c_end, (state[12](remaining - tile)[pos][1],))
            _serve(state, c_end)
    v_end = max(c_end, state[1]) + epilogue
    state[0], state[1] = c_end, v_end
    if not per_step and remaining > ahead:  # the window `slots` tiles later
        _window(state, c_end, tuple(x for _, x, _ in state[12](remaining - ahead)))
    state[6].append((max(v_end, c_end + epilogue + queued), 1, port, transfer, (bursts,)))
    _serve(state, c_end)


def _window(state: list, time: int, loads: tuple) -> None:
    """Request a window of the stream (its steps' port cycles) once its slot frees; its mover
    takes one window at a time."""
    if any(not p[1] for p in state[6]) or state[11]:  # the mover is busy with the one before
        state[11].append((time, loads))
    else:
        _request(state, time, loads)


def _request(state: list, time: int, parts: tuple) -> None:
    """Put a window's first step on the port's queue once the mover is free (its further steps
    follow it, :func:`_serve`)."""
    state[6].append((max(time, state[10], _slot_free(state)), 0, parts[0], parts[0], parts[1:]))


def _held(program: Program, stream: tuple | None) -> tuple[int, int] | None:
    """For a stream into an outer level (``stream``: kind, hop, lead): (that level's slots,
    cycles from a window's last transfer until it frees its slot there: the source's latency
    and the next hop's transfer of a step's tile). A slot of an outer level is held while its
    window is in flight, not only while it waits to be computed: with 2 slots in L2, window
    ``w`` cannot be requested before window ``w − 2`` has arrived and moved on, however many
    windows the inner levels could hold (144x11x1135 FP16 per core on rtx3090_chip: B's 600
    cycles of DRAM latency keep its lead near 3 windows, not the 6 its levels' slots allow;
    the model went from −16.2 % to 0.0 % of the DES). None when the stream feeds the unit
    (its slot frees when the window is computed: the lead)."""
    if stream is None:
        return None
    mem, links, j = program.memory, program.links, stream[1]
    chain = _chain(program, links[j].operand)
    if chain[-1] == j:
        return None
    nxt = chain[chain.index(j) + 1]
    move = mem.transfer_cycles(links[nxt].src, links[nxt].dst, program.step_at(0).link_bytes[nxt])
    return program.buffers(links[j].operand, links[j].dst), mem.latency(links[j].src) + move


def _passed(state: list, end: int) -> None:
    """A window of the stream has passed its hop at ``end``: note when it frees its slot."""
    if state[15] is not None:
        room, hold = state[15]
        state[14].append(end + hold)
        del state[14][:-room]


def _slot_free(state: list) -> int:
    """When the stream's next window has a slot in its destination (0: not bounded)."""
    if state[15] is None or len(state[14]) < state[15][0]:
        return 0
    return state[14][-state[15][0]]


def _stores(state: list) -> int:
    """Stores requested and not yet served."""
    return sum(1 for p in state[6] if p[1])


def _relative(state: list) -> tuple:
    """The state with every time relative to the last compute's end (equal states evolve
    alike, shifted)."""
    ref = state[0]
    if not state[9]:  # no stream
        return (state[1] - ref, state[2] - ref, *[s - ref for s in state[3]])
    return (state[1] - ref, state[2] - ref, *(s - ref for s in state[3]),
            *(s - ref for s in state[5]), state[10] - ref,
            *((p[0] - ref, *p[1:]) for p in sorted(state[6])),
            *((w[0] - ref, w[1]) for w in state[11]), *(s - ref for s in state[14]))  # fmt: skip


def _shift(state: list, cycles: int, tiles: int) -> None:
    """Advance the state by ``tiles`` tiles taking ``cycles`` (a jump over repeated runs)."""
    state[4] -= tiles
    state[8] -= tiles
    state[0] += cycles
    state[1] += cycles
    state[2] += cycles
    state[3][:] = [s + cycles for s in state[3]]
    state[5][:] = [s + cycles for s in state[5]]
    state[6][:] = [(p[0] + cycles, *p[1:]) for p in state[6]]
    state[10] += cycles
    state[11][:] = [(w[0] + cycles, w[1]) for w in state[11]]
    state[14][:] = [s + cycles for s in state[14]]


def _runs(state: list) -> Callable[[list, int], int]:
    """The pipeline's ``step`` for :func:`twin_walk.walk`: after a middle run, jump over whole
    periods of runs once the state (relative to the compute's end) recurs — often after ``b``
    runs, the slots alternating — or after :data:`_TRIES` runs extrapolate the last ``b`` runs'
    rate; never into the last ``ahead`` tiles, whose loads differ."""

    def step(history: list, middle: int) -> int:
        rel = _relative(state)
        period = next((p for p in range(1, len(history) + 1) if history[-p][0] == rel), 0)
        if not period and len(history) >= _TRIES:
            period = len(state[3])  # no recurrence yet: extrapolate the last b runs' rate
        skipped = 0
        if period and middle >= period:
            _, c_end, left = history[-period]
            tiles = left - state[4]  # per period
            jumps = min(middle // period, max(0, state[4] // tiles - 1))
            _shift(state, (state[0] - c_end) * jumps, tiles * jumps)
            skipped = jumps * period
        history.append((rel, state[0], state[4]))
        return skipped

    return step
