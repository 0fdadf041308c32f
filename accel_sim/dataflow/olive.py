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

**Decoders** (array edge): the matmul names its decoding (``MatmulOp.decode`` = ``olive4`` /
``olive8``) on a unit that declares those decoders (``ComputeUnit.decode_actions``: the bit-slice
array); the engine counts every element of X and W entering the array from its innermost buffer
(X once per column fold, each W tile each time it is loaded) and prices it as
``energy.compute.decode_olive<bits>`` (pJ per decoded element, breakdown ``decode_olive<bits>``);
a missing entry is a one-line error naming it, raised when the plan is built. One decoder per
PE row (X) and per column (W load), one element per cycle each, keeps up with the array, so
decoders cost no throughput; their one-cycle pipeline stage is not charged (at most one cycle
per fold of ≥ 191 cycles on ``ops_bitslice``, and hidden behind the previous fold:
docs/dataflows.md, *OliVe and ANT*). On units without decoders (systolic, cube) the decoding is
not modelled and the notes say so. Not priced anywhere: the PEs' exponent shifter (a shift of
each product before the accumulation).
"""

from __future__ import annotations

import math

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import FP16_BYTES, PER_CHANNEL_SCALES
from accel_sim.dataflow.plan import MatmulOp, Plan, VectorOp
from accel_sim.errors import UserInputError

KNOBS = {"bits": 4}
#: vector-unit operations per element of the OVP encoder (assumption: scale multiply, grid
#: round, outlier compare, victim select — the steps of OliVe's ``_forward``)
ENCODE_OPS = 4.0


def decoding(arch, gemm, bits: int, scheme: str, label: str) -> tuple[str | None, str, dict]:
    """``(MatmulOp.decode, note, knobs)`` of one GEMM's ``bits``-bit ``scheme`` codes on ``arch``.

    Where the unit declares ``decode_<scheme><bits>``, its energy entry must exist (one-line
    error naming ``energy.compute.decode_<scheme><bits>`` otherwise) and the engine prices the
    decodes. Knobs: ``decodes``, the elements decoded if each W tile is loaded once (X once per
    column fold, W once; the engine counts the mapper's actual loads), and ``decoder_pj``, those
    decodes × the entry as its source states it (pJ at the source's node, before node scaling;
    the run's ``energy_breakdown_pj["decode_<scheme><bits>"]`` is the priced figure)."""
    unit, decoder = arch.compute, f"{scheme}{bits}"
    action = f"decode_{decoder}"
    if action not in unit.decode_actions():
        return None, (f"{label} decoders at the array edge not modelled: compute.kind "
                      f"{unit.kind} declares no {action} (the bitslice unit does)"), {}  # fmt: skip
    arch.require_energy("compute", action)
    folds_n = math.ceil(gemm.N / getattr(unit, "cols", unit.output_tile_side()))
    decodes = (gemm.M * gemm.K * folds_n + gemm.K * gemm.N) * gemm.count
    note = (f"{label} decoders at the array edge: every element of X and W entering the array "
            f"is decoded, priced as energy.compute.{action} (breakdown {action}); their "
            "one-cycle pipeline stage is not in cycles (≤ 1 per fold, hidden behind the "
            "previous fold: docs/dataflows.md); the PEs' exponent shifters are not "
            "priced")  # fmt: skip
    pj = decodes * arch.energy["compute"][action].value
    return decoder, note, {"decodes": decodes, "decoder_pj": pj}


def encode_pass(gemm, bits: int, ops: float, name: str) -> VectorOp:
    """Encode X (FP16) into ``bits``-bit codes on the vector unit: ``ops`` per element."""
    elements = gemm.M * gemm.K
    return VectorOp(name, elements, ops, elements * FP16_BYTES,
                    int(elements * bits / 8 + 0.5), gemm.count)  # fmt: skip


def matmul(gemm, bits: int, name: str, decode: str | None) -> MatmulOp:
    """The GEMM at the int<bits> rate with ``bits``-bit operands (decoded exponent-integer
    pairs multiply on the same 4-bit slices) through the ``decode`` decoders (or none),
    per-channel W scales, 1-multiply dequantize."""
    return MatmulOp(name, gemm.M, gemm.K, gemm.N, f"int{bits}", bits, bits, 16,
                    epilogue_ops_per_output=1.0, count=gemm.count,
                    b_scales=PER_CHANNEL_SCALES, decode=decode)  # fmt: skip


def _error_key(knobs, gemm) -> str:
    return f"olive:bits={knobs['bits']}"


@register("olive", KNOBS, "OliVe outlier-victim pairs, 4 or 8 bits, decoders at the array edge",
          error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    bits = knobs["bits"]
    if bits not in (4, 8):
        raise UserInputError("knobs", "OliVe has 4- and 8-bit OVP variants: bits must be 4 or 8",
                             "olive.bits")  # fmt: skip
    decode, note, extra = decoding(arch, gemm, bits, "olive", "OVP")
    ops = (encode_pass(gemm, bits, ENCODE_OPS, "ovp_encode"),
           matmul(gemm, bits, "ovp_matmul", decode))  # fmt: skip
    notes = (f"OliVe-{bits}: X OVP-encoded on the vector unit ({ENCODE_OPS:g} ops/element, "
             f"static per-tensor scale), W encoded offline; int{bits} rate", note)  # fmt: skip
    return Plan("olive", gemm, ops, notes, {**knobs, **extra})
