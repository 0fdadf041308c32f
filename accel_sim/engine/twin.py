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


def step_period(program: Program, code: int) -> int:
    """Cycles between consecutive steps of class ``code`` in steady state."""
    step = program.class_of(code)
    mem = program.memory
    busy: dict[object, int] = defaultdict(int)
    busy["compute"] = step.compute_cycles
    hop = []
    for j, (link, nbytes) in enumerate(zip(program.links, step.link_bytes)):
        cycles = mem.transfer_cycles(link.src, link.dst, nbytes)
        hop.append(cycles)
        for port in mem.hop_ports(link.src, link.dst):
            busy[port] += cycles
    for operand, l0 in (("A", 0), ("B", 1)):
        chain = [j for j, ln in enumerate(program.links) if ln.operand == operand]
        for k, j in enumerate(chain):
            closes = step.closes_src[chain[k + 1]] if k + 1 < len(chain) else step.closes_l0[l0]
            if not (step.opens[j] and closes and step.link_bytes[j]):
                continue  # a window longer than one step: its slots amortise over the window
            held = hop[j] + mem.latency(program.links[j].src)
            held += hop[chain[k + 1]] if k + 1 < len(chain) else step.compute_cycles
            level = program.arch.memory[program.links[j].dst]
            busy[("slots", j)] = math.ceil(held / level.buffers)
    if program.op.epilogue_ops_per_output and step.outputs:
        lanes = program.arch.vector.bytes_per_cycle // 2
        busy["vector"] = math.ceil(step.outputs * program.op.epilogue_ops_per_output / lanes)
    return max(busy.values())


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
    # step 0 is fully on the critical path (fill + its compute); every later step adds its period
    body = sum(n * step_period(program, code) for code, n in program.multiplicity.items())
    body -= step_period(program, program.code(0))
    return fill + first.compute_cycles + body + drain
