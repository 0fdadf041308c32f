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

The recurrence is shift-invariant, so runs of tiles of one class — and runs of whole rows of
tiles that repeat — are simulated until the state (every time relative to the last compute's
end) recurs, then jumped over (exact once it recurs; after a few runs without recurrence, the
last run's increment is extrapolated).
"""

from __future__ import annotations

import math

from accel_sim.engine.program import Program
from accel_sim.engine.twin_steps import _chain, _epilogue, output_tiles

#: Runs of one repeated sequence simulated before the last runs' increment is extrapolated.
_TRIES = 8


def tile_pipeline(program: Program, fill: int, queued: dict[int, int], ahead: int,
                  after: int) -> int:  # fmt: skip
    """When the last output tile has left: the recurrence from ``fill`` (the first compute's
    start), ``queued`` (per output-tile class, the loads ahead of its C hop beyond its
    epilogue; none for the last ``ahead`` tiles, whose inputs' successors do not exist) and
    ``after`` (the last tile's way out beyond its first C hop)."""
    mem, links = program.memory, program.links
    c0 = links[_chain(program, "C")[0]]
    b = program.buffers("C", c0.src)
    tiles = output_tiles(program)
    cost = {}
    for outer, (_, compute, step) in tiles.items():
        nbytes = step.link_bytes[_chain(program, "C")[0]]
        port = max((c for _, c in mem.port_cycles(c0.src, c0.dst, nbytes)), default=0)
        cost[outer] = (compute, _epilogue(program, step.outputs), queued.get(outer, 0),
                       mem.transfer_cycles(c0.src, c0.dst, nbytes), port)  # fmt: skip
    r = program.window("C", program.inner["C"])[0]
    loops = [i for i in range(r + 1) if program.count[i] > 1]
    # state: compute end, vector end, port free, the last b C-hop ends (oldest first), tiles
    # left before the last `ahead`
    state = [fill, fill, 0, [0] * b, program.n_steps // math.prod(
        program.count[r + 1 :]) - ahead]  # fmt: skip
    once = sum(3 * program._radix[i] for i in range(r + 1) if program.count[i] == 1)
    _walk(program, loops, 0, once, cost, state)
    return state[3][-1] + after


def _tile(state: list, cost: tuple) -> None:
    compute, epilogue, queued, transfer, port = cost
    c_end, v_end, p_free, slots, left = state
    state[4] = left - 1
    if left <= 0:
        queued = 0
    c_end = max(c_end, slots[0]) + compute
    v_end = max(c_end, v_end) + epilogue
    start = max(v_end, c_end + epilogue + queued, p_free)
    state[:3] = c_end, v_end, start + port
    slots.pop(0)
    slots.append(start + transfer)


def _relative(state: list) -> tuple:
    ref = state[0]
    return (state[1] - ref, state[2] - ref, *(s - ref for s in state[3]))


def _shift(state: list, cycles: int, tiles: int) -> None:
    state[4] -= tiles
    state[0] += cycles
    state[1] += cycles
    state[2] += cycles
    state[3][:] = [s + cycles for s in state[3]]


def _walk(program: Program, loops: list[int], k: int, code: int, cost: dict, state: list):
    """Every tile of loops ``loops[k:]`` (outermost first) under the class digits ``code`` of
    the loops outside them: first index, the middle ones (one repeated sequence), last."""
    if k == len(loops):
        _tile(state, cost[code])
        return
    i = loops[k]
    n, radix = program.count[i], program._radix[i]
    _walk(program, loops, k + 1, code, cost, state)  # FIRST (digit 0)
    middle, history = n - 2, []  # per run simulated: (relative state, compute end, tiles)
    while middle > 0:
        _walk(program, loops, k + 1, code + radix, cost, state)
        middle -= 1
        rel = _relative(state)
        # a period of p runs (the slots alternate: often p = b): the state recurs p runs later
        period = next((p for p in range(1, len(history) + 1) if history[-p][0] == rel), 0)
        if not period and len(history) >= _TRIES:
            period = len(state[3])  # no recurrence yet: extrapolate the last b runs' rate
        if period and middle >= period:
            _, c_end, left = history[-period]
            tiles = left - state[4]  # per period
            # (not into the last `ahead` tiles, whose loads differ)
            jumps = min(middle // period, max(0, state[4] // tiles - 1))
            _shift(state, (state[0] - c_end) * jumps, tiles * jumps)
            middle -= jumps * period
        history.append((rel, state[0], state[4]))
    _walk(program, loops, k + 1, code + 2 * radix, cost, state)  # LAST
