"""W4A4 static (PrefixQuant O2; docs/dataflows.md): INT4 weights per channel, per-tensor static INT4
activations, one matmul at R4. The static scale is fused into the producer of X (no absmax or
quantize pass); the epilogue dequantizes and requantizes (2 multiplies per output). PrefixQuant's
prefixed tokens only lengthen attention's K/V (``workload/models.py``), not the linear layers.
"""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import PER_CHANNEL_SCALE_BITS
from accel_sim.dataflow.plan import MatmulOp, Plan


@register("w4a4_static", {}, "INT4 per-channel weights, per-tensor static INT4 activations")
def build(gemm, arch, stats, knobs) -> Plan:
    op = MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "int4", 4, 4, 16,
                  epilogue_ops_per_output=2.0, count=gemm.count,
                  b_scale_bits_per_col=PER_CHANNEL_SCALE_BITS)  # fmt: skip
    return Plan("w4a4_static", gemm, (op,), (), dict(knobs))
