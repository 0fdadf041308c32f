"""Statistics of real activation tensors behind the data-dependent costs (docs/modelling.md).

Each public kernel ``f`` validates X, converts it once to C-contiguous float32 (M tokens × K
channels) and runs a numba kernel; ``f_ref`` is its plain-numpy twin. Results are deterministic
(exact integer counts; :func:`mean_abs` sums per-row float64 partials in a fixed order) and
|x| > T is decided exactly (float32 |x| vs float64 T, on bit patterns: :func:`_t_bits`).
Sources: OSC eq. 1, Algorithm 1, §2.2 eqs. 2-4 / Table 1. MUXQ outlier channels, OPS
INT16 slices and early bird, and :func:`tensor_stats` are in :mod:`.stats_ops`, which builds on
this module (never the reverse: no import cycle).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import prange

from accel_sim.errors import UserInputError

# Spinning OpenMP threads made every call 5-10x slower on shared, busy cores: let them sleep.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: OSC eq. 1: T = α·E|X| with α = 5.
OSC_ALPHA = 5.0
_F32_MAX = float(np.finfo(np.float32).max)
_ROW_BLOCKS = 64  # parallel work items for kernels that keep per-block integer counts
_SCAN = 32  # block width of the vectorised "any |x| > T" pre-scan of the OSC kernels
_ABS = np.uint32(0x7FFFFFFF)
_INF_BITS = 0x7F800000  # bits(|x|) >= this  <=>  x is Inf or NaN
_PARALLEL_MIN = 1 << 16  # inputs with fewer elements run the kernels on one thread


def _serial_if_small(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Run a parallel kernel on one thread if its first argument is small (threads gain nothing)."""

    @functools.wraps(kernel)
    def run(*args: Any) -> Any:
        previous = numba.get_num_threads()
        numba.set_num_threads(1 if args[0].size < _PARALLEL_MIN else previous)
        try:
            return kernel(*args)
        finally:
            numba.set_num_threads(previous)

    return run


# --------------------------------------------------------------------------- validation
def as_f32_matrix(X: Any, source: str = "X") -> np.ndarray:
    """X as a C-contiguous float32 M×K matrix (no copy if it already is one), from any real dtype
    (float16/32/64, ml_dtypes bfloat16/FP8, ints). Non-2-D, empty, NaN/Inf (checked after the
    cast: float64 beyond float32 range too) raise :class:`UserInputError`."""
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise UserInputError(source, f"expected a 2-D array (tokens × channels), got {arr.shape}")
    if arr.size == 0:
        raise UserInputError(source, f"expected a non-empty array, got shape {arr.shape}")
    if arr.dtype.kind not in "fiuV":
        raise UserInputError(source, f"expected a real numeric array, got dtype {arr.dtype}")
    try:
        with np.errstate(over="ignore"):  # values beyond float32 become Inf, rejected below
            out = np.ascontiguousarray(arr, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise UserInputError(source, f"cannot convert dtype {arr.dtype} to float32: {exc}") from exc
    if _absmax_bits(out.view(np.uint32)) >= _INF_BITS:
        raise UserInputError(source, "contains NaN or Inf (after conversion to float32)")
    return out


def positive_int(v: Any, name: str, source: str) -> int:
    """v as an int, or UserInputError unless it is a positive integer (bool excluded)."""
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v <= 0:
        raise UserInputError(source, f"{name} must be a positive integer, got {v!r}")
    return int(v)


def check_threshold(T: Any, name: str, source: str) -> float:
    """T as a float, or UserInputError unless finite and >= 0."""
    T = float(T)
    if not math.isfinite(T) or T < 0:
        raise UserInputError(source, f"{name} must be finite and >= 0, got {T!r}")
    return T


def _check_table(table: Any, K: int, G: int, source: str) -> np.ndarray:
    tab = np.ascontiguousarray(table, dtype=np.int64)
    n_groups = -(-K // G)
    if tab.shape != (n_groups,):
        raise UserInputError(source, f"table needs ceil(K/G) = {n_groups} entries, got {tab.shape}")
    k0 = np.arange(n_groups) * G
    bad = np.flatnonzero((tab != -1) & ((tab < k0) | (tab >= np.minimum(k0 + G, K))))
    if bad.size:
        raise UserInputError(source, f"table[{bad[0]}] = {tab[bad[0]]} is not -1 nor in its group")
    return tab


def _osc_inputs(X: Any, G: Any, T: Any, name: str) -> tuple[np.ndarray, int, float]:
    src = f"{name}(X)"
    return as_f32_matrix(X, src), positive_int(G, "G", src), check_threshold(T, "T", src)


# --------------------------------------------------------------------------- absmax / mean|X|
def _t_bits(T: float) -> np.uint32:
    """Bits of the largest float32 t <= T (T >= 0). Non-negative float32 values order like their
    bit patterns, and for float32 a: a > T <=> a > t, so |x| > T <=> bits(|x|) > bits(t)."""
    t = np.float32(min(T, _F32_MAX))
    if float(t) > T:
        t = np.nextafter(t, np.float32(-np.inf))
    return np.array(t, np.float32).view(np.uint32)[()]


@numba.njit(cache=True)
def _bits_max(u: np.ndarray) -> np.uint32:
    """max bits(|x|) of a contiguous uint32 view (exact; this select form vectorises)."""
    mx = np.uint32(0)
    for k in range(u.shape[0]):
        v = u[k] & _ABS
        mx = v if v > mx else mx
    return mx


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _absmax_bits(U: np.ndarray) -> np.uint32:
    rows = np.zeros(U.shape[0], np.uint32)
    for m in prange(U.shape[0]):
        rows[m] = _bits_max(U[m])
    return rows.max()


def _absmax(x: np.ndarray) -> float:
    return float(np.array(_absmax_bits(x.view(np.uint32)), np.uint32).view(np.float32)[()])


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _mean_abs(X: np.ndarray) -> float:
    M, K = X.shape
    rows = np.zeros(M, np.float64)
    k4 = K - K % 4
    for m in prange(M):
        s0 = s1 = s2 = s3 = 0.0
        for k in range(0, k4, 4):
            s0 += abs(X[m, k])
            s1 += abs(X[m, k + 1])
            s2 += abs(X[m, k + 2])
            s3 += abs(X[m, k + 3])
        for k in range(k4, K):
            s0 += abs(X[m, k])
        rows[m] = (s0 + s1) + (s2 + s3)
    total = 0.0
    for m in range(M):  # not rows.sum(): parallel=True would split it by thread count
        total += rows[m]
    return total / (M * K)


def absmax(X: Any) -> float:
    """max |x| over the tensor (numerator of any per-tensor symmetric scale)."""
    return _absmax(as_f32_matrix(X, "absmax(X)"))


def absmax_ref(X: Any) -> float:
    """numpy twin of :func:`absmax`."""
    return float(np.abs(as_f32_matrix(X, "absmax_ref(X)")).max())


def mean_abs(X: Any) -> float:
    """E|X| = (1/(S·H))·Σ|x| (OSC eq. 1), accumulated in float64."""
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
@numba.njit(cache=True)
def _row_afflicted(u: np.ndarray, G: int, tb: np.uint32, out_k: np.ndarray) -> int:
    """Afflicted groups of one row (uint32 view): writes each one's argmax channel (global index,
    smallest on ties) to out_k in group order and returns how many. A vectorised max over blocks
    of _SCAN channels skips the (usually many) blocks without any |x| > T."""
    K = u.shape[0]
    n = 0
    last = -1
    for b0 in range(0, K, _SCAN):
        if _bits_max(u[b0 : b0 + _SCAN]) <= tb:
            continue
        for k in range(b0, min(K, b0 + _SCAN)):
            if (u[k] & _ABS) > tb and k // G != last:
                last = k // G
                kb = last * G
                for kk in range(kb + 1, min(K, kb + G)):
                    if (u[kk] & _ABS) > (u[kb] & _ABS):  # strict: ties keep the smallest index
                        kb = kk
                out_k[n] = kb
                n += 1
    return n


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _group_argmax_counts(U: np.ndarray, G: int, tb: np.uint32) -> np.ndarray:
    """counts[g, j] = #tokens whose max |x| in group g exceeds T, with argmax at local channel j."""
    M, K = U.shape
    n_groups = (K + G - 1) // G
    n_blocks = min(M, _ROW_BLOCKS)
    per = (M + n_blocks - 1) // n_blocks
    part = np.zeros((n_blocks, n_groups, G), np.int64)
    for b in prange(n_blocks):
        out_k = np.empty(n_groups, np.int64)
        for m in range(b * per, min(M, (b + 1) * per)):
            for i in range(_row_afflicted(U[m], G, tb, out_k)):
                part[b, out_k[i] // G, out_k[i] % G] += 1
    return part.sum(axis=0)


def _counts(x: np.ndarray, G: int, T: float) -> np.ndarray:
    return _group_argmax_counts(x.view(np.uint32), G, _t_bits(T))


def _afflicted_ref(x: np.ndarray, G: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """numpy: (afflicted bool[M, groups], global argmax channel int[M, groups])."""
    M, K = x.shape
    n_groups = -(-K // G)
    a = np.zeros((M, n_groups * G), np.float64)  # zero padding never beats a real |x| >= 0
    a[:, :K] = np.abs(x)
    a = a.reshape(M, n_groups, G)
    return a.max(axis=2) > T, a.argmax(axis=2) + np.arange(n_groups) * G


def _counts_ref(x: np.ndarray, G: int, T: float) -> np.ndarray:
    afflicted, k = _afflicted_ref(x, G, T)
    counts = np.zeros((afflicted.shape[1], G), np.int64)
    np.add.at(counts, (k[afflicted] // G, k[afflicted] % G), 1)
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
    return float(np.mean(counts.max(axis=1)[has] / afflicted[has])) if has.any() else math.nan


def osc_lookup_table(X: Any, G: int, T: float) -> np.ndarray:
    """OSC Algorithm 1 (§3.1) for one position/layer: the suppression table, int32[ceil(K/G)].

    For each group of G consecutive channels (the last one may be shorter), the afflicted tokens
    are those whose max |x| in the group exceeds T (§2.2 eq. 3); each contributes its argmax
    channel (eq. 2), counted as a multiset. The entry is the most frequent argmax channel as a
    *global* channel index (the paper stores the local j = entry − g·G), or −1 when no token is
    afflicted. Ties (equal |x| in a token, equal counts) go to the smallest channel index.
    """
    return _table_from_counts(_counts(*_osc_inputs(X, G, T, "osc_lookup_table")))


def osc_lookup_table_ref(X: Any, G: int, T: float) -> np.ndarray:
    """numpy twin of :func:`osc_lookup_table`."""
    return _table_from_counts(_counts_ref(*_osc_inputs(X, G, T, "osc_lookup_table_ref")))


def clustering_density_per_group(X: Any, G: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """OSC §2.2 per group: (N_total, N_hit), int64[ceil(K/G)] each.

    N_total(k) = |S_k|, the afflicted tokens (eq. 3); N_hit(k) = the count of the most frequent
    argmax channel among them (eq. 4); C_k = N_hit/N_total where N_total > 0.
    """
    counts = _counts(*_osc_inputs(X, G, T, "clustering_density_per_group"))
    return counts.sum(axis=1), counts.max(axis=1)


def clustering_density_per_group_ref(X: Any, G: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of :func:`clustering_density_per_group`."""
    counts = _counts_ref(*_osc_inputs(X, G, T, "clustering_density_per_group_ref"))
    return counts.sum(axis=1), counts.max(axis=1)


def clustering_density(X: Any, G: int, T: float) -> float:
    """OSC §2.2 clustering density C̄ = mean over groups of C_k = N_hit/N_total.

    Deviation from the paper's C̄ = (1/K)·Σ_k C_k: C_k is undefined for a group without afflicted
    tokens, so such groups are left out of the mean; nan when no group is afflicted.
    """
    return _density_from_counts(_counts(*_osc_inputs(X, G, T, "clustering_density")))


def clustering_density_ref(X: Any, G: int, T: float) -> float:
    """numpy twin of :func:`clustering_density`."""
    return _density_from_counts(_counts_ref(*_osc_inputs(X, G, T, "clustering_density_ref")))


# --------------------------------------------------------------------------- table quality
@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _hit_counts(U: np.ndarray, table: np.ndarray, G: int, tb: np.uint32) -> tuple[int, int]:
    M = U.shape[0]
    events = np.zeros(M, np.int64)
    hits = np.zeros(M, np.int64)
    for m in prange(M):
        out_k = np.empty(table.shape[0], np.int64)
        events[m] = _row_afflicted(U[m], G, tb, out_k)
        for i in range(events[m]):
            hits[m] += out_k[i] == table[out_k[i] // G]
    return events.sum(), hits.sum()


def table_hit_rate(X_heldout: Any, table: Any, G: int, T: float) -> float:
    """Fraction of held-out outlier events the OSC table catches (OSC §2.2's C_k on new tokens).

    An event is a (token, group) pair whose group max |x| exceeds T; it is a hit when its argmax
    channel (smallest on ties) equals the table entry; entries −1 always miss. nan if no event.
    """
    x, G, T = _osc_inputs(X_heldout, G, T, "table_hit_rate")
    tab = _check_table(table, x.shape[1], G, "table_hit_rate(table)")
    events, hits = _hit_counts(x.view(np.uint32), tab, G, _t_bits(T))
    return hits / events if events else math.nan


def table_hit_rate_ref(X_heldout: Any, table: Any, G: int, T: float) -> float:
    """numpy twin of :func:`table_hit_rate`."""
    x, G, T = _osc_inputs(X_heldout, G, T, "table_hit_rate_ref")
    tab = _check_table(table, x.shape[1], G, "table_hit_rate_ref(table)")
    afflicted, k = _afflicted_ref(x, G, T)
    events = int(afflicted.sum())
    return int((afflicted & (k == tab)).sum()) / events if events else math.nan


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _coverage_counts(X: np.ndarray, in_table: np.ndarray, T: float) -> tuple[int, int]:
    M, K = X.shape
    total = np.zeros(M, np.int64)
    covered = np.zeros(M, np.int64)
    for m in prange(M):
        t = c = 0
        for k in range(K):
            out = abs(X[m, k]) > T
            t += out
            c += out & in_table[k]
        total[m], covered[m] = t, c
    return total.sum(), covered.sum()


def _table_mask(X: Any, table: Any, G: Any, T: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    x, G, T = _osc_inputs(X, G, T, name)
    tab = _check_table(table, x.shape[1], G, f"{name}(table)")
    mask = np.zeros(x.shape[1], np.bool_)
    mask[tab[tab >= 0]] = True
    return x, mask


def osc_branch_coverage(X: Any, table: Any, G: int, T: float) -> float:
    """Fraction of outlier elements (|x| > T) lying in table channels, i.e. carried by OSC's FP16
    branch B (OSC §3.2 step 3; docs/modelling.md). nan when X has no outlier element."""
    x, mask = _table_mask(X, table, G, T, "osc_branch_coverage")
    total, covered = _coverage_counts(x, mask, float(T))
    return covered / total if total else math.nan


def osc_branch_coverage_ref(X: Any, table: Any, G: int, T: float) -> float:
    """numpy twin of :func:`osc_branch_coverage`."""
    x, mask = _table_mask(X, table, G, T, "osc_branch_coverage_ref")
    out = np.abs(x).astype(np.float64) > float(T)
    total = int(out.sum())
    return int(out[:, mask].sum()) / total if total else math.nan
