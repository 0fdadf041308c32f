"""Per-step costs of the closed-form twin (``twin.py``): what each step keeps every port, the
compute unit and the epilogue busy (cycles), the chains of hops per operand, the output tiles and
their ways out. Shared by the twin's body/fill/drain (``twin.py``) and its sequential-chain bounds
(``twin_chains.py``).
"""

from __future__ import annotations

import math

from accel_sim.engine.program import Program
from accel_sim.engine.program_periods import _class_of


def _chain(program: Program, operand: str) -> list[int]:
    """Indices of ``operand``'s links in ``program.links``, outermost hop first (cached)."""
    cache = program.__dict__.setdefault("_twin_chains", {})
    chain = cache.get(operand)
    if chain is None:
        chain = cache[operand] = [j for j, ln in enumerate(program.links) if ln.operand == operand]
    return chain


def first_arrivals(program: Program) -> dict[int, int]:
    """Per input link, the earliest cycle its hop can start: the first step's data must first
    come from DRAM to the hop's source (each hop before it on the operand's way in: its
    transfer and its source's latency; 0 for a hop out of DRAM). Every later step's data comes
    no earlier, and no compute or store precedes the first step's data. Once per program."""
    cached = program.__dict__.get("_twin_first_arrivals")
    if cached is None:
        mem, first, cached = program.memory, program.step_at(0), {}
        for operand in "AB":
            at = 0
            for j in _chain(program, operand):
                link = program.links[j]
                cached[j] = at
                at += mem.transfer_cycles(link.src, link.dst, first.link_bytes[j])
                at += mem.latency(link.src)
        program.__dict__["_twin_first_arrivals"] = cached
    return cached


def _per_class(program: Program, name: str, code: int, build) -> dict[object, int]:
    """``build(program, code)``, cached per code under ``name`` and shared by the codes of equal
    step classes (``build`` must read only the step's class): the caller must not change it."""
    cache = program.__dict__.setdefault(name, {})
    hit = cache.get(code)
    if hit is None:
        shared = program.__dict__.setdefault(name + "_class", {})
        step = id(program.class_of(code))  # (equal classes are one object)
        hit = shared.get(step)
        if hit is None:
            hit = shared[step] = build(program, code)
        cache[code] = hit
    return hit


def step_busy(program: Program, code: int) -> dict[object, int]:
    """Cycles a step of class ``code`` occupies each resource: the unit, every port, the vector
    unit, (Little's law) the slots of every level whose window is that single step, and under
    ``"bubble"`` the serial refill of :func:`_bubble` (once per class, :func:`_per_class`)."""
    return _per_class(program, "_twin_busy", code, _busy_and_bubble)


def _busy_and_bubble(program: Program, code: int) -> dict[object, int]:
    busy, bubble = _step_busy(program, code), _bubble(program, code)
    return {**busy, _BUBBLE: bubble} if bubble else busy


def _plan(program: Program) -> tuple:
    """What :func:`_step_busy` needs about the program's links, computed once: per link its
    (src, dst, port rates); per input hop (link, next link or None, innermost-slot index,
    source latency, destination slots, window of one group: :func:`_group_window`); the C
    links; the accumulator slots; per staged C hop (link, next link, source latency, destination
    slots); epilogue lanes."""
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
                hops.append((j, nxt, l0, mem.latency(ln.src), program.buffers(operand, ln.dst),
                             _group_window(program, operand, ln.dst)))  # fmt: skip
        c_chain = _chain(program, "C")
        staged = tuple((j, c_chain[k + 1], mem.latency(program.links[j].src),
                        program.buffers("C", program.links[j].dst))
                       for k, j in enumerate(c_chain[:-1]))  # fmt: skip
        plan = program.__dict__["_twin_plan"] = (
            links, tuple(hops), c_chain[0], _acc_buffers(program), staged,
            program.arch.vector.lanes)  # fmt: skip
    return plan


def _step_busy(program: Program, code: int) -> dict[object, int]:
    step = program.class_of(code)
    mem = program.memory
    links, hops, c0, acc_slots, staged, lanes = _plan(program)
    # per link its transfer cycles, and per port its cycles: the same for every class that
    # moves the same bytes (cached per program)
    moves = program.__dict__.setdefault("_twin_moves", {})
    move = moves.get(step.link_bytes)
    if move is None:
        hop, ports = [], {}
        for (src, dst), nbytes in zip(links, step.link_bytes):
            hop.append(mem.transfer_cycles(src, dst, nbytes))
            for port, cycles in mem.port_cycles(src, dst, nbytes):
                ports[port] = ports.get(port, 0) + cycles
        move = moves[step.link_bytes] = (hop, ports)
    hop = move[0]
    busy: dict[object, int] = {"compute": step.compute_cycles}
    busy.update(move[1])
    ports = move[1]
    for j, nxt, l0, latency, slots, group_window in hops:
        closes = step.closes_src[nxt] if nxt is not None else step.closes_l0[l0]
        use = hop[nxt] if nxt is not None else step.compute_cycles
        if step.opens[j] and closes and step.link_bytes[j]:
            busy[("slots", j)] = math.ceil((hop[j] + latency + use) / slots)
        elif group_window:
            # a window of one group (one K iteration of a block): its slot is held from the
            # transfers its first step waits for (everything that step puts on the hop's
            # ports) and the source latency through every step's use; the later steps'
            # transfers overlap the earlier steps' compute
            held = use
            if step.opens[j]:
                src, dst = links[j]
                held += latency + max(ports.get(p, 0) for p in mem.hop_ports(src, dst))
            busy[("slots", j)] = held / slots
        # otherwise a window longer than one step: its slots amortise over the window
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


def _group_window(program: Program, operand: str, level: int) -> bool:
    """Whether ``operand``'s window in ``level`` is one sweep of the innermost iterating loop
    (a *group*) in a nest with K above the block loop: one K iteration of the block, whose
    windows of every input open and close together (:func:`_step_busy` bounds their slots). With
    K innermost such windows keep the plain amortisation (bounding them there moved the model
    away from the DES on the agreement grid)."""
    if _inside_k(program) < 2:
        return False
    r, g = program.window(operand, level)[0], _group_loop(program)
    return r < g and all(program.count[i] == 1 for i in range(r + 1, g))


def _group_loop(program: Program) -> int:
    """The innermost loop that iterates: one sweep of it is a *group* of steps."""
    for i in range(len(program.count) - 1, -1, -1):
        if program.count[i] > 1:
            return i
    return -1


def _group_codes(program: Program, g: int, radix: int, outer: int) -> list[int]:
    """Every class code of the steps of one group of class ``outer``."""
    if g < 0:
        return [outer]
    count = program.count[g]
    digits = (0, 2) if count == 2 else (0, 1, 2) if count > 2 else (3,)
    return [outer + d * radix for d in digits]


def _group_classes(program: Program, g: int, radix: int, outer: int) -> tuple[int, ...]:
    """The identities of a group's step classes, in step order (equal classes are one object,
    ``Program.class_of``): groups with equal keys cost alike wherever only classes are read."""
    return tuple(id(program.class_of(c)) for c in _group_codes(program, g, radix, outer))


def _downstream(program: Program, code: int) -> dict[object, int]:
    """The part of :func:`step_busy` that serves the output a step closes (epilogue, stores,
    output slots): it follows the step's compute (once per class, :func:`_per_class`)."""
    return _per_class(program, "_twin_down", code, _build_downstream)


def _build_downstream(program: Program, code: int) -> dict[object, int]:
    step, down = program.class_of(code), {}
    if not step.closes_accumulator:
        return down
    busy = step_busy(program, code)
    for r in busy:
        if r == "vector" or (isinstance(r, tuple) and r[0] in ("acc", "cslots")):
            down[r] = busy[r]
    if ("acc",) in busy:  # only the hold beyond the step's own compute
        down[("acc",)] = busy[("acc",)] - math.ceil(step.compute_cycles / _acc_buffers(program))
    return _store_ports(program, step, down)


def _store_ports(program: Program, step, into: dict) -> dict:
    """``into`` plus, per port, the cycles of the step's C hops (its output tile's stores)."""
    mem = program.memory
    for j in _chain(program, "C"):
        link = program.links[j]
        for port, cycles in mem.port_cycles(link.src, link.dst, step.link_bytes[j]):
            into[port] = into.get(port, 0) + cycles
    return into


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
    for j, nxt, l0, latency, slots, _ in hops:
        if slots != 1 or not step.opens[j]:
            continue
        if step.closes_src[nxt] if nxt is not None else step.closes_l0[l0]:
            continue  # a one-step window: the Little's-law slot bound covers it
        src, dst = links[j]
        delay = max(delay, program.memory.transfer_cycles(src, dst, step.link_bytes[j]) + latency)
    return delay


def _digit_count(count: int, digit: int) -> int:
    """Steps of one sweep of a loop of ``count`` iterations whose index class is ``digit``."""
    return count - 2 if digit == 1 else 1


def _epilogue(program: Program, outputs: int) -> int:
    if not (program.op.epilogue_ops_per_output and outputs):
        return 0
    lanes = program.arch.vector.lanes
    return math.ceil(outputs * program.op.epilogue_ops_per_output / lanes)


def _way_out(program: Program, step, start: int, free: dict,
             arrival: dict | None = None) -> int:  # fmt: skip
    """When an output tile closed by ``step`` at ``start`` (its epilogue done) has left through
    every C hop, queueing on ports busy until ``free`` (updated); ``arrival``, if given, gets
    the time the tile reaches each port of its way."""
    mem = program.memory
    t = start
    c_chain = _chain(program, "C")
    for k, j in enumerate(c_chain):
        link, nbytes = program.links[j], step.link_bytes[j]
        if not nbytes:
            continue
        ports = mem.port_cycles(link.src, link.dst, nbytes)
        t = max(t, *(free.get(p, t) for p, _ in ports))
        if arrival is not None:
            for p, _ in ports:
                arrival.setdefault(p, t)
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


def _last_tiles(program: Program) -> list[int]:
    """The closing steps of the output tiles whose way out is the drain's, earliest first: the
    last two (``_tile_steps`` apart) with K innermost; with K above the block loop every tile of
    the last window (they close on consecutive steps, the last K iteration's)."""
    n = program.n_steps
    inside = _inside_k(program)
    if inside > 1:
        return list(range(max(0, n - inside), n))
    spt = _tile_steps(program)
    return [n - 1 - spt, n - 1] if n > spt else [n - 1]


def _inside_k(program: Program) -> int:
    """Steps per iteration of the innermost iterating K loop inside the accumulator's window
    (1 when K is innermost: every tile's K steps are consecutive)."""
    k_loops = program.window("C", program.inner["C"])[1]
    return math.prod(program.count[max(k_loops) + 1 :]) if k_loops else 1


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
