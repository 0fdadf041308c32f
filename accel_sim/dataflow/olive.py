"""OliVe (Guo et al., ISCA 2023, arXiv 2304.07493): outlier-victim pairs at 4 or 8 bits.

OliVe stores W and X as 4-bit (or 8-bit) OVP codes (``quant/olive.py``): normal values as int
(or flint), an outlier as abfloat with its pair partner pruned to a "victim" whose code marks the
pair (§3). An OVP decoder at the edge of the array turns each code into an exponent-integer pair
and the PEs multiply the integers and shift by the exponent sum (§5). The plan runs on any unit
with an int4 (int8) rate, as OliVe integrates with systolic arrays (§5); a unit without the rate
refuses it with one line (``--dataflow all`` skips it there). On the bit-slice array
(``compute.kind: bitslice``, the array OPS and its baselines share in ``ops-fig3``) a b-bit OliVe
MAC is ``ceil(b/4)²`` slice products, like an INT-b MAC (OliVe-4 = 1, OliVe-8 = 4); on the
systolic and cube units it packs as INT-b.

The plan (one GEMM, ``bits`` = 4 or 8):

1. **encoder** — X (FP16) is OVP-encoded on the vector unit with the static per-tensor scale
   calibrated offline (OliVe quantizes activations with a searched per-tensor alpha): multiply by
   1/scale, round to the normal ∪ outlier grid, compare with the outlier threshold, select the
   pair's victim — :data:`ENCODE_OPS` element operations (assumption: one per step named), reads
   FP16, writes ``bits`` per element. W is encoded offline (no cost);
2. **matmul** — at the int4 (int8) rate with ``bits``-bit operands, per-channel FP32 W scales as
   a metadata stream and a 1-multiply dequantize epilogue (s_x · s_w[n]).

**Decoders** (array edge): one per PE row for the streamed X and one per column on the weight
load path (on units without rows/columns, the output-tile side stands for both), each decoding
one code per cycle, so they keep up with the array by construction and cost no throughput;
their pipeline latency (:data:`DECODER_LATENCY_CYCLES` per fold) and energy
(:data:`DECODE_PJ`) are stated in the plan's notes and knobs (``decodes``, ``decoder_pj``) but are
**not** in the run's cycles and ``energy_pj``: the engine prices only its fixed components
(MACs, memory levels, vector unit, early-bird comparator, leakage), and adding a codec component
needs changes to the schema, plan and engine outside this module (docs/dataflows.md, *OliVe and
ANT*). Also not priced: the PEs' exponent shifter (a shift of each product before the accumulation).
"""

from __future__ import annotations

import math

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import FP16_BYTES, PER_CHANNEL_SCALE_BITS
from accel_sim.dataflow.plan import MatmulOp, Plan, VectorOp
from accel_sim.errors import UserInputError

KNOBS = {"bits": 4}
#: vector-unit operations per element of the OVP encoder (assumption: scale multiply, grid
#: round, outlier compare, victim select — the steps of OliVe's ``_forward``)
ENCODE_OPS = 4.0
#: energy of decoding one code at the array edge, pJ at 45 nm (assumption: a few dozen gates —
#: identifier compare and an int/exponent mux — taken as one 8-bit add of Horowitz ISSCC 2014,
#: 0.03 pJ, at 4 bits and twice that at 8 bits)
DECODE_PJ = {4: 0.03, 8: 0.06}
#: decoder pipeline latency per fold, cycles (assumption: one registered stage at the edge)
DECODER_LATENCY_CYCLES = 1


def decoder_note(arch, gemm, bits: int, scheme: str) -> tuple[str, dict]:
    """Decoder counts and energy of one GEMM: X decoded once per column fold (N / the unit's
    columns, its output-tile side where it has no ``cols``) as it streams in, W once (a lower
    bound if the mapper reloads W per block of rows)."""
    unit = arch.compute
    side = unit.output_tile_side()
    folds_n = math.ceil(gemm.N / getattr(unit, "cols", side))
    folds_k = math.ceil(gemm.K / getattr(unit, "rows", side))
    decodes = (gemm.M * gemm.K * folds_n + gemm.K * gemm.N) * gemm.count
    pj = decodes * DECODE_PJ[bits]
    latency = DECODER_LATENCY_CYCLES * folds_n * folds_k * gemm.count
    note = (f"{scheme} decoders at the array edge: {decodes:,} decodes ≈ {pj:,.0f} pJ at 45 nm "
            f"(assumption {DECODE_PJ[bits]} pJ each) and ≤ {latency:,} cycles of pipeline "
            "latency (one per fold): not in energy_pj or cycles (the engine has no codec "
            "component); the PEs' exponent shifters are not priced either")  # fmt: skip
    return note, {"decodes": decodes, "decoder_pj": pj, "decoder_latency_cycles": latency}


def encode_pass(gemm, bits: int, ops: float, name: str) -> VectorOp:
    """Encode X (FP16) into ``bits``-bit codes on the vector unit: ``ops`` per element."""
    elements = gemm.M * gemm.K
    return VectorOp(name, elements, ops, elements * FP16_BYTES,
                    int(elements * bits / 8 + 0.5), gemm.count)  # fmt: skip


def matmul(gemm, bits: int, name: str) -> MatmulOp:
    """The GEMM at the int<bits> rate with ``bits``-bit operands (decoded exponent-integer
    pairs multiply on the same 4-bit slices), per-channel W scales, 1-multiply dequantize."""
    return MatmulOp(name, gemm.M, gemm.K, gemm.N, f"int{bits}", bits, bits, 16,
                    epilogue_ops_per_output=1.0, count=gemm.count,
                    b_scale_bits_per_col=PER_CHANNEL_SCALE_BITS)  # fmt: skip


def _error_key(knobs, gemm) -> str:
    return f"olive:bits={knobs['bits']}"


@register("olive", KNOBS, "OliVe outlier-victim pairs, 4 or 8 bits, decoders at the array edge",
          error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    bits = knobs["bits"]
    if bits not in (4, 8):
        raise UserInputError("knobs", "OliVe has 4- and 8-bit OVP variants: bits must be 4 or 8",
                             "olive.bits")  # fmt: skip
    note, extra = decoder_note(arch, gemm, bits, "OVP")
    ops = (encode_pass(gemm, bits, ENCODE_OPS, "ovp_encode"), matmul(gemm, bits, "ovp_matmul"))
    notes = (f"OliVe-{bits}: X OVP-encoded on the vector unit ({ENCODE_OPS:g} ops/element, "
             f"static per-tensor scale), W encoded offline; int{bits} rate", note)  # fmt: skip
    return Plan("olive", gemm, ops, notes, {**knobs, **extra})
