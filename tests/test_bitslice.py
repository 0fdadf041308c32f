"""The bit-slice PE array (``compute.kind: bitslice``, OPS §III) and OPS on it (issue 10, item 1).

Hand counts use ``arch_configs/ops_bitslice.yaml``: R = 32 rows, C = 128 columns of 4-bit PEs,
weight stationary; a fold of m streamed rows at a precision of P slice products per MAC and s_w
weight slices takes ``s_w·R + R + C − 2 + P·m`` cycles.
"""

from __future__ import annotations

import json
import math

import pytest

import accel_sim
from accel_sim.arch.load import arch_from_dict, load_arch
from accel_sim.arch.units.base import StepTile
from accel_sim.arch.units.bitslice import BitSliceArray, derived_rates
from accel_sim.arch.units.systolic import SystolicArray
from accel_sim.dataflow.plan import ComparatorOp, MatmulOp
from accel_sim.engine.mapper import map_matmul
from accel_sim.workload.trace import load_trace

ARCH = "ops_bitslice"
R, C = 32, 128


@pytest.fixture(scope="module")
def arch():
    return load_arch(ARCH)


@pytest.fixture(scope="module")
def trace():
    return load_trace("smollm2-135m")


def _variant(edit) -> object:
    data = json.loads(load_arch(ARCH).model_dump_json())
    edit(data)
    return arch_from_dict(data, "bitslice+edit")


def _fold(P: int, s_w: int, m: int) -> int:
    return s_w * R + R + C - 2 + P * m


def _stats(sets: float, tiles: float, chunk: int = 32, tau: float = 0.0,
           rows: float | None = None) -> dict:  # fmt: skip
    sizes = (16, 32, 64, 128)
    entry = {"sets": sets, "tiles": {str(t): tiles for t in sizes}}
    if rows is not None:
        entry["rows"] = {str(t): rows for t in sizes}
    grid = {f"{chunk}:{tau:g}": entry}
    return {"ops_skip": grid, "int16_hi_zero_fraction": 0.9, "int16_hi_zero_fraction_w": 0.9}


# ------------------------------------------------------------------ the unit
def test_rates_are_quadratic_in_slices(arch):
    unit = arch.compute
    assert unit.kind == "bitslice" and isinstance(unit, BitSliceArray)
    assert dict(unit.rates) == {"int16": 1, "int8": 4, "int4": 16}  # 1:4:16, not 1:2:4
    assert [unit.products_per_mac(unit.rates[p]) for p in ("int16", "int8", "int4")] == [16, 4, 1]
    assert unit.fp16_macs_per_cycle == R * C // 16  # rate 1 = INT16 MACs per cycle
    assert [unit.peak_macs_per_cycle(p) for p in ("int16", "int8", "int4")] == [256, 1024, 4096]
    with pytest.raises(accel_sim.UserInputError, match="no fp16 rate"):
        unit.rate("fp16")
    # configurable slice width: still quadratic
    assert derived_rates(2) == {"int4": 16, "int8": 4, "int16": 1}
    assert derived_rates(8) == {"int4": 4, "int8": 4, "int16": 1}  # INT4 and INT8 are one slice
    two = _variant(lambda d: d["compute"].update(slice_bits=2)).compute
    assert two.products_per_mac(1) == 64 and two.products_per_mac(16) == 4


def test_fold_formula_hand_counts(arch):
    unit = arch.compute
    tile = StepTile(64, R, C)
    for rate, P, s_w in ((1, 16, 4), (4, 4, 2), (16, 1, 1)):
        assert unit.step_cycles(tile, rate, 64, R, C) == _fold(P, s_w, 64)
        # one more streamed row costs P cycles: the 1:4:16 ratio of the stream
        assert unit.step_cycles(tile, rate, 65, R, C) - unit.step_cycles(tile, rate, 64, R, C) == P
    # INT4 (one slice) is SCALE-Sim's WS fold of an R×C array
    ws = SystolicArray(rows=R, cols=C, dataflow="ws", rates={"int4": 1})
    for m in (1, 17, 300):
        assert unit.step_cycles(StepTile(m, R, C), 16, m, R, C) == ws.step_cycles(
            StepTile(m, R, C), 1, m, R, C
        )


@pytest.mark.parametrize("flow, P, s_w", [("int16", 16, 4), ("w8a8", 4, 2), ("w4a4_static", 1, 1)])
def test_small_gemm_cycles_on_the_engine(flow, P, s_w):
    """64×64×256: K/R × N/C = 2 × 2 folds, each streaming all 64 rows (the mapper keeps the
    whole stream); the engine's compute cycles are the hand count."""
    r = accel_sim.simulate(ARCH, "64x64x256", flow)
    assert r.compute_cycles == 4 * _fold(P, s_w, 64)


def test_cost_ratio_1_4_16_on_a_large_gemm():
    """Compute-bound, the busy cycles of INT16 : INT8 : INT4 approach 16 : 4 : 1 (fold
    overheads aside) — at equal array area, where the systolic unit gives 4 : 2 : 1."""
    c = {f: accel_sim.simulate(ARCH, "1024x512x512", f).compute_cycles
         for f in ("int16", "w8a8", "w4a4_static")}  # fmt: skip
    folds = (512 // R) * (512 // C)
    for f, P, s_w in (("int16", 16, 4), ("w8a8", 4, 2), ("w4a4_static", 1, 1)):
        assert c[f] == folds * _fold(P, s_w, 1024)
    assert c["int16"] / c["w8a8"] == pytest.approx(4, rel=0.05)
    assert c["w8a8"] / c["w4a4_static"] == pytest.approx(4, rel=0.2)


def test_rates_follow_slice_bits_or_a_whole_multiple():
    with pytest.raises(accel_sim.UserInputError, match="rates follow from slice_bits"):
        _variant(lambda d: d["compute"].update(rates={"int16": 1, "int8": 2, "int4": 4}))
    fast = _variant(lambda d: d["compute"].update(rates={"int16": 2, "int8": 8, "int4": 32}))
    unit = fast.compute
    assert unit.products_per_cycle == 2 and unit.comparators == 128  # the file sets 128
    # INT16 (rate 2 now): 16 slice products per MAC at 2 per PE per cycle
    assert unit.step_cycles(StepTile(64, R, C), 2, 64, R, C) == 4 * R + R + C - 2 + 16 * 64 // 2
    with pytest.raises(accel_sim.UserInputError, match="multiple of 16"):
        _variant(lambda d: d["compute"].update(rows=3, cols=5, comparators=5))


def test_energy_coverage_at_load_and_slice_energies(arch):
    assert arch.compute.energy_actions() == ("mac_int16", "mac_int4", "mac_int8")
    assert arch.unused_energy_entries == []
    e = {p: arch.energy["compute"][f"mac_{p}"].value for p in ("int4", "int8", "int16")}
    slice_mac = 0.2 * (4 / 8) ** 2 + 0.05  # 4x4 multiply + 16-bit column add [H14]
    reduction = 0.1 / R  # one 32-bit shift-add per item of R slice products
    for p, P in (("int4", 1), ("int8", 4), ("int16", 16)):
        assert e[p] == pytest.approx(P * (slice_mac + reduction))
    with pytest.raises(accel_sim.UserInputError, match=r"energy\.compute\.mac_int8"):
        _variant(lambda d: d["energy"]["compute"].pop("mac_int8"))


@pytest.mark.parametrize("precision", ["int16", "int8", "int4"])
def test_every_gemm_up_to_4096_maps(arch, precision):
    bits = {"int16": 16, "int8": 8, "int4": 4}[precision]
    for M in (1, 33, 4096):
        for K in (1, 100, 4096):
            for N in (1, 129, 4096):
                op = MatmulOp("mm", M, K, N, precision, bits, bits, 16)
                mapping = map_matmul(arch, op)
                assert mapping.tile.tk == R and mapping.tile.tn == C


# ------------------------------------------------------------------ OPS on the unit
def test_ops_is_one_interleaved_pass_with_hand_cycles(arch):
    """τ = 0, sets 75 % skipped, rows 50 %, tiles 25 %: a row costs 1 + 15·0.25 = 4.75 cycles
    at set granularity, 1 + 15·0.5 = 8.5 at row, 1 + 15·0.75 = 12.25 at tile; written as an
    INT16 matmul of M' = ceil(64·row/16) rows, so the fold is 4R + R + C − 2 + 16·M'."""
    stats = _stats(0.75, 0.25, rows=0.5)
    for gran, row in (("set", 4.75), ("row", 8.5), ("tile", 12.25)):
        r = accel_sim.simulate(ARCH, "64x64x256", "ops", {"tau": 0.0, "granularity": gran}, stats)
        m_eff = math.ceil(64 * row / 16)
        assert [op["name"] for op in r.ops] == ["absmax", "quantize", "early_bird_interleaved"]
        assert r.compute_cycles == 4 * _fold(16, 4, m_eff)
    plan = accel_sim.api.get_dataflow("ops").build(
        accel_sim.api._as_gemm((64, 64, 256)), arch, stats,
        accel_sim.api.get_dataflow("ops").resolve_knobs({"tau": 0.0}),
    )  # fmt: skip
    assert plan.knobs["ops_granularity"] == "set"  # the default on this unit
    assert not any(isinstance(op, ComparatorOp) for op in plan.ops)  # comparators are inline
    (mm,) = plan.matmuls
    assert mm.precision == "int16" and mm.K == 64 and mm.N == 256 and mm.b_bits == 16
    assert mm.M * mm.a_bits == pytest.approx(64 * 16)  # X read once at 16 bits
    assert mm.M * mm.c_bits == pytest.approx(64 * 16)  # a 16-bit output, no 32-bit psums out


def test_ops_off_equals_int16_on_the_unit():
    r16 = accel_sim.simulate(ARCH, "256x512x512", "int16")
    off = accel_sim.simulate(ARCH, "256x512x512", "ops", {"tau": -1.0}, _stats(0.0, 0.0, tau=-1))
    assert off.compute_cycles == r16.compute_cycles


def test_set_row_tile_granularities_save_in_that_order(trace):
    """Coarser blocks skip only when every set in them does: set ≥ row (1×C) ≥ tile (C×C)."""
    gemms = [g for g in trace.gemms if g.layer in (0, 15)]
    for g in gemms:
        stats = trace.stats_for(g)
        int16 = accel_sim.simulate(ARCH, g, "int16", stats=stats).compute_cycles
        for tau in (0.0, 1.0, 4.0, 16.0):
            s, r, t = (accel_sim.simulate(ARCH, g, "ops", {"tau": tau, "granularity": gran},
                                          stats) for gran in ("set", "row", "tile"))  # fmt: skip
            assert (s.extra["ops_set_skip_fraction"] >= r.extra["ops_row_skip_fraction"]
                    >= r.extra["ops_tile_skip_fraction"])  # fmt: skip
            saved = [int16 - x.compute_cycles for x in (s, r, t)]
            assert saved[0] >= saved[1] >= saved[2] >= 0, (g.name, tau)
            assert s.extra["rel_error"] == r.extra["rel_error"] == t.extra["rel_error"]


def test_default_comparators_keep_up(arch, trace):
    unit = arch.compute
    assert unit.comparators == unit.cols  # one per column
    assert unit.early_bird_issue(32, 1.0) == (1.0, 0.0)  # every set skipped: 1 item per row
    for g in trace.gemms[:40]:
        plan = accel_sim.api.get_dataflow("ops").build(
            accel_sim.api._as_gemm((g.M, g.K, g.N)), arch, trace.stats_for(g),
            accel_sim.api.get_dataflow("ops").resolve_knobs({"tau": 16.0}),
        )  # fmt: skip
        assert plan.knobs["ops_comparator_stall"] == 0.0


def test_too_few_comparators_stall(trace):
    g = next(g for g in trace.gemms if g.kind == "up_gate_in")
    stats = trace.stats_for(g)
    half = _variant(lambda d: d["compute"].update(comparators=64))
    full = accel_sim.simulate(ARCH, g, "ops", {"tau": 4.0}, stats)
    slow = accel_sim.simulate(half, g, "ops", {"tau": 4.0}, stats)
    assert slow.compute_cycles > full.compute_cycles
    assert half.compute.early_bird_issue(32, 1.0) == (2.0, 1.0)
    # chunk 16 puts two sets in each column: one comparator per column no longer keeps up
    assert load_arch(ARCH).compute.early_bird_issue(16, 1.0) == (2.0, 1.0)


def test_granularity_knob_errors(trace):
    g = trace.gemms[0]
    stats = trace.stats_for(g)
    with pytest.raises(accel_sim.UserInputError, match="per-set skip hardware"):
        accel_sim.simulate("systolic_32x32_ws", g, "ops", {"tau": 0.0, "granularity": "set"},
                           stats)  # fmt: skip
    with pytest.raises(accel_sim.UserInputError, match="per-row skip hardware"):
        accel_sim.simulate("systolic_32x32_ws", g, "ops", {"tau": 0.0, "granularity": "row"},
                           stats)  # fmt: skip
    with pytest.raises(accel_sim.UserInputError, match="granularity must be one of"):
        accel_sim.simulate(ARCH, g, "ops", {"tau": 0.0, "granularity": "column"}, stats)
    with pytest.raises(accel_sim.UserInputError, match="no row-level early-bird statistics"):
        accel_sim.simulate(ARCH, "64x64x256", "ops", {"tau": 0.0, "granularity": "row"},
                           _stats(0.75, 0.25))  # fmt: skip
    with pytest.raises(accel_sim.UserInputError, match="chunk must divide"):
        accel_sim.simulate(ARCH, g, "ops", {"tau": 0.0, "chunk": 64}, stats)
    # the systolic array keeps today's passes (hi×hi, comparator unit, remaining slices)
    r = accel_sim.simulate("systolic_32x32_ws", g, "ops", {"tau": 0.0}, stats)
    assert [op["name"] for op in r.ops][2:4] == ["hi_x_hi", "early_bird"]
