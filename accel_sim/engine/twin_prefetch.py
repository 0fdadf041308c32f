"""Prefetch across groups in the closed-form twin's body (``twin.py``, ``body_cycles``). Cycles
throughout.

The per-group estimate charges each group (one sweep of the innermost iterating loop) its
busiest resource and carries nothing over to the next group. An input window that spans one
or more groups and has ``s ≥ 2`` slots is loaded ahead, though: the window ``s`` back frees its
slot when its last step is computed, and the mover then loads the next window, up to a token
queue's depth of steps ahead of the compute. So the load-heavy first group of a block (an
operand block loaded during the block's first fold) borrows the port time its predecessors left
idle — a vector-bound last fold of the block before (3525×828×156 W8A8-static on the edge NPU,
K above the block loop), or the block's own light later folds (3542×541×247 W8A8 there, the next
M block of A loaded during the current block's later N folds).

:func:`prefetch_saving` runs a (max, +) recurrence over the groups in program order: group
``i`` ends at

    E(i) = max(E(i−1) + W(i), max_p [max(max(P_p(i−1), E(i−d_p)) + pre_p(i), E(i−1)) + rest_p(i)])
           + bubble(i)

where ``W`` is the group's busiest resource other than the ports that carry prefetched loads,
``pre_p`` the cycles port ``p`` spends on loads of windows that may start ``d_p`` groups early,
``rest_p`` the port's other work in the group (stores, one-step windows, turnovers: these wait
for the group to start) and ``P_p`` when the port finished the group's work. With ``d = 1``
everywhere it is the plain sum of the groups' spans; the saving is that sum less the
recurrence's span. Runs of groups that repeat are simulated until the state (every time
relative to the last group's end) recurs, then jumped over.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import (
    _BUBBLE,
    _digit_count,
    _group_classes,
    _group_codes,
    _inside_k,
    _plan,
)
from accel_sim.engine.twin_walk import walk

#: Runs of one repeated sequence simulated before the last run's increment is extrapolated.
_TRIES = 8


def _leads(program: Program, g: int) -> dict[int, int]:
    """Per input hop whose window spans whole groups and has at least two slots, how many groups
    back the group must end before the hop may load a group's window: ``(s − 1) × G + 1`` for
    ``s`` slots and windows of ``G`` groups, at most a token queue's depth of steps ahead (the
    mover runs no further ahead of the compute)."""
    c = program.count[g]
    queue = program.arch.dma_queue_steps // c + 1
    leads = {}
    for j, _, _, _, slots, _ in _plan(program)[1]:
        link = program.links[j]
        r = program.window(link.operand, link.dst)[0]
        if slots < 2 or r >= g:
            continue
        d = min((slots - 1) * math.prod(program.count[r + 1 : g]) + 1, queue)
        if d > 1:
            leads[j] = d
    return leads


def _split(program: Program, g: int, radix: int, outer: int, busy: dict, leads: dict,
           shared: set, lagged: bool) -> tuple:  # fmt: skip
    """A group class's (W, bubble, {port: (d, pre, rest, has loads)}, compute, {downstream
    resource: cycles}) from its ``busy`` totals, for every port of ``shared`` (those the
    prefetched hops use); the downstream resources (epilogue, output slots, ports only stores
    use) apart from W when ``lagged``."""
    pre, lag, loads = _group_loads(program, g, radix, outer, leads)
    down = {}
    if lagged:
        down = {r: c for r, c in busy.items() if r not in shared and _downstream_resource(r)}
        down = {r: c for r, c in down.items() if r not in _load_ports(program)}
    w = max((c for r, c in busy.items() if r != _BUBBLE and r not in shared and r not in down),
            default=0)  # fmt: skip
    ports = {p: (lag.get(p, 1), pre.get(p, 0), busy.get(p, 0) - pre.get(p, 0), p in loads)
             for p in shared}  # fmt: skip
    return w, busy.get(_BUBBLE, 0), ports, busy.get("compute", 0), down


def _group_loads(program: Program, g: int, radix: int, outer: int, leads: dict) -> tuple:
    """A group class's loads: per port the cycles of loads that may start early and their
    least lead (groups), and every port its loads use. They read only the group's step
    classes, so groups of the same classes (shared class objects, ``Program.class_of``) share
    them (cached per program and ``leads``)."""
    codes = _group_codes(program, g, radix, outer)
    memo = program.__dict__.setdefault("_twin_group_loads", {})
    key = (_group_classes(program, g, radix, outer), tuple(leads.items()))
    hit = memo.get(key)
    if hit is not None:
        return hit
    mem, links = program.memory, _plan(program)[0]
    hops = [hop[0] for hop in _plan(program)[1]]
    pre: dict = {}
    lag: dict = {}
    loads: set = set()  # ports the group's own loads use
    for code in codes:
        step = program.class_of(code)
        times = _digit_count(program.count[g], (code // radix) % 4)
        for j in hops:
            if not step.link_bytes[j]:
                continue
            d = leads.get(j)
            for port, cycles in mem.port_cycles(*links[j], step.link_bytes[j]):
                loads.add(port)
                if d is not None:
                    pre[port] = pre.get(port, 0) + cycles * times
                    lag[port] = min(lag.get(port, d), d)
    hit = memo[key] = (pre, lag, loads)
    return hit


def _downstream_resource(resource) -> bool:
    """Whether ``resource`` serves outputs only (epilogue, output slots) or is a port."""
    if resource == "vector":
        return True
    return isinstance(resource, tuple) and (resource[0] in ("acc", "cslots")
                                            or isinstance(resource[0], int))  # fmt: skip


def _load_ports(program: Program) -> set:
    """Every port an input hop uses (cached)."""
    ports = program.__dict__.get("_twin_load_ports")
    if ports is None:
        mem, links = program.memory, _plan(program)[0]
        ports = {p for j, *_ in _plan(program)[1] for p in mem.hop_ports(*links[j])}
        program.__dict__["_twin_load_ports"] = ports
    return ports


def prefetch_saving(program: Program, g: int, radix: int, groups: dict, adjusted: dict,
                    first: int) -> float | int:  # fmt: skip
    """How much less than the sum of the groups' spans (all but the first, whose head
    ``body_cycles`` costs) the groups take when windows spanning groups load ahead and, with K
    above the block loop, the outputs' way out lags the compute (the recurrence above; 0 when
    neither can happen). ``groups``: per group class (count, busy); ``adjusted``: the classes
    whose busy the first group and the drain changed."""
    if g <= 0 or len(groups) < 2:
        return 0
    busiest, bubbles = set(), False
    for o, (_, busy) in groups.items():
        if o != first:
            busy = adjusted.get(o, busy)
            busiest.add(max((r for r in busy if r != _BUBBLE), key=busy.get))
            bubbles = bubbles or busy.get(_BUBBLE, 0) > 0
    if len(busiest) == 1 and not bubbles:
        return 0  # one resource paces every group back to back: the plain sum
    leads = _leads(program, g)
    lag = _output_lag(program, g)
    if not leads and not lag:
        return 0
    mem, links = program.memory, _plan(program)[0]
    shared = {p for j in leads for p in mem.hop_ports(*links[j])}
    movable = shared | ({r for _, b in groups.values() for r in b if _downstream_resource(r)}
                        - _load_ports(program) if lag else set())  # fmt: skip
    if not busiest & movable:
        return 0  # no group's busiest resource can move: the plain sum
    parts = {o: _split(program, g, radix, o, adjusted.get(o, b), leads, shared, lag > 0)
             for o, (_, b) in groups.items()}  # fmt: skip
    if not any(_may_gain(part) for o, part in parts.items() if o != first):
        return 0  # every group's span is set by work that cannot move: the plain sum
    depth = max(leads.values(), default=1)
    # the ends of the last ``depth`` groups (oldest first); per port when it finished and
    # before when the next groups' early loads may not start; per downstream resource when it
    # finished each of the last ``lag`` + 1 groups; the plain sum of spans so far
    state = {"ends": [0.0] * depth, "port": {}, "gate": {}, "down": {}, "lag": lag,
             "plain": 0.0, "started": False}  # fmt: skip
    loops = [i for i in range(g) if program.count[i] > 1]
    once = sum(3 * program._radix[i] for i in range(g) if program.count[i] == 1)
    once += sum(3 * program._radix[i] for i in range(g + 1, len(program.count)))
    walk(program, loops, once, lambda code: _group(state, parts[code]), _runs(state))
    end = max([state["ends"][-1]] + [h[-1] for h in state["down"].values()])
    return state["plain"] - end or 0  # (an int when nothing moves, as the plain sum)


def _may_gain(part: tuple) -> bool:
    """Whether a group's span may be set by work that can move to an earlier group: loads that
    may start early or the outputs' way out, which may lag (else the recurrence gives each
    group its plain span)."""
    w, _, ports, _, down = part
    fixed = max([w] + [pre + rest for _, pre, rest, _ in ports.values() if not pre])
    return any(pre and pre + rest > fixed for _, pre, rest, _ in ports.values()) or any(
        c > fixed for c in down.values()
    )


def _output_lag(program: Program, g: int) -> int:
    """With K above the block loop, how many groups the outputs' way out (epilogues, stores) may
    lag the compute: an accumulator window of ``G`` groups with ``b`` slots is needed again
    ``(b − 1) × G`` groups later, and the compute runs at most a token queue's depth of steps
    ahead of the epilogue. 0 with K innermost (a group's way out already goes to the next
    group: ``twin._carry_spills``)."""
    if _inside_k(program) < 2:
        return 0
    r = program.window("C", program.inner["C"])[0]
    b = _plan(program)[3]
    queue = program.arch.dma_queue_steps
    return min((b - 1) * math.prod(program.count[r + 1 : g]), queue // program.count[g])


def _group(state: dict, part: tuple) -> None:
    """One group through the recurrence (``part``: :func:`_split`'s)."""
    ends, done, gate = state["ends"], state["port"], state["gate"]
    w, bubble, ports, compute, down = part
    if not state["started"]:  # the head (``body_cycles``): its end is the origin
        state["started"] = True
        state["port"] = {p: 0.0 for p in ports}
        state["gate"] = {p: 0.0 for p in ports}
        return
    last = ends[-1]
    end = last + w
    span = w
    for p, (d, pre, rest, waits) in ports.items():
        start = max(done.get(p, last), ends[-d], gate.get(p, -math.inf))
        finish = max(start + pre, last) + rest
        done[p] = finish
        # the next groups' early loads queue with this group's loads on the port (first come,
        # first served): before this group's compute ends they would delay it
        gate[p] = last + compute if waits else -math.inf
        end = max(end, finish)
        span = max(span, pre + rest)
    lag = state["lag"]
    for r, cycles in down.items():
        history = state["down"].setdefault(r, [last] * (lag + 1))
        history.append(max(history[-1], last) + cycles)
        history.pop(0)
        end = max(end, history[0])  # the group ``lag`` back must have left
        span = max(span, cycles)
    end += bubble
    state["plain"] += span + bubble
    ends.pop(0)
    ends.append(end)


def _relative(state: dict) -> tuple:
    ref = state["ends"][-1]
    # (the dicts keep their insertion order, the same for every state of one walk)
    return (*(e - ref for e in state["ends"]),
            *((p, t - ref) for p, t in state["port"].items()),
            *((p, t - ref) for p, t in state["gate"].items()),
            *((r, *(t - ref for t in h)) for r, h in state["down"].items()))  # fmt: skip


def _shift(state: dict, cycles: float, plain: float) -> None:
    state["ends"][:] = [e + cycles for e in state["ends"]]
    state["port"] = {p: t + cycles for p, t in state["port"].items()}
    state["gate"] = {p: t + cycles for p, t in state["gate"].items()}
    state["down"] = {r: [t + cycles for t in h] for r, h in state["down"].items()}
    state["plain"] += plain


def _steady(history: list, state: dict) -> bool:
    """Whether the last two runs advanced the groups' end and the plain sum by the same
    cycles: a state that drifts (a resource slower than the groups falling behind at a constant
    rate) recurs only up to that drift, so the run's increment is extrapolated as after
    :data:`_TRIES` runs, without waiting for them."""
    if len(history) < 2:
        return False
    (_, e1, p1), (_, e2, p2) = history[-2:]
    return state["ends"][-1] - e2 == e2 - e1 and state["plain"] - p2 == p2 - p1


def _runs(state: dict) -> Callable[[list, int], int]:
    """The recurrence's ``step`` for :func:`twin_walk.walk`: after a middle run, jump over whole
    periods once the state (relative to the last group's end) recurs, or after :data:`_TRIES`
    runs or two equal increments (:func:`_steady`) extrapolate the last run's increment."""

    def step(history: list, middle: int) -> int:
        rel = _relative(state)
        period = next((p for p in range(1, len(history) + 1) if history[-p][0] == rel), 0)
        if not period and (len(history) >= _TRIES or _steady(history, state)):
            period = 1  # no recurrence (yet): extrapolate the last run's increment
        skipped = 0
        if period and middle >= period:
            _, end, plain = history[-period]
            jumps = middle // period
            _shift(state, (state["ends"][-1] - end) * jumps, (state["plain"] - plain) * jumps)
            skipped = jumps * period
        history.append((rel, state["ends"][-1], state["plain"]))
        return skipped

    return step
