"""Outlier channels (MUXQ/LLM.int8), INT16 precision slices and early-bird statistics (OPS),
and the per-tensor summary :func:`tensor_stats`. Conventions as in :mod:`.stats`.

INT16 (OPS §I: weights and activations as 16-bit integers): symmetric per-tensor, scale
s = absmax/32767 (s = 1 for an all-zero tensor), q = clip(rint(float64(x)/s), ±32767), rint rounds
half to even. Sign-magnitude slices (docs/modelling.md; the paper leaves it open): q = sign·mag,
mag ∈ [0, 32767], hi = mag >> 12 ∈ [0, 7] (4 bits with the sign), lo = mag & 0xFFF (three 4-bit
slices). In two's complement hi = (q >> 12) & 0xF is 0xF for every small negative q.

Early bird (OPS §II, §III): a computation set is one output (m, n) × one K-chunk of c channels
(the last chunk may be shorter). Its hi×hi partial sum
P_hi = Σ_k (sign·hi)_x[m, k]·(sign·hi)_w[n, k] is an integer in units of one hi×hi product (it
is worth s_x·s_w·2^24·P_hi in Y[m, n]); the set is skipped when |P_hi| ≤ τ, τ in the same units
(τ = 0 skips only sets whose hi×hi sum is exactly 0, cancellations included).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import prange

from accel_sim.errors import UserInputError
from accel_sim.workload.stats import (
    _ROW_BLOCKS,
    OSC_ALPHA,
    _absmax,
    _counts,
    _density_from_counts,
    _mean_abs,
    _serial_if_small,
    as_f32_matrix,
    check_threshold,
    positive_int,
)

INT16_QMAX = 32767
HI_SHIFT = 12
LO_MASK = 0xFFF
ENCODINGS = ("sign_magnitude", "twos_complement")
#: LLM.int8() / MUXQ §3.3 outlier criterion: a channel holding any |x| > 6.
OUTLIER_THRESHOLD = 6.0
#: Group sizes of OSC §2.2 / Table 1 reported by :func:`tensor_stats`.
DENSITY_GROUP_SIZES = (16, 32, 64)


# --------------------------------------------------------------------------- outlier channels
@_serial_if_small
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
    """Per-channel max |x| over tokens, float32[K] (per-channel scales, outlier detection)."""
    return _channel_absmax(as_f32_matrix(X, "channel_absmax(X)"))


def channel_absmax_ref(X: Any) -> np.ndarray:
    """numpy twin of :func:`channel_absmax`."""
    return np.abs(as_f32_matrix(X, "channel_absmax_ref(X)")).max(axis=0)


def outlier_channels(X: Any, threshold: float = OUTLIER_THRESHOLD) -> np.ndarray:
    """Channels holding any |x| > threshold, sorted int64 (LLM.int8() criterion, MUXQ §3.3)."""
    thr = check_threshold(threshold, "threshold", "outlier_channels")
    cmax = _channel_absmax(as_f32_matrix(X, "outlier_channels(X)"))
    return np.flatnonzero(cmax.astype(np.float64) > thr)


def outlier_channels_ref(X: Any, threshold: float = OUTLIER_THRESHOLD) -> np.ndarray:
    """numpy twin of :func:`outlier_channels`."""
    x = as_f32_matrix(X, "outlier_channels_ref(X)")
    return np.flatnonzero((np.abs(x).astype(np.float64) > float(threshold)).any(axis=0))


def outlier_channel_count(X: Any, threshold: float = OUTLIER_THRESHOLD) -> int:
    """Number of :func:`outlier_channels` (MUXQ's n_out, the Aux width)."""
    return int(outlier_channels(X, threshold).size)


# --------------------------------------------------------------------------- INT16 quantization
def int16_scale(amax: float) -> float:
    """Per-tensor symmetric INT16 scale: absmax/32767, or 1.0 for an all-zero tensor."""
    return float(amax) / INT16_QMAX if amax > 0 else 1.0


@numba.njit(cache=True, inline="always")
def _q(v: float, scale: float) -> int:
    r = min(max(np.rint(np.float64(v) / scale), -INT16_QMAX), INT16_QMAX)
    return int(r)


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _quantize_int16(X: np.ndarray, scale: float) -> np.ndarray:
    q = np.empty(X.shape, np.int16)
    for m in prange(X.shape[0]):
        for k in range(X.shape[1]):
            q[m, k] = _q(X[m, k], scale)
    return q


def quantize_int16(X: Any) -> tuple[np.ndarray, float]:
    """Per-tensor symmetric INT16 quantization (module docstring): (q int16[M, K], scale)."""
    x = as_f32_matrix(X, "quantize_int16(X)")
    scale = int16_scale(_absmax(x))
    return _quantize_int16(x, scale), scale


def quantize_int16_ref(X: Any) -> tuple[np.ndarray, float]:
    """numpy twin of :func:`quantize_int16`."""
    x = as_f32_matrix(X, "quantize_int16_ref(X)")
    scale = int16_scale(float(np.abs(x).max()))
    q = np.clip(np.rint(x.astype(np.float64) / scale), -INT16_QMAX, INT16_QMAX)
    return q.astype(np.int16), scale


def split_sign_magnitude(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sign-magnitude slices of q ∈ [−32767, 32767]: (negative bool, hi uint8 0..7, lo uint16
    0..4095), q = (−1)^negative·(hi·4096 + lo). Plain numpy (already vectorised)."""
    mag = np.abs(np.asarray(q, dtype=np.int32))
    return np.asarray(q) < 0, (mag >> HI_SHIFT).astype(np.uint8), (mag & LO_MASK).astype(np.uint16)


def split_twos_complement(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two's-complement slices (hi = (q >> 12) & 0xF, lo = q & 0xFFF): −1 → (0xF, 0xFFF)."""
    q32 = np.asarray(q, dtype=np.int32)
    return ((q32 >> HI_SHIFT) & 0xF).astype(np.uint8), (q32 & LO_MASK).astype(np.uint16)


def _first_reaching(scale: float, target: int) -> np.float32:
    """Smallest finite float32 v with q(v) >= target. q is non-decreasing in v (correctly rounded
    division by s > 0, then rint, then clip), so bisect over float32 values in order."""
    lo, hi = -0x7F7FFFFF, 0x7F7FFFFF  # order keys of −FLT_MAX, +FLT_MAX (q(+FLT_MAX) = 32767)

    def value(key: int) -> np.float32:
        bits = key if key >= 0 else (-key) | 0x80000000
        return np.array(bits, np.uint32).view(np.float32)[()]

    while lo < hi:
        mid = (lo + hi) // 2
        q = min(max(np.rint(np.float64(value(mid)) / scale), -INT16_QMAX), INT16_QMAX)
        lo, hi = (lo, mid) if q >= target else (mid + 1, hi)
    return value(lo)


def _hi_zero_bounds(scale: float, code: int) -> tuple[np.float32, np.float32]:
    """[a, b) with hi == 0 <=> a <= x < b (sign-magnitude: |q| <= 4095; two's: 0 <= q <= 4095)."""
    return _first_reaching(scale, (-4095, 0)[code]), _first_reaching(scale, 4096)


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _count_in_range(X: np.ndarray, a: np.float32, b: np.float32) -> int:
    rows = np.zeros(X.shape[0], np.int64)
    for m in prange(X.shape[0]):
        c = 0
        for k in range(X.shape[1]):
            c += (X[m, k] >= a) & (X[m, k] < b)
        rows[m] = c
    return rows.sum()


def _encoding_code(encoding: str, source: str) -> int:
    if encoding not in ENCODINGS:
        raise UserInputError(source, f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    return ENCODINGS.index(encoding)


def _hi_zero_fraction(x: np.ndarray, amax: float, code: int) -> float:
    return _count_in_range(x, *_hi_zero_bounds(int16_scale(amax), code)) / x.size


def int16_hi_zero_fraction(X: Any, encoding: str = "sign_magnitude") -> float:
    """OPS Fig. 1 high-order sparsity: fraction of elements whose 4-bit hi slice is 0 after
    per-tensor INT16 quantization (sign-magnitude |q| >> 12, or two's complement for contrast).
    Exact without dividing: q is monotone in x, so hi == 0 is an interval of x."""
    code = _encoding_code(encoding, "int16_hi_zero_fraction(encoding)")
    x = as_f32_matrix(X, "int16_hi_zero_fraction(X)")
    return _hi_zero_fraction(x, _absmax(x), code)


def int16_hi_zero_fraction_ref(X: Any, encoding: str = "sign_magnitude") -> float:
    """numpy twin of :func:`int16_hi_zero_fraction`."""
    code = _encoding_code(encoding, "int16_hi_zero_fraction_ref(encoding)")
    q, _ = quantize_int16_ref(X)
    hi = split_twos_complement(q)[0] if code else split_sign_magnitude(q)[1]
    return float(np.mean(hi == 0))


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _tile_count_in_range(X: np.ndarray, a: np.float32, b: np.float32, tm: int, tk: int):
    M, K = X.shape
    out = np.zeros(((M + tm - 1) // tm, (K + tk - 1) // tk), np.int64)
    for i in prange(out.shape[0]):
        for m in range(i * tm, min(M, (i + 1) * tm)):
            for j in range(out.shape[1]):
                c = 0
                for k in range(j * tk, min(K, (j + 1) * tk)):
                    c += (X[m, k] >= a) & (X[m, k] < b)
                out[i, j] += c
    return out


def _tile_sizes(M: int, N: int, tm: int, tn: int) -> np.ndarray:
    """Elements per (tm × tn) tile of an M×N grid, edge tiles smaller."""
    rows = np.minimum(tm, M - np.arange(0, M, tm))
    return rows[:, None] * np.minimum(tn, N - np.arange(0, N, tn))[None, :]


def _tile_sum_ref(a: np.ndarray, tm: int, tn: int) -> np.ndarray:
    """numpy: sum of a[M, N, ...] over (tm × tn) tiles (zero-padded edges)."""
    M, N = a.shape[:2]
    Mt, Nt = -(-M // tm), -(-N // tn)
    pad = np.zeros((Mt * tm, Nt * tn) + a.shape[2:])
    pad[:M, :N] = a
    return pad.reshape((Mt, tm, Nt, tn) + a.shape[2:]).sum(axis=(1, 3))


def int16_hi_zero_tile_map(X: Any, tile_m: int, tile_k: int) -> np.ndarray:
    """Per (tile_m × tile_k) tile of X, the fraction of zero sign-magnitude hi slices (OPS
    zero-slice skipping per tile): float64[ceil(M/tile_m), ceil(K/tile_k)]."""
    src = "int16_hi_zero_tile_map"
    x = as_f32_matrix(X, f"{src}(X)")
    tm, tk = positive_int(tile_m, "tile_m", src), positive_int(tile_k, "tile_k", src)
    a, b = _hi_zero_bounds(int16_scale(_absmax(x)), 0)
    return _tile_count_in_range(x, a, b, tm, tk) / _tile_sizes(*x.shape, tm, tk)


def int16_hi_zero_tile_map_ref(X: Any, tile_m: int, tile_k: int) -> np.ndarray:
    """numpy twin of :func:`int16_hi_zero_tile_map`."""
    zero = split_sign_magnitude(quantize_int16_ref(X)[0])[1] == 0
    return _tile_sum_ref(zero, tile_m, tile_k) / _tile_sizes(*zero.shape, tile_m, tile_k)


# --------------------------------------------------------------------------- early bird
@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _signed_hi(X: np.ndarray, scale: float) -> np.ndarray:
    h = np.empty(X.shape, np.int8)
    for m in prange(X.shape[0]):
        for k in range(X.shape[1]):
            qv = _q(X[m, k], scale)
            h[m, k] = (abs(qv) >> HI_SHIFT) * (1 if qv >= 0 else -1)
    return h


@_serial_if_small
@numba.njit(cache=True, parallel=True)
def _early_bird_counts(xh: np.ndarray, whT: np.ndarray, chunk: int, tau: float, tm: int, tn: int):
    """Per (m-tile, n-tile, chunk): (#sets with P_hi != 0, #sets with |P_hi| > tau), int64 each.

    Work follows the non-zero hi slices of X: a row-chunk without any gives P_hi = 0 for all N
    outputs at no cost; otherwise P_hi[0:N] accumulates as int32 AXPYs over rows of whT (K×N).
    """
    M, K = xh.shape
    N = whT.shape[1]
    C = (K + chunk - 1) // chunk
    Nt = (N + tn - 1) // tn
    nz = np.zeros(((M + tm - 1) // tm, Nt, C), np.int64)
    gt = np.zeros(nz.shape, np.int64)
    for i in prange(nz.shape[0]):
        acc = np.empty(N, np.int32)
        idx = np.empty(chunk, np.int64)
        for m in range(i * tm, min(M, (i + 1) * tm)):
            for c in range(C):
                cnt = 0
                for k in range(c * chunk, min(K, (c + 1) * chunk)):
                    if xh[m, k] != 0:
                        idx[cnt] = k
                        cnt += 1
                if cnt == 0:
                    continue
                acc[:] = 0
                for j in range(cnt):
                    v = np.int32(xh[m, idx[j]])
                    w = whT[idx[j]]
                    for n in range(N):
                        acc[n] += v * w[n]
                for t in range(Nt):
                    a_nz = a_gt = 0
                    for n in range(t * tn, min(N, (t + 1) * tn)):
                        a_nz += acc[n] != 0
                        a_gt += abs(acc[n]) > tau
                    nz[i, t, c] += a_nz
                    gt[i, t, c] += a_gt
    return nz, gt


def _early_bird(X: Any, W: Any, chunk: Any, tau: Any, tm: Any, tn: Any, src: str):
    """Validate, slice and count; tn = None means one n-tile. Returns (nz, gt, sets per tile)."""
    x, w = as_f32_matrix(X, f"{src}(X)"), as_f32_matrix(W, f"{src}(W)")
    if x.shape[1] != w.shape[1]:
        raise UserInputError(src, f"X is M×K = {x.shape} but W is N×K = {w.shape}: K differs")
    chunk = positive_int(chunk, "chunk", src)
    tau = check_threshold(tau, "tau", src)
    tm = positive_int(tm, "tile_m", src)
    tn = w.shape[0] if tn is None else positive_int(tn, "tile_n", src)
    xh = _signed_hi(x, int16_scale(_absmax(x)))
    whT = np.ascontiguousarray(_signed_hi(w, int16_scale(_absmax(w))).T)
    nz, gt = _early_bird_counts(xh, whT, chunk, tau, tm, tn)
    return nz, gt, _tile_sizes(x.shape[0], w.shape[0], tm, tn)[:, :, None]


def early_bird_stats(X: Any, W: Any, chunk: int, tau: float) -> tuple[float, float]:
    """OPS early bird over all M·N·ceil(K/chunk) computation sets of Y = X·Wᵀ (W is N×K):
    (fraction with P_hi == 0, fraction with |P_hi| ≤ tau = skipped). Units: module docstring."""
    nz, gt, sets = _early_bird(X, W, chunk, tau, 8, None, "early_bird_stats")
    total = int(sets.sum()) * nz.shape[2]
    return (total - int(nz.sum())) / total, (total - int(gt.sum())) / total


def early_bird_skip_map(
    X: Any, W: Any, chunk: int, tau: float, tile_m: int, tile_n: int
) -> np.ndarray:
    """Per output tile (tile_m × tile_n) and K-chunk, the fraction of the tile's computation sets
    the early bird skips (|P_hi| ≤ tau): float64[ceil(M/tile_m), ceil(N/tile_n), ceil(K/chunk)].
    Parallel over m-tiles: use at least as many m-tiles as cores."""
    _, gt, sets = _early_bird(X, W, chunk, tau, tile_m, tile_n, "early_bird_skip_map")
    return (sets - gt) / sets


def early_bird_partial_sums_ref(X: Any, W: Any, chunk: int) -> np.ndarray:
    """numpy reference P_hi, int64[M, N, ceil(K/chunk)] (one exact float64 matmul per chunk)."""
    hx, hw = (
        (np.sign(q) * (np.abs(q.astype(np.int32)) >> HI_SHIFT)).astype(np.float64)
        for q in (quantize_int16_ref(X)[0], quantize_int16_ref(W)[0])
    )
    sums = [hx[:, k : k + chunk] @ hw[:, k : k + chunk].T for k in range(0, hx.shape[1], chunk)]
    return np.stack(sums, axis=2).astype(np.int64)


def early_bird_stats_ref(X: Any, W: Any, chunk: int, tau: float) -> tuple[float, float]:
    """numpy twin of :func:`early_bird_stats` (small sizes: materialises M·N·C sums)."""
    p = early_bird_partial_sums_ref(X, W, chunk)
    return int((p == 0).sum()) / p.size, int((np.abs(p) <= tau).sum()) / p.size


def early_bird_skip_map_ref(
    X: Any, W: Any, chunk: int, tau: float, tile_m: int, tile_n: int
) -> np.ndarray:
    """numpy twin of :func:`early_bird_skip_map`."""
    skip = np.abs(early_bird_partial_sums_ref(X, W, chunk)) <= tau
    sets = _tile_sizes(*skip.shape[:2], tile_m, tile_n)[:, :, None]
    return _tile_sum_ref(skip, tile_m, tile_n) / sets


# --------------------------------------------------------------------------- summary
def tensor_stats(X: Any, alpha: float = OSC_ALPHA, source: str = "tensor_stats") -> dict[str, Any]:
    """Per-tensor summary printed by ``accel-sim trace stats FILE --json`` (JSON-ready values).

    Keys: ``shape`` [M, K]; ``absmax``; ``mean_abs``; ``osc_alpha``; ``osc_threshold`` (OSC eq. 1);
    ``clustering_density`` {"16", "32", "64"} (OSC §2.2; None when no group is afflicted);
    ``outlier_channels`` (count of channels with any |x| > 6, MUXQ/LLM.int8);
    ``int16_hi_zero_fraction`` (OPS, per-tensor INT16, sign-magnitude).
    """
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha <= 0:
        raise UserInputError(source, f"alpha must be finite and > 0, got {alpha!r}")
    x = as_f32_matrix(X, source)
    amax, mabs = _absmax(x), _mean_abs(x)
    T = alpha * mabs
    density = {str(G): _density_from_counts(_counts(x, G, T)) for G in DENSITY_GROUP_SIZES}
    return {
        "shape": [int(x.shape[0]), int(x.shape[1])],
        "absmax": float(amax),
        "mean_abs": float(mabs),
        "osc_alpha": alpha,
        "osc_threshold": float(T),
        "clustering_density": {g: None if math.isnan(d) else d for g, d in density.items()},
        "outlier_channels": int(np.count_nonzero(_channel_absmax(x) > OUTLIER_THRESHOLD)),
        "int16_hi_zero_fraction": float(_hi_zero_fraction(x, amax, 0)),
    }
