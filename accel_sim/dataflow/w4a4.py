"""W4A4 static (PrefixQuant O2; docs/dataflows.md, docs/modelling.md "PrefixQuant on a GPU"):
INT4 weights per channel, per-tensor static INT4 activations, one matmul at R4. PrefixQuant's
prefixed tokens only lengthen attention's K/V (``workload/models.py``), not the linear layers.

The online work PrefixQuant-O2 does beside the matmul (PrefixQuant App. B, following SpinQuant's
R1–R4 rotations), each a vector op (one GPU kernel) with a knob to switch it off:

* ``quantize`` (default on): X is quantized with the static per-tensor scale by its own kernel
  (multiply, round, clip: 3 ops per element; reads FP16 X, writes INT4 X); the epilogue then only
  dequantizes (1 multiply per output). Off: the scale is fused into the producer of X, so X
  arrives in INT4 and the epilogue dequantizes and requantizes (2 multiplies per output).
  Every GEMM quantizes its own input: q/k/v (and gate/up) share one X, which a real kernel
  quantizes once, so this counts 3 of a Llama layer's 7 quantize kernels twice over.
* ``hadamard`` (default on): R4, the online Hadamard rotation of down_proj's input (kind
  ``down_in``) over its whole row of K elements, before the quantize: a fast Walsh–Hadamard
  transform on the vector unit and, when K is not a power of two (Llama-2's 11008 = 172·64), a
  dense ±1 factor as a small FP16 matmul (``dataflow/common.py``: ``hadamard_passes``).
  R1 (q/k/v/gate/up inputs) and R2 (o_proj, head-wise) are absorbed into the weights offline and
  cost nothing at run time.
* ``r3_head_dim`` (default 0 = off): R3, the head-wise rotation of Q and K after RoPE in blocks
  of ``r3_head_dim``, charged on the output of every ``attn_in`` GEMM (the plan cannot tell
  q_proj from v_proj, so v is counted too). R3 only serves KV-cache quantization, which
  PrefixQuant's speed test leaves out, and leaves QKᵀ unchanged otherwise.
* ``quantize_lm_head`` (default off): PrefixQuant's code skips the LM head when it wraps linear
  layers for quantization, so the ``lm_head_in`` GEMM runs as a plain FP16 matmul (as INT4 W4A4
  on an architecture without an FP16 rate, or with the knob on).

Every step is row-wise (a row's rotation, the static per-tensor scale, a row of Y), so the ops
form one chain streamed row block by row block (docs/dataflows.md, "Overlap and fusion"); on a
GPU proxy they stay separate kernels, one after another.
"""

from __future__ import annotations

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import PER_CHANNEL_SCALES, hadamard_passes, static_quantize_pass
from accel_sim.dataflow.plan import MatmulOp, Plan, VectorOp, streamed
from accel_sim.errors import UserInputError

KNOBS = {"quantize": True, "hadamard": True, "r3_head_dim": 0, "quantize_lm_head": False}


@register("w4a4_static", KNOBS, "INT4 per-channel weights, per-tensor static INT4 activations")
def build(gemm, arch, stats, knobs) -> Plan:
    quantize, r3 = knobs["quantize"], knobs["r3_head_dim"]
    if r3 < 0:
        raise UserInputError("knobs", f"r3_head_dim must be 0 (off) or positive, got {r3}",
                             "r3_head_dim")  # fmt: skip
    dense = "fp16" in arch.compute.rates  # else the dense Hadamard factor runs as vector adds
    if gemm.kind == "lm_head_in" and not knobs["quantize_lm_head"] and dense:
        op = MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "fp16", 16, 16, 16, count=gemm.count)
        return Plan("w4a4_static", gemm, (op,), ("LM head kept in FP16 (PrefixQuant does not "
                    "quantize it)",), dict(knobs))  # fmt: skip
    ops: list[MatmulOp | VectorOp] = []
    if knobs["hadamard"] and gemm.kind == "down_in":
        ops += hadamard_passes(gemm, gemm.K, gemm.K, "hadamard_r4", dense)
    if quantize:
        ops.append(static_quantize_pass(gemm, 4))
    ops.append(MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "int4", 4, 4, 16,
                        epilogue_ops_per_output=1.0 if quantize else 2.0, count=gemm.count,
                        b_scales=PER_CHANNEL_SCALES))  # fmt: skip
    if r3 and gemm.kind == "attn_in":
        if gemm.N % r3:
            raise UserInputError("knobs", f"r3_head_dim {r3} does not divide the GEMM's N = "
                                 f"{gemm.N}", "r3_head_dim")  # fmt: skip
        ops += hadamard_passes(gemm, r3, gemm.N, "hadamard_r3", dense)  # Y: M × N in blocks
    notes = ()
    if r3 and gemm.kind != "attn_in":
        notes = (f"r3_head_dim applies to attn_in GEMMs only (Q and K after RoPE); this GEMM's "
                 f"kind is {gemm.kind or 'not set'}, so no R3 rotation is charged",)  # fmt: skip
    return Plan("w4a4_static", gemm, tuple(ops), notes, dict(knobs),
                streamed(*(op.name for op in ops)))  # fmt: skip
