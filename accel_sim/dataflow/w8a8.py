"""W8A8 (docs/dataflows.md; the OSC paper's baseline).

* ``w8a8`` — per-token dynamic: the vector unit finds each token's |x| maximum and quantizes X
  (reads X twice, writes INT8 X); the matmul runs at R8 with 32-bit accumulation; the epilogue
  dequantizes Y with ``s_x[m]·s_w[n]`` (2 multiplies per output) as the tile drains.
* ``w8a8_static`` — per-tensor static (what TWEO's outlier-free training makes usable): no absmax
  pass; the scalar scale is fused into the producer of X, so X arrives in INT8 and the epilogue
  does the dequantize and the requantize for the next layer (2 multiplies per output).

W is INT8 (or FP8 with ``format: fp8``) offline, with an FP32 scale per output channel.

``fusion`` (dynamic only; docs/dataflows.md, "Overlap and fusion"): ``tile`` (what ``auto`` is on
an accelerator) — absmax and quantize of a row block in one vector pass (X read once: a row of
K FP16 values stays in the vector unit's buffer between the two), streamed to the matmul row
block by row block; ``producer`` — that pass runs in the epilogue of X's producer (a row-wise
kernel such as RMSNorm), X arrives in INT8 and only its vector operations remain; ``none``
(``auto`` on GPU proxies and with ``overlap=False``) — two passes, each reading X.
"""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import (
    PER_CHANNEL_SCALES,
    absmax_pass,
    fused_pass,
    fusion,
    quantize_pass,
)
from accel_sim.dataflow.plan import MatmulOp, Plan, streamed

KNOBS = {"format": "int8"}
DYNAMIC_KNOBS = {"format": "int8", "fusion": "auto"}


def _matmul(gemm, knobs) -> MatmulOp:
    fmt = knobs["format"]
    if fmt not in ("int8", "fp8"):
        from accel_sim.errors import UserInputError

        raise UserInputError("knobs", f"format must be int8 or fp8, got {fmt!r}", "format")
    return MatmulOp(
        "matmul",
        gemm.M,
        gemm.K,
        gemm.N,
        fmt,
        a_bits=8,
        b_bits=8,
        b_scales=PER_CHANNEL_SCALES,
        c_bits=16,
        epilogue_ops_per_output=2.0,
        count=gemm.count,
    )


def _key(name):
    return lambda knobs, gemm: name if knobs["format"] == "int8" else None


@register("w8a8", DYNAMIC_KNOBS, "INT8 per-token dynamic activations, per-channel weights",
          error_key=_key("w8a8"))  # fmt: skip
def build_dynamic(gemm, arch, stats, knobs) -> Plan:
    how = fusion(knobs, arch)
    matmul = _matmul(gemm, knobs)
    if how == "none":
        ops = (absmax_pass(gemm), quantize_pass(gemm, 8), matmul)
        note = "absmax and quantize: two vector passes, each reading X"
    else:  # compare + multiply + convert per element; INT8 X out
        elements = gemm.M * gemm.K
        ops = (fused_pass("absmax_quantize", elements, 3.0, elements, how, gemm.count), matmul)
        note = "absmax and quantize in " + (
            "one pass over X" if how == "tile" else "the epilogue of X's producer (INT8 X)"
        )
    edges = streamed(*(op.name for op in ops))  # per token: row block by row block
    return Plan("w8a8", gemm, ops, (note,), {**knobs, "fusion": how}, edges)


@register("w8a8_static", KNOBS, "INT8 per-tensor static activations (TWEO), per-channel weights",
          error_key=_key("w8a8_static"))  # fmt: skip
def build_static(gemm, arch, stats, knobs) -> Plan:
    return Plan("w8a8_static", gemm, (_matmul(gemm, knobs),), (), dict(knobs))
