"""Numerically faithful reference outputs Y = X·Wᵀ for every dataflow (docs/modelling.md).

Shapes: X is M×K float activations, W is N×K float weights (one output channel per row, so
blocks and per-channel scales run along K for both), Y is M×N. Each ``y_*`` function quantizes the
operands exactly as its dataflow does (formats from :mod:`accel_sim.quant.formats`, ml_dtypes for
FP4/FP8/E8M0/E4M3/FP16 rounding) and then multiplies the dequantized operands in float64.
Integer paths multiply the integer codes in float64 (exact, as the hardware's INT32 accumulators)
and apply the scales after; floating-point paths accumulate in float64, whose difference from the
hardware's FP32 accumulation is far below the operand rounding studied here. Outputs are the
accumulator values before any output cast. Compare against :func:`y_exact` with
:func:`relative_error` to weigh each dataflow's speed against its accuracy.
"""

from __future__ import annotations

import math

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.quant.formats import fp16, int_quantize, mse_clip_scale, mx, nvfp4

__all__ = [
    "relative_error",
    "y_exact",
    "y_fp16",
    "y_w8a8",
    "y_mx",
    "build_osc_table",
    "osc_channels",
    "y_osc",
    "outlier_channels",
    "y_muxq",
    "y_llm_int8",
    "y_w4a4_static",
    "y_int16",
    "ops_slices",
    "y_ops",
]

_SRC = "accel_sim.quant.reference"


def _check(X: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[1]:
        raise UserInputError(_SRC, f"need X[M×K] and W[N×K], got {X.shape} and {W.shape}")
    return X, W


def relative_error(Y: np.ndarray, Y_ref: np.ndarray) -> float:
    """``||Y − Y_ref||_F / ||Y_ref||_F`` (0 when both are zero, inf when only Y_ref is)."""
    Y = np.asarray(Y, dtype=np.float64)
    Y_ref = np.asarray(Y_ref, dtype=np.float64)
    num = float(np.linalg.norm(Y - Y_ref))
    den = float(np.linalg.norm(Y_ref))
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def y_exact(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The unquantized float64 product X·Wᵀ (the reference the errors are measured against)."""
    X, W = _check(X, W)
    return X @ W.T


def y_fp16(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """FP16 dataflow: both operands rounded to FP16 (RNE), products accumulated wide."""
    X, W = _check(X, W)
    return fp16(X).astype(np.float64) @ fp16(W).astype(np.float64).T


def _int_matmul(X: np.ndarray, W: np.ndarray, bits: int, x_axis, w_axis, x_scale=None):
    """Quantize X (scales indexed by ``x_axis``) and W, multiply codes exactly, dequantize."""
    qx, sx = int_quantize(X, bits, x_axis, x_scale)
    qw, sw = int_quantize(W, bits, w_axis)
    sx = np.reshape(sx, (-1, 1)) if np.ndim(sx) else sx  # per-token: (M,1)
    sw = np.reshape(sw, (1, -1)) if np.ndim(sw) else sw  # per-channel: (1,N)
    return (qx @ qw.T) * sx * sw


def y_w8a8(
    X: np.ndarray,
    W: np.ndarray,
    per_token: bool = True,
    act_scale: float | None = None,
    w_per_channel: bool = True,
) -> np.ndarray:
    """W8A8 INT8 dataflow (OSC's baseline; docs/dataflows.md).

    ``per_token=True``: X per-token dynamic absmax INT8 (one scale per row of X).
    ``per_token=False``: one per-tensor scale for X: ``act_scale`` if given (static, calibrated;
    values beyond 127·act_scale clip) else absmax(X)/127. W is INT8 with per-output-channel absmax
    scales (``w_per_channel=False``: one per-tensor scale). Round-half-even, codes in [-127, 127].
    """
    X, W = _check(X, W)
    x_axis = 0 if per_token else None
    scale = None if per_token else act_scale
    return _int_matmul(X, W, 8, x_axis, 0 if w_per_channel else None, scale)


_MX_FORMATS = {
    "mxfp4": lambda a: mx(a, "fp4", 32),
    "nvfp4": lambda a: nvfp4(a, 16),
    "mxfp8": lambda a: mx(a, "fp8", 32),
}


def y_mx(X: np.ndarray, W: np.ndarray, fmt: str = "mxfp4") -> np.ndarray:
    """Plain micro-scaled GEMM, both operands blocked along K.

    ``fmt``: "mxfp4" (E2M1, E8M0 scale per 32), "nvfp4" (E2M1, E4M3 scale per 16 + FP32 tensor
    scale) or "mxfp8" (E4M3, E8M0 scale per 32; OSC's W2 fallback).
    """
    X, W = _check(X, W)
    if fmt not in _MX_FORMATS:
        raise UserInputError(_SRC, f"unknown format {fmt!r}; use {sorted(_MX_FORMATS)}", "fmt")
    q = _MX_FORMATS[fmt]
    return q(X).astype(np.float64) @ q(W).astype(np.float64).T


def build_osc_table(X_calib: np.ndarray, G: int = 32, alpha: float = 5.0) -> np.ndarray:
    """OSC Algorithm 1 (T = α·mean|X|) as the reference functions want it: entries local to
    their group (0..G−1, −1 = none). The work is done by the statistics kernel
    :func:`accel_sim.workload.stats.osc_lookup_table`, which returns global channel indices."""
    from accel_sim.workload.stats import osc_lookup_table, osc_threshold

    if isinstance(G, bool) or not isinstance(G, int) or G <= 0:
        raise UserInputError(_SRC, f"G must be a positive int, got {G!r}", "G")
    table = osc_lookup_table(X_calib, G, osc_threshold(X_calib, alpha)).astype(np.int64)
    return np.where(table >= 0, table - np.arange(table.size) * G, -1)


def osc_channels(table: np.ndarray, G: int, K: int) -> np.ndarray:
    """Absolute channel indices k·G + table[k] of the table's non-negative entries (sorted)."""
    t = np.asarray(table).astype(np.int64).ravel()
    if t.size != math.ceil(K / G):
        raise UserInputError(_SRC, f"table length {t.size} != ceil(K/G) = {math.ceil(K / G)}")
    if np.any((t < -1) | (t >= G)):
        raise UserInputError(_SRC, f"table entries must lie in [-1, {G - 1}]", "table")
    idx = np.nonzero(t >= 0)[0] * G + t[t >= 0]
    if np.any(idx >= K):
        raise UserInputError(_SRC, "a table entry points past the last channel K", "table")
    return idx


def y_osc(
    X: np.ndarray,
    W: np.ndarray,
    table: np.ndarray,
    G: int = 32,
    base: str = "mxfp4",
    fallback_mxfp8: bool = False,
) -> np.ndarray:
    """OSC dual-path GEMM (OSC §3.2 Algorithm 2, §3.3 eq. 5).

    The table's channels (one per group of G along K, −1 = none) are gathered into B (M×K') and
    zeroed in X; path A quantizes that X and the whole W to ``base`` ("mxfp4": block 32, E8M0;
    "nvfp4": block 16, E4M3 + FP32 tensor scale) and multiplies; path B multiplies B by W_L (the
    same K' weight rows) with both in FP16; Y = A + B. The table group G is independent of the
    MX block. ``fallback_mxfp8=True`` is the W2 (down-projection) fallback: the whole GEMM in
    MXFP8 (E4M3, block 32), no branch, table ignored.
    """
    X, W = _check(X, W)
    if fallback_mxfp8:
        return y_mx(X, W, "mxfp8")
    if base not in ("mxfp4", "nvfp4"):
        raise UserInputError(_SRC, f"base must be 'mxfp4' or 'nvfp4', got {base!r}", "base")
    idx = osc_channels(table, G, X.shape[1])
    Xa = X.copy()
    Xa[:, idx] = 0.0
    Y = y_mx(Xa, W, base)
    if idx.size:
        B = fp16(X[:, idx]).astype(np.float64)
        WL = fp16(W[:, idx]).astype(np.float64)
        Y = Y + B @ WL.T
    return Y


def outlier_channels(X: np.ndarray, threshold: float = 6.0) -> np.ndarray:
    """Columns of X with at least one |x| > threshold (LLM.int8()'s criterion, MUXQ §3.3);
    the statistics kernel's answer."""
    from accel_sim.workload.stats_ops import outlier_channels as kernel

    return kernel(X, threshold)


def y_muxq(
    X: np.ndarray,
    W: np.ndarray,
    exp: int = 1,
    threshold: float = 6.0,
    per_token: bool = False,
    w_per_channel: bool = True,
) -> np.ndarray:
    """MUXQ (MUXQ §3.3 eqs. 4-7): uniform INT8 with an auxiliary matrix for outlier channels.

    Outlier channels: any |x| > ``threshold``. Body = X with those columns shifted right by
    ``exp`` (an FP exponent decrement, i.e. an exact division by 2^exp); Aux = Body's outlier
    columns. Body and Aux are INT8-quantized as the one concatenated matrix [Body | Aux] (shared
    per-tensor scale, or per-token with ``per_token=True``); W INT8 per output channel (per-tensor
    with ``w_per_channel=False``), W_out = the same codes' outlier columns.
    Y = Body·W + (2^exp − 1)·Aux·W_out, the (2^exp − 1) applied to the integer Aux product.
    The paper picks exp = 2 for accuracy; exp = 1 (default here) makes the combine a plain add.
    """
    X, W = _check(X, W)
    if isinstance(exp, bool) or not isinstance(exp, int) or exp < 0:
        raise UserInputError(_SRC, f"exp must be an int >= 0, got {exp!r}", "exp")
    idx = outlier_channels(X, threshold)
    body = X.copy()
    body[:, idx] = np.ldexp(body[:, idx], -exp)
    # Aux ⊂ Body, so the absmax of [Body | Aux] (per tensor or per row) is Body's own.
    qb, sx = int_quantize(body, 8, 0 if per_token else None)
    qw, sw = int_quantize(W, 8, 0 if w_per_channel else None)
    acc = qb @ qw.T
    if idx.size:
        acc = acc + (2**exp - 1) * (qb[:, idx] @ qw[:, idx].T)
    sx = np.reshape(sx, (-1, 1)) if np.ndim(sx) else sx
    sw = np.reshape(sw, (1, -1)) if np.ndim(sw) else sw
    return acc * sx * sw


def y_llm_int8(X: np.ndarray, W: np.ndarray, threshold: float = 6.0) -> np.ndarray:
    """LLM.int8() mixed-precision decomposition (Dettmers et al. 2022).

    Outlier columns of X (any |x| > ``threshold``) and the matching weight columns go to an FP16
    matmul; the remaining columns are INT8, X per-token absmax over the non-outlier columns, W per
    output channel over all of K (the INT8 weights are stored once, offline).
    """
    X, W = _check(X, W)
    idx = outlier_channels(X, threshold)
    Xr = X.copy()
    Xr[:, idx] = 0.0
    qx, sx = int_quantize(Xr, 8, 0)
    qw, sw = int_quantize(W, 8, 0)
    qw[:, idx] = 0.0
    Y = (qx @ qw.T) * sx.reshape(-1, 1) * sw.reshape(1, -1)
    if idx.size:
        Y = Y + fp16(X[:, idx]).astype(np.float64) @ fp16(W[:, idx]).astype(np.float64).T
    return Y


def y_w4a4_static(
    X: np.ndarray, W: np.ndarray, act_scale: float | None = None, mse_init: bool = False
) -> np.ndarray:
    """PrefixQuant-O2 style W4A4 (PrefixQuant §3 eq. 2, Table 1): INT4 per-channel weights,
    per-tensor static INT4 activations, codes in [-7, 7], round-half-even.

    ``act_scale``: the calibrated activation step (values beyond 7·act_scale clip); default
    absmax(X)/7, or with ``mse_init=True`` the MSE-best clipped scale (the paper's grid-search
    initialization), which then also picks each weight row's clipping.
    """
    X, W = _check(X, W)
    if act_scale is None and mse_init:
        act_scale = float(mse_clip_scale(X, 4, None))
    w_scale = mse_clip_scale(W, 4, 0) if mse_init else None
    qx, sx = int_quantize(X, 4, None, act_scale)
    qw, sw = int_quantize(W, 4, 0, w_scale)
    return (qx @ qw.T) * sx * sw.reshape(1, -1)


def y_int16(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """INT16 per-tensor absmax quantization of both operands (OPS §I), exact integer product."""
    X, W = _check(X, W)
    return _int_matmul(X, W, 16, None, None)


_HI_SHIFT = 12
_HI_UNIT = float(2 ** (2 * _HI_SHIFT))  # one hi×hi product = 2^24 INT16 LSB²


def ops_slices(q: np.ndarray, sign: str = "sign_magnitude") -> tuple[np.ndarray, np.ndarray]:
    """Split INT16 codes into a 4-bit high slice and a 12-bit low part, q = hi·2^12 + lo.

    ``sign_magnitude`` (default): hi = sign·(|q| >> 12) in [-7, 7] (sign bit + 3 magnitude bits),
    lo = sign·(|q| & 0xFFF); a small value of either sign has hi = 0. ``twos_complement``:
    hi = q >> 12 (arithmetic) in [-8, 7], lo = q & 0xFFF in [0, 4095]; small negatives have
    hi = −1 (0xF), which defeats the zero-slice skipping (docs/modelling.md, OPS).
    """
    q = np.asarray(q, dtype=np.float64)
    if sign == "sign_magnitude":
        s = np.sign(q)
        mag = np.abs(q)
        hi = np.floor(mag / 2**_HI_SHIFT)
        return s * hi, s * (mag - hi * 2**_HI_SHIFT)
    if sign == "twos_complement":
        hi = np.floor(q / 2**_HI_SHIFT)
        return hi, q - hi * 2**_HI_SHIFT
    raise UserInputError(_SRC, f"sign must be sign_magnitude|twos_complement, got {sign!r}")


def y_ops(
    X: np.ndarray,
    W: np.ndarray,
    chunk: int = 32,
    tau: float = 0,
    preset: str = "zero",
    sign: str = "sign_magnitude",
) -> tuple[np.ndarray, float]:
    """OPS precision-slice GEMM with the early-bird comparator (OPS §II-III); returns (Y, skip).

    X and W are INT16 per-tensor absmax quantized and sliced by :func:`ops_slices`. A computation
    set is one output (m, n) over one K-chunk of ``chunk`` channels (the paper leaves the set
    open). The comparator sees the set's hi×hi partial sum P = Σ_k hi_x·hi_w, an integer in units
    of one hi×hi product (2^24 INT16 LSB², i.e. 2^24·s_x·s_w in real value). If |P| ≤ ``tau`` the
    rest of the set (hi×lo, lo×hi, lo×lo) is skipped and the preset written: "zero" → the set
    contributes 0; "hi_only" → it contributes 2^24·P. Otherwise the exact 16×16 product sum is
    used. ``tau < 0`` never skips (= :func:`y_int16`). ``skip`` = skipped sets / (M·N·n_chunks).
    Vectorized per chunk: memory O(M·N + (M+N)·K).
    """
    X, W = _check(X, W)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
        raise UserInputError(_SRC, f"chunk must be a positive int, got {chunk!r}", "chunk")
    if preset not in ("zero", "hi_only"):
        raise UserInputError(_SRC, f"preset must be 'zero' or 'hi_only', got {preset!r}")
    qx, sx = int_quantize(X, 16, None)
    qw, sw = int_quantize(W, 16, None)
    # |hi| <= 8, so hi×hi partial sums are exact in float32 for any chunk < 2^18.
    hdt = np.float32 if chunk < 2**18 else np.float64
    hx = ops_slices(qx, sign)[0].astype(hdt)
    hw = ops_slices(qw, sign)[0].astype(hdt)
    M, K = qx.shape
    N = qw.shape[0]
    acc = np.zeros((M, N))
    if M * N == 0:
        return acc, 0.0
    skipped = 0
    n_chunks = max(1, math.ceil(K / chunk))
    for c in range(n_chunks):
        sl = slice(c * chunk, min(K, (c + 1) * chunk))
        full = qx[:, sl] @ qw[:, sl].T  # exact: |sum| <= chunk·2^30 < 2^53
        hh = hx[:, sl] @ hw[:, sl].T
        keep = np.abs(hh) > tau
        skipped += keep.size - int(np.count_nonzero(keep))
        if preset == "zero":
            acc += np.where(keep, full, 0.0)
        else:
            acc += np.where(keep, full, hh.astype(np.float64) * _HI_UNIT)
    return acc * sx * sw, skipped / float(M * N * n_chunks)
