"""An Ascend-like cube unit: one ``block_m×block_k×block_n`` FP16 block per cycle.

At rate r the K depth of a block grows r-fold (FP8: 16×32×16, FP4: 16×64×16 on the default
16×16×16 cube). A step is any multiple of the block in each dimension; edge blocks are padded.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, StrictInt

from accel_sim.arch.base import MAX_LATENCY_CYCLES
from accel_sim.arch.units import register
from accel_sim.arch.units.base import ComputeUnit, StepTile, pow2_multiples


@register
class CubeUnit(ComputeUnit):
    """An Ascend-like cube (Da Vinci core, HPCA 2021): ``block_m·block_k·block_n`` MACs/cycle."""

    kind: Literal["cube"] = "cube"
    block_m: StrictInt = Field(16, gt=0, le=4096, description="M rows of one block (≤ 4096)")
    block_k: StrictInt = Field(16, gt=0, le=4096, description="K depth of one FP16 block (≤ 4096)")
    block_n: StrictInt = Field(16, gt=0, le=4096, description="N columns of one block (≤ 4096)")
    pipeline_latency_cycles: StrictInt = Field(
        0, ge=0, le=MAX_LATENCY_CYCLES,
        description="fill + drain of the cube pipeline, paid once per matmul (cycles, ≤ 1e6)",
    )  # fmt: skip

    @property
    def fp16_macs_per_cycle(self) -> int:
        return self.block_m * self.block_k * self.block_n

    def step_dims(self, M: int, K: int, N: int, rate: int) -> tuple[list[int], ...]:
        return (pow2_multiples(self.block_m, M), pow2_multiples(self.block_k * rate, K),
                pow2_multiples(self.block_n, N))  # fmt: skip

    def step_cycles(self, tile: StepTile, rate: int, m: int, k: int, n: int) -> int:
        return (
            math.ceil(m / self.block_m)
            * math.ceil(k / (self.block_k * rate))
            * math.ceil(n / self.block_n)
        )

    def once_cycles(self, tile: StepTile, rate: int) -> int:
        return self.pipeline_latency_cycles

    def output_tile_side(self) -> int:
        return self.block_m

    def describe(self) -> str:
        return f"cube {self.block_m}x{self.block_k}x{self.block_n}, rates {self.rates}"
