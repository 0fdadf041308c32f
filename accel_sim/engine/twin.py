"""Closed-form twin of the DES: the same step program, costed without simulation.

For a pipeline whose stages are the hops, the compute unit, the epilogue and the store hops,
each step occupies every port and the compute unit for a known time (its *busy* times, from
:class:`~accel_sim.engine.memory.MemorySystem`). In steady state a step leaves the pipeline once
per ``period = max over resources of busy`` — the slowest resource sets the pace — so

    cycles ≈ fill + Σ_steps period(step) + drain

where ``fill`` is the time the first step's inputs need to reach the compute unit, and ``drain``
the time the last output tile needs to get back to DRAM. A level whose window is a single step
also bounds the period by its slots (Little's law): a slot is held while its tile arrives, waits
out the source latency and leaves through the next port (or the compute unit). Where consecutive
steps differ (the first row of a block loads more than the rest) double buffering and the token
queues let a heavy step borrow slack from light neighbours, which a sum of per-step maxima does
not see: there the twin overestimates (``docs/engine.md`` lists the regimes and their gaps).
"""

from __future__ import annotations

import math
from collections import defaultdict

from accel_sim.engine.program import Program


def step_busy(program: Program, code: int) -> dict[object, int]:
    """Cycles a step of class ``code`` occupies each resource: the unit, every port, the vector
    unit, and (Little's law) the slots of every level whose window is that single step."""
    step = program.class_of(code)
    mem = program.memory
    busy: dict[object, int] = defaultdict(int)
    busy["compute"] = step.compute_cycles
    hop = []
    for link, nbytes in zip(program.links, step.link_bytes):
        hop.append(mem.transfer_cycles(link.src, link.dst, nbytes))
        for port, cycles in mem.port_cycles(link.src, link.dst, nbytes):
            busy[port] += cycles
    for operand, l0 in (("A", 0), ("B", 1)):
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        for k, j in enumerate(chain):
            closes = step.closes_src[chain[k + 1]] if k + 1 < len(chain) else step.closes_l0[l0]
            if not (step.opens[j] and closes and step.link_bytes[j]):
                continue  # a window longer than one step: its slots amortise over the window
            held = hop[j] + mem.latency(program.links[j].src)
            held += hop[chain[k + 1]] if k + 1 < len(chain) else step.compute_cycles
            busy[("slots", j)] = math.ceil(held / program.buffers(operand, program.links[j].dst))
    epilogue = 0
    if program.op.epilogue_ops_per_output and step.outputs:
        lanes = program.arch.vector.bytes_per_cycle // 2
        epilogue = math.ceil(step.outputs * program.op.epilogue_ops_per_output / lanes)
        busy["vector"] = epilogue
    # output slots (Little's law): an accumulator tile is held from its first K step through
    # the epilogue and its store; an output tile staged in a level, from its arrival until it
    # has left for the next one
    c_chain = [j for j, ln in enumerate(program.links) if ln.operand == "C"]
    acc = step.compute_cycles
    if step.closes_accumulator and c_chain:
        acc += epilogue + hop[c_chain[0]]
    busy[("acc",)] = math.ceil(acc / program.buffers("C", program.links[c_chain[0]].src))
    for k, j in enumerate(c_chain[:-1]):
        if step.link_bytes[j]:
            held = hop[j] + mem.latency(program.links[j].src) + hop[c_chain[k + 1]]
            busy[("cslots", j)] = math.ceil(held / program.buffers("C", program.links[j].dst))
    return busy


def _group_loop(program: Program) -> int:
    """The innermost loop that iterates: one sweep of it is a *group* of steps."""
    for i in range(len(program.count) - 1, -1, -1):
        if program.count[i] > 1:
            return i
    return -1


def body_cycles(program: Program) -> int:
    """Σ over groups of the busiest resource's total within the group.

    Within one sweep of the innermost iterating loop (e.g. the K steps of one output tile) the
    token queues and double buffers let resources overlap freely, so the group takes as long as
    its busiest resource; between groups nothing is carried over (a conservative cut)."""
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
        busy[_BUBBLE] += _bubble(program, code) * times
        groups[outer] = (total, busy)
    return sum(n * (max(c for r, c in busy.items() if r != _BUBBLE) + busy[_BUBBLE])
               for n, busy in groups.values())  # fmt: skip


_BUBBLE = "bubble"


def _bubble(program: Program, code: int) -> int:
    """A single-buffered window spanning several steps cannot prefetch its successor: when
    the step opens such a window, its first tile's way in (transfer + latency) is serial."""
    step = program.class_of(code)
    mem = program.memory
    delay = 0
    for operand, l0 in (("A", 0), ("B", 1)):
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        for k, j in enumerate(chain):
            link = program.links[j]
            if not step.opens[j] or program.buffers(operand, link.dst) != 1:
                continue
            closes = step.closes_src[chain[k + 1]] if k + 1 < len(chain) else step.closes_l0[l0]
            if closes:
                continue  # a one-step window: the Little's-law slot bound covers it
            delay = max(delay, mem.transfer_cycles(link.src, link.dst, step.link_bytes[j])
                        + mem.latency(link.src))  # fmt: skip
    return delay


def _digit_count(count: int, digit: int) -> int:
    """Steps of one sweep of a loop of ``count`` iterations whose index class is ``digit``."""
    return {0: 1, 1: count - 2, 2: 1, 3: 1}[digit]


def twin_cycles(program: Program) -> int:
    """Closed-form estimate of :func:`accel_sim.engine.des.simulate_program`'s cycles."""
    arch, mem = program.arch, program.memory
    first, last = program.step_at(0), program.step_at(program.n_steps - 1)
    fill = 0
    for operand in "AB":
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        path = sum(
            mem.transfer_cycles(program.links[j].src, program.links[j].dst, first.link_bytes[j])
            + (mem.latency(program.links[j].src) if first.link_bytes[j] else 0)
            for j in chain
        )
        fill = max(fill, path)
    drain = 0
    if program.op.epilogue_ops_per_output:
        lanes = arch.vector.bytes_per_cycle // 2
        drain += math.ceil(last.outputs * program.op.epilogue_ops_per_output / lanes)
    c_chain = [j for j, ln in enumerate(program.links) if ln.operand == "C"]
    for k, j in enumerate(c_chain):
        link = program.links[j]
        drain += mem.transfer_cycles(link.src, link.dst, last.link_bytes[j])
        if k < len(c_chain) - 1:
            drain += mem.latency(link.src)
    # step 0 is on the critical path as fill + its compute; later steps add their share of the
    # busiest resource of their group
    head = max(step_busy(program, program.code(0)).values()) - first.compute_cycles
    estimate = fill + body_cycles(program) - head + drain
    return max(estimate, _store_bound(program, fill))


def _store_bound(program: Program, fill: int) -> int:
    """A port that carries outputs cannot start storing before the first output tile is done:
    ``fill + compute of the first group + its epilogue``, after which it still has every store
    (and whatever loads it has not finished) to serve. Binds when outputs dominate the traffic
    (small K: the GEMM is a stream of output tiles)."""
    mem, arch = program.memory, program.arch
    loads: dict[object, int] = defaultdict(int)
    stores: dict[object, int] = defaultdict(int)
    for link, nbytes in zip(program.links, program.link_bytes):
        for port, cycles in mem.port_cycles(link.src, link.dst, nbytes):
            (stores if link.operand == "C" else loads)[port] += cycles
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
