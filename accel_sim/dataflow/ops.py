"""OPS: outlier-aware precision slicing with the early-bird comparator (OPS §III).

X and W are quantized to INT16 (per tensor) and each split, in sign-magnitude, into a 4-bit high
slice (sign + 3 magnitude bits) and a 12-bit low part (three 4-bit slices): a 16×16-bit product
is 16 slice products on a 4-bit MAC array (rate ``int4``). Per *computation set* — one output
element over one K-chunk of ``chunk`` elements — the hi×hi partial sum is computed first; the
**early-bird comparator** (a unit in the architecture file, with its own latency and energy)
compares it with τ; at or below τ the other 15 slice products of the set are skipped and the
``preset`` is written. Products with a zero high slice are skipped too (zero-slice skipping).
The paper tunes τ and the preset offline per layer and leaves the set size and sign encoding
open; our defaults are chunk = 32, sign-magnitude, preset 0 and **τ = −1 (early bird off)**:
with per-tensor INT16 scales set by outliers most high slices are zero, so even τ = 0 skips most
sets of real traces and loses most of the output (see the trace's errors). Sweep τ to see the
trade-off.

Costs on the engine: INT16 quantize of X (absmax + quantize on the vector unit); the hi×hi matmul
(M×K×N int4 MACs, 4-bit operands); ``M·N·ceil(K/chunk)`` comparisons; the remaining slice
products as one int4 matmul of inner size ``K_rest = ceil(K · (1 − s) · r)`` with
``r = 9 + 3(1 − z_x) + 3(1 − z_w)`` slice products per MAC (z = zero fraction of high slices)
and operand widths scaled so its traffic is the 12-bit low parts of the sets not skipped.

Granularity, honestly: a systolic array or cube cannot drop a single output's work in the
middle of a tile; it saves cycles only when every set of an output tile × chunk is skipped. So
``s`` is the fraction of *tiles* fully skipped (the trace stores it for square tiles of 16, 32,
64 and 128 outputs; the array's tile is rounded to the nearest stored size), while the numerical
error and the reported set skip fraction use every skipped set.
"""

from __future__ import annotations

import math

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import absmax_pass, quantize_pass
from accel_sim.dataflow.plan import ComparatorOp, MatmulOp, Plan
from accel_sim.errors import UserInputError

KNOBS = {"chunk": 32, "tau": -1.0, "preset": "zero", "sign": "sign_magnitude"}
TILE_SIZES = (16, 32, 64, 128)


def array_tile(arch) -> int:
    """The square output tile the unit drops work at, rounded to a stored size."""
    side = arch.compute.output_tile_side()
    return min(TILE_SIZES, key=lambda t: (abs(math.log2(t / side)), t))


def skip_fractions(stats, knobs, tile: int) -> tuple[float, float, str]:
    """(set skip fraction, fully-skipped tile fraction, source)."""
    key = f"{knobs['chunk']}:{knobs['tau']:g}"
    grid = (stats or {}).get("ops_skip")
    if grid is None:
        if knobs["tau"] < 0:
            return 0.0, 0.0, "τ < 0: nothing skipped"
        raise UserInputError("ops", "needs early-bird statistics: run it on a trace (--trace)")
    if key not in grid:
        raise UserInputError("knobs", f"the compact trace has early-bird statistics for "
                             f"chunk:tau in {sorted(grid)}; capture a full trace for {key}",
                             "tau")  # fmt: skip
    entry = grid[key]
    return float(entry["sets"]), float(entry["tiles"][str(tile)]), "trace"


def _error_key(knobs, gemm) -> str:
    return f"ops:chunk={knobs['chunk']},tau={knobs['tau']:g},preset={knobs['preset']}"


@register("ops", KNOBS, "INT16 as 4-bit slices, zero-slice skipping, early-bird comparator",
          needs_stats=True, error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    if knobs["sign"] != "sign_magnitude":
        raise UserInputError("knobs", "the compact trace's statistics use sign-magnitude slices; "
                             "capture a full trace for two's complement", "sign")  # fmt: skip
    if knobs["preset"] not in ("zero", "hi_only"):
        raise UserInputError("knobs", "preset must be 'zero' or 'hi_only'", "preset")
    if not isinstance(knobs["chunk"], int) or knobs["chunk"] <= 0:
        raise UserInputError("knobs", "chunk must be a positive integer", "chunk")
    tile = array_tile(arch)
    sets, tiles, source = skip_fractions(stats, knobs, tile)
    zx = float((stats or {}).get("int16_hi_zero_fraction", 0.0))
    zw = float((stats or {}).get("int16_hi_zero_fraction_w", 0.0))
    slices = 9 + 3 * (1 - zx) + 3 * (1 - zw)
    k_rest = math.ceil(gemm.K * (1 - tiles) * slices)
    n_sets = gemm.M * gemm.N * math.ceil(gemm.K / knobs["chunk"])
    ops: list = [absmax_pass(gemm), quantize_pass(gemm, 16),
                 MatmulOp("hi_x_hi", gemm.M, gemm.K, gemm.N, "int4", 4, 4, 32,
                          count=gemm.count)]  # fmt: skip
    if knobs["tau"] >= 0:  # τ < 0: the early bird is off, its comparators idle
        ops.append(ComparatorOp("early_bird", n_sets, gemm.count))
    if k_rest:
        kept = gemm.K * (1 - tiles)
        ops.append(MatmulOp("remaining_slices", gemm.M, k_rest, gemm.N, "int4",
                            12 * kept / k_rest, 12 * kept / k_rest, 16,
                            epilogue_ops_per_output=2.0, count=gemm.count))  # fmt: skip
    notes = (f"skip: {sets:.1%} of computation sets, {tiles:.1%} of {tile}×{tile} output tiles "
             f"({source}); zero high slices: X {zx:.1%}, W {zw:.1%}",)  # fmt: skip
    extra = {"ops_set_skip_fraction": sets, "ops_tile_skip_fraction": tiles, "ops_tile": tile}
    return Plan("ops", gemm, tuple(ops), notes, {**knobs, **extra})


@register("int16", {}, "INT16 activations and weights at the 16-bit rate (OPS's baseline)")
def build_int16(gemm, arch, stats, knobs) -> Plan:
    ops = (absmax_pass(gemm), quantize_pass(gemm, 16),
           MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "int16", 16, 16, 16,
                    epilogue_ops_per_output=1.0, count=gemm.count))  # fmt: skip
    return Plan("int16", gemm, ops, (), {})
