"""What one step tile weighs and costs: an operand piece's bytes (elements at their width plus
its block scales, the metadata streams' bytes) and the unit's busy cycles on one step. The one
place the engine, its closed-form model, the mapper and the reports size a tile (bytes, cycles).
"""

from __future__ import annotations

import math

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.memory import MemorySystem


def tile_bytes(rows: int, cols: int, bits: float) -> int:
    """Bytes of a rows×cols tile at ``bits`` per element, rounded up to whole bytes."""
    return math.ceil(rows * cols * bits / 8)


def scale_bytes(op: MatmulOp, operand: str, rows: int, cols: int, tk: int | None = None) -> int:
    """Bytes of the metadata stream (``op.scales(operand)``, :class:`~accel_sim.dataflow.plan.
    Scales`) of a rows×cols piece of ``operand`` (``OPERAND_DIMS`` order: A is m×k, B k×n) held
    as step tiles ``tk`` deep along K (default: one tile): ``lines × blocks × bits / 8``, lines
    the rows of A or columns of B, rounded up to whole bytes; 0 without scales."""
    scales = op.scales(operand)
    if scales is None:
        return 0
    lines, k = (rows, cols) if operand == "A" else (cols, rows)
    return scales.bytes(lines, k, tk)


def operand_bytes(op: MatmulOp, operand: str, rows: int, cols: int,
                  tk: int | None = None) -> int:  # fmt: skip
    """Bytes of a rows×cols piece of ``operand`` as it sits in a buffer and crosses a hop: its
    elements at the operand's width plus its block scales (a block-scale stream travels with its
    tile); epilogue scales (``block == 0``) are not part of a tile (:meth:`Program._build_class`
    charges them). The one place the engine, its closed-form model and the mapper size a tile."""
    if operand == "A":
        nbytes, scales = math.ceil(rows * cols * op.a_bits / 8), op.a_scales  # tile_bytes
        if scales is not None and scales.block:
            nbytes += scales.bytes(rows, cols, tk)  # scale_bytes: A's lines are its rows
    elif operand == "B":
        nbytes, scales = math.ceil(rows * cols * op.b_bits / 8), op.b_scales
        if scales is not None and scales.block:
            nbytes += scales.bytes(cols, rows, tk)  # B's lines are its columns
    else:
        nbytes = math.ceil(rows * cols * op.c_bits / 8)
    return nbytes


def matmul_efficiency(arch: Arch, precision: str) -> float:
    """``efficiency["matmul_<precision>"]`` if the file gives one, else ``efficiency["matmul"]``,
    else 1 (``arch/schema.py``: GPU proxies derate each precision against its own peak)."""
    eff = arch.efficiency
    return eff.get(f"matmul_{precision}", eff.get("matmul", 1.0))


def step_busy_cycles(arch: Arch, memory: MemorySystem, op: MatmulOp, tile, rate: int,
                     inner: dict[str, int], m: int, k: int, n: int) -> int:  # fmt: skip
    """Cycles the unit is busy on one step of extents ``m×k×n``: the unit's own step time
    (divided by the precision's matmul efficiency, :func:`matmul_efficiency`), or longer when
    its accumulator level cannot keep up.
    A step accumulates its output tile in place through the accumulator level's write port (a
    read-modify-write inside the bank; the read port serves the drain). The innermost A and B
    buffers are taken to feed the unit at its rate (their read ports are sized for it: the
    cube's L0A/L0B, a systolic array's edge SRAM banks)."""
    unit = arch.compute.step_cycles(tile, rate, m, k, n)
    eff = matmul_efficiency(arch, op.precision)
    if eff != 1.0:
        unit = math.ceil(unit / eff)
    acc = memory.access_cycles(inner["C"], 0, tile_bytes(m, n, op.accumulator_bits))
    return max(unit, acc)
