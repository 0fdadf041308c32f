"""OPS: outlier-aware precision slicing with the early-bird comparator (OPS §III).

X and W are quantized to INT16 (per tensor) and each split, in sign-magnitude, into a 4-bit high
slice (sign + 3 magnitude bits) and a 12-bit low part (three 4-bit slices): a 16×16-bit product
is 16 slice products. Per *computation set* — one output element over one K-chunk of ``chunk``
elements — the hi×hi partial sum is computed first; the **early-bird comparator** compares it
with τ; at or below τ the other 15 slice products of the set are skipped and the ``preset`` is
written. The paper tunes τ and the preset offline per layer and leaves the set size and sign
encoding open; our defaults are chunk = 32, sign-magnitude, preset 0 and **τ = −1 (early bird
off)**: with per-tensor INT16 scales set by outliers most high slices are zero, so even τ = 0
skips most sets of real traces and loses most of the output (see the trace's errors). Sweep τ to
see the trade-off.

**τ = auto** (``--knob ops.tau=auto``, ``dataflow/ops_tau.py``): the paper's offline layer-wise
choice, from the trace's stored errors: per GEMM (per layer kind in model runs) the largest τ of
the trace's grid (−1, 0, 1, 4, 16 at chunk 32) whose relative output error is within ``budget``,
with the preset of the smaller error at that τ (``preset=auto``, implied unless a preset is
given); if no τ ≥ 0 fits, τ = −1 (early bird off), said in the plan's notes. Default budget
**0.05**: the paper states none (it reports task accuracy and perplexity); 0.05 is above the
median error of W8A8 per-token INT8 of every layer kind of both shipped traces (0.012–0.035), so
OPS may lose about what the 8-bit baseline loses and no more than a few times that. The trace's
errors are on its held-out tokens and it stores no OPS error on its calibration tokens, so the
choice is made on the tokens that report its error (selection on the evaluation set). A fixed τ
with ``preset=auto`` takes the preset of the smaller stored error at that τ.

Two lowerings, chosen by the architecture's compute unit (through its public interface: a unit
with ``early_bird_issue`` has inline comparators, i.e. the ``bitslice`` unit), and the knob
``granularity`` (``auto``: ``set`` on a unit with inline comparators, ``tile`` elsewhere):

**On the bit-slice unit** (``arch/units/bitslice.py``, OPS's own array): one interleaved pass.
Weights (all their slices) are stationary; per streamed row of X each PE group issues the hi×hi
item first, the inline comparator at the column's foot decides, and the 15 other slice-pair items
follow only for kept sets (the hi×hi items of later rows run ahead so that the decision latency of
R + 1 cycles is hidden: "interleaved computation"). A row costs ``1 + 15·(1 − s)`` cycles instead
of 16 (or the comparators' time if ``compute.comparators`` is too small to keep up: the stall is
reported in the plan's knobs). No 32-bit partial sums leave the array and W is loaded once per
fold. ``s`` depends on the granularity, i.e. on the hardware assumed:

* ``set`` (default here): every PE group (a column, or R/chunk groups of it) advances on its own —
  a small queue per column holds the low slices of X for the rows it keeps, and the partial-sum
  buffer takes the preset for skipped sets — so cycles follow the trace's set skip fraction
  ``s = ops_skip[chunk:τ].sets``. The traces store its mean, not its spread over columns, so the
  columns are taken as perfectly balanced: an upper bound of the saving; the queues' area and
  energy are not modelled.
* ``row``: a plain lockstep array (X's slices broadcast along the rows to every column, no
  per-column queues) can drop a streamed row's remaining items for a chunk only when all C
  columns skip it: ``s = ops_skip[chunk:τ].rows[C]``, the fraction of (1 × C row segment,
  chunk) pairs whose every set is skipped (``workload/early_bird_blocks.py``; C = 128 on
  ``ops_bitslice``, rounded to the stored widths 16/32/64/128).
* ``tile``: an array that issues whole ``C×C`` output tiles drops a tile × chunk only when all
  of its sets skip: ``s = ops_skip[chunk:τ].tiles[C]`` (a lower bound of ``row``).

The engine's ``MatmulOp`` has no per-row issue count, so the pass is written as an INT16 matmul
(16 slice products per row on this unit) whose M is shrunk to ``M' = ceil(M · f / 16)`` with ``f``
the row cost above; ``a_bits``, ``c_bits``, the accumulator width and the epilogue are scaled by
``M / M'`` so every byte count and buffer footprint equals the real pass's (X and W read at 16
bits, a 16-bit output). The fold structure (K/R × N/C folds, each loading its W slices once) is
the real one; the stream of each fold is ``16·m' ≈ f·m`` cycles. MAC energy is that of ``f·M·K·N``
slice products and their reductions. Not priced: the comparisons (≤ 1 compare per 32 slice MACs,
≤ 3 % of the pass's compute energy; the engine prices comparisons only as a separate
``ComparatorOp``, which would also add a sequential pass). Zero-slice skipping is not applied
here: an item is a column sum over R elements, zero only if all R high slices are, a chunk-level
statistic the traces lack (for τ ≥ 0 such an item's hi×hi sum is 0 ≤ τ, so the early bird
already skips it).

**On the systolic and cube units** (``tile`` only; ``set`` and ``row`` are errors: they have no
per-set or per-row skip hardware) the plan is a sequence of passes: INT16 quantize of X (absmax +
quantize on the vector unit); the hi×hi matmul (M×K×N int4 MACs, 4-bit operands);
``M·N·ceil(K/chunk)`` comparisons on the architecture's separate ``early_bird`` unit; the remaining
slice products as one int4 matmul of inner size ``K_rest = ceil(K · (1 − s) · r)`` with ``r = 9 +
3(1 − z_x) + 3(1 − z_w)`` slice products per MAC (z = zero fraction of high slices) and operand
widths scaled so its traffic is the 12-bit low parts of the sets not skipped. Such an array cannot
drop a single output's work in the middle of a tile; ``s`` is the fraction of output tiles × chunk
fully skipped (the trace stores square tiles of 16, 32, 64 and 128 outputs; the array's tile is
rounded to the nearest stored size). On every unit the numerical error and the reported set skip
fraction use every skipped set.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from accel_sim.dataflow import ops_tau
from accel_sim.dataflow.base import Dataflow, register
from accel_sim.dataflow.common import absmax_pass, quantize_pass
from accel_sim.dataflow.plan import ComparatorOp, Edge, MatmulOp, Plan
from accel_sim.errors import UserInputError

KNOBS = {
    "chunk": 32,
    "tau": -1.0,
    "preset": "zero",
    "sign": "sign_magnitude",
    "granularity": "auto",
    "budget": ops_tau.DEFAULT_BUDGET,
}
GRANULARITIES = ("auto", "set", "row", "tile")
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
        raise UserInputError("ops", "needs early-bird statistics: run it on a trace (--trace) "
                             "(in Python: stats=)")  # fmt: skip
    if key not in grid:
        raise UserInputError("knobs", f"the compact trace has early-bird statistics for "
                             f"chunk:tau in {sorted(grid)}; capture a full trace for {key}",
                             "chunk" if all(k.split(":")[0] != str(knobs["chunk"]) for k in grid)
                             else "tau")  # fmt: skip
    entry = grid[key]
    return float(entry["sets"]), float(entry["tiles"][str(tile)]), "trace"


def row_skip_fraction(stats, knobs, width: int) -> float:
    """Fraction of (1 × ``width`` row segment, chunk) pairs whose every set the early bird skips
    (the trace's ``ops_skip[chunk:τ].rows``; 0 with τ < 0 and no trace)."""
    grid = (stats or {}).get("ops_skip")
    if grid is None:
        return skip_fractions(stats, knobs, width)[0]  # τ < 0: 0.0; otherwise its error
    rows = grid.get(f"{knobs['chunk']}:{knobs['tau']:g}", {}).get("rows")
    if rows is None or str(width) not in rows:
        raise UserInputError("ops", "the trace has no row-level early-bird statistics for rows "
                             f"of {width} outputs (ops_skip.rows): re-compact it with this "
                             "version (accel-sim trace compact)", "granularity")  # fmt: skip
    return float(rows[str(width)])


def _error_key(knobs, gemm) -> str:
    return f"ops:chunk={knobs['chunk']},tau={knobs['tau']:g},preset={knobs['preset']}"


def inline_early_bird(arch) -> bool:
    """The unit compares hi×hi sums inline and can skip per set (the ``bitslice`` unit)."""
    return callable(getattr(arch.compute, "early_bird_issue", None))


def granularity(arch, knobs) -> str:
    """The skip granularity: the knob, ``auto`` resolved by the unit; ``set`` needs a unit
    with inline comparators and per-set skip hardware."""
    g = knobs["granularity"]
    if g not in GRANULARITIES:
        raise UserInputError("knobs", f"granularity must be one of {GRANULARITIES}", "granularity")
    inline = inline_early_bird(arch)
    if g == "auto":
        return "set" if inline else "tile"
    if g in ("set", "row") and not inline:
        raise UserInputError("knobs", f"granularity '{g}' needs per-{g} skip hardware (the "
                             f"bitslice unit's inline comparators); the {arch.compute.kind} "
                             "unit drops work only per output tile: use 'tile'",
                             "granularity")  # fmt: skip
    return g


@register("ops", KNOBS, "INT16 as 4-bit slices, zero-slice skipping, early-bird comparator",
          needs_stats=True, error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    if knobs["sign"] != "sign_magnitude":
        raise UserInputError("knobs", "the compact trace's statistics use sign-magnitude slices; "
                             "capture a full trace for two's complement", "sign")  # fmt: skip
    if knobs["preset"] not in (*ops_tau.PRESETS, "auto"):
        raise UserInputError("knobs", "preset must be 'zero', 'hi_only' or 'auto'", "preset")
    if not isinstance(knobs["chunk"], int) or knobs["chunk"] <= 0:
        raise UserInputError("knobs", "chunk must be a positive integer", "chunk")
    knobs, choice = ops_tau.resolve(stats, knobs)
    plan = _build(gemm, arch, stats, knobs)
    if choice is None:
        return plan
    extra = {"ops_tau_auto": True, "ops_tau_met": choice.met}
    notes = (choice.note(), *plan.notes)
    return dataclasses.replace(plan, notes=notes, knobs={**plan.knobs, **extra})


def _build(gemm, arch, stats, knobs) -> Plan:
    """The plan at a concrete τ and preset."""
    gran = granularity(arch, knobs)
    tile = array_tile(arch)
    sets, tiles, source = skip_fractions(stats, knobs, tile)
    if inline_early_bird(arch):
        rows = row_skip_fraction(stats, knobs, tile) if gran == "row" else None
        return _interleaved(gemm, arch, knobs, gran, (sets, rows, tiles), tile, source)
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
    extra = {"ops_set_skip_fraction": sets, "ops_tile_skip_fraction": tiles, "ops_tile": tile,
             "ops_granularity": gran}  # fmt: skip
    names = [op.name for op in ops]  # each slice pass needs the previous one's row blocks
    edges = (_INT16_IN[0], *(Edge(a, b) for a, b in zip(names[1:], names[2:])))
    return Plan("ops", gemm, tuple(ops), notes, {**knobs, **extra}, edges)


class OpsDataflow(Dataflow):
    """The ``ops`` dataflow: ``tau`` is a float knob that also takes ``"auto"`` (τ and preset
    chosen from the trace's errors against ``budget``, ``dataflow/ops_tau.py``), which the
    generic type check (a knob takes its default's type) cannot express; with ``tau=auto`` and
    no ``preset`` given, the preset is chosen too (``preset=auto``). The error reported for a
    run is the trace's at the chosen τ and preset."""

    def resolve_knobs(self, given: Mapping[str, Any] | None, source: str = "knobs") -> dict:
        if not isinstance(given, Mapping):
            return super().resolve_knobs(given, source)
        given = dict(given)
        tau = given.get("tau")
        auto = isinstance(tau, str) and tau == "auto"
        if isinstance(tau, str) and not auto:
            raise UserInputError(source, f"ops knob expects float or 'auto', got {tau!r}",
                                 "ops.tau")  # fmt: skip
        if auto:
            del given["tau"]
        knobs = super().resolve_knobs(given, source)
        if not knobs["budget"] >= 0:
            raise UserInputError(source, "the error budget is a relative output error ≥ 0, "
                                 f"got {knobs['budget']!r}", "ops.budget")  # fmt: skip
        if auto:
            knobs["tau"] = "auto"
            if "preset" not in given:
                knobs["preset"] = "auto"
        return knobs

    def numerical_error(self, stats, knobs, gemm) -> float | None:
        if stats is not None and "auto" in (knobs.get("tau"), knobs.get("preset")):
            knobs = ops_tau.resolve(stats, knobs)[0]
        return super().numerical_error(stats, knobs, gemm)


build.dataflows = tuple(OpsDataflow(**{f.name: getattr(d, f.name) for f in fields(d)})
                        for d in build.dataflows)  # fmt: skip


def _interleaved(gemm, arch, knobs, gran, fractions, tile, source) -> Plan:
    """One interleaved pass on a bit-slice unit (module docstring); ``fractions`` = (sets,
    rows or None, tiles) skipped."""
    sets, rows, tiles = fractions
    unit = arch.compute
    if getattr(unit, "slice_bits", None) != 4:
        raise UserInputError(arch.origin, "OPS splits INT16 into 4-bit slices: the bit-slice "
                             "unit needs slice_bits 4", "compute.slice_bits")  # fmt: skip
    per_mac = unit.products_per_mac(unit.rate("int16", arch.origin, "ops"))  # 16
    skip = {"set": sets, "row": rows, "tile": tiles}[gran]
    int16_row = per_mac / unit.products_per_cycle  # cycles of a streamed INT16 row
    if knobs["tau"] >= 0:
        row, stall = unit.early_bird_issue(knobs["chunk"], skip, per_mac - 1)
    else:  # τ < 0: the early bird is off, every row is all 16 items, no comparisons
        row, stall, skip = int16_row, 0.0, 0.0
    m_eff = max(1, math.ceil(gemm.M * row / int16_row - 1e-9))
    scale = gemm.M / m_eff
    ops = (absmax_pass(gemm), quantize_pass(gemm, 16),
           MatmulOp("early_bird_interleaved", m_eff, gemm.K, gemm.N, "int16", 16 * scale,
                    16, 16 * scale, math.ceil(32 * scale - 1e-9),
                    epilogue_ops_per_output=1.0 * scale, count=gemm.count))  # fmt: skip
    row_note = f"{rows:.1%} of 1×{tile} row segments, " if rows is not None else ""
    notes = (f"skip ({gran} granularity): {skip:.1%} of the remaining slice products; "
             f"{sets:.1%} of computation sets, {row_note}{tiles:.1%} of {tile}×{tile} output "
             f"tiles ({source}); a streamed row costs {row:.3g} of {int16_row:g} cycles"
             + (f", of which {stall:.3g} comparator stall" if stall else ""),
             f"one interleaved INT16 pass written as M' = {m_eff} rows for M = {gemm.M} "
             "(operand, output and accumulator widths scaled by M/M'); comparisons inline, "
             "not priced")  # fmt: skip
    extra = {
        "ops_set_skip_fraction": sets,
        **({"ops_row_skip_fraction": rows} if rows is not None else {}),
        "ops_tile_skip_fraction": tiles,
        "ops_tile": tile,
        "ops_granularity": gran,
        "ops_row_cycles": row,
        "ops_comparator_stall": stall,
    }
    return Plan(
        "ops",
        gemm,
        ops,
        notes,
        {**knobs, **extra},
        (*_INT16_IN, Edge("quantize", "early_bird_interleaved")),
    )


#: Per-tensor INT16 X: the quantize needs the absmax of the whole tensor, then goes row block by
#: row block into the matmul (docs/dataflows.md, "Overlap and fusion").
_INT16_IN = (Edge("absmax", "quantize", streamed=False),)


@register("int16", {}, "INT16 activations and weights at the 16-bit rate (OPS's baseline)")
def build_int16(gemm, arch, stats, knobs) -> Plan:
    ops = (absmax_pass(gemm), quantize_pass(gemm, 16),
           MatmulOp("matmul", gemm.M, gemm.K, gemm.N, "int16", 16, 16, 16,
                    epilogue_ops_per_output=1.0, count=gemm.count))  # fmt: skip
    return Plan("int16", gemm, ops, (), {}, (*_INT16_IN, Edge("quantize", "matmul")))
