"""LLM.int8() (Dettmers et al. 2022; docs/dataflows.md): outlier columns in FP16, the rest in INT8.

Vector unit: find the outlier columns (any |x| > 6: one compare per element), gather them
(M·n_out FP16), per-token absmax and quantize the rest to INT8. Matrix unit: M×K×N at R8 (outlier
columns zeroed) and M×n_out×N at R16 against the FP16 rows of W; the FP16 result is added in
its epilogue. On a unit without an FP16 rate (an INT-only NPU, MUXQ's target) the FP16 product
runs on the vector unit: 2 ops (multiply, add) per MAC — the inefficiency MUXQ §1 points at.

Dependencies (docs/dataflows.md, "Overlap and fusion"): the outlier columns are known only once
detection has seen every token, so the gather and the absmax wait for all of it; the quantize
and the INT8 matmul then go row block by row block, the FP16 product after the gather.
"""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import (
    FP16_BYTES,
    PER_CHANNEL_SCALES,
    absmax_pass,
    quantize_pass,
)
from accel_sim.dataflow.outliers import outlier_channel_count
from accel_sim.dataflow.plan import Edge, MatmulOp, Plan, VectorOp

KNOBS = {"threshold": 6.0, "outlier_channels": -1}


@register(
    "llm_int8",
    KNOBS,
    "INT8 matmul + FP16 matmul of the outlier columns",
    needs_stats=True,
    error_key=lambda k, g: "llm_int8" if k["threshold"] == 6.0 else None,
)
def build(gemm, arch, stats, knobs) -> Plan:
    n_out, source = outlier_channel_count(gemm, stats, knobs, "llm_int8")
    ops: list = [VectorOp("detect_outliers", gemm.M * gemm.K, 1.0, gemm.M * gemm.K * FP16_BYTES,
                          0, gemm.count)]  # fmt: skip
    notes = [f"outlier channels n_out={n_out} ({source})"]
    if n_out:
        moved = gemm.M * n_out
        ops.append(VectorOp("gather_outliers", moved, 1.0, moved * FP16_BYTES, moved * FP16_BYTES,
                            gemm.count))  # fmt: skip
    ops += [absmax_pass(gemm), quantize_pass(gemm, 8)]
    ops.append(MatmulOp("int8_part", gemm.M, gemm.K, gemm.N, "int8", 8,
                        8, 16, epilogue_ops_per_output=2.0, count=gemm.count,
                        b_scales=PER_CHANNEL_SCALES))  # fmt: skip
    if n_out and arch.compute.rates.get("fp16"):
        ops.append(MatmulOp("fp16_outliers", gemm.M, n_out, gemm.N, "fp16", 16, 16, 16,
                            epilogue_ops_per_output=1.0, count=gemm.count))  # fmt: skip
    elif n_out:
        macs = gemm.M * n_out * gemm.N
        ops.append(VectorOp("fp16_outliers_on_vector_unit", macs, 2.0,
                            (gemm.M * n_out + n_out * gemm.N) * FP16_BYTES,
                            gemm.M * gemm.N * FP16_BYTES, gemm.count))  # fmt: skip
        notes.append("no FP16 matrix rate on this unit: the FP16 outlier product runs on the "
                     "vector unit")  # fmt: skip
    edges = [Edge("detect_outliers", "absmax", streamed=False), Edge("absmax", "quantize"),
             Edge("quantize", "int8_part")]  # fmt: skip
    if n_out:
        edges.append(Edge("detect_outliers", "gather_outliers", streamed=False))
        edges.append(Edge("gather_outliers", ops[-1].name))
        edges.append(Edge("int8_part", ops[-1].name))  # its result is added onto int8_part's
    return Plan("llm_int8", gemm, tuple(ops), tuple(notes), {**knobs, "outlier_channels": n_out},
                tuple(edges))  # fmt: skip
