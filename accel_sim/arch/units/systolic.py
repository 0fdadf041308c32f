"""An R×C systolic array (WS/OS/IS); fold timing is SCALE-Sim v3's (``engine/systolic_timing.py``).

A step is one fold. SCALE-Sim streams the whole stream dimension through every fold (WS: all M
rows of A; IS: all N columns of B; OS: all of K); the mapper may also cut the stream into
shorter chunks when the buffers cannot hold a whole stream, each chunk a fold of its own that pays
the fold's fill and skew again. With the full stream the cycles equal SCALE-Sim's exactly.

At a precision with rate r a PE does r MACs per cycle on packed operands: the reduction dimension
K is packed r-fold (WS/IS hold r·R rows of K per fold; OS streams ceil(K/r)).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, StrictBool, StrictInt

from accel_sim.arch.base import MAX_PARALLEL
from accel_sim.arch.units import register
from accel_sim.arch.units.base import ComputeUnit, StepTile, pow2_multiples


@register
class SystolicArray(ComputeUnit):
    """An R×C systolic array; ``dataflow`` picks the stationary operand."""

    kind: Literal["systolic"] = "systolic"
    rows: StrictInt = Field(gt=0, le=MAX_PARALLEL, description="PE rows R (≤ 2^20)")
    cols: StrictInt = Field(gt=0, le=MAX_PARALLEL, description="PE columns C (≤ 2^20)")
    dataflow: Literal["ws", "os", "is"]
    drain_overlap: StrictBool = Field(
        True,
        description="overlap each fold's output drain with the next fold's fill, as SCALE-Sim "
        "v3 does (its issue #4 discusses changing this); False adds the drain to every fold",
    )

    @property
    def fp16_macs_per_cycle(self) -> int:
        return self.rows * self.cols

    def step_dims(self, M: int, K: int, N: int, rate: int) -> tuple[list[int], ...]:
        R, C = self.rows, self.cols
        if self.dataflow == "ws":  # B stationary (r·R)×C; A streams rows of M
            return pow2_multiples(1, M), [rate * R], [C]
        if self.dataflow == "is":  # A stationary; B streams columns of N
            return [C], [rate * R], pow2_multiples(1, N)
        return [R], pow2_multiples(rate, K), [C]  # OS: K streams

    def streamed_dim(self) -> str:
        return {"ws": "m", "is": "n", "os": "k"}[self.dataflow]

    def _stream(self, rate: int, m: int, k: int, n: int) -> int:
        return {"ws": m, "is": n, "os": math.ceil(k / rate)}[self.dataflow]

    def step_cycles(self, tile: StepTile, rate: int, m: int, k: int, n: int) -> int:
        """SCALE-Sim's fold time P with the step's stream length T (edge folds in the array's
        rows/columns are padded to a full fold, as SCALE-Sim does)."""
        R, C, T = self.rows, self.cols, self._stream(rate, m, k, n)
        if self.dataflow == "os":
            return T + R + C - 2 + (0 if self.drain_overlap else R)
        return 2 * R + C + T - 2

    def once_cycles(self, tile: StepTile, rate: int) -> int:
        return -1  # SCALE-Sim reports the index of the last cycle (its issue #125)

    def output_tile_side(self) -> int:
        return min(self.rows, self.cols)

    def describe(self) -> str:
        return f"systolic {self.rows}x{self.cols} {self.dataflow.upper()}, rates {self.rates}"
