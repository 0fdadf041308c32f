"""FP16 baseline (docs/dataflows.md): one matmul at R16, X, W and Y in FP16."""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.plan import MatmulOp, Plan


@register("fp16", description="FP16 activations and weights, one matmul at the FP16 rate")
def build(gemm, arch, stats, knobs) -> Plan:
    op = MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "fp16", 16, 16, 16, count=gemm.count)
    return Plan("fp16", gemm, (op,))
