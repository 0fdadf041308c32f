"""The first pass of the closed-form twin (``twin.py``): where an operand's panel is kept across
the outermost iterating loop, that loop's first iteration loads it and every later one reads it
on chip, so the first pass can be bound by a load port and the rest by the unit. The whole-run
chains (``twin_chains.py``) spread the loads over the run; this chain puts every later step
after the first pass's last load. Cycles throughout.
"""

from __future__ import annotations

import math
from collections import defaultdict

from accel_sim.engine.program import Program
from accel_sim.engine.twin_chains import (
    _heads,
    _lead,
    _port_tails,
    _step_loads,
    late_tiles,
)
from accel_sim.engine.twin_steps import _epilogue, _store_ports, _way_out


def first_pass_estimate(program: Program) -> float:
    """The longest of :func:`_first_pass_chains` (-inf without a first pass): an estimate term,
    not a bound — the stores it puts ahead of the pass's last load are an estimate."""
    n = program.n_steps
    last = program.step_at(n - 1)
    out_last = _way_out(program, last, _epilogue(program, last.outputs), {})
    chains = _first_pass_chains(program, _heads(program), out_last)
    return max(chains.values(), default=-math.inf)


def _first_pass_chains(program: Program, heads: dict, out_last: int) -> dict:
    """Per load port, the chain through the first iteration of the outermost iterating loop
    (its *first pass*), where an operand kept across that loop is loaded once and read from
    on-chip for the rest: the pass's last step computes only after every load of the pass on
    the port (its movers take their steps in order) and the stores the port serves before the
    last of them, then that load's way in; every later step computes after it, then the last
    tile's way out (``out_last``). A mapping that keeps B's panel in L2 across M is bound by
    DRAM in its first M pass and by compute after it; the whole-run chains average the two.
    Stores: those of the pass's tiles but the ones closing within reach of its last load's way
    in (:func:`twin_chains.late_tiles`, on the pass's own load per step)."""
    count, radix = program.count, program._radix
    r = next((i for i, c in enumerate(count) if c > 1), None)
    if r is None:
        return {}
    first_loads: dict = defaultdict(int)
    first_stores: dict = defaultdict(int)
    rest, tiles = 0, 0
    for code, n in program.multiplicity.items():
        step = program.class_of(code)
        if (code // radix[r]) % 4:
            rest += n * step.compute_cycles
            continue
        for port, cycles in _step_loads(program, step).items():
            first_loads[port] += n * cycles
        if step.closes_accumulator:
            tiles += n
            for port, cycles in _store_ports(program, step, {}).items():
                first_stores[port] += n * cycles
    if not rest:
        return {}
    pass_steps = math.prod(count[r + 1 :])
    last = program.step_at(pass_steps - 1)
    tails, leads = _port_tails(program, last)
    out = {}
    for port, tail in tails.items():
        stores = first_stores.get(port, 0)
        if stores:  # (the pass's last tile closes after its last load, at the earliest)
            lead = min(_lead(program, *hop) for hop in leads[port])
            per_step = (first_loads[port] + stores) / pass_steps
            late = 1 + late_tiles(program, lead, tail + last.compute_cycles, per_step, tiles)
            stores = stores * (tiles - late) / tiles
        out[port] = (heads.get(port, 0) + first_loads[port] + stores + tail + last.compute_cycles
                     + rest + out_last)  # fmt: skip
    return out
