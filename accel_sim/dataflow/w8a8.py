"""W8A8 (docs/dataflows.md; the OSC paper's baseline).

* ``w8a8`` — per-token dynamic: the vector unit finds each token's |x| maximum and quantizes X
  (reads X twice, writes INT8 X); the matmul runs at R8 with 32-bit accumulation; the epilogue
  dequantizes Y with ``s_x[m]·s_w[n]`` (2 multiplies per output) as the tile drains.
* ``w8a8_static`` — per-tensor static (what TWEO's outlier-free training makes usable): no absmax
  pass; the scalar scale is fused into the producer of X, so X arrives in INT8 and the epilogue
  does the dequantize and the requantize for the next layer (2 multiplies per output).

W is INT8 (or FP8 with ``format: fp8``) offline, with an FP32 scale per output channel.
"""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import PER_CHANNEL_SCALE_BITS, absmax_pass, quantize_pass
from accel_sim.dataflow.plan import MatmulOp, Plan

KNOBS = {"format": "int8"}


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
        b_scale_bits_per_col=PER_CHANNEL_SCALE_BITS,
        c_bits=16,
        epilogue_ops_per_output=2.0,
        count=gemm.count,
    )


def _key(name):
    return lambda knobs, gemm: name if knobs["format"] == "int8" else None


@register("w8a8", KNOBS, "INT8 per-token dynamic activations, per-channel weights",
          error_key=_key("w8a8"))  # fmt: skip
def build_dynamic(gemm, arch, stats, knobs) -> Plan:
    ops = (absmax_pass(gemm), quantize_pass(gemm, 8), _matmul(gemm, knobs))
    return Plan("w8a8", gemm, ops, ("absmax and quantize of X are not overlapped with the matmul",),
                dict(knobs))  # fmt: skip


@register("w8a8_static", KNOBS, "INT8 per-tensor static activations (TWEO), per-channel weights",
          error_key=_key("w8a8_static"))  # fmt: skip
def build_static(gemm, arch, stats, knobs) -> Plan:
    return Plan("w8a8_static", gemm, (_matmul(gemm, knobs),), (), dict(knobs))
