"""ANT (Guo et al., MICRO 2022): adaptive numeric types per tensor, 4-bit with 8-bit fallback.

ANT quantizes each tensor to the 4-bit type — int, PoT or flint — of smallest quantization MSE,
chosen offline per tensor (``quant/ant.py``), and keeps layers that need it at 8-bit int
("ANT4-8"). A decoder at the edge of the array turns flint/PoT codes into exponent-integer pairs
for 4-bit integer PEs with a shifter, fused in fours for 8 bits (§V). The plan runs on any unit
with int4/int8 rates (ANT evaluates systolic arrays); on the bit-slice array a 4-bit ANT MAC is
one slice product, an 8-bit one four, like INT4/INT8.

The plan (one GEMM):

1. **precision** — ``bits`` 8: 8-bit int. ``bits`` 4 (ANT4-8): 4 bits, unless the statistics
   hold the GEMM's 4-bit relative output error on calibration tokens (``errors["ant:bits=4,
   split=calib"]``) and it exceeds ``budget``: then 8 bits. ANT's own code sets the ``n`` layers
   of largest weight + input MSE to 8 bits (``n`` per model); a per-GEMM plan cannot rank against
   layers it does not see, so the same kind of measure is thresholded instead. Default budget:
   ``ops_tau.DEFAULT_BUDGET`` (0.05), the budget OPS's τ=auto uses. Without that error (a trace
   compacted before ANT existed, or no trace) the GEMM stays at 4 bits and the notes say so;
2. **encoder** — X (FP16) to the tensor's type on the vector unit with its static scale:
   :data:`ENCODE_OPS` operations per element (assumption: scale multiply, round to the type's
   grid — a leading-one detect for flint/PoT —, clip), W encoded offline;
3. **matmul** — int4 or int8 rate, per-channel FP32 W scales, 1-multiply dequantize epilogue.

Decoders as for OliVe (``dataflow/olive.py``): sized to the array's input rate, on the bit-slice
array priced per decoded element of X and W as ``energy.compute.decode_ant<bits>`` (the bits
chosen: 4, or 8 after a fallback), their one-cycle pipeline stage not charged (docs/dataflows.md).
The reported error is the trace's ``ant:bits=<4|8>`` at the precision chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from accel_sim.dataflow.base import Dataflow, register
from accel_sim.dataflow.olive import decoding, encode_pass, matmul
from accel_sim.dataflow.ops_tau import DEFAULT_BUDGET
from accel_sim.dataflow.plan import Plan
from accel_sim.errors import UserInputError

KNOBS = {"bits": 4, "budget": DEFAULT_BUDGET}
#: vector-unit operations per element of the ANT encoder (assumption: scale multiply, round to
#: the type's grid, clip — static_quantize_pass's three for int)
ENCODE_OPS = 3.0
#: the statistics' key of the 4-bit error on calibration tokens (the fallback's measure)
CALIB_KEY = "ant:bits=4,split=calib"


def precision(stats: Mapping[str, Any] | None, knobs) -> tuple[int, str]:
    """(bits, why) of one GEMM under ANT4-8 (module docstring)."""
    if knobs["bits"] == 8:
        return 8, "8-bit int (bits=8)"
    err = ((stats or {}).get("errors") or {}).get(CALIB_KEY)
    if err is None:
        return 4, "4-bit: no ANT calibration error in the statistics, no 8-bit fallback decided"
    if err > knobs["budget"]:
        return 8, (f"8-bit fallback: 4-bit error on calibration tokens {err:.3g} > budget "
                   f"{knobs['budget']:g}")  # fmt: skip
    return 4, f"4-bit: error on calibration tokens {err:.3g} ≤ budget {knobs['budget']:g}"


def _error_key(knobs, gemm) -> str:
    return f"ant:bits={knobs['bits']}"


@register("ant", KNOBS, "ANT adaptive types int/flint/PoT per tensor, 4-bit with 8-bit fallback",
          error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    if knobs["bits"] not in (4, 8):
        raise UserInputError("knobs", "ANT runs 4-bit types with an 8-bit fallback (bits=4) or "
                             "8-bit int everywhere (bits=8)", "ant.bits")  # fmt: skip
    if not knobs["budget"] >= 0:
        raise UserInputError("knobs", f"the fallback budget is a relative output error ≥ 0, got "
                             f"{knobs['budget']!r}", "ant.budget")  # fmt: skip
    bits, why = precision(stats, knobs)
    decode, note, extra = decoding(arch, gemm, bits, "ant", "ANT")
    ops = (encode_pass(gemm, bits, ENCODE_OPS, "ant_encode"),
           matmul(gemm, bits, "ant_matmul", decode))  # fmt: skip
    notes = (f"ANT: {why}; X encoded on the vector unit ({ENCODE_OPS:g} ops/element, static "
             f"per-tensor type and scale), W offline; int{bits} rate",
             note)  # fmt: skip
    return Plan("ant", gemm, ops, notes, {**knobs, "ant_bits": bits, **extra})


class AntDataflow(Dataflow):
    """The ``ant`` dataflow: its error is the trace's at the precision :func:`precision`
    chooses for the GEMM (4 bits, or 8 after a fallback)."""

    def numerical_error(self, stats, knobs, gemm) -> float | None:
        bits, _ = precision(stats, knobs)
        return super().numerical_error(stats, {**knobs, "bits": bits}, gemm)


build.dataflows = tuple(AntDataflow(**{f.name: getattr(d, f.name) for f in fields(d)})
                        for d in build.dataflows)  # fmt: skip
