"""Tests for accel_sim.quant: number formats and per-dataflow reference outputs."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from accel_sim.errors import UserInputError
from accel_sim.quant import (
    MX_ELEMENTS,
    build_osc_table,
    fp16,
    int_quantize,
    int_symmetric,
    mx,
    mx_quantize,
    nvfp4,
    nvfp4_quantize,
    ops_slices,
    outlier_channels,
    relative_error,
    y_exact,
    y_fp16,
    y_int16,
    y_llm_int8,
    y_muxq,
    y_mx,
    y_ops,
    y_osc,
    y_w4a4_static,
    y_w8a8,
)

FP4_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)
OUTLIER_COLS = [5, 70, 200]


@pytest.fixture(scope="module")
def planted():
    """Random X (M×K) with three planted outlier channels (|x| ≫ 6), W (N×K), exact Y."""
    rng = np.random.default_rng(1234)
    M, K, N = 64, 256, 96
    X = rng.standard_normal((M, K)).astype(np.float32)
    X[:, OUTLIER_COLS] *= 30.0
    W = (0.05 * rng.standard_normal((N, K))).astype(np.float32)
    return X, W, y_exact(X, W)


# ---------------------------------------------------------------- formats


def test_mxfp4_exact_values_round_trip():
    rng = np.random.default_rng(0)
    K = 70  # not a multiple of 32: the tail block is padded conceptually
    vals = rng.choice(FP4_GRID, size=(5, K)) * rng.choice([-1, 1], size=(5, K))
    exps = rng.integers(-10, 10, size=(5, math.ceil(K / 32)))
    for b in range(exps.shape[1]):
        vals[:, 32 * b] = 6.0  # every block reaches the top of E2M1, so its scale is 2^exp
    x = (vals * np.ldexp(1.0, np.repeat(exps, 32, axis=1)[:, :K])).astype(np.float32)
    np.testing.assert_array_equal(mx(x, "fp4"), x)
    assert mx(x, "fp4").shape == x.shape


@pytest.mark.parametrize("elem,emax", [("fp4", 2), ("fp8", 8), ("fp8_e5m2", 15)])
def test_e8m0_scale_is_floor_log2_amax_minus_emax(elem, emax):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 96)) * np.exp(rng.uniform(-8, 8, size=(4, 1)))
    elements, scales = mx_quantize(x, elem, 32)
    assert scales.dtype == ml_dtypes.float8_e8m0fnu
    assert elements.dtype == MX_ELEMENTS[elem]
    amax = np.abs(x.astype(np.float32)).reshape(4, 3, 32).max(axis=-1)
    expected = 2.0 ** (np.floor(np.log2(amax)) - emax)
    np.testing.assert_array_equal(scales.astype(np.float64), expected)


def test_mx_zero_block_and_saturation():
    x = np.zeros((2, 64), np.float32)
    x[1, 32] = 7.9  # amax/scale = 7.9 -> saturates to 6·scale (E2M1 max normal)
    y = mx(x, "fp4")
    assert np.all(y[0] == 0) and np.all(np.isfinite(y))
    assert y[1, 32] == 6.0
    _, scales = mx_quantize(x, "fp4")
    assert np.all(np.isfinite(scales.astype(np.float32)))


def test_nvfp4_blocks_of_16_and_scales():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 48)).astype(np.float32)
    x[:, :16] *= 1000.0  # first block large; the other two must keep their own fine scales
    elements, sb, g = nvfp4_quantize(x)
    assert elements.shape == (3, 3, 16) and sb.shape == (3, 3)
    assert elements.dtype == ml_dtypes.float4_e2m1fn and sb.dtype == ml_dtypes.float8_e4m3fn
    assert g == np.float32(np.abs(x).max() / (6 * 448))
    assert float(sb.astype(np.float32).max()) == 448.0  # the tensor's amax maps to 6·448
    y = nvfp4(x)
    for blk in range(3):
        sl = slice(16 * blk, 16 * blk + 16)
        err = np.abs(y[:, sl] - x[:, sl]).max(axis=1)
        amax = np.abs(x[:, sl]).max(axis=1)
        assert np.all(err <= amax / 6 * 1.07)  # ≤ one E2M1 step (2 at top) · scale/2, + E4M3 RNE
    # values already on the grid with amax 6 survive
    grid = np.tile(np.concatenate([FP4_GRID, -FP4_GRID]), (1, 2))
    np.testing.assert_allclose(nvfp4(grid), grid, rtol=1e-6)


def test_int8_per_token_error_bound():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 100)) * rng.uniform(0.01, 100, size=(16, 1))
    q, s = int_quantize(x, 8, axis=0)
    assert s.shape == (16, 1)
    np.testing.assert_allclose(s[:, 0], np.abs(x).max(axis=1) / 127)
    assert np.all(np.abs(q) <= 127) and np.all(q == np.rint(q))
    assert np.all(np.abs(int_symmetric(x, 8, axis=0) - x) <= s / 2 * (1 + 1e-12))


def test_int_static_scale_clips_and_rounds_half_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, 1000.0])
    np.testing.assert_array_equal(int_symmetric(x, 8, scale=1.0), [0, 2, 2, -0, 127])
    with pytest.raises(UserInputError):
        int_symmetric(x, 1)


def test_fp16_rounds():
    assert fp16(np.array([1 + 2**-12]))[0] == 1.0
    assert np.isinf(fp16(np.array([1e6]))[0])


# ---------------------------------------------------------------- dataflows: accuracy order


def test_error_ordering_with_outlier_channels(planted):
    X, W, Y = planted
    e = {
        "fp16": relative_error(y_fp16(X, W), Y),
        "int16": relative_error(y_int16(X, W), Y),
        "llm_int8": relative_error(y_llm_int8(X, W), Y),
        "w8a8_tok": relative_error(y_w8a8(X, W, per_token=True), Y),
        "w8a8_ten": relative_error(y_w8a8(X, W, per_token=False), Y),
        "muxq": relative_error(y_muxq(X, W), Y),
        "muxq2": relative_error(y_muxq(X, W, exp=2), Y),
        "w4a4": relative_error(y_w4a4_static(X, W), Y),
        "mxfp8": relative_error(y_mx(X, W, "mxfp8"), Y),
        "mxfp4": relative_error(y_mx(X, W, "mxfp4"), Y),
    }
    assert e["fp16"] < e["w8a8_tok"] < e["w4a4"]
    assert e["int16"] < e["w8a8_tok"]
    assert e["llm_int8"] < e["w8a8_tok"]
    assert e["muxq2"] < e["muxq"] < e["w8a8_ten"]
    assert e["mxfp8"] < e["mxfp4"]


def test_muxq_without_outliers_is_per_tensor_int8(planted):
    X, W, _ = planted
    Xs = np.clip(X, -5, 5)
    assert outlier_channels(Xs).size == 0
    np.testing.assert_array_equal(y_muxq(Xs, W), y_w8a8(Xs, W, per_token=False))
    # exp = 0: Aux is weighted by 2^0 - 1 = 0 -> naive INT8
    np.testing.assert_array_equal(y_muxq(X, W, exp=0), y_w8a8(X, W, per_token=False))


def test_osc_table_and_branch(planted):
    X, W, Y = planted
    table = build_osc_table(X, G=32)
    assert table.shape == (8,)
    for c in OUTLIER_COLS:
        assert table[c // 32] == c % 32
    plain = y_mx(X, W, "mxfp4")
    np.testing.assert_array_equal(y_osc(X, W, np.full(8, -1), 32), plain)
    for base in ("mxfp4", "nvfp4"):
        assert relative_error(y_osc(X, W, table, 32, base), Y) < 0.7 * relative_error(
            y_mx(X, W, base), Y
        )
    fb = y_osc(X, W, table, 32, fallback_mxfp8=True)
    np.testing.assert_array_equal(fb, y_mx(X, W, "mxfp8"))
    with pytest.raises(UserInputError):
        y_osc(X, W, np.zeros(7, int), 32)


def test_w4a4_static_scale(planted):
    X, W, Y = planted
    Xs = np.clip(X, -4, 4)
    e_abs = relative_error(y_w4a4_static(Xs, W), y_exact(Xs, W))
    e_given = relative_error(y_w4a4_static(Xs, W, act_scale=4 / 7), y_exact(Xs, W))
    assert e_given == pytest.approx(e_abs)
    assert relative_error(y_w4a4_static(X, W, mse_init=True), Y) <= relative_error(
        y_w4a4_static(X, W), Y
    )


# ---------------------------------------------------------------- OPS


def test_ops_slices_reconstruct():
    q = np.array([-32767, -4097, -4096, -1, 0, 1, 4095, 4096, 32767], dtype=np.float64)
    for sign in ("sign_magnitude", "twos_complement"):
        hi, lo = ops_slices(q, sign)
        np.testing.assert_array_equal(hi * 4096 + lo, q)
    hi, _ = ops_slices(q, "sign_magnitude")
    assert hi.max() == 7 and hi.min() == -7 and hi[3] == 0  # -1 has a zero high slice
    assert ops_slices(q, "twos_complement")[0][3] == -1  # ...but 0xF in two's complement


def test_ops_never_skip_equals_int16(planted):
    X, W, _ = planted
    for sign in ("sign_magnitude", "twos_complement"):
        Y, skip = y_ops(X[:, :250], W[:, :250], chunk=32, tau=-1, sign=sign)  # ragged last chunk
        assert skip == 0.0
        np.testing.assert_array_equal(Y, y_int16(X[:, :250], W[:, :250]))


def test_ops_error_and_skips_grow_with_tau(planted):
    X, W, Y = planted
    taus = [-1, 0, 2, 8, 10**6]
    res = [y_ops(X, W, chunk=16, tau=t) for t in taus]
    skips = [s for _, s in res]
    errs = [relative_error(y, Y) for y, _ in res]
    assert skips == sorted(skips) and skips[0] == 0.0 and skips[-1] == 1.0
    assert 0 < skips[1] < 1
    assert errs == sorted(errs) and errs[0] < errs[-1]
    assert errs[-1] == pytest.approx(1.0)  # everything skipped, preset zero -> Y = 0
    # at tau = 0 a skipped set has hi×hi == 0, so both presets agree; above, hi_only is closer
    np.testing.assert_array_equal(y_ops(X, W, 16, 0, "hi_only")[0], res[1][0])
    assert relative_error(y_ops(X, W, 16, 8, "hi_only")[0], Y) <= errs[3]
    # two's complement: small negatives have hi = 0xF, so fewer sets can be skipped
    assert y_ops(X, W, 16, 0, sign="twos_complement")[1] < skips[1]


def test_ops_trace_size_is_fast():
    import time

    rng = np.random.default_rng(5)
    X = rng.standard_normal((256, 576)).astype(np.float32)
    W = rng.standard_normal((1536, 576)).astype(np.float32)
    t0 = time.perf_counter()
    y_ops(X, W, chunk=32, tau=0)
    assert time.perf_counter() - t0 < 5.0  # ~0.2 s warm on 2 cores; generous for loaded CI


# ---------------------------------------------------------------- properties

_floats = st.floats(-1e4, 1e4, allow_nan=False, width=32)


@settings(max_examples=60, deadline=None, database=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 40)), elements=_floats),
    st.sampled_from([None, 0, 1]),
    st.sampled_from([4, 8, 16]),
)
def test_int_quant_idempotent(x, axis, bits):
    once = int_symmetric(x, bits, axis)
    np.testing.assert_allclose(int_symmetric(once, bits, axis), once, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None, database=None)
@given(
    arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 80)), elements=_floats),
    st.sampled_from(["fp4", "fp8"]),
)
def test_mx_idempotent_and_bounded(x, elem):
    once = mx(x, elem)
    np.testing.assert_array_equal(mx(once, elem), once)
    # error ≤ the saturation gap 2^(emax+1) − max normal, times the scale:
    # E2M1: 8 − 6 = 2, E4M3: 512 − 448 = 64
    _, scales = mx_quantize(x, elem)
    s = np.repeat(scales.astype(np.float32), 32, axis=-1)[..., : x.shape[-1]]
    assert np.all(np.abs(once - x) <= (2.0 if elem == "fp4" else 64.0) * s)


@settings(max_examples=60, deadline=None, database=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 5)), elements=_floats),
    arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 5)), elements=_floats),
)
def test_relative_error_properties(a, b):
    assert relative_error(a, a) == 0.0
    if a.shape == b.shape:
        assert relative_error(a, b) >= 0.0
