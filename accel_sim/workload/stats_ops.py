"""INT16 precision-slice statistics for OPS (seed paper 003) and its early-bird comparator.

Quantization (OPS §I/§II: "quantizes weights and activations into 16-bit integers"): symmetric,
per-tensor, scale s = absmax/32767 (s = 1 for an all-zero tensor), q = clip(rint(x/s), ±32767)
with round-half-even, computed as float64(x)/s. Sign-magnitude slicing (DESIGN §3: the paper
leaves the sign encoding open): q = sign·mag, mag ∈ [0, 32767], hi = mag >> 12 ∈ [0, 7] (4 bits
with the sign), lo = mag & 0xFFF (three 4-bit slices). With two's complement, hi = (q >> 12) & 0xF
is 0xF for every small negative value, which is why sign-magnitude is used.

Early bird (OPS §II, §III "Early Bird Computation"): a computation set is one output (m, n) times
one K-chunk of c consecutive channels (the last chunk may be shorter). Its hi×hi partial sum is
P_hi(m, n, chunk) = Σ_k (sign_x·hi_x[m, k])·(sign_w·hi_w[n, k]), an integer in units of one
hi×hi product; in value terms it contributes s_x·s_w·2^24·P_hi to Y[m, n]. The set is skipped
when |P_hi| ≤ τ, τ in the same units (τ = 0: skip only sets whose hi×hi sum is exactly 0).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from accel_sim.errors import UserInputError
from accel_sim.workload.stats import _absmax, as_f32_matrix

INT16_QMAX = 32767
HI_SHIFT = 12
LO_MASK = 0xFFF
ENCODINGS = ("sign_magnitude", "twos_complement")


def int16_scale(amax: float) -> float:
    """Per-tensor symmetric INT16 scale: absmax/32767, or 1.0 for an all-zero tensor."""
    return float(amax) / INT16_QMAX if amax > 0 else 1.0


def _encoding_code(encoding: str, source: str) -> int:
    if encoding not in ENCODINGS:
        raise UserInputError(source, f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    return ENCODINGS.index(encoding)


def _positive_int(v: Any, name: str, source: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v <= 0:
        raise UserInputError(source, f"{name} must be a positive integer, got {v!r}")
    return int(v)


# --------------------------------------------------------------------------- quantization
@numba.njit(cache=True, inline="always")
def _q(v: float, scale: float) -> int:
    r = np.rint(np.float64(v) / scale)
    if r > INT16_QMAX:
        r = INT16_QMAX
    elif r < -INT16_QMAX:
        r = -INT16_QMAX
    return int(r)


@numba.njit(cache=True, parallel=True)
def _quantize_int16(X: np.ndarray, scale: float) -> np.ndarray:
    M, K = X.shape
    q = np.empty((M, K), np.int16)
    for m in prange(M):
        for k in range(K):
            q[m, k] = _q(X[m, k], scale)
    return q


def quantize_int16(X: Any) -> tuple[np.ndarray, float]:
    """Per-tensor symmetric INT16 quantization (module docstring): returns (q int16, scale)."""
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
    """Sign-magnitude slices of INT16 values in [−32767, 32767]: (negative bool, hi uint8 0..7,
    lo uint16 0..4095), with q = (−1)^negative · (hi·4096 + lo). Plain numpy (already vectorised)."""
    mag = np.abs(np.asarray(q, dtype=np.int32))
    return np.asarray(q) < 0, (mag >> HI_SHIFT).astype(np.uint8), (mag & LO_MASK).astype(np.uint16)


def split_twos_complement(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two's-complement slices: (hi = (q >> 12) & 0xF, lo = q & 0xFFF); −1 → hi 0xF, lo 0xFFF."""
    q32 = np.asarray(q, dtype=np.int32)
    return ((q32 >> HI_SHIFT) & 0xF).astype(np.uint8), (q32 & LO_MASK).astype(np.uint16)


@numba.njit(cache=True, parallel=True)
def _hi_zero_rows(X: np.ndarray, scale: float, code: int) -> np.ndarray:
    M, K = X.shape
    rows = np.zeros(M, np.int64)
    for m in prange(M):
        c = 0
        if code == 0:  # sign-magnitude: |q| < 4096
            for k in range(K):
                c += abs(_q(X[m, k], scale)) < 4096
        else:  # two's complement: 0 <= q < 4096
            for k in range(K):
                qv = _q(X[m, k], scale)
                c += (qv >= 0) & (qv < 4096)
        rows[m] = c
    return rows


def _hi_zero_count(X: np.ndarray, scale: float, code: int) -> int:
    return int(_hi_zero_rows(X, scale, code).sum())


def int16_hi_zero_fraction(X: Any, encoding: str = "sign_magnitude") -> float:
    """OPS Fig. 1 "sparsity of the high-order part": fraction of elements whose 4-bit hi slice is
    0 after per-tensor INT16 quantization (sign-magnitude hi = |q| >> 12; two's complement
    hi = (q >> 12) & 0xF, shown for contrast)."""
    code = _encoding_code(encoding, "int16_hi_zero_fraction(encoding)")
    x = as_f32_matrix(X, "int16_hi_zero_fraction(X)")
    return _hi_zero_count(x, int16_scale(_absmax(x)), code) / x.size


def int16_hi_zero_fraction_ref(X: Any, encoding: str = "sign_magnitude") -> float:
    """numpy twin of :func:`int16_hi_zero_fraction`."""
    _encoding_code(encoding, "int16_hi_zero_fraction_ref(encoding)")
    q, _ = quantize_int16_ref(X)
    hi = split_sign_magnitude(q)[1] if encoding == ENCODINGS[0] else split_twos_complement(q)[0]
    return float(np.mean(hi == 0))


@numba.njit(cache=True, parallel=True)
def _hi_zero_tiles(X: np.ndarray, scale: float, tile_m: int, tile_k: int) -> np.ndarray:
    M, K = X.shape
    Mt = (M + tile_m - 1) // tile_m
    Kt = (K + tile_k - 1) // tile_k
    out = np.zeros((Mt, Kt), np.float64)
    for i in prange(Mt):
        m1 = min(M, (i + 1) * tile_m)
        for j in range(Kt):
            k1 = min(K, (j + 1) * tile_k)
            c = 0
            for m in range(i * tile_m, m1):
                for k in range(j * tile_k, k1):
                    c += abs(_q(X[m, k], scale)) < 4096
            out[i, j] = c / ((m1 - i * tile_m) * (k1 - j * tile_k))
    return out


def int16_hi_zero_tile_map(X: Any, tile_m: int, tile_k: int) -> np.ndarray:
    """Per (tile_m × tile_k) tile of X, the fraction of zero sign-magnitude hi slices
    (OPS zero-slice skipping at tile granularity), float64[ceil(M/tile_m), ceil(K/tile_k)]."""
    src = "int16_hi_zero_tile_map"
    x = as_f32_matrix(X, f"{src}(X)")
    tm, tk = _positive_int(tile_m, "tile_m", src), _positive_int(tile_k, "tile_k", src)
    return _hi_zero_tiles(x, int16_scale(_absmax(x)), tm, tk)


def int16_hi_zero_tile_map_ref(X: Any, tile_m: int, tile_k: int) -> np.ndarray:
    """numpy twin of :func:`int16_hi_zero_tile_map`."""
    q, _ = quantize_int16_ref(X)
    zero = (split_sign_magnitude(q)[1] == 0).astype(np.float64)
    M, K = zero.shape
    Mt, Kt = -(-M // tile_m), -(-K // tile_k)
    pad = np.zeros((Mt * tile_m, Kt * tile_k))
    pad[:M, :K] = zero
    ones = np.zeros_like(pad)
    ones[:M, :K] = 1.0
    count = pad.reshape(Mt, tile_m, Kt, tile_k).sum(axis=(1, 3))
    return count / ones.reshape(Mt, tile_m, Kt, tile_k).sum(axis=(1, 3))


# --------------------------------------------------------------------------- early bird
@numba.njit(cache=True, parallel=True)
def _signed_hi(X: np.ndarray, scale: float) -> np.ndarray:
    M, K = X.shape
    h = np.empty((M, K), np.int8)
    for m in prange(M):
        for k in range(K):
            qv = _q(X[m, k], scale)
            h[m, k] = (abs(qv) >> HI_SHIFT) * (1 if qv >= 0 else -1)
    return h


@numba.njit(cache=True, parallel=True)
def _early_bird_counts(
    xh: np.ndarray, whT: np.ndarray, chunk: int, tau: float, tile_m: int, tile_n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per (m-tile, n-tile, chunk): #sets with P_hi != 0 and #sets with |P_hi| > tau.

    Work is proportional to the non-zero hi slices of X: a row-chunk of X with no non-zero hi
    slice gives P_hi = 0 for all N outputs at no cost; otherwise P_hi[0:N] is accumulated as
    contiguous int32 AXPYs over rows of whT (K×N), which vectorise.
    """
    M, K = xh.shape
    N = whT.shape[1]
    C = (K + chunk - 1) // chunk
    Mt = (M + tile_m - 1) // tile_m
    Nt = (N + tile_n - 1) // tile_n
    nz = np.zeros((Mt, Nt, C), np.int64)
    gt = np.zeros((Mt, Nt, C), np.int64)
    for i in prange(Mt):
        acc = np.empty(N, np.int32)
        idx = np.empty(chunk, np.int64)
        for m in range(i * tile_m, min(M, (i + 1) * tile_m)):
            for c in range(C):
                cnt = 0
                for k in range(c * chunk, min(K, (c + 1) * chunk)):
                    if xh[m, k] != 0:
                        idx[cnt] = k
                        cnt += 1
                if cnt == 0:
                    continue
                v = np.int32(xh[m, idx[0]])
                w = whT[idx[0]]
                for n in range(N):
                    acc[n] = v * w[n]
                for j in range(1, cnt):
                    v = np.int32(xh[m, idx[j]])
                    w = whT[idx[j]]
                    for n in range(N):
                        acc[n] += v * w[n]
                for t in range(Nt):
                    a_nz = 0
                    a_gt = 0
                    for n in range(t * tile_n, min(N, (t + 1) * tile_n)):
                        a_nz += acc[n] != 0
                        a_gt += abs(acc[n]) > tau
                    nz[i, t, c] += a_nz
                    gt[i, t, c] += a_gt
    return nz, gt


def _eb_inputs(
    X: Any, W: Any, chunk: int, tau: float, src: str
) -> tuple[np.ndarray, np.ndarray, int, float]:
    x = as_f32_matrix(X, f"{src}(X)")
    w = as_f32_matrix(W, f"{src}(W)")
    if x.shape[1] != w.shape[1]:
        raise UserInputError(src, f"X is M×K = {x.shape} but W is N×K = {w.shape}: K differs")
    chunk = _positive_int(chunk, "chunk", src)
    tau = float(tau)
    if not np.isfinite(tau) or tau < 0:
        raise UserInputError(src, f"tau must be finite and >= 0, got {tau!r}")
    return x, w, chunk, tau


def _eb_run(x: np.ndarray, w: np.ndarray, chunk: int, tau: float, tm: int, tn: int):
    xh = _signed_hi(x, int16_scale(_absmax(x)))
    whT = np.ascontiguousarray(_signed_hi(w, int16_scale(_absmax(w))).T)
    return _early_bird_counts(xh, whT, chunk, tau, tm, tn)


def _set_counts(M: int, N: int, C: int, tm: int, tn: int) -> np.ndarray:
    rows = np.minimum(tm, M - np.arange(0, M, tm))
    cols = np.minimum(tn, N - np.arange(0, N, tn))
    return np.broadcast_to((rows[:, None] * cols[None, :])[:, :, None], (rows.size, cols.size, C))


def early_bird_stats(X: Any, W: Any, chunk: int, tau: float) -> tuple[float, float]:
    """OPS early bird over all M·N·ceil(K/chunk) computation sets of Y = X·Wᵀ (W is N×K):
    (fraction with P_hi == 0, fraction with |P_hi| ≤ tau, i.e. skipped). Units: module docstring.
    """
    x, w, chunk, tau = _eb_inputs(X, W, chunk, tau, "early_bird_stats")
    nz, gt = _eb_run(x, w, chunk, tau, 8, w.shape[0])
    total = x.shape[0] * w.shape[0] * nz.shape[2]
    return 1.0 - int(nz.sum()) / total, 1.0 - int(gt.sum()) / total


def early_bird_skip_map(
    X: Any, W: Any, chunk: int, tau: float, tile_m: int, tile_n: int
) -> np.ndarray:
    """Per output tile (tile_m × tile_n) and K-chunk, the fraction of the tile's computation sets
    skipped by the early bird (|P_hi| ≤ tau): float64[ceil(M/tile_m), ceil(N/tile_n), ceil(K/chunk)].
    Parallel over m-tiles, so use at least as many m-tiles as cores for speed."""
    src = "early_bird_skip_map"
    x, w, chunk, tau = _eb_inputs(X, W, chunk, tau, src)
    tm, tn = _positive_int(tile_m, "tile_m", src), _positive_int(tile_n, "tile_n", src)
    _, gt = _eb_run(x, w, chunk, tau, tm, tn)
    sets = _set_counts(x.shape[0], w.shape[0], gt.shape[2], tm, tn)
    return (sets - gt) / sets


def early_bird_partial_sums_ref(X: Any, W: Any, chunk: int) -> np.ndarray:
    """numpy reference P_hi as int64[M, N, ceil(K/chunk)] (one float64 matmul per chunk; exact)."""
    qx, _ = quantize_int16_ref(X)
    qw, _ = quantize_int16_ref(W)
    hx = (np.sign(qx) * (np.abs(qx.astype(np.int32)) >> HI_SHIFT)).astype(np.float64)
    hw = (np.sign(qw) * (np.abs(qw.astype(np.int32)) >> HI_SHIFT)).astype(np.float64)
    K = hx.shape[1]
    chunks = [hx[:, k : k + chunk] @ hw[:, k : k + chunk].T for k in range(0, K, chunk)]
    return np.stack(chunks, axis=2).astype(np.int64)


def early_bird_stats_ref(X: Any, W: Any, chunk: int, tau: float) -> tuple[float, float]:
    """numpy twin of :func:`early_bird_stats` (small sizes only: materialises M·N·C sums)."""
    p = early_bird_partial_sums_ref(X, W, chunk)
    return float(np.mean(p == 0)), float(np.mean(np.abs(p) <= tau))


def early_bird_skip_map_ref(
    X: Any, W: Any, chunk: int, tau: float, tile_m: int, tile_n: int
) -> np.ndarray:
    """numpy twin of :func:`early_bird_skip_map`."""
    skip = (np.abs(early_bird_partial_sums_ref(X, W, chunk)) <= tau).astype(np.float64)
    M, N, C = skip.shape
    Mt, Nt = -(-M // tile_m), -(-N // tile_n)
    pad = np.zeros((Mt * tile_m, Nt * tile_n, C))
    pad[:M, :N] = skip
    count = pad.reshape(Mt, tile_m, Nt, tile_n, C).sum(axis=(1, 3))
    return count / _set_counts(M, N, C, tile_m, tile_n)
