"""MUXQ (MUXQ §3, Eqs. 4–7; docs/dataflows.md): outlier columns in an INT8 Aux matrix.

Outlier channels are those with any |x| > 6 (LLM.int8()'s criterion). Body = X with the outlier
columns shifted right by ``exp`` bits (divided by 2^exp); Aux = Body's outlier columns (M×n_out).
``Y = Body·W + (2^exp − 1)·Aux·W_out``, everything INT8 (per-tensor by default, the paper's
NPU setting). Costs:

* vector: detect the outlier channels (one compare per element of X), shift the outlier columns
  and gather Aux (M·n_out elements, 2 ops), quantize X to INT8
  (2 ops/element; with ``granularity: per_token`` also an absmax pass);
* ``fused: false`` — two matmuls at R8: M×K×N and M×n_out×N; the Aux result is scaled by
  (2^exp − 1) and added in the Aux matmul's epilogue: 1 op per output when exp = 1 (an add), 2
  otherwise (multiply + add) — MUXQ §3's "additional overhead" for exp ≠ 1;
* ``fused: true`` — one matmul [Body | Aux]·[W ; (2^exp−1)·W_out] of inner size K + n_out (the
  scaled W_out rows are prepared offline).
The paper's default is exp = 2.

Dependencies (docs/dataflows.md, "Overlap and fusion"): the outlier channels are known only once
detection has seen every token, so the shift/gather and the quantize wait for all of it; from
there the quantize and the matmuls go row block by row block.
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
from accel_sim.errors import UserInputError

KNOBS = {"exp": 2, "threshold": 6.0, "fused": False, "granularity": "per_tensor",
         "outlier_channels": -1}  # fmt: skip


def _error_key(knobs, gemm) -> str | None:
    exact = knobs["granularity"] == "per_tensor" and knobs["threshold"] == 6.0
    return f"muxq:exp={knobs['exp']}" if exact else None


@register("muxq", KNOBS, "INT8 Body + INT8 Aux of the outlier columns (exp shift)",
          needs_stats=True, error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    if knobs["granularity"] not in ("per_tensor", "per_token"):
        raise UserInputError("knobs", "granularity must be per_tensor or per_token", "granularity")
    if not isinstance(knobs["exp"], int) or not 1 <= knobs["exp"] <= 7:
        # (exp = 0 makes the Aux factor 2^0 − 1 = 0: no outlier path; 8 shifts an INT8 out)
        raise UserInputError("knobs", f"exp must be an integer from 1 to 7 (the Body's shift "
                             f"in bits), got {knobs['exp']!r}", "exp")  # fmt: skip
    n_out, source = outlier_channel_count(gemm, stats, knobs, "muxq")
    w_bits = 8  # + one FP32 scale per output channel, as a metadata stream
    # MUXQ detects the outlier channels of each input (one compare per element, like LLM.int8())
    ops: list = [VectorOp("detect_outliers", gemm.M * gemm.K, 1.0, gemm.M * gemm.K * FP16_BYTES,
                          0, gemm.count)]  # fmt: skip
    if knobs["granularity"] == "per_token":
        ops.append(absmax_pass(gemm))
    if n_out:
        moved = gemm.M * n_out
        ops.append(VectorOp("shift_and_gather_aux", moved, 2.0, moved * FP16_BYTES,
                            moved * FP16_BYTES, gemm.count))  # fmt: skip
    ops.append(quantize_pass(gemm, 8, columns=gemm.K + n_out))
    scale_ops = 1.0 if knobs["exp"] == 1 else 2.0
    if knobs["fused"] or not n_out:
        ops.append(MatmulOp("body_aux_fused", gemm.M, gemm.K + n_out, gemm.N, "int8", 8, w_bits,
                            16, epilogue_ops_per_output=2.0, count=gemm.count,
                            b_scales=PER_CHANNEL_SCALES))  # fmt: skip
    else:
        ops.append(MatmulOp("body", gemm.M, gemm.K, gemm.N, "int8", 8, w_bits, 16,
                            epilogue_ops_per_output=2.0, count=gemm.count,
                            b_scales=PER_CHANNEL_SCALES))  # fmt: skip
        ops.append(MatmulOp("aux", gemm.M, n_out, gemm.N, "int8", 8, w_bits, 16,
                            epilogue_ops_per_output=scale_ops, count=gemm.count,
                            b_scales=PER_CHANNEL_SCALES))  # fmt: skip
    notes = (f"outlier channels n_out={n_out} ({source})",)
    names = [op.name for op in ops]
    edges = [Edge("detect_outliers", "quantize", streamed=False)]
    if n_out:
        edges += [Edge("detect_outliers", "shift_and_gather_aux", streamed=False),
                  Edge("shift_and_gather_aux", "quantize")]  # fmt: skip
    if "absmax" in names:  # per token: the scale of row block i is ready after its block
        edges.append(Edge("absmax", "quantize"))
    edges += [Edge("quantize", name) for name in names if name in ("body_aux_fused", "body", "aux")]
    if "aux" in names:  # the Aux product is added onto the Body's output in its epilogue
        edges.append(Edge("body", "aux"))
    return Plan("muxq", gemm, tuple(ops), notes, {**knobs, "outlier_channels": n_out},
                tuple(edges))  # fmt: skip
