"""OliVe (outlier-victim pairs) and ANT (adaptive numeric types) on the bit-slice array (issue 10,
item 4): their formats against hand-worked values from the authors' code, the OVP codes and the
decoder's exponent-integer pairs, ANT's selection by MSE and 8-bit fallback, the plans' costs as
hand counts on ``ops_bitslice`` (R = 32, C = 128: a fold of m rows at P slice products per MAC
and s_w weight slices is ``s_w·R + R + C − 2 + P·m`` cycles), and the skip elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accel_sim
from accel_sim.api import unsupported_reason
from accel_sim.arch.load import load_arch
from accel_sim.dataflow import ant as ant_flow
from accel_sim.dataflow.plan import MatmulOp, VectorOp
from accel_sim.quant import ant, olive
from accel_sim.quant.reference import relative_error, y_exact, y_w4a4_static
from accel_sim.workload.gemm import Gemm

ARCH = "ops_bitslice"
R, C = 32, 128


def _fold(P: int, s_w: int, m: int) -> int:
    return s_w * R + R + C - 2 + P * m


# ------------------------------------------------------------------ OliVe's formats
def test_olive_grids_by_hand():
    assert olive.normal_grid(4).tolist() == [4.0 * i for i in range(-7, 8)]
    # abfloat E2M1, bias 5: 2^e·(1 + m/2), e = 5..8, without 32 itself
    assert olive.outlier_grid(4)[7:].tolist() == [48, 64, 96, 128, 192, 256, 384]
    assert olive.normal_grid(4, "flint")[7:].tolist() == [0, 2, 4, 6, 8, 12, 16, 32]
    out8 = olive.outlier_grid(8)
    assert len(out8) == 2 * (4 * 32 - 1) and out8[-1] == 256 * (1 + 31 / 32)
    assert out8[len(out8) // 2] == 32 * (1 + 1 / 32)
    assert olive.normal_grid(8)[-1] == 31.75  # 127 · 32/128


def test_victims_follow_the_pair_rule():
    # pairs (48, 8): 8 is the victim; (4, −96): 4 is; (12, 20): none; (64, 128): both are
    # outliers, the odd one is the victim (authors' _forward)
    q = np.array([[48.0, 8, 4, -96], [12, 20, 64, 128]])
    assert olive.victims(q).tolist() == [[False, True, True, False], [False, False, False, True]]
    v = np.array([[50.0, 7.9, 3.0, -100.0], [13.0, 19.0, 70.0, 140.0]])
    assert olive.ovp_codes(v, 4).tolist() == [[48, 0, 0, -96], [12, 20, 64, 0]]


def test_ovp_codes_and_decoder_by_hand():
    q = np.array([96.0, 0.0, -12.0, 28.0, 0.0, -384.0])
    codes = olive.encode4(q)
    # 96 = 2^6·1.5: e = 1, m = 1 → 0b0011; its victim → identifier 0b1000; −12 = −3 normal LSBs
    # → 0b1011; 28 → 0b0111; victim → 0b1000; −384 = −2^8·1.5: sign, e = 3, m = 1 → 0b1111
    assert codes.tolist() == [0b0011, 0b1000, 0b1011, 0b0111, 0b1000, 0b1111]
    integer, exponent = olive.decode4(codes)
    assert integer.tolist() == [3, 0, -3, 7, 0, -3]
    assert exponent.tolist() == [3, 0, 0, 0, 0, 5]  # 3·2^3 = 24 LSBs = 96; 3·2^5·4 = 384


def test_decoded_integer_products_equal_the_grid_values():
    """The PE's integer products shifted by the exponent sums equal the product of the grid
    values: the exponent-integer path is exact."""
    rng = np.random.default_rng(0)
    x = olive.ovp_codes(rng.standard_t(2, (8, 64)) * 9, 4)
    w = olive.ovp_codes(rng.standard_t(2, (16, 64)) * 9, 4)
    assert (np.abs(x) > 32).any() and (np.abs(w) > 32).any()
    ix, ex = olive.decode4(olive.encode4(x))
    iw, ew = olive.decode4(olive.encode4(w))
    assert np.array_equal(ix * 2.0**ex * 4, x) and np.array_equal(iw * 2.0**ew * 4, w)
    hw = (ix[:, None, :] * iw[None, :, :] * 2.0 ** (ex[:, None, :] + ew[None, :, :])).sum(-1)
    assert np.array_equal(hw * 16, x @ w.T)


def test_olive_keeps_outliers_that_int4_clips():
    """OliVe's claim on a tensor with rare large outliers: lower output error than per-tensor
    INT4 (absmax scale), and the 8-bit variant lower still."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((96, 128))
    X[:, 5] *= 40  # an outlier channel
    W = rng.standard_normal((64, 128)) * 0.05
    calib, held = X[:48], X[48:]
    exact = y_exact(held, W)
    e4 = relative_error(olive.y_olive(calib, held, W, 4), exact)
    e8 = relative_error(olive.y_olive(calib, held, W, 8), exact)
    int4 = relative_error(y_w4a4_static(held, W), exact)
    assert e8 < e4 < int4


# ------------------------------------------------------------------ ANT's types
def test_ant_grids_by_hand():
    assert (ant.grid("int") * 7).tolist() == list(range(-8, 8))
    assert (ant.grid("pot") * 64)[8:].tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert (ant.grid("flint") * 4)[7:].tolist() == [0, 0.25, 0.5, 0.75, 1, 1.5, 2, 4]
    assert (ant.grid("int", signed=False) * 15).tolist() == list(range(16))
    assert (ant.grid("int", 8) * 127).tolist() == list(range(-128, 128))


@pytest.mark.parametrize("kind", ["int", "pot", "flint"])
def test_ant_picks_the_type_a_tensor_is_made_of(kind):
    """A tensor whose values are exactly one type's grid (times a scale, absmax at the grid's
    maximum, ratio 100 % in the search) has MSE 0 in that type and not in the others."""
    rng = np.random.default_rng(2)
    g = ant.grid(kind)
    x = rng.choice(g[(g > -1) & (g != 0)], size=(4, 96)) * 3.0
    x[:, 0] = 3.0  # every row reaches the grid's maximum
    chosen, _, mse = ant.select(x, 4, per_row=False)
    assert chosen == kind and mse == pytest.approx(0.0, abs=1e-24)
    others = [ant.search(x, k, 4, False)[1] for k in ant.TYPES if k != kind]
    assert min(others) > 1e-6


def test_ant_fallback_rule():
    knobs = dict(ant_flow.KNOBS)
    assert ant_flow.precision({"errors": {ant_flow.CALIB_KEY: 0.2}}, knobs)[0] == 8
    assert ant_flow.precision({"errors": {ant_flow.CALIB_KEY: 0.01}}, knobs)[0] == 4
    bits, why = ant_flow.precision(None, knobs)
    assert bits == 4 and "no 8-bit fallback decided" in why
    assert ant_flow.precision(None, {**knobs, "bits": 8})[0] == 8
    plan = ant_flow.build(Gemm(64, 64, 256), load_arch(ARCH),
                          {"errors": {ant_flow.CALIB_KEY: 0.2}}, knobs)  # fmt: skip
    assert plan.matmuls[0].precision == "int8" and plan.knobs["ant_bits"] == 8


# ------------------------------------------------------------------ plans and costs
@pytest.mark.parametrize("flow, knobs, P, s_w", [
    ("olive", {"bits": 4}, 1, 1), ("olive", {"bits": 8}, 4, 2), ("ant", {"bits": 4}, 1, 1),
    ("ant", {"bits": 8}, 4, 2)])  # fmt: skip
def test_matmul_cycles_are_the_fold_count(flow, knobs, P, s_w):
    """1024×512×512: 16 × 4 folds of 1024 streamed rows; OliVe-b / ANT-b MACs are ceil(b/4)²
    slice products, like INT-b."""
    r = accel_sim.simulate(ARCH, "1024x512x512", flow, knobs)
    folds = (512 // R) * (512 // C)
    assert r.compute_cycles == folds * _fold(P, s_w, 1024)
    assert r.energy_breakdown_pj[f"mac_int{knobs['bits']}"] > 0


def test_plan_encoder_and_decoder_counts():
    from accel_sim.dataflow.olive import build

    r = accel_sim.simulate(ARCH, "64x256x512", "olive", {"bits": 4})
    plan = build(Gemm(64, 256, 512), load_arch(ARCH), None, {"bits": 4})
    enc, mm = plan.ops
    assert isinstance(enc, VectorOp) and enc.elements == 64 * 256 and enc.ops_per_element == 4
    assert enc.write_bytes == 64 * 256 // 2  # 4-bit codes
    assert isinstance(mm, MatmulOp) and (mm.a_bits, mm.b_bits, mm.precision) == (4, 4, "int4")
    # X decoded once per column fold (512/128 = 4), W once: 64·256·4 + 256·512
    assert r.knobs["decodes"] == 64 * 256 * 4 + 256 * 512
    assert r.knobs["decoder_pj"] == pytest.approx(r.knobs["decodes"] * 0.03)
    assert r.stalls["vector:ovp_encode"] > 0


def test_units_without_the_rate_skip_with_one_line():
    for flow in ("olive", "ant"):
        reason = unsupported_reason("tpu_like_chip", flow)  # bf16/fp16/int8 only
        assert reason and "no int4 rate" in reason and "\n" not in reason
        assert unsupported_reason("tpu_like_chip", flow, knobs={"bits": 8}) is None
        for arch in (ARCH, "ascend_like_cube", "systolic_32x32_ws"):
            assert unsupported_reason(arch, flow) is None


def test_on_the_systolic_array_olive_packs_like_int4():
    """On a 1:2:4 systolic unit the OliVe-4 matmul is an INT4 matmul of 4-bit operands: the
    same busy cycles as W4A4's (which differs only in its quantize pass)."""
    a = accel_sim.simulate("systolic_32x32_ws", "256x512x512", "olive", {"bits": 4})
    b = accel_sim.simulate("systolic_32x32_ws", "256x512x512", "w4a4_static")
    assert a.ops[-1]["compute_cycles"] == b.ops[-1]["compute_cycles"] > 0


def test_bad_knobs_are_one_line(run_cli):
    for knob in ("olive.bits=5", "ant.bits=6", "ant.budget=-1"):
        flow = knob.split(".")[0]
        code, out, err = run_cli(["run", "--arch", ARCH, "--gemm", "64x64x128", "--dataflow",
                                  flow, "--knob", knob])  # fmt: skip
        assert code == 2 and out == "" and err.count("\n") == 1, (knob, err)
    code, _, err = run_cli(["run", "--arch", "tpu_like_chip", "--gemm", "64x64x128",
                            "--dataflow", "olive"])  # fmt: skip
    assert code == 2 and "no int4 rate" in err and err.count("\n") == 1


def _grids() -> list[np.ndarray]:
    """OliVe's normal ∪ outlier grids and every ANT type, signed and unsigned."""
    out = [np.union1d(olive.normal_grid(b, k), olive.outlier_grid(b))
           for k, b in (("int", 4), ("flint", 4), ("int", 8))]  # fmt: skip
    out += [ant.grid(k, b, signed) for k, b in (("int", 4), ("pot", 4), ("flint", 4), ("int", 8))
            for signed in (True, False)]  # fmt: skip
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data(), index=st.integers(0, len(_grids()) - 1))
def test_grid_round_kernel_matches_numpy_reference(data, index):
    """The numba rounding (every MSE scale search calls it; a bucket table, not a search)
    equals the numpy reference on random values, the grid points, their exact midpoints (ties),
    the next floats on either side of both, and far beyond the ends."""
    grid = _grids()[index]
    span = float(grid[-1] - grid[0])
    values = data.draw(st.lists(st.floats(-2 * span, 2 * span, allow_nan=False), min_size=1,
                                max_size=64))  # fmt: skip
    mids = (grid[1:] + grid[:-1]) / 2
    near = [np.nextafter(p, d) for p in (grid, mids) for d in (np.inf, -np.inf)]
    v = np.concatenate([values, grid, mids, *near, [1e9, -1e9, 0.0, -0.0]])
    np.testing.assert_array_equal(olive.grid_round(v, grid), olive.grid_round_ref(v, grid))
    square = v[: v.size - v.size % 2].reshape(2, -1)
    np.testing.assert_array_equal(olive.grid_round(square, grid),
                                  olive.grid_round_ref(square, grid))  # fmt: skip
