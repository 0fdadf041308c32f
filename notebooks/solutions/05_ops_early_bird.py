"""Worked answers to the exercises of ``05_ops_early_bird.ipynb`` (reveal after trying).

Each function returns the values of the notebook's ✎ variables, computed the way a student
would — from the architecture file (``arch_configs/ops_bitslice.yaml``) and the numbers the
notebook printed (the trace's skip fractions) — not by asking the simulator for the answer.
``tests/test_notebooks.py`` runs the notebook with these filled in and every check strict, so an
answer that stops matching the simulator fails CI. The ``try_*`` functions answer the ✎ *Try it*
prompts (not checked in the notebook).
"""

from __future__ import annotations

import math

import accel_sim
from accel_sim.workload.trace import load_trace

ARCH = "ops_bitslice"
CHUNK = 32  # the ops dataflow's default computation set


def _array() -> tuple[int, int, int]:
    """R, C and the slice width from the architecture file."""
    unit = accel_sim.load_arch(ARCH).compute
    return unit.rows, unit.cols, unit.slice_bits


def _gemm_and_skips():
    """The notebook's GEMM (layer-0 gate_proj, trace index 4) and its stored skip fractions."""
    trace = load_trace("smollm2-135m")
    gemm = trace.gemms[4]
    return gemm, trace.stats_for(gemm)["ops_skip"]


def slices() -> dict:
    """A b-bit operand is ceil(b/4) slices of 4 bits; a MAC multiplies every slice of x with
    every slice of w: ceil(b/4)² slice products — 16, 4 and 1 at INT16, INT8 and INT4, so on one
    array the rates are INT16 : INT8 : INT4 = 1 : 4 : 16."""
    _, _, sb = _array()
    return {f"my_p{b}": math.ceil(b / sb) ** 2 for b in (16, 8, 4)}


def _fold(stream_cycles_per_row: float, m: int) -> float:
    """One fold at INT16: load 4 weight slices per column (s_w·R), skew R + C − 2, stream."""
    R, C, sb = _array()
    s_w = math.ceil(16 / sb)
    return s_w * R + R + C - 2 + stream_cycles_per_row * m


def fold() -> dict:
    """256×576×1536 at INT16 on 32×128 PEs: s_w = 4, P = 16. One fold = 4·32 + 32 + 128 − 2 +
    16·256 = 128 + 158 + 4,096 = 4,382 cycles. Folds: ceil(576/32)·ceil(1536/128) = 18·12 = 216,
    so the array computes 216 · 4,382 = 946,512 cycles. (The total adds the absmax/quantize
    passes before the first rows arrive and the drain of the last outputs.)"""
    R, C, _ = _array()
    M, K, N = 256, 576, 1536
    per_fold = _fold(16, M)
    return {"my_fold_cycles": per_fold,
            "my_compute_cycles": math.ceil(K / R) * math.ceil(N / C) * per_fold}  # fmt: skip


def early_bird() -> dict:
    """At τ = 0 the trace's set skip fraction is s ≈ 0.975, so a row costs 1 + 15·(1 − s) ≈ 1.374
    cycles (the hi×hi item always, the other 15 only for kept sets). A fold: 286 + 1.374·256 ≈
    638 cycles; × 216 folds ≈ 137,800 cycles, within 0.1 % of the simulator (which streams whole
    16-cycle rows: ceil(256·1.374/16) = 22 of them per fold)."""
    R, C, _ = _array()
    gemm, skips = _gemm_and_skips()
    s = skips[f"{CHUNK}:0"]["sets"]
    row = 1 + 15 * (1 - s)
    folds = math.ceil(gemm.K / R) * math.ceil(gemm.N / C)
    return {"my_row_cycles": row, "my_eb_compute": folds * _fold(row, gemm.M)}


def granularity() -> dict:
    """Each granularity's row cost is 1 + 15·(1 − s) with its own s, so the differences are
    15·(s_set − s_row) and 15·(s_set − s_tile). At τ = 1: s_set ≈ 0.994, s_row ≈ 0.758,
    s_tile ≈ 0.086 → the lockstep row array spends ≈ 3.5 more cycles per streamed row, the tile
    array ≈ 13.6 more (almost the whole 15: it drops hardly anything)."""
    _, C, _ = _array()
    _, skips = _gemm_and_skips()
    entry = skips[f"{CHUNK}:1"]
    s_set, s_row, s_tile = entry["sets"], entry["rows"][str(C)], entry["tiles"][str(C)]
    return {"my_row_extra": 15 * (s_set - s_row), "my_tile_extra": 15 * (s_set - s_tile)}


def try_independence() -> dict:
    """(A "try it".) At τ = 0, s ≈ 0.975 and s¹²⁸ ≈ 0.04, but the trace's row fraction is ≈ 0.39,
    ten times more: skipped sets are not independent, they cluster. A set is kept only where a
    non-zero high slice of x meets one of w in the chunk; a token whose activations in a chunk are
    all below max|X|/8 has only zero high slices there, and then *every* column skips it. The
    kept sets sit on the few tokens and channels with outliers, so whole row segments drop
    together — and a 128×128 tile, which needs 128 such tokens in a row, almost never does."""
    _, C, _ = _array()
    _, skips = _gemm_and_skips()
    entry = skips[f"{CHUNK}:0"]
    independent = entry["sets"] ** C
    return {"independent_row_fraction": independent, "trace_row_fraction": entry["rows"][str(C)]}


def try_comparators() -> dict:
    """(A "try it".) With C/2 = 64 comparators the row's (R/chunk)·C = 128 hi×hi sums take
    128/64 = 2 cycles, while at τ = 16 the items take only 1 + 15·(1 − s) ≈ 1.0: the row costs
    max(items, compare) = 2 cycles, about 1 of them a comparator stall. What that costs the GEMM
    is smaller than the row's 2× suggests, because rows are a part of the cycles: at τ = 16
    (set granularity) the simulator gives 217,705 cycles instead of 181,059, against INT16's
    967,358 (5.3× → 4.4× over INT16). chunk = 16 on the shipped array does the same: each
    32-row column now holds R/chunk = 2 sets, so 256 sums per row for 128 comparators, again
    2 cycles per row."""
    R, C, _ = _array()
    _, skips = _gemm_and_skips()
    items = 1 + 15 * (1 - skips[f"{CHUNK}:16"]["sets"])
    half = max(items, (R // CHUNK) * C / (C // 2))
    chunk16 = max(1 + 15 * (1 - skips["16:16"]["sets"]), (R // 16) * C / C)
    return {"row_cycles_half_comparators": half, "row_cycles_chunk16": chunk16}
