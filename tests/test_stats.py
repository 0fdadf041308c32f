"""Statistics kernels (accel_sim.workload.stats / stats_ops): numba kernel == numpy reference on
random data (hypothesis), plus tiny cases computed by hand."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from accel_sim.errors import UserInputError
from accel_sim.workload import stats as S
from accel_sim.workload import stats_ops as O
from accel_sim.workload.early_bird_blocks import full_skip_fraction, full_skip_fraction_of_sets

PROPS = settings(max_examples=60, deadline=None)

# values that make ties, exact halves, zeros and rare large outliers likely
_VALUES = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.0, -2.5, 6.0, -6.0, 7.0]),
    st.floats(-8.0, 8.0, width=32),
    st.floats(-1e4, 1e4, width=32),
)


@st.composite
def matrices(draw, max_m: int = 10, max_k: int = 40, k: int | None = None) -> np.ndarray:
    shape = (draw(st.integers(1, max_m)), k if k is not None else draw(st.integers(1, max_k)))
    return draw(arrays(np.float32, shape, elements=_VALUES))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# --------------------------------------------------------------------------- hand-computed cases
# tokens × 7 channels, G = 3 → groups {0,1,2}, {3,4,5}, {6}; T = 5 (strict >)
X_OSC = np.array(
    [
        [0, 9, 1, 0, 0, 0, 0],  # g0 argmax 1
        [0, -8, 7, 6, 6, 1, 0],  # g0 argmax 1; g1 tie 6/6 -> channel 3
        [7, 1, 0, 1, 2, 5.5, 0],  # g0 argmax 0; g1 argmax 5
        [0, 0, 0, 0, 0, 5, 1],  # 5 is not > 5: no event
    ],
    np.float32,
)


def test_basic_reductions_by_hand() -> None:
    x = np.array([[1, -2], [3, -4]], np.float32)
    assert S.absmax(x) == 4.0 and S.mean_abs(x) == 2.5
    assert S.osc_threshold(x, alpha=2.0) == 5.0 and S.osc_threshold(x) == 12.5


def test_osc_table_density_hit_rate_by_hand() -> None:
    G, T = 3, 5.0
    for table_fn in (S.osc_lookup_table, S.osc_lookup_table_ref):
        table = table_fn(X_OSC, G, T)
        assert table.dtype == np.int32 and table.tolist() == [1, 3, -1]  # count tie 3/5 -> 3
    for per_group in (S.clustering_density_per_group, S.clustering_density_per_group_ref):
        total, hit = per_group(X_OSC, G, T)
        assert total.tolist() == [3, 2, 0] and hit.tolist() == [2, 1, 0]
    assert S.clustering_density(X_OSC, G, T) == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert S.clustering_density_ref(X_OSC, G, T) == S.clustering_density(X_OSC, G, T)
    table = np.array([1, 3, -1])
    # events: t0g0 hit, t1g0 hit, t1g1 hit, t2g0 miss, t2g1 miss
    assert S.table_hit_rate(X_OSC, table, G, T) == 3 / 5
    held_out = np.vstack([X_OSC, [[0, 0, 0, 0, 0, 0, 10]]])  # event in the -1 group: a miss
    assert S.table_hit_rate(held_out, table, G, T) == S.table_hit_rate_ref(held_out, table, G, T)
    assert S.table_hit_rate(held_out, table, G, T) == 3 / 6
    # outlier elements: 9 | 8 7 6 6 | 7 5.5 -> 7, of which in channels {1, 3}: 9, 8, 6 -> 3
    assert S.osc_branch_coverage(X_OSC, table, G, T) == 3 / 7
    assert S.osc_branch_coverage_ref(X_OSC, table, G, T) == 3 / 7


def test_osc_no_afflicted_group() -> None:
    x = np.ones((3, 8), np.float32)
    assert S.osc_lookup_table(x, 4, 1.0).tolist() == [-1, -1]
    assert math.isnan(S.clustering_density(x, 4, 1.0))
    assert math.isnan(S.table_hit_rate(x, [-1, -1], 4, 1.0))
    assert math.isnan(S.osc_branch_coverage(x, [-1, -1], 4, 1.0))
    assert S.osc_lookup_table(x, 4, 0.99).tolist() == [0, 4]  # all-equal ties -> first channel


def test_outlier_channels_by_hand() -> None:
    x = np.zeros((3, 6), np.float32)
    x[1, 2] = 6.0  # not > 6
    x[2, 4] = -6.5
    x[0, 5] = 100.0
    assert O.outlier_channels(x).tolist() == [4, 5] and O.outlier_channel_count(x) == 2
    assert O.outlier_channels(x, threshold=50.0).tolist() == [5]
    assert O.channel_absmax(x).tolist() == [0, 0, 6, 0, 6.5, 100]


def test_int16_quantization_and_slices_by_hand() -> None:
    # absmax 32767 -> scale 1; rint halves to even: 2.5->2, 3.5->4, 4095.5->4096, 4094.5->4094
    x = np.array([[32767, 2.5, 3.5, -2.5, 4095.5, 4096, 4094.5, -4095.5]], np.float32)
    q, scale = O.quantize_int16(x)
    assert scale == 1.0 and q.tolist() == [[32767, 2, 4, -2, 4096, 4096, 4094, -4096]]
    neg, hi, lo = O.split_sign_magnitude(q)
    assert neg.tolist() == [[False, False, False, True, False, False, False, True]]
    assert hi.tolist() == [[7, 0, 0, 0, 1, 1, 0, 1]]
    assert lo.tolist() == [[4095, 2, 4, 2, 0, 0, 4094, 0]]
    hi2, lo2 = O.split_twos_complement(q)
    assert hi2.tolist() == [[7, 0, 0, 0xF, 1, 1, 0, 0xF]]  # small negatives: 0xF
    assert lo2.tolist()[0][3] == 0xFFE
    assert O.int16_hi_zero_fraction(x) == 4 / 8
    assert O.int16_hi_zero_fraction(x, "twos_complement") == 3 / 8
    assert O.int16_hi_zero_tile_map(x, 1, 4).tolist() == [[0.75, 0.25]]
    assert O.int16_hi_zero_fraction(np.zeros((2, 2))) == 1.0  # scale 1, all q = 0


def test_early_bird_by_hand() -> None:
    # absmax 32767 -> scale 1 -> signed hi = sign·(|q| >> 12)
    x = np.array([[32767, 4096, -8192, 100]], np.float32)  # hi: 7, 1, -2, 0
    w = np.array([[32767, -4096, 4096, 0], [0, 0, 0, -32767]], np.float32)  # 7,-1,1,0 / 0,0,0,-7
    # chunk 2: P(n0,c0) = 49 - 1 = 48, P(n0,c1) = -2, P(n1,c0) = 0, P(n1,c1) = 0
    p = O.early_bird_partial_sums_ref(x, w, 2)
    assert p.tolist() == [[[48, -2], [0, 0]]]
    assert O.early_bird_stats(x, w, 2, 2) == (0.5, 0.75)
    assert O.early_bird_stats(x, w, 2, 1) == (0.5, 0.5)
    assert O.early_bird_skip_map(x, w, 2, 2, 1, 1).tolist() == [[[0, 1], [1, 1]]]
    assert O.early_bird_skip_map(x, w, 2, 2, 1, 2).tolist() == [[[0.5, 1]]]
    cancel = np.array([[32767, 32767]], np.float32), np.array([[32767, -32767]], np.float32)
    assert O.early_bird_stats(*cancel, 2, 0) == (1.0, 1.0)  # 49 - 49 = 0: counted as zero


def test_full_skip_blocks_by_hand() -> None:
    """Rows and tiles skip only when every set in them does (same x, w as above: sets
    skipped at τ = 2 are (n0,c1), (n1,c0), (n1,c1); only (n0,c0) = 48 is kept)."""
    x = np.array([[32767, 4096, -8192, 100]], np.float32)
    w = np.array([[32767, -4096, 4096, 0], [0, 0, 0, -32767]], np.float32)
    # a row of 2 columns: chunk 0 keeps n0 -> not skipped; chunk 1 all skipped -> 1 of 2
    assert full_skip_fraction(x, w, 2, 2, 1, 2) == 0.5
    # a row of 1 column = the set itself: 3 of 4 sets
    assert full_skip_fraction(x, w, 2, 2, 1, 1) == 0.75
    # τ = 48 skips every set, so every block of any shape
    assert full_skip_fraction(x, w, 2, 48, 4, 4) == 1.0
    skip = np.array([[[False, True], [True, True]]])  # [M=1, N=2, C=2]
    assert full_skip_fraction_of_sets(skip, 1, 2) == 0.5
    assert full_skip_fraction_of_sets(skip, 3, 1) == 0.75  # padding never blocks a skip
    three = np.ones((3, 3, 1), bool)
    three[2, 2, 0] = False  # one kept set in the corner
    assert full_skip_fraction_of_sets(three, 2, 2) == 3 / 4  # 2x2 tiles: only the corner one
    assert full_skip_fraction_of_sets(three, 1, 3) == 2 / 3  # rows of 3: the last row is kept
    with pytest.raises(UserInputError):
        full_skip_fraction_of_sets(three.astype(int), 1, 1)
    with pytest.raises(UserInputError):
        full_skip_fraction_of_sets(three, 0, 1)


def test_tensor_stats_json() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    x[:, [5, 70]] *= 40
    st_ = O.tensor_stats(x)
    json.dumps(st_, allow_nan=False)
    assert st_["shape"] == [64, 128] and st_["outlier_channels"] == O.outlier_channel_count(x)
    assert st_["absmax"] == S.absmax(x) and st_["osc_threshold"] == S.osc_threshold(x)
    for g in ("16", "32", "64"):
        assert st_["clustering_density"][g] == S.clustering_density(x, int(g), S.osc_threshold(x))
    assert st_["int16_hi_zero_fraction"] == O.int16_hi_zero_fraction(x)
    zero = O.tensor_stats(np.zeros((2, 3)))
    json.dumps(zero, allow_nan=False)
    assert zero["clustering_density"] == {"16": None, "32": None, "64": None}


# --------------------------------------------------------------------------- input handling
@pytest.mark.parametrize(
    "bad",
    [
        np.array([[1.0, np.nan]]),
        np.array([[np.inf, 1.0]], np.float32),
        np.array([[1e39, 1.0]]),  # finite float64, Inf in float32
        np.ones(3),
        np.ones((2, 2, 2)),
        np.ones((0, 4)),
        np.ones((2, 2), complex),
        np.array([["a", "b"]]),
    ],
)
def test_bad_inputs_raise_user_input_error(bad: np.ndarray) -> None:
    for fn in (S.absmax, S.mean_abs, O.tensor_stats, O.int16_hi_zero_fraction):
        with pytest.raises(UserInputError):
            fn(bad)


def test_bad_arguments_raise_user_input_error() -> None:
    x = np.ones((4, 8), np.float32)
    calls = [
        lambda: S.osc_lookup_table(x, 0, 1.0),
        lambda: S.osc_lookup_table(x, 2.5, 1.0),
        lambda: S.clustering_density(x, 4, -1.0),
        lambda: S.clustering_density(x, 4, math.inf),
        lambda: S.table_hit_rate(x, [0, 4, 8], 4, 1.0),
        lambda: S.table_hit_rate(x, [0, 3], 4, 1.0),  # 3 is not in group 1
        lambda: O.int16_hi_zero_fraction(x, "ones_complement"),
        lambda: O.early_bird_stats(x, np.ones((3, 7)), 4, 0),
        lambda: O.early_bird_stats(x, x, 0, 0),
        lambda: O.early_bird_skip_map(x, x, 4, -1, 1, 1),
        lambda: O.early_bird_skip_map(x, x, 4, 0, 0, 1),
        lambda: O.tensor_stats(x, alpha=0.0),
    ]
    for call in calls:
        with pytest.raises(UserInputError):
            call()


def test_dtypes_and_layouts_convert_once() -> None:
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal((16, 24)).astype(np.float32)
    for other in (x32.astype(np.float16), x32.astype(ml_dtypes.bfloat16), x32.astype(np.float64)):
        ref = np.asarray(other, dtype=np.float32)
        assert S.absmax(other) == S.absmax(ref) and O.tensor_stats(other) == O.tensor_stats(ref)
    xt = np.asfortranarray(x32)
    assert S.osc_lookup_table(xt, 8, 1.0).tolist() == S.osc_lookup_table(x32, 8, 1.0).tolist()
    assert S.as_f32_matrix(x32) is x32  # no copy for float32 C-order
    assert S.absmax(rng.integers(-9, 9, (3, 3))) <= 9


def test_results_do_not_depend_on_thread_count() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((300, 257)) * 3).astype(np.float32)
    w = rng.standard_normal((40, 257)).astype(np.float32)
    before = numba.get_num_threads()
    runs = []
    for n in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        numba.set_num_threads(n)
        runs.append((S.mean_abs(x), O.tensor_stats(x), O.early_bird_stats(x, w, 16, 3).__repr__()))
    numba.set_num_threads(before)
    assert all(r == runs[0] for r in runs)


# --------------------------------------------------------------------------- kernel == reference
@PROPS
@given(x=matrices(), alpha=st.floats(0.0, 8.0))
def test_reductions_match_reference(x: np.ndarray, alpha: float) -> None:
    assert S.absmax(x) == S.absmax_ref(x)
    assert S.mean_abs(x) == pytest.approx(S.mean_abs_ref(x), rel=1e-12, abs=0)
    assert S.osc_threshold(x, alpha) == pytest.approx(S.osc_threshold_ref(x, alpha), rel=1e-12)
    np.testing.assert_array_equal(O.channel_absmax(x), O.channel_absmax_ref(x))


@PROPS
@given(data=st.data(), x=matrices(max_m=12, max_k=70), G=st.integers(1, 20))
def test_osc_kernels_match_reference(data: st.DataObject, x: np.ndarray, G: int) -> None:
    T = data.draw(st.one_of(st.just(S.osc_threshold(x)), st.floats(0.0, 2e4)))
    table = S.osc_lookup_table(x, G, T)
    np.testing.assert_array_equal(table, S.osc_lookup_table_ref(x, G, T))
    for a, b in zip(
        S.clustering_density_per_group(x, G, T), S.clustering_density_per_group_ref(x, G, T)
    ):
        np.testing.assert_array_equal(a, b)
    assert _same(S.clustering_density(x, G, T), S.clustering_density_ref(x, G, T))
    held = data.draw(matrices(max_m=12, k=x.shape[1]))
    assert _same(S.table_hit_rate(held, table, G, T), S.table_hit_rate_ref(held, table, G, T))
    total, hit = S.clustering_density_per_group(x, G, T)  # on its own calibration data the
    own = S.table_hit_rate(x, table, G, T)  # table hits exactly the N_hit tokens of each group
    assert _same(own, hit.sum() / total.sum() if total.sum() else math.nan)
    cov = S.osc_branch_coverage(held, table, G, T)
    assert _same(cov, S.osc_branch_coverage_ref(held, table, G, T))


@PROPS
@given(x=matrices(), threshold=st.floats(0.0, 1e4))
def test_outlier_channels_match_reference(x: np.ndarray, threshold: float) -> None:
    np.testing.assert_array_equal(O.outlier_channels(x), O.outlier_channels_ref(x))
    got = O.outlier_channels(x, threshold)
    np.testing.assert_array_equal(got, O.outlier_channels_ref(x, threshold))


@PROPS
@given(x=matrices(), tm=st.integers(1, 12), tk=st.integers(1, 12))
def test_int16_kernels_match_reference(x: np.ndarray, tm: int, tk: int) -> None:
    q, s = O.quantize_int16(x)
    q_ref, s_ref = O.quantize_int16_ref(x)
    assert s == s_ref
    np.testing.assert_array_equal(q, q_ref)
    for enc in O.ENCODINGS:
        assert O.int16_hi_zero_fraction(x, enc) == O.int16_hi_zero_fraction_ref(x, enc)
    np.testing.assert_array_equal(
        O.int16_hi_zero_tile_map(x, tm, tk), O.int16_hi_zero_tile_map_ref(x, tm, tk)
    )


@PROPS
@given(amax=st.floats(2.0**-100, 2.0**100, width=32), ulps=st.integers(-3, 3))
def test_hi_zero_interval_is_exact_at_rounding_boundaries(amax: float, ulps: int) -> None:
    """int16_hi_zero_fraction counts an x-interval instead of dividing: check it where q flips."""
    scale, amax32 = float(np.float32(amax)) / 32767, np.float32(amax)
    vals = [amax32]
    for half in (4095.5, -4095.5, 0.5, -0.5, 4096.0, 32766.5, -32766.5):
        v = np.float32(half * scale)
        for _ in range(abs(ulps)):
            v = np.nextafter(v, np.float32(np.sign(ulps) * np.inf))
        vals.append(v)
    x = np.array([[v for v in vals if abs(v) <= amax32]], np.float32)
    np.testing.assert_array_equal(O.quantize_int16(x)[0], O.quantize_int16_ref(x)[0])
    for enc in O.ENCODINGS:
        assert O.int16_hi_zero_fraction(x, enc) == O.int16_hi_zero_fraction_ref(x, enc)


@PROPS
@given(
    data=st.data(),
    x=matrices(max_m=9, max_k=50),
    chunk=st.integers(1, 20),
    tau=st.sampled_from([0, 1, 2, 5, 40, 1e9]),
    tm=st.integers(1, 6),
    tn=st.integers(1, 6),
)
def test_early_bird_matches_reference(
    data: st.DataObject, x: np.ndarray, chunk: int, tau: float, tm: int, tn: int
) -> None:
    w = data.draw(matrices(max_m=9, k=x.shape[1]))
    assert O.early_bird_stats(x, w, chunk, tau) == O.early_bird_stats_ref(x, w, chunk, tau)
    np.testing.assert_array_equal(
        O.early_bird_skip_map(x, w, chunk, tau, tm, tn),
        O.early_bird_skip_map_ref(x, w, chunk, tau, tm, tn),
    )
    skip = np.abs(O.early_bird_partial_sums_ref(x, w, chunk)) <= tau
    assert full_skip_fraction(x, w, chunk, tau, tm, tn) == full_skip_fraction_of_sets(skip, tm, tn)
