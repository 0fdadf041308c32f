"""Tile shapes and loop order for a matmul on a compute unit.

A matmul runs as a loop nest ``for outer: for middle: for k:`` over tiles of ``tm×tk×tn``; the
reduction ``k`` is innermost so partial sums stay in the accumulator level. Each iteration is a
*step*: one tile of compute with its operand tiles.

* Systolic arrays: a step is one SCALE-Sim fold (``systolic_timing.fold_plan``): WS holds a
  (r·R)×C tile of W and streams all M rows; OS holds an R×C tile of Y and streams K; IS holds an
  (r·R)×C tile of X and streams all N columns.
* Cube units: the largest tile whose operand tiles fit the innermost buffers (L0A/L0B/L0C) with
  their double buffering, in multiples of the cube block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accel_sim.arch.schema import Arch, CubeUnit, MemoryLevel, SystolicArray
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.systolic_timing import fold_plan
from accel_sim.errors import UserInputError


@dataclass(frozen=True)
class Tiling:
    """Tile sizes (elements), loop counts and loop order of one matmul."""

    tm: int
    tk: int
    tn: int
    order: tuple[str, str]  # (outer, middle) dims, each "m" or "n"; k is always innermost
    fold_cycles: int = 0  # systolic: cycles per fold (SCALE-Sim); 0 for cube units
    # added to the last step: systolic, SCALE-Sim's total minus folds × fold_cycles (its −1);
    # cube, the pipeline fill + drain paid once per matmul
    last_step_adjust: int = 0

    def counts(self, op: MatmulOp) -> dict[str, int]:
        return {
            "m": math.ceil(op.M / self.tm),
            "k": math.ceil(op.K / self.tk),
            "n": math.ceil(op.N / self.tn),
        }


def innermost_level(arch: Arch, operand: str) -> MemoryLevel:
    """The level that feeds (A, B) or receives (C) the compute unit."""
    return arch.path(operand)[-1]


def tile_bytes(rows: int, cols: int, bits: float) -> int:
    """Bytes of a rows×cols tile at ``bits`` per element (rounded up to whole bytes)."""
    return math.ceil(rows * cols * bits / 8)


def _pow2_multiples(block: int, limit: int) -> list[int]:
    """block, 2·block, 4·block, ... up to the first value ≥ limit."""
    sizes, size = [], block
    while True:
        sizes.append(size)
        if size >= limit:
            return sizes
        size *= 2


def _cube_tiling(arch: Arch, unit: CubeUnit, op: MatmulOp, rate: int) -> Tiling:
    l0a, l0b, l0c = (innermost_level(arch, x) for x in "ABC")
    best: tuple | None = None
    for tm in _pow2_multiples(unit.block_m, op.M):
        for tn in _pow2_multiples(unit.block_n, op.N):
            c_bytes = tile_bytes(tm, tn, op.accumulator_bits)
            if l0c.buffers * c_bytes > l0c.capacity_bytes:
                break
            for tk in _pow2_multiples(unit.block_k * rate, op.K):
                a_bytes = tile_bytes(tm, tk, op.a_bits)
                b_bytes = tile_bytes(tk, tn, op.b_bits)
                same = l0a is l0b
                need_a = l0a.buffers * (a_bytes + (b_bytes if same else 0))
                if need_a > l0a.capacity_bytes or l0b.buffers * b_bytes > l0b.capacity_bytes:
                    break
                em, ek, en = min(tm, op.M), min(tk, op.K), min(tn, op.N)
                steps = math.ceil(op.M / tm) * math.ceil(op.K / tk) * math.ceil(op.N / tn)
                # fewest steps; then the least operand traffic per MAC; then squarer tiles
                key = (steps, (em * ek + ek * en) / (em * ek * en), abs(tm - tn))
                if best is None or key < best[0]:
                    best = (key, tm, tk, tn)
    if best is None:
        raise UserInputError(
            arch.origin,
            f"{op.name}: even one {unit.block_m}×{unit.block_k * rate}×{unit.block_n} block does "
            f"not fit the buffers {l0a.name}/{l0b.name}/{l0c.name} with their double buffering",
            "memory",
        )
    _, tm, tk, tn = best
    # the loop order is chosen by the step program, which knows what each level retains
    return Tiling(tm=tm, tk=tk, tn=tn, order=("m", "n"),
                  last_step_adjust=unit.pipeline_latency_cycles)  # fmt: skip


def _systolic_tiling(unit: SystolicArray, op: MatmulOp, rate: int) -> Tiling:
    folds = fold_plan(
        unit.dataflow, unit.rows, unit.cols, op.M, op.K, op.N, rate, unit.drain_overlap
    )
    order = {"ws": ("n", "m"), "os": ("m", "n"), "is": ("m", "n")}[unit.dataflow]
    adjust = folds.total_cycles - folds.folds * folds.cycles_per_fold
    return Tiling(
        tm=folds.tm,
        tk=folds.tk,
        tn=folds.tn,
        order=order,
        fold_cycles=folds.cycles_per_fold,
        last_step_adjust=adjust,
    )


def unit_rate(arch: Arch, op: MatmulOp) -> int:
    """MACs per cycle of ``op.precision`` relative to FP16 on this unit (the rate table)."""
    rate = arch.compute.rates.get(op.precision)
    if rate is None or rate <= 0:
        raise UserInputError(
            arch.origin,
            f"{op.name}: the compute unit has no {op.precision} rate; it supports "
            f"{sorted(k for k, v in arch.compute.rates.items() if v > 0)}",
            "compute.rates",
        )
    return rate


def choose_tiling(arch: Arch, op: MatmulOp) -> Tiling:
    rate = unit_rate(arch, op)
    if isinstance(arch.compute, SystolicArray):
        return _systolic_tiling(arch.compute, op, rate)
    return _cube_tiling(arch, arch.compute, op, rate)


def step_compute_cycles(arch: Arch, tiling: Tiling, rate: int, tm: int, tk: int, tn: int) -> int:
    """Cycles the unit is busy on one step of actual size tm×tk×tn.

    Cube: one ``block_m×(block_k·r)×block_n`` block per cycle, edge blocks padded.
    Systolic: SCALE-Sim pads edge folds, so every fold costs ``fold_cycles``.
    Divided by the architecture's ``efficiency["matmul"]`` (GPU proxies' calibration).
    """
    unit = arch.compute
    if isinstance(unit, SystolicArray):
        cycles = tiling.fold_cycles
    else:
        cycles = (
            math.ceil(tm / unit.block_m)
            * math.ceil(tk / (unit.block_k * rate))
            * math.ceil(tn / unit.block_n)
        )
    efficiency = arch.efficiency.get("matmul", 1.0)
    return cycles if efficiency == 1.0 else math.ceil(cycles / efficiency)
