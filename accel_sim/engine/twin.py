"""Closed-form twin of the DES: the same step program, costed without simulation.

For a pipeline whose stages are the hops, the compute unit, the epilogue and the store hops,
each step occupies every shared port and the compute unit for a known time (its *busy* times).
In steady state a step leaves the pipeline once per ``period = max over resources of busy`` —
the slowest resource sets the pace — so

    cycles ≈ fill + Σ_steps period(step) + drain

where ``fill`` is the time the first step's inputs need to reach the compute unit beyond what
their own bottleneck already accounts for, and ``drain`` the time the last output tile needs to
get back to DRAM. Each level's slots also bound the period (Little's law): a slot is held while
its tile arrives, waits out the source latency and leaves through the next port, where it may
queue behind every other transfer of the step (taken at its worst). Where consecutive steps
differ (the first row of a panel loads more than the rest) double buffering lets a heavy step
borrow slack from a light neighbour, which the sum of per-step maxima does not see: the twin then
overestimates, and tests document each regime's gap.
"""

from __future__ import annotations

import math
from collections import defaultdict

from accel_sim.engine.program import Program, hop_bandwidth, port_of


def _hop_cycles(program: Program, link_index: int, nbytes: int) -> int:
    return math.ceil(nbytes / hop_bandwidth(program, link_index)) if nbytes else 0


def step_period(program: Program, code: int) -> int:
    """Cycles between consecutive steps of class ``code`` in steady state."""
    step = program.class_of(code)
    busy: dict[object, int] = defaultdict(int)
    busy["compute"] = step.compute_cycles
    for j, nbytes in enumerate(step.link_bytes):
        cycles = _hop_cycles(program, j, nbytes)
        busy[port_of(program, j)] += cycles
    ports = dict(busy)
    # Little's law on every level's slots: a slot is held while its tile comes in, waits out the
    # source latency and goes on (into the next level, or through the compute unit)
    for operand in "AB":
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        for k, j in enumerate(chain):
            held = _hop_cycles(program, j, step.link_bytes[j])
            if step.link_bytes[j]:
                held += program.arch.memory[program.links[j].src].latency_cycles
            if k + 1 < len(chain):
                # the tile leaves through the next hop's port, which it shares with every other
                # transfer of the step on that port: in the worst case it waits for all of them
                nxt = chain[k + 1]
                own = _hop_cycles(program, nxt, step.link_bytes[nxt])
                held += ports.get(port_of(program, nxt), own) if own else 0
            else:
                held += step.compute_cycles
            level = program.arch.memory[program.links[j].dst]
            busy[("slots", operand, j)] = math.ceil(held / level.buffers)
    if program.op.epilogue_ops_per_output and step.outputs:
        lanes = program.arch.vector.bytes_per_cycle // 2
        busy["vector"] = math.ceil(step.outputs * program.op.epilogue_ops_per_output / lanes)
    return max(busy.values())


def twin_cycles(program: Program) -> int:
    """Closed-form estimate of :func:`accel_sim.engine.des.simulate_program`'s cycles."""
    arch = program.arch
    first, last = program.step_at(0), program.step_at(program.n_steps - 1)
    fill = 0
    for operand in "AB":
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        path = sum(
            _hop_cycles(program, j, first.link_bytes[j])
            + (arch.memory[program.links[j].src].latency_cycles if first.link_bytes[j] else 0)
            for j in chain
        )
        fill = max(fill, path)
    drain = 0
    if program.op.epilogue_ops_per_output:
        lanes = arch.vector.bytes_per_cycle // 2
        drain += math.ceil(last.outputs * program.op.epilogue_ops_per_output / lanes)
    c_chain = [j for j, ln in enumerate(program.links) if ln.operand == "C"]
    for k, j in enumerate(c_chain):
        drain += _hop_cycles(program, j, last.link_bytes[j])
        if k < len(c_chain) - 1:
            drain += arch.memory[program.links[j].src].latency_cycles
    # step 0 is fully on the critical path (fill + its compute); every later step adds its period
    body = sum(n * step_period(program, code) for code, n in program.multiplicity.items())
    body -= step_period(program, program.code(0))
    return fill + first.compute_cycles + body + drain
