"""Action counts: what the hardware did, kept apart from what it costs (energy/model.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from accel_sim.engine.program import Program
from accel_sim.engine.step_costs import operand_bytes, tile_bytes


@dataclass
class ActionCounts:
    """Counts of energy-relevant actions.

    Attributes:
        macs: useful multiply-accumulates per precision (``{"int8": ...}``).
        bytes_read, bytes_written: bytes per memory level name.
        vector_ops: element operations on the vector unit.
        comparator_ops: early-bird comparisons.
        decodes: elements decoded at the array edge per decoder (``MatmulOp.decode``:
            ``{"olive4": ...}``), priced as the compute unit's ``decode_<decoder>``.
    """

    macs: Counter = field(default_factory=Counter)
    bytes_read: Counter = field(default_factory=Counter)
    bytes_written: Counter = field(default_factory=Counter)
    vector_ops: float = 0.0
    comparator_ops: int = 0
    decodes: Counter = field(default_factory=Counter)

    def add(self, other: ActionCounts, times: int = 1) -> None:
        for mine, theirs in (
            (self.macs, other.macs),
            (self.bytes_read, other.bytes_read),
            (self.bytes_written, other.bytes_written),
            (self.decodes, other.decodes),
        ):
            for key, value in theirs.items():
                mine[key] += value * times
        self.vector_ops += other.vector_ops * times
        self.comparator_ops += other.comparator_ops * times


def matmul_counts(program: Program) -> ActionCounts:
    """Exact counts of one matmul: transfers over every hop, plus the compute unit's own reads of
    its innermost A/B buffers (each step reads its tiles once) and accumulator read-modify-writes
    in the innermost C level (a read except on an output tile's first k-step, a write every
    step). Scale streams are in both: in the hops' bytes (``Program.link_bytes``) and, for block
    scales, in the unit's reads of its tiles (:func:`~accel_sim.engine.program.operand_bytes`). With
    ``op.decode``, every element of those A and B reads is decoded once as it enters the array."""
    arch, op = program.arch, program.op
    counts = ActionCounts()
    for precision, macs in op.macs_by_precision().items():
        counts.macs[precision] += macs
    for link, nbytes in zip(program.links, program.link_bytes):
        counts.bytes_read[arch.memory[link.src].name] += nbytes
        counts.bytes_written[arch.memory[link.dst].name] += nbytes
    l0 = {x: arch.path(x)[-1].name for x in "ABC"}
    acc_bits = op.accumulator_bits
    for code, n in program.multiplicity.items():
        ext = program.extents(code)
        a_elements, b_elements = ext["m"] * ext["k"], ext["k"] * ext["n"]
        counts.bytes_read[l0["A"]] += n * operand_bytes(op, "A", ext["m"], ext["k"])
        counts.bytes_read[l0["B"]] += n * operand_bytes(op, "B", ext["k"], ext["n"])
        if op.decode is not None:
            counts.decodes[op.decode] += n * (a_elements + b_elements)
        acc = tile_bytes(ext["m"], ext["n"], acc_bits)
        counts.bytes_written[l0["C"]] += n * acc
        if not program.class_of(code).starts_tile:
            counts.bytes_read[l0["C"]] += n * acc
    counts.vector_ops += op.M * op.N * op.count * op.epilogue_ops_per_output
    return counts

