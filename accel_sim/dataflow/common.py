"""Building blocks the dataflow modules share (vector passes, scale widths)."""

from __future__ import annotations

from accel_sim.dataflow.plan import VectorOp
from accel_sim.workload.gemm import Gemm

FP16_BYTES = 2
#: An FP32 scale per row (per-token) or column (per-channel): a metadata stream of the matmul
#: (``MatmulOp.a_scale_bits_per_row`` / ``b_scale_bits_per_col``), not bits inside its tiles.
PER_CHANNEL_SCALE_BITS = 32


def absmax_pass(gemm: Gemm, columns: int | None = None, name: str = "absmax") -> VectorOp:
    """Per-token |x| maximum over X (FP16): one compare per element, reads X once."""
    k = gemm.K if columns is None else columns
    return VectorOp(name, gemm.M * k, 1.0, gemm.M * k * FP16_BYTES, 0, gemm.count)


def quantize_pass(gemm: Gemm, out_bits: float, columns: int | None = None,
                  name: str = "quantize") -> VectorOp:  # fmt: skip
    """Scale, round and convert X (FP16) to ``out_bits``: 2 ops per element (multiply, convert);
    reads X, writes the quantized copy."""
    k = gemm.K if columns is None else columns
    elements = gemm.M * k
    return VectorOp(
        name, elements, 2.0, elements * FP16_BYTES, int(elements * out_bits / 8 + 0.5), gemm.count
    )
