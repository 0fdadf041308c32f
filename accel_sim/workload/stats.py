"""Statistics of real activation tensors that drive the data-dependent costs (DESIGN §2).

Every public kernel ``f`` validates its input, converts X once to a C-contiguous float32 matrix
(M tokens × K channels) and runs a numba kernel; beside it ``f_ref`` computes the same quantity in
plain numpy (slow, for the tests). Results are deterministic: integer counts are exact and the one
floating-point sum (:func:`mean_abs`) adds per-row float64 partial sums in a fixed order, whatever
the thread count.

Sources: OSC (seed paper 000) eq. 1 for the threshold, Algorithm 1 for the lookup table, §2.2
eqs. 2-4 for the clustering density (Table 1); LLM.int8() / MUXQ (seed 001, §3.3) for the
"any |x| > 6" outlier-channel criterion. INT16 slicing and early-bird statistics (OPS, seed 003)
live in :mod:`accel_sim.workload.stats_ops`.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import prange

from accel_sim.errors import UserInputError

#: OSC eq. 1: T = α·E|X| with α = 5.
OSC_ALPHA = 5.0
#: LLM.int8() / MUXQ outlier criterion: a channel holding any |x| > 6.
OUTLIER_THRESHOLD = 6.0
#: Group sizes of OSC §2.2 / Table 1 reported by :func:`tensor_stats`.
DENSITY_GROUP_SIZES = (16, 32, 64)
_F32_MAX = float(np.finfo(np.float32).max)
_ROW_BLOCKS = 64  # parallel work items for kernels that keep per-block integer counts


# --------------------------------------------------------------------------- validation
def as_f32_matrix(X: Any, source: str = "X") -> np.ndarray:
    """Return X as a C-contiguous float32 M×K matrix, or raise :class:`UserInputError`.

    Accepts any real dtype numpy can cast to float32 (float16/32/64, ml_dtypes bfloat16/FP8,
    integers). Rejects non-2-D or empty arrays and NaN/Inf (checked after the float32 cast, so a
    float64 value beyond float32 range is rejected too). No copy when X is already float32 C-order.
    """
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise UserInputError(source, f"expected a 2-D array (tokens × channels), got {arr.shape}")
    if arr.size == 0:
        raise UserInputError(source, f"expected a non-empty array, got shape {arr.shape}")
    if arr.dtype.kind not in "fiuV":
        raise UserInputError(source, f"expected a real numeric array, got dtype {arr.dtype}")
    try:
        out = np.ascontiguousarray(arr, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise UserInputError(source, f"cannot convert dtype {arr.dtype} to float32: {exc}") from exc
    if not _all_finite(out):
        raise UserInputError(source, "contains NaN or Inf (after conversion to float32)")
    return out


def _check_group(G: int, source: str) -> int:
    if isinstance(G, bool) or not isinstance(G, int | np.integer) or G <= 0:
        raise UserInputError(source, f"group size G must be a positive integer, got {G!r}")
    return int(G)


def _check_threshold(T: float, source: str, name: str = "T") -> float:
    T = float(T)
    if not math.isfinite(T) or T < 0:
        raise UserInputError(source, f"threshold {name} must be finite and >= 0, got {T!r}")
    return T


def _check_table(table: Any, K: int, G: int, source: str) -> np.ndarray:
    tab = np.ascontiguousarray(table, dtype=np.int64)
    n_groups = -(-K // G)
    if tab.shape != (n_groups,):
        raise UserInputError(source, f"table must have ceil(K/G) = {n_groups} entries, got {tab.shape}")
    k0 = np.arange(n_groups) * G
    bad = (tab != -1) & ((tab < k0) | (tab >= np.minimum(k0 + G, K)))
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        raise UserInputError(source, f"table[{g}] = {tab[g]} is neither -1 nor a channel of group {g}")
    return tab


@numba.njit(cache=True, parallel=True)
def _all_finite(X: np.ndarray) -> bool:
    M, K = X.shape
    bad = np.zeros(M, np.uint8)
    for m in prange(M):
        acc = np.uint8(0)
        for k in range(K):
            acc |= np.uint8(not (abs(X[m, k]) <= _F32_MAX))
        bad[m] = acc
    return not bad.any()


# --------------------------------------------------------------------------- absmax / mean|X|
@numba.njit(cache=True)
def _row_absmax(row: np.ndarray) -> float:
    best = np.float32(0.0)
    for k in range(row.shape[0]):
        a = abs(row[k])
        if a > best:
            best = a
    return best


@numba.njit(cache=True, parallel=True)
def _absmax(X: np.ndarray) -> float:
    M = X.shape[0]
    rows = np.zeros(M, np.float32)
    for m in prange(M):
        rows[m] = _row_absmax(X[m])
    return float(rows.max())


@numba.njit(cache=True, parallel=True)
def _mean_abs(X: np.ndarray) -> float:
    M, K = X.shape
    rows = np.zeros(M, np.float64)
    for m in prange(M):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        k4 = K - K % 4
        for k in range(0, k4, 4):
            s0 += abs(X[m, k])
            s1 += abs(X[m, k + 1])
            s2 += abs(X[m, k + 2])
            s3 += abs(X[m, k + 3])
        for k in range(k4, K):
            s0 += abs(X[m, k])
        rows[m] = (s0 + s1) + (s2 + s3)
    total = 0.0
    for m in range(M):
        total += rows[m]
    return total / (M * K)


def absmax(X: Any) -> float:
    """max |x| over the tensor (the per-tensor scale numerator of any symmetric quantizer)."""
    return _absmax(as_f32_matrix(X, "absmax(X)"))


def absmax_ref(X: Any) -> float:
    """numpy twin of :func:`absmax`."""
    return float(np.abs(as_f32_matrix(X, "absmax_ref(X)")).max())


def mean_abs(X: Any) -> float:
    """E|X| = (1/(S·H)) Σ|x| (OSC eq. 1), accumulated in float64."""
    return _mean_abs(as_f32_matrix(X, "mean_abs(X)"))


def mean_abs_ref(X: Any) -> float:
    """numpy twin of :func:`mean_abs` (pairwise summation: agrees to ~1e-12 relative)."""
    x = as_f32_matrix(X, "mean_abs_ref(X)")
    return float(np.abs(x).sum(dtype=np.float64) / x.size)


def osc_threshold(X: Any, alpha: float = OSC_ALPHA) -> float:
    """OSC eq. 1 (§2.1): T = α·E|X|, α = 5 in the paper."""
    return float(alpha) * _mean_abs(as_f32_matrix(X, "osc_threshold(X)"))


def osc_threshold_ref(X: Any, alpha: float = OSC_ALPHA) -> float:
    """numpy twin of :func:`osc_threshold`."""
    return float(alpha) * mean_abs_ref(X)


# --------------------------------------------------------------------------- OSC group argmax
@numba.njit(cache=True, parallel=True)
def _group_argmax_counts(X: np.ndarray, G: int, T: float) -> np.ndarray:
    """counts[g, j] = #tokens whose group-g argmax is local channel j and whose max |x| > T."""
    M, K = X.shape
    n_groups = (K + G - 1) // G
    n_blocks = min(M, _ROW_BLOCKS)
    per = (M + n_blocks - 1) // n_blocks
    part = np.zeros((n_blocks, n_groups, G), np.int64)
    for b in prange(n_blocks):
        for m in range(b * per, min(M, (b + 1) * per)):
            for g in range(n_groups):
                k0 = g * G
                best = abs(X[m, k0])
                jb = 0
                for k in range(k0 + 1, min(K, k0 + G)):
                    a = abs(X[m, k])
                    if a > best:  # strict: ties keep the smallest channel (np.argmax order)
                        best = a
                        jb = k - k0
                if best > T:
                    part[b, g, jb] += 1
    counts = np.zeros((n_groups, G), np.int64)
    for b in range(n_blocks):
        counts += part[b]
    return counts


def _group_argmax_counts_ref(x: np.ndarray, G: int, T: float) -> np.ndarray:
    M, K = x.shape
    n_groups = -(-K // G)
    a = np.zeros((M, n_groups * G), np.float64)  # pad with 0: never beats a real |x| >= 0
    a[:, :K] = np.abs(x)
    a = a.reshape(M, n_groups, G)
    j = a.argmax(axis=2)
    afflicted = a.max(axis=2) > T
    counts = np.zeros((n_groups, G), np.int64)
    g_idx = np.broadcast_to(np.arange(n_groups), j.shape)
    np.add.at(counts, (g_idx[afflicted], j[afflicted]), 1)
    return counts


def _table_from_counts(counts: np.ndarray) -> np.ndarray:
    """Algorithm 1 lines 16-17: mode of the argmax channels, −1 if no afflicted token."""
    n_groups, G = counts.shape
    table = (counts.argmax(axis=1) + np.arange(n_groups) * G).astype(np.int32)
    table[counts.sum(axis=1) == 0] = -1
    return table


def _density_from_counts(counts: np.ndarray) -> float:
    afflicted = counts.sum(axis=1)
    has = afflicted > 0
    if not has.any():
        return math.nan
    return float(np.mean(counts.max(axis=1)[has] / afflicted[has]))


def _osc_inputs(X: Any, G: int, T: float, name: str) -> tuple[np.ndarray, int, float]:
    src = f"{name}(X)"
    return as_f32_matrix(X, src), _check_group(G, src), _check_threshold(T, src)


def osc_lookup_table(X: Any, G: int, T: float) -> np.ndarray:
    """OSC Algorithm 1 (§3.1) for one position/layer: the suppression table, int32[ceil(K/G)].

    For each group of G consecutive channels (the last group may be shorter), the "afflicted"
    tokens are those whose max |x| in the group exceeds T (eq. 3); each contributes its argmax
    channel (eq. 2). The entry is the most frequent argmax channel, as a *global* channel index
    (the paper stores the local index j = entry − g·G), or −1 when no token is afflicted.
    Ties (equal |x| within a token, or equal counts between channels) go to the smallest index.
    """
    x, G, T = _osc_inputs(X, G, T, "osc_lookup_table")
    return _table_from_counts(_group_argmax_counts(x, G, T))


def osc_lookup_table_ref(X: Any, G: int, T: float) -> np.ndarray:
    """numpy twin of :func:`osc_lookup_table`."""
    x, G, T = _osc_inputs(X, G, T, "osc_lookup_table_ref")
    return _table_from_counts(_group_argmax_counts_ref(x, G, T))


def clustering_density_per_group(X: Any, G: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """OSC §2.2 per group: (N_total, N_hit) as int64[ceil(K/G)] arrays.

    N_total(k) = |S_k|, the afflicted tokens (eq. 3); N_hit(k) = count of the most frequent
    argmax channel among them (eq. 4); C_k = N_hit/N_total where N_total > 0.
    """
    x, G, T = _osc_inputs(X, G, T, "clustering_density_per_group")
    counts = _group_argmax_counts(x, G, T)
    return counts.sum(axis=1), counts.max(axis=1)


def clustering_density_per_group_ref(X: Any, G: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of :func:`clustering_density_per_group`."""
    x, G, T = _osc_inputs(X, G, T, "clustering_density_per_group_ref")
    counts = _group_argmax_counts_ref(x, G, T)
    return counts.sum(axis=1), counts.max(axis=1)


def clustering_density(X: Any, G: int, T: float) -> float:
    """OSC §2.2 clustering density C̄: mean of C_k = N_hit/N_total over groups.

    Deviation from the paper's C̄ = (1/K)·Σ_k C_k: C_k is undefined for a group with no afflicted
    token, so such groups are left out of the mean; nan when no group is afflicted.
    """
    x, G, T = _osc_inputs(X, G, T, "clustering_density")
    return _density_from_counts(_group_argmax_counts(x, G, T))


def clustering_density_ref(X: Any, G: int, T: float) -> float:
    """numpy twin of :func:`clustering_density`."""
    x, G, T = _osc_inputs(X, G, T, "clustering_density_ref")
    return _density_from_counts(_group_argmax_counts_ref(x, G, T))


# --------------------------------------------------------------------------- table quality
@numba.njit(cache=True, parallel=True)
def _hit_counts(X: np.ndarray, table: np.ndarray, G: int, T: float) -> tuple[int, int]:
    M, K = X.shape
    n_groups = table.shape[0]
    events = np.zeros(M, np.int64)
    hits = np.zeros(M, np.int64)
    for m in prange(M):
        e = 0
        h = 0
        for g in range(n_groups):
            k0 = g * G
            best = abs(X[m, k0])
            kb = k0
            for k in range(k0 + 1, min(K, k0 + G)):
                a = abs(X[m, k])
                if a > best:
                    best = a
                    kb = k
            if best > T:
                e += 1
                h += kb == table[g]
        events[m] = e
        hits[m] = h
    return events.sum(), hits.sum()


def table_hit_rate(X_heldout: Any, table: Any, G: int, T: float) -> float:
    """Fraction of held-out outlier events caught by the OSC table (OSC §2.2, C_k on new data).

    An event is a (token, group) pair whose group max |x| exceeds T; it is a hit when its argmax
    channel (smallest on ties) equals the table entry. Groups with entry −1 count as misses.
    nan when there is no event.
    """
    x, G, T = _osc_inputs(X_heldout, G, T, "table_hit_rate")
    tab = _check_table(table, x.shape[1], G, "table_hit_rate(table)")
    events, hits = _hit_counts(x, tab, G, T)
    return hits / events if events else math.nan


def table_hit_rate_ref(X_heldout: Any, table: Any, G: int, T: float) -> float:
    """numpy twin of :func:`table_hit_rate`."""
    x, G, T = _osc_inputs(X_heldout, G, T, "table_hit_rate_ref")
    M, K = x.shape
    tab = _check_table(table, K, G, "table_hit_rate_ref(table)")
    a = np.zeros((M, tab.size * G), np.float64)
    a[:, :K] = np.abs(x)
    a = a.reshape(M, tab.size, G)
    afflicted = a.max(axis=2) > T
    glob = a.argmax(axis=2) + np.arange(tab.size) * G
    events = int(afflicted.sum())
    return int((afflicted & (glob == tab)).sum()) / events if events else math.nan


@numba.njit(cache=True, parallel=True)
def _coverage_counts(X: np.ndarray, in_table: np.ndarray, T: float) -> tuple[int, int]:
    M, K = X.shape
    total = np.zeros(M, np.int64)
    covered = np.zeros(M, np.int64)
    for m in prange(M):
        t = 0
        c = 0
        for k in range(K):
            out = abs(X[m, k]) > T
            t += out
            c += out & in_table[k]
        total[m] = t
        covered[m] = c
    return total.sum(), covered.sum()


def _table_mask(X: Any, table: Any, G: int, T: float, name: str) -> tuple[np.ndarray, np.ndarray, float]:
    x, G, T = _osc_inputs(X, G, T, name)
    tab = _check_table(table, x.shape[1], G, f"{name}(table)")
    mask = np.zeros(x.shape[1], np.bool_)
    mask[tab[tab >= 0]] = True
    return x, mask, T


def osc_branch_coverage(X: Any, table: Any, G: int, T: float) -> float:
    """Fraction of outlier elements (|x| > T) that sit in table channels, i.e. that OSC's FP16
    branch B carries (DESIGN §3, OSC §3.2 step 3). nan when X has no outlier element."""
    x, mask, T = _table_mask(X, table, G, T, "osc_branch_coverage")
    total, covered = _coverage_counts(x, mask, T)
    return covered / total if total else math.nan


def osc_branch_coverage_ref(X: Any, table: Any, G: int, T: float) -> float:
    """numpy twin of :func:`osc_branch_coverage`."""
    x, mask, T = _table_mask(X, table, G, T, "osc_branch_coverage_ref")
    out = np.abs(x).astype(np.float64) > T
    total = int(out.sum())
    return int(out[:, mask].sum()) / total if total else math.nan


# --------------------------------------------------------------------------- outlier channels
@numba.njit(cache=True, parallel=True)
def _channel_absmax(X: np.ndarray) -> np.ndarray:
    M, K = X.shape
    n_blocks = min(M, _ROW_BLOCKS)
    per = (M + n_blocks - 1) // n_blocks
    part = np.zeros((n_blocks, K), np.float32)
    for b in prange(n_blocks):
        row = part[b]
        for m in range(b * per, min(M, (b + 1) * per)):
            for k in range(K):
                a = abs(X[m, k])
                row[k] = a if a > row[k] else row[k]
    out = part[0].copy()
    for b in range(1, n_blocks):
        for k in range(K):
            out[k] = max(out[k], part[b, k])
    return out


def channel_absmax(X: Any) -> np.ndarray:
    """Per-channel max |x| over tokens, float32[K] (per-channel scales, MUXQ/LLM.int8 detection)."""
    return _channel_absmax(as_f32_matrix(X, "channel_absmax(X)"))


def channel_absmax_ref(X: Any) -> np.ndarray:
    """numpy twin of :func:`channel_absmax`."""
    return np.abs(as_f32_matrix(X, "channel_absmax_ref(X)")).max(axis=0)


def outlier_channels(X: Any, threshold: float = OUTLIER_THRESHOLD) -> np.ndarray:
    """Channels holding any |x| > threshold, sorted int64 (LLM.int8() criterion, MUXQ §3.3)."""
    thr = _check_threshold(threshold, "outlier_channels(X)", "threshold")
    cmax = _channel_absmax(as_f32_matrix(X, "outlier_channels(X)"))
    return np.flatnonzero(cmax.astype(np.float64) > thr)


def outlier_channels_ref(X: Any, threshold: float = OUTLIER_THRESHOLD) -> np.ndarray:
    """numpy twin of :func:`outlier_channels`."""
    x = as_f32_matrix(X, "outlier_channels_ref(X)")
    return np.flatnonzero((np.abs(x).astype(np.float64) > float(threshold)).any(axis=0))


def outlier_channel_count(X: Any, threshold: float = OUTLIER_THRESHOLD) -> int:
    """Number of :func:`outlier_channels` (MUXQ's n_out, the Aux width)."""
    return int(outlier_channels(X, threshold).size)


# --------------------------------------------------------------------------- summary
def _json_float(v: float) -> float | None:
    return None if math.isnan(v) else float(v)


def tensor_stats(X: Any, alpha: float = OSC_ALPHA, source: str = "tensor_stats") -> dict[str, Any]:
    """The per-tensor summary printed by ``accel-sim trace stats FILE --json`` (JSON-ready).

    Keys: ``shape`` [M, K]; ``absmax``; ``mean_abs``; ``osc_alpha``; ``osc_threshold`` (OSC eq. 1);
    ``clustering_density`` {"16","32","64"} (OSC §2.2, None when no group is afflicted);
    ``outlier_channels`` (count of channels with any |x| > 6, MUXQ/LLM.int8);
    ``int16_hi_zero_fraction`` (OPS, sign-magnitude INT16 per-tensor).
    """
    from accel_sim.workload.stats_ops import _hi_zero_count, int16_scale

    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha <= 0:
        raise UserInputError(source, f"alpha must be finite and > 0, got {alpha!r}")
    x = as_f32_matrix(X, source)
    amax = _absmax(x)
    mabs = _mean_abs(x)
    T = alpha * mabs
    density = {
        str(G): _json_float(_density_from_counts(_group_argmax_counts(x, G, T)))
        for G in DENSITY_GROUP_SIZES
    }
    n_out = int(np.count_nonzero(_channel_absmax(x).astype(np.float64) > OUTLIER_THRESHOLD))
    hi_zero = _hi_zero_count(x, int16_scale(amax), 0) / x.size
    return {
        "shape": [int(x.shape[0]), int(x.shape[1])],
        "absmax": float(amax),
        "mean_abs": float(mabs),
        "osc_alpha": alpha,
        "osc_threshold": float(T),
        "clustering_density": density,
        "outlier_channels": n_out,
        "int16_hi_zero_fraction": float(hi_zero),
    }
