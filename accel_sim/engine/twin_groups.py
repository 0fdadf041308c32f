"""Per-group adjustments of the closed-form twin's body (``twin.py``, ``body_cycles``): what a
group of steps (one sweep of the innermost iterating loop) loses beyond its busiest resource's
total — a port idling at a group's end for a slot (:func:`_turnover`), the longest chain of
input slot holds (:func:`_slot_chains`), with K above the block loop the next window's tile
queued ahead (:func:`_prefetch_idle`), and with K innermost the unit's stall when an output
tile's store goes ahead of a streamed input's tile on a shared bus (:func:`_store_ahead`).
Cycles throughout.
"""

from __future__ import annotations

from accel_sim.engine.program import Program
from accel_sim.engine.program_periods import _class_of
from accel_sim.engine.twin_steps import (
    _chain,
    _digit_count,
    _epilogue,
    _group_codes,
    _inside_k,
    _plan,
)


def _slot_chains(program: Program, g: int, radix: int, outer: int) -> dict[object, int]:
    """Per one-step window with ``s`` slots whose group of ``count`` steps is a multiple of
    ``s`` long, the longest chain of holds that share a slot in a group of class ``outer``:
    slots are taken in step order, so steps ``i, i + s, …`` hold one slot in turn, and with
    ``count`` a multiple of ``s`` the same positions of every group do (the first K step of
    every output tile on one slot, its short last one on the other), which the Little's-law
    average (Σ held / s) misses (27×219×2171 W8A8-static on the edge NPU: B streamed through
    two FILTER_SRAM slots, a full and a short K step per tile)."""
    count = program.count[g]
    links, hops = _plan(program)[:2]
    mem = program.memory
    out: dict[object, int] = {}
    for j, nxt, l0, latency, slots, _ in hops:
        if slots < 2 or count < slots or count % slots:
            continue
        chains = [0] * slots
        for code in _group_codes(program, g, radix, outer):
            step = program.class_of(code)
            closes = step.closes_src[nxt] if nxt is not None else step.closes_l0[l0]
            if not (step.opens[j] and closes and step.link_bytes[j]):
                break
            use = step.compute_cycles if nxt is None else mem.transfer_cycles(
                *links[nxt], step.link_bytes[nxt])  # fmt: skip
            held = mem.transfer_cycles(*links[j], step.link_bytes[j]) + latency + use
            digit = (code // radix) % 4
            lo = 0 if digit == 0 else 1 if digit == 1 else count - 1
            hi = lo + _digit_count(count, digit) - 1  # positions lo … hi, by residue
            for res in range(slots):
                first = lo + (res - lo) % slots
                if first <= hi:
                    chains[res] += held * ((hi - first) // slots + 1)
        else:
            out[("slots", j)] = max(chains)
    return out


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
    for j, nxt, l0, latency, slots, _ in hops:
        if slots < 2 or slots > count:
            continue
        head = program.class_of(outer + _class_of(count - slots, count) * radix)
        closes = head.closes_src[nxt] if nxt is not None else head.closes_l0[l0]
        if not (head.opens[j] and closes and head.link_bytes[j]):
            continue
        steps = [head] + [program.class_of(outer + _class_of(i, count) * radix)
                          for i in range(count - slots + 1, count)]  # fmt: skip
        src, dst = links[j]
        hop = [mem.transfer_cycles(src, dst, s.link_bytes[j]) for s in steps]
        after = head.compute_cycles if nxt is None else mem.transfer_cycles(
            *links[nxt], head.link_bytes[nxt])  # fmt: skip
        wait = hop[0] + latency + after - sum(hop)
        if wait > 0:
            for port in mem.hop_ports(src, dst):
                idle[port] = max(idle.get(port, 0), wait)
    return idle


def _prefetch_idle(program: Program, g: int, radix: int, outer: int,
                   busy: dict) -> dict[object, float]:  # fmt: skip
    """With K above the block loop, what a group of class ``outer`` (``busy``: its totals) loses
    to the next window's tile of an input whose window is one group (:func:`_group_window`):
    it is requested as soon as its slot frees and queues on the port ahead of the current
    window's later tiles.

    * When the port is behind (its work exceeds the group's compute by more than the source
      latency), the window ends only after those tiles, their latency and its last step's
      compute, and the window ``slots`` later cannot load before it has: the port idles for the
      latency and that compute once per ``slots`` windows. With two slots it loads the next
      window's other tiles meanwhile (the input's tile is the window's first; the rest of the
      group's work on the port is the other input's), so it idles for ``latency + compute −
      (port work − tile)`` per two windows. So it does, with two slots, where the port only
      just paces the group (its work above the compute but within the latency of it) and the
      other input's window is the group too: both inputs' loads of a window start when the
      window two back closes, and the next window's tile, requested when the window before
      closes, goes ahead of the current window's last tile (247×1993×52 W8A8-static on the
      32×32 WS, DES 31,233: per two windows 2 × 618 (A) + 80 + 50 (B) + 150 (latency) + 341
      (compute) = 1,857 cycles; −15.4 % → +0.3 %).
    * Otherwise an operand streamed one tile per step on the same port (``s`` slots: ``s − 1``
      steps of prefetch) waits out that transfer once per window: the unit stalls for the
      transfer, its own tile and latency, less the prefetched steps' compute (the port's slot
      turnover, :func:`_turnover`, happens during that stall)."""
    if _inside_k(program) < 2:
        return {}
    links, hops = _plan(program)[:2]
    mem = program.memory
    last = 2 if program.count[g] > 1 else 3
    first, middle = program.class_of(outer), program.class_of(outer + last * radix)
    out: dict[object, float] = {}
    for j, _, _, latency, slots, group_window in hops:
        if not group_window:
            continue
        ports = set(mem.hop_ports(*links[j]))
        transfer = mem.transfer_cycles(*links[j], first.link_bytes[j])
        for y, _, _, y_latency, y_slots, y_group in hops:
            operand = program.links[y].operand
            if (operand == program.links[j].operand or not middle.link_bytes[y]
                    or not ports & set(mem.hop_ports(*links[y]))):  # fmt: skip
                continue  # no later tile of the window on the port
            behind = [p for p in ports if busy.get(p, 0) > busy["compute"] + latency]
            paced = behind
            if not behind and y_group and slots == 2:  # the other input's window is the group
                paced = [p for p in ports if busy.get(p, 0) > busy["compute"]]
            for port in paced:
                idle = latency + middle.compute_cycles
                if slots == 2:  # the next window's other tiles load meanwhile
                    idle -= busy[port] - transfer
                out[port] = max(out.get(port, 0), max(0, idle) / slots)
            if not behind and program.window(operand, links[y][1])[0] >= g:
                own = mem.transfer_cycles(*links[y], middle.link_bytes[y])
                stall = transfer + own + y_latency - (y_slots - 1) * middle.compute_cycles
                out["compute"] = max(out.get("compute", 0), stall)
    return out


def _store_ahead(program: Program, g: int, radix: int, outer: int) -> int:
    """With K innermost, the unit's stall in the group after one of class ``outer``: the output
    tile the group closes leaves through a level with one port for reads and writes (a DRAM
    bus, ``shared_port``) that an input streamed one tile per step (a window inside the group,
    ``s`` slots) also loads through. The store, requested when the epilogue (and the C hops
    before) end, goes ahead (first come, first served) of the input's next request, made at a
    step boundary ``gap`` cycles later; that tile is then usable ``store + tile + latency −
    gap`` after the request, where ``s − 1`` steps' compute were to hide it (1575×1791×464
    W4A4-static on the edge NPU: a 64 KB C tile, 1,922 cycles on the LPDDR bus, ahead of an
    8 KB B tile, with 702-cycle steps: −14.9 % → −0.9 %). Not after the last group, where no
    input tile follows. On levels with separate read and write ports (the cube's L2, whose
    read port both the L2 → HBM store and the L2 → L1 loads use) it is not charged: there the
    DES's stalls are a tenth of it, and charging it moved the agreement grid away from the DES
    (``benchmarks/bench_engine.py``; seeds 7–16: 85 cases above 5 % against 81)."""
    count = program.count[g]
    if _inside_k(program) != 1:
        return 0
    last = program.class_of(outer + _class_of(count - 1, count) * radix)
    if not last.closes_accumulator:
        return 0
    step = program.class_of(outer + _class_of(count // 2, count) * radix)
    links, hops = _plan(program)[:2]
    mem = program.memory
    ready = _epilogue(program, last.outputs)  # when the tile's first C hop is requested
    stall = 0
    for k in _chain(program, "C"):
        link, nbytes = program.links[k], last.link_bytes[k]
        if not nbytes:
            continue
        held = dict(mem.port_cycles(link.src, link.dst, nbytes))  # each port at its own rate
        gap = -ready % step.compute_cycles
        for j, _, _, latency, slots, _ in hops:
            ln = program.links[j]
            common = [held[p] for p in mem.hop_ports(*links[j]) if p in held and p[1] == "rw"]
            if not (step.link_bytes[j] and common) or program.window(ln.operand, ln.dst)[0] < g:
                continue
            store = max(common)  # the input's request waits while the store holds the port
            tile = mem.transfer_cycles(*links[j], step.link_bytes[j])
            hidden = (slots - 1) * step.compute_cycles
            stall = max(stall, store + tile + latency - gap - hidden)
        ready += mem.transfer_cycles(link.src, link.dst, nbytes) + mem.latency(link.src)
    return max(0, stall)


def _write_block(program: Program, g: int, radix: int, outer: int) -> tuple[dict, int]:
    """(per port, the idle of a port feeding a streamed input while one output tile of a group
    of class ``outer`` moves into a level that input is also written into; how many output
    tiles the group closes). The cube's L0C → L2 move holds L2's write port, which B's HBM → L2
    tiles need too: a hop takes its ports together, so B's next tile waits for the move and
    HBM's port idles, less what the tile in flight when the move starts still has there after
    its part of L2's port (its overhang ``o``), in expectation over when the move comes (the
    unit finishes at any point of a tile ``f`` cycles long on the feeding port, ``w`` on the
    shared one): ``o`` if during the shared part (the move waits for it), ``o/2`` on average
    if during the overhang, ``o (w + o/2) / f`` in all. 216×177×2362 FP16 on the cube: a 55 KB
    tile holds L2's write port 432 cycles, a 4 KB B tile HBM's 111 and L2's 32, and HBM idles
    419 cycles a tile in the DES's trace, 381 by the formula (model −11.7 % → +1.3 %). The
    move of the last tile of the run delays no input (``body_cycles`` takes it back)."""
    count = program.count[g]
    closing = 0
    for code in _group_codes(program, g, radix, outer):
        if program.class_of(code).closes_accumulator:
            closing += _digit_count(count, (code // radix) % 4)
    if not closing or count <= 2 * closing:
        # the port idles only once the tile before's store has left it, which takes more than
        # the input tiles (two) queued ahead of that store: with one or two steps an output
        # tile, the stores keep it busy through the moves (3878×2×15 FP16 on the cube)
        return {}, 0
    last = program.class_of(outer + _class_of(count - 1, count) * radix)
    step = program.class_of(outer + _class_of(count // 2, count) * radix)
    links, hops = _plan(program)[:2]
    mem = program.memory
    out: dict[object, float] = {}
    for k in _chain(program, "C"):
        link, nbytes = program.links[k], last.link_bytes[k]
        if not nbytes:
            continue
        held = dict(mem.port_cycles(link.src, link.dst, nbytes))
        into = mem.port(link.dst, "w")
        if link.dst == 0 or into not in held:
            continue
        for j, *_ in hops:
            src, dst = links[j]
            if dst != link.dst or not step.link_bytes[j]:
                continue
            mine = dict(mem.port_cycles(src, dst, step.link_bytes[j]))
            feed = mem.port(src, "r")
            if into not in mine or feed in held:
                continue
            # the tile in flight still holds the feeding port for its overhang after its part
            # of the shared one: all of it if the move came while that part ran (and waited
            # for it), on average half if it came during the overhang
            overhang = max(0, mine[feed] - mine[into])
            idle = held[into] - overhang * (mine[into] + overhang / 2) / mine[feed]
            if idle > 0:
                out[feed] = max(out.get(feed, 0), idle)
    return out, closing
