"""The input windows' slot chains: lower bounds of the DES's cycles for the closed-form twin
(``twin.py``). Cycles throughout.

A window of A or B in a level (the steps of one iteration of its window loop, ``program.py``)
takes one of the level's ``b`` slots before its first tile crosses the hop into the level, and
frees it only once its last step has left the level: the next hop has moved it, or (in the
level feeding the unit) the unit has computed it. One mover takes slots in step order and the
next frees them in step order, so window ``w + b`` cannot start before window ``w`` has ended:
windows ``w, w + b, w + 2b, …`` hold one slot in turn. A window's *hold* is at least, for any of
its steps ``i`` whose tile crosses the hop, the hop's transfers of its steps up to ``i``, the
source's latency, and the next hop's transfers (or the unit's compute) of its steps from ``i``
on — a two-stage flow shop with a delay between the stages. No chain starts before the first
step's data have reached the hop's source (``twin_steps.first_arrivals``: the hops before it
and their sources' latencies), which in a short program is a large part of the whole.

* :func:`window_slot_bound`: from the step classes alone (no enumeration), the mean of the
  ``b`` chains (the longest is at least their mean), with each hold bounded by its last loaded
  step (then the closing step's next hop) or by its first (then every step's next hop).
* :func:`window_chains`: for programs of at most :data:`ENUMERATE` steps, every window's hold
  and the ``b`` chains themselves (``twin.twin_cycles`` asks for them only when the mean is
  close to binding, ``twin.CHAINS_WHEN``): chain ``r`` starts after the mover's transfers of
  the steps before window ``r``, and the chain holding the last window ends with the last
  step's way to the unit, its compute and the last output tile's way out. For the model's
  estimate (``stretch``) their transfers are stretched by the output stores that share the
  hop's ports (:func:`_store_stretch`): windows after the first load while earlier output tiles
  are stored, first come, first served, which makes those chains an estimate rather than a
  bound. On the chips' per-core views (small parts, DRAM latency, loads and stores on one
  port) a stretch took rtx3090_chip's worst gap from -15 % to -8.7 % (``benchmarks/bench_chip.py
  --agreement``, seed 2, 300 cases). The stores counted are those issued while the window
  loads, not a share of all of them spread over the run: a single-slot window loads while the
  unit waits and stores little (32×32 WS, 6775×300×132 W8A8: +10.2 % → +3.4 %).
* Each window of a chain also bounds the end: once it has started, its first tile's way to the
  unit, then every step from there on through the unit, one after the other, and the last
  output tile's way out (:func:`_unit_after`; the model's drain in the estimate).
"""

from __future__ import annotations

import math

import numpy as np

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import _chain, _epilogue, _plan, _way_out, first_arrivals

#: Programs up to this many steps have their windows enumerated (:func:`window_chains`).
ENUMERATE = 4096


def _hop_plan(program: Program, j: int, nxt, l0: int) -> dict:
    """Per distinct step class (by identity): (hop ``j``'s transfer cycles, the next hop's
    transfer cycles or the unit's compute, opens a window, closes one). Once per program."""
    plans = program.__dict__.setdefault("_twin_hop_plans", {})
    if j in plans:
        return plans[j]
    mem = program.memory
    links = _plan(program)[0]
    out = plans[j] = {}
    for step, _ in program._class_counts:
        a = mem.transfer_cycles(*links[j], step.link_bytes[j]) if step.link_bytes[j] else 0
        if nxt is None:
            use, closes = step.compute_cycles, step.closes_l0[l0]
        else:
            nbytes = step.link_bytes[nxt]
            use = mem.transfer_cycles(*links[nxt], nbytes) if nbytes else 0
            closes = step.closes_src[nxt]
        out[id(step)] = (a, use, bool(step.opens[j]), bool(closes))
    return out


def _hop_means(program: Program) -> dict[int, float]:
    """Per input hop with loads (link index), the mean of its slot chains (module docstring).
    Computed once per program."""
    cached = program.__dict__.get("_twin_window_means")
    if cached is not None:
        return cached
    means = {}
    for j, nxt, l0, latency, slots, _ in _plan(program)[1]:
        plan = _hop_plan(program, j, nxt, l0)
        last_loaded = first_loaded = 0  # Σ holds by each of the two flow-shop bounds
        for step, n in program._class_counts:
            a, use, opens, closes = plan[id(step)]
            first_loaded += n * use
            if a:
                last_loaded += n * a
                if opens:
                    last_loaded += n * latency
                    first_loaded += n * (a + latency)
                if closes:
                    last_loaded += n * use
        if last_loaded:  # (every chain starts once the first data reach the hop's source)
            means[j] = first_arrivals(program)[j] + max(last_loaded, first_loaded) / slots
    program.__dict__["_twin_window_means"] = means
    return means


def window_slot_bound(program: Program) -> float:
    """The mean of every input hop's slot chains, the largest over hops; -inf without any."""
    return max(_hop_means(program).values(), default=-math.inf)


def _last_way_out(program: Program) -> int:
    """The last output tile's way out after the last compute (its epilogue and every C hop),
    cycles; once per program."""
    cached = program.__dict__.get("_twin_last_way_out")
    if cached is None:
        last = program.step_at(program.n_steps - 1)
        cached = _way_out(program, last, _epilogue(program, last.outputs), {})
        program.__dict__["_twin_last_way_out"] = cached
    return cached


def _tail(program: Program, operand: str, k: int) -> int:
    """From the end of hop ``chain[k + 1]``'s transfer of the last step (the end of the last
    window of hop ``chain[k]``'s level; ``k`` = the last hop: its compute) to the end: the
    step's way on to the unit, its compute and the last output tile's way out."""
    mem, last = program.memory, program.step_at(program.n_steps - 1)
    chain = _chain(program, operand)
    out = _last_way_out(program)
    if k + 1 >= len(chain):
        return out
    way = 0
    for m in range(k + 1, len(chain)):
        link, nbytes = program.links[chain[m]], last.link_bytes[chain[m]]
        if nbytes:
            way += mem.latency(link.src)
            if m > k + 1:
                way += mem.transfer_cycles(link.src, link.dst, nbytes)
    return way + last.compute_cycles + out


def window_chains(program: Program, floor: float = -math.inf, stretch: bool = False,
                  drain: float | None = None) -> float:  # fmt: skip
    """The longest input slot chain, windows enumerated (module docstring), over the hops whose
    chains' mean is at least ``floor`` (the others are not enumerated); -inf for programs of
    more than :data:`ENUMERATE` steps or without such hops. ``stretch``: the transfers
    stretched by the output stores on their ports (:func:`_store_stretch`, the model's
    estimate); False: not, a lower bound of the DES.
    ``drain``: the model's drain, ending the chains that run the rest of the steps through
    the unit (:func:`_unit_after`) in the estimate; None: the last output tile's way out (the
    bound). Each hop's is computed once per program, stretch and drain."""
    if program.n_steps > ENUMERATE:
        return -math.inf
    done = program.__dict__.setdefault("_twin_window_chains", {})
    best = -math.inf
    means = _hop_means(program)
    tails = program.__dict__.setdefault("_twin_window_tails", {})
    for j, nxt, l0, latency, slots, _ in _plan(program)[1]:
        if j not in means:
            continue
        operand = program.links[j].operand
        k = _chain(program, operand).index(j)
        if j not in tails:
            tails[j] = _tail(program, operand, k)
        # the last chain ends with the last step's tail, which the mean leaves out (it weighs
        # in short programs)
        if means[j] + tails[j] < floor:
            continue
        chain = done.get((j, stretch, drain))
        if chain is None:
            classes, inverse = _step_classes(program)
            chain = done[(j, stretch, drain)] = _hop_chains(
                program, j, nxt, l0, latency, slots, classes, inverse, tails[j], stretch, drain)
        best = max(best, chain)
    return best


def _busiest_port_per_step(program: Program, ms: list[int], ports: set, classes: list,
                           inverse: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per step, the cycles links ``ms`` take at that step on the busiest of ``ports``."""
    mem = program.memory
    per = {}
    for step, _ in program._class_counts:
        load: dict = {}
        for m in ms:
            nb = step.link_bytes[m]
            if nb:
                ln = program.links[m]
                for p, c in mem.port_cycles(ln.src, ln.dst, nb):
                    if p in ports:
                        load[p] = load.get(p, 0) + c
        per[id(step)] = max(load.values(), default=0)
    return np.array([per[c] for c in classes], dtype=np.int64)[inverse]


def _store_stretch(program, j, a, starts, ends, slots, classes, inverse) -> np.ndarray:
    """Per step, the factor stretching hop ``j``'s transfers by the output stores issued
    while its window loads, first come, first served on a shared port: window ``w`` loads from
    the close of window ``w - slots`` (whose slot it takes) until its last loaded tile; over
    that time the unit runs the steps loaded before it, so the stores of the steps from that
    close up to the step before its last loaded one queue among its transfers. Window 0 loads
    before any store. At most ×2 per window."""
    # per step, its closing output tile's stores on the busiest of the hop's ports
    link = program.links[j]
    outs = [m for m, ln in enumerate(program.links) if ln.operand == "C"]
    ports = set(program.memory.hop_ports(link.src, link.dst))
    st = _busiest_port_per_step(program, outs, ports, classes, inverse)
    if not st.any():
        return np.ones(len(a))
    cum = np.concatenate(([0], np.cumsum(st)))
    count = len(starts)
    w = np.arange(count)
    lo = np.where(w >= slots, ends[np.maximum(w - slots, 0)], 0)
    # each window's last loaded step (-1: none); the stores of steps lo … hi - 1 queue among
    # its transfers
    hi = np.maximum.reduceat(np.where(a > 0, np.arange(len(a)), -1), starts)
    stores = np.where(hi > lo, cum[np.maximum(hi, 0)] - cum[lo], 0)
    total = np.add.reduceat(a, starts)
    factor = 1 + np.minimum(1.0, stores / np.maximum(total, 1))
    factor[0] = 1.0  # (window 0 loads before any store)
    return np.repeat(factor, ends - starts + 1)


def _step_classes(program: Program) -> tuple[list[int], np.ndarray]:
    """(the distinct step classes by identity, each step's index into them). Once per
    program."""
    cached = program.__dict__.get("_twin_step_classes")
    if cached is None:
        raw = program.codes_at(np.arange(program.n_steps, dtype=np.int64), canonical=False)
        uniq, inverse = np.unique(raw, return_inverse=True)
        cached = ([id(program.class_of(int(c))) for c in uniq], inverse)
        program.__dict__["_twin_step_classes"] = cached
    return cached


def _hop_chains(program, j, nxt, l0, latency, slots, classes, inverse, tail, stretch,
                drain) -> float:  # fmt: skip
    plan = _hop_plan(program, j, nxt, l0)
    per_class = np.array([plan[c] for c in classes], dtype=np.int64)
    a, use, opens, closes = (per_class[inverse, i] for i in range(4))
    starts, ends = np.flatnonzero(opens), np.flatnonzero(closes)
    n = len(a)
    # windows are contiguous: each opens where the one before closed (else no bound)
    if (not len(starts) or len(starts) != len(ends) or starts[0] != 0 or ends[-1] != n - 1
            or np.any(starts[1:] != ends[:-1] + 1) or not a.any()):  # fmt: skip
        return -math.inf
    if stretch:  # (the output stores on the hop's ports meanwhile)
        a = a * _store_stretch(program, j, a, starts, ends, slots, classes, inverse)
        if nxt is not None:  # (and the other operand's tiles of the same steps on its ports)
            use = use + _shared_next(program, j, nxt, classes, inverse)
    before = np.concatenate(([0], np.cumsum(a)))  # transfers of the steps before step i
    after = np.concatenate((np.cumsum(use[::-1])[::-1], [0]))  # next-stage work from step i on
    # the flow-shop bound at every loaded step, relative to its window's start and end
    window = np.repeat(np.arange(len(starts)), ends - starts + 1)
    at = before[1:] - before[starts][window] + latency + after[:-1] - after[ends + 1][window]
    at = np.where(a > 0, at, 0)
    holds = np.maximum(np.maximum.reduceat(at, starts), after[starts] - after[ends + 1])
    best = -math.inf
    count = len(starts)
    head = first_arrivals(program)[j]  # no window opens before the first data reach the source
    way, computes, out = _unit_after(program, j, classes, inverse)
    # (the model's estimate ends with its drain, the last two output tiles' way out)
    rest = computes + (out if drain is None else drain)
    for r in range(min(slots, count)):
        chain = head + before[starts[r]] + holds[r::slots].sum()
        if (count - 1) % slots == r:
            chain += tail
        best = max(best, float(chain))
        # each window of the chain: its start, its first tile's way to the unit, then every
        # step from there on through the unit, one after the other, and the last way out
        first = starts[r::slots]
        begin = head + before[starts[r]] + np.concatenate(([0], np.cumsum(holds[r::slots])[:-1]))
        known = way[first] >= 0
        if known.any():
            best = max(best, float((begin + way[first] + rest[first])[known].max()))
    return best


def _unit_after(program: Program, j: int, classes: list, inverse: np.ndarray) -> tuple:
    """For input hop ``j``: (per step, the way of its tile from the start of its transfer on
    the hop to the unit — the hop's and every later hop's transfer, each source's latency —,
    or -1 where a later hop moves nothing at that step (the unit then takes data that came
    earlier); per step, the compute of that step and every later one; the last output tile's
    way out). Once per program and hop."""
    cache = program.__dict__.setdefault("_twin_unit_after", {})
    if j in cache:
        return cache[j]
    mem = program.memory
    operand = program.links[j].operand
    chain = _chain(program, operand)
    inner = chain[chain.index(j):]
    per_class, compute = {}, {}
    for step, _ in program._class_counts:
        total = 0
        for m in inner:
            link, nbytes = program.links[m], step.link_bytes[m]
            if not nbytes:
                total = -1
                break
            total += mem.transfer_cycles(link.src, link.dst, nbytes) + mem.latency(link.src)
        per_class[id(step)], compute[id(step)] = total, step.compute_cycles
    way = np.array([per_class[c] for c in classes], dtype=np.int64)[inverse]
    comp = np.array([compute[c] for c in classes], dtype=np.int64)[inverse]
    cache[j] = (way, np.cumsum(comp[::-1])[::-1], _last_way_out(program))
    return cache[j]


def _shared_next(program: Program, j: int, nxt: int, classes: list,
                 inverse: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per step, the other input operand's cycles at that step on the busiest port of hop
    ``nxt`` (the hop after ``j``) that its own hops share: a window leaves the level only as
    fast as that port lets its tiles through beside the other operand's of the same steps,
    which alternate with them there (first come, first served). 44×2911×157 W8A8-static on
    ascend910b_chip (44×736×80 per core): B's tiles go from L2 into L1 at 32 cycles each, A's
    at 44 through the same L1 write port, so B's first window leaves L2 after 76 cycles a step
    and the third waits that long for its slot. Only in the estimate: where one operand's
    mover runs ahead of the other they do not alternate."""
    mem = program.memory
    operand = program.links[j].operand
    ports = set(mem.hop_ports(program.links[nxt].src, program.links[nxt].dst))
    others = [m for m, ln in enumerate(program.links) if ln.operand not in (operand, "C")
              and ports & set(mem.hop_ports(ln.src, ln.dst))]
    return _busiest_port_per_step(program, others, ports, classes, inverse)
