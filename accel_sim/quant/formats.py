"""Number formats as quantize-dequantize ("fake quant") functions on top of ml_dtypes.

Every function takes a float array and returns the values the hardware would actually multiply
(float64 for integer formats, float32 for the floating-point ones), so a reference GEMM can be
computed with ordinary numpy matmuls. Element and scale types come from ml_dtypes
(``float4_e2m1fn``, ``float8_e4m3fn``, ``float8_e5m2``, ``float6_e2m3fn``, ``float6_e3m2fn``,
``float8_e8m0fnu``, ``float16``): their casts do round-to-nearest-even, we never re-implement it.
ml_dtypes >= 0.5 is required (FP4 and E8M0 appeared there).

Formats
-------
* ``int_symmetric`` / ``int_quantize``: symmetric absmax INT-b, codes in [-(2^(b-1)-1), 2^(b-1)-1],
  round-half-even (``np.rint``), clip. Per tensor, per row or per column (``axis``). MUXQ §2.1
  eq. (1)-(2), LLM.int8(), W8A8 baselines, PrefixQuant eq. (2) without zero point.
* ``mx``: OCP Microscaling Formats (MX) v1.0 §5-6: blocks of 32 along the last axis share an E8M0
  scale X = 2^(floor(log2 amax) - emax_elem); elements V/X are cast to the element type with
  saturation to its max normal (what the spec's reference library does). MXFP4 = E2M1 elements
  (emax 2), MXFP8 = E4M3 (emax 8) or E5M2 (emax 15). OSC §3.2 base path and W2 fallback.
* ``nvfp4``: NVIDIA NVFP4: E2M1 elements in blocks of 16 with an E4M3 block scale, plus a per-tensor
  FP32 scale g = amax_tensor / (6 * 448) so that every block scale amax_b / (6 g) fits E4M3
  (the two-level recipe of TensorRT Model Optimizer / Transformer Engine). Block scales are RNE-cast
  to E4M3, so amax_b / scale may land a little above 6: those elements saturate to 6.
* ``fp16``: IEEE binary16 (overflow gives inf, as the hardware would).

Blocks run along the last axis (the GEMM reduction axis K for both X[M×K] and W[N×K]). When K is
not a multiple of the block the tail block is padded with zeros conceptually (zeros never change a
block's absmax). An all-zero block gets the smallest scale and zero elements.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from accel_sim.errors import UserInputError

__all__ = [
    "MX_ELEMENTS",
    "int_quantize",
    "int_symmetric",
    "mse_clip_scale",
    "mx",
    "mx_quantize",
    "nvfp4",
    "nvfp4_quantize",
    "fp16",
]

for _name in ("float4_e2m1fn", "float8_e8m0fnu", "float8_e4m3fn"):
    if not hasattr(ml_dtypes, _name):  # pragma: no cover - depends on the installed version
        raise ImportError(f"accel_sim.quant needs ml_dtypes >= 0.5 (missing {_name})")

#: MX element formats: name -> ml_dtypes element type (OCP MX v1.0 Table 1).
MX_ELEMENTS: dict[str, type] = {
    "fp4": ml_dtypes.float4_e2m1fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn,
    "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp8": ml_dtypes.float8_e4m3fn,
    "fp8_e4m3": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
}

_E8M0 = ml_dtypes.float8_e8m0fnu
_E8M0_EMIN, _E8M0_EMAX = -127, 127  # 0xFF is NaN; 2^-127 .. 2^127 are representable
_FP4_MAX = float(ml_dtypes.finfo(ml_dtypes.float4_e2m1fn).max)  # 6.0
_E4M3_MAX = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)  # 448.0


def _check_bits(bits: int) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 32:
        raise UserInputError("quant", f"bits must be an int in [2, 32], got {bits!r}", "bits")
    return 2 ** (bits - 1) - 1


def _amax(x: np.ndarray, axis: int | None) -> np.ndarray:
    """Absmax over everything (axis None) or over all axes except ``axis`` (kept, keepdims)."""
    a = np.abs(x)
    if axis is None:
        return np.asarray(a.max(initial=0.0))
    if x.ndim != 2 or axis not in (0, 1):
        raise UserInputError("quant", f"axis must be None, 0 or 1 for a 2-D array, got {axis!r}")
    return a.max(axis=1 - axis, keepdims=True, initial=0.0)


def int_quantize(
    x: np.ndarray, bits: int, axis: int | None = None, scale: float | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric absmax integer quantization; returns ``(codes, scale)`` with x ≈ codes · scale.

    Args:
        x: float array (2-D when ``axis`` is given).
        bits: integer width b; codes lie in [-(2^(b-1)-1), 2^(b-1)-1] (symmetric, no -2^(b-1)).
        axis: the axis that *indexes* the scales. ``None``: one scale per tensor; ``0``: one scale
            per row (per-token for X[M×K], per-output-channel for W[N×K]); ``1``: one per column.
        scale: a given (static, calibrated) scale; values beyond ``qmax · scale`` are clipped.
            Default: absmax / qmax over the scaled slice (dynamic). An all-zero slice gets scale 1.

    Rounding is round-half-to-even (``np.rint``); codes are returned as float64 integers so that
    matmuls on them are exact (|sum| < 2^53 for every K the simulator sees).
    """
    qmax = _check_bits(bits)
    xf = np.asarray(x, dtype=np.float64)
    if scale is None:
        s = _amax(xf, axis) / qmax
        s = np.where(s > 0, s, 1.0)
    else:
        s = np.asarray(scale, dtype=np.float64)
        if np.any(~(s > 0)):
            raise UserInputError("quant", f"a given scale must be > 0, got {scale!r}", "scale")
    codes = np.clip(np.rint(xf / s), -qmax, qmax)
    return codes, s


def int_symmetric(
    x: np.ndarray, bits: int, axis: int | None = None, scale: float | np.ndarray | None = None
) -> np.ndarray:
    """Fake-quant INT-b symmetric (see :func:`int_quantize`); returns float64 ``codes · scale``."""
    codes, s = int_quantize(x, bits, axis, scale)
    return codes * s


def best_of(candidates, error) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise argmin over candidate scales: ``error(c)`` for each candidate ``c`` (arrays
    that broadcast alike, e.g. one scale per row), and per element the candidate of least error
    with that error; ties go to the earlier candidate. Shared by every MSE scale search here and
    in ``quant/olive.py``, ``quant/ant.py``."""
    best_c = best_e = None
    for c in candidates:
        e = error(c)
        if best_e is None:
            best_c, best_e = c, e
        else:
            better = e < best_e
            best_c, best_e = np.where(better, c, best_c), np.where(better, e, best_e)
    return best_c, best_e


def mse_clip_scale(
    x: np.ndarray, bits: int, axis: int | None = None, grid: np.ndarray | None = None
) -> np.ndarray:
    """Scale minimizing the quantization MSE over clipping ratios γ (PrefixQuant §3 init).

    PrefixQuant initializes its (asymmetric) quantizers by an MSE grid search over clipping
    factors; this is the symmetric analogue: scale = γ · absmax / qmax with γ from ``grid``
    (default 1.0, 0.95, ..., 0.30), chosen per scaled slice.
    """
    qmax = _check_bits(bits)
    xf = np.asarray(x, dtype=np.float64)
    gammas = np.linspace(1.0, 0.3, 15) if grid is None else np.asarray(grid, dtype=np.float64)
    base = _amax(xf, axis) / qmax
    base = np.where(base > 0, base, 1.0)

    def error(s: np.ndarray) -> np.ndarray:
        err = (np.clip(np.rint(xf / s), -qmax, qmax) * s - xf) ** 2
        return err.sum() if axis is None else err.sum(axis=1 - axis, keepdims=True)

    return best_of((base * g for g in gammas), error)[0]


def _blocks(x: np.ndarray, block: int) -> tuple[np.ndarray, int]:
    """float32 view of ``x`` as (..., nblocks, block) with the tail zero-padded; returns K too."""
    if isinstance(block, bool) or not isinstance(block, int) or block <= 0:
        raise UserInputError("quant", f"block must be a positive int, got {block!r}", "block")
    xf = np.asarray(x, dtype=np.float32)
    if xf.ndim == 0:
        xf = xf.reshape(1)
    k = xf.shape[-1]
    nb = max(1, math.ceil(k / block))
    pad = nb * block - k
    if pad:
        xf = np.concatenate([xf, np.zeros(xf.shape[:-1] + (pad,), np.float32)], axis=-1)
    return xf.reshape(xf.shape[:-1] + (nb, block)), k


def _unblock(xb: np.ndarray, k: int, shape: tuple[int, ...]) -> np.ndarray:
    return xb.reshape(xb.shape[:-2] + (-1,))[..., :k].reshape(shape)


def mx_quantize(x: np.ndarray, elem: str = "fp4", block: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """OCP MX v1.0 quantization along the last axis; returns ``(elements, scales)``.

    ``elements`` has shape (..., nblocks, block) and the ml_dtypes element type (E2M1 for "fp4",
    E4M3 for "fp8"); ``scales`` has shape (..., nblocks) and type ``float8_e8m0fnu``, equal to
    2^(floor(log2 amax_block) - emax_elem), clamped to E8M0's range [2^-127, 2^127]. Elements are
    V / scale cast with RNE after saturating to the element's max normal. All-zero blocks get the
    scale 2^-127.
    """
    if elem not in MX_ELEMENTS:
        raise UserInputError("quant", f"unknown MX element {elem!r}; use {sorted(MX_ELEMENTS)}")
    etype = MX_ELEMENTS[elem]
    emax_elem = math.floor(math.log2(float(ml_dtypes.finfo(etype).max)))
    elem_max = np.float32(ml_dtypes.finfo(etype).max)
    xb, _ = _blocks(x, block)
    amax = np.abs(xb).max(axis=-1)
    # frexp: amax = m·2^e with m in [0.5, 1) -> floor(log2 amax) = e - 1, exactly.
    _, e = np.frexp(amax)
    shared = np.where(amax > 0, e - 1 - emax_elem, _E8M0_EMIN)
    shared = np.clip(shared, _E8M0_EMIN, _E8M0_EMAX)
    scales = np.ldexp(np.float32(1.0), shared.astype(np.int32)).astype(_E8M0)
    v = xb / scales.astype(np.float32)[..., None]  # division by a power of two: exact
    elements = np.clip(v, -elem_max, elem_max).astype(etype)
    return elements, scales


def mx(x: np.ndarray, elem: str = "fp4", block: int = 32) -> np.ndarray:
    """Fake-quant MX (MXFP4 by default, block 32) along the last axis; float32, same shape."""
    xa = np.asarray(x)
    elements, scales = mx_quantize(xa, elem, block)
    deq = elements.astype(np.float32) * scales.astype(np.float32)[..., None]
    return _unblock(deq, xa.shape[-1] if xa.ndim else 1, xa.shape)


def nvfp4_quantize(
    x: np.ndarray, block: int = 16, tensor_scale: bool = True
) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """NVFP4 quantization along the last axis; returns ``(elements, block_scales, tensor_scale)``.

    ``elements``: E2M1, shape (..., nblocks, block). ``block_scales``: E4M3, shape (..., nblocks),
    = RNE_e4m3(amax_block / (6 · g)). ``tensor_scale`` g (FP32) = amax_tensor / (6 · 448), or 1.0
    with ``tensor_scale=False`` (then block scales beyond 448 saturate and tiny ones flush to 0).
    A block whose E4M3 scale is 0 dequantizes to zeros. x ≈ elements · block_scale · g.
    """
    xb, _ = _blocks(x, block)
    amax_t = float(np.abs(xb).max(initial=0.0))
    g = np.float32(1.0)
    if tensor_scale and amax_t > 0 and np.float32(amax_t / (_FP4_MAX * _E4M3_MAX)) > 0:
        g = np.float32(amax_t / (_FP4_MAX * _E4M3_MAX))
    amax_b = np.abs(xb).max(axis=-1)
    sb = np.clip(amax_b / (np.float32(_FP4_MAX) * g), 0, _E4M3_MAX).astype(ml_dtypes.float8_e4m3fn)
    denom = sb.astype(np.float32)[..., None] * g
    safe = np.where(denom > 0, denom, np.float32(1.0))
    v = np.where(denom > 0, xb / safe, np.float32(0.0))
    elements = np.clip(v, -_FP4_MAX, _FP4_MAX).astype(ml_dtypes.float4_e2m1fn)
    return elements, sb, g


def nvfp4(x: np.ndarray, block: int = 16, tensor_scale: bool = True) -> np.ndarray:
    """Fake-quant NVFP4 (E2M1, E4M3 block scale per 16, FP32 tensor scale); float32, same shape."""
    xa = np.asarray(x)
    elements, sb, g = nvfp4_quantize(xa, block, tensor_scale)
    deq = elements.astype(np.float32) * (sb.astype(np.float32) * g)[..., None]
    return _unblock(deq, xa.shape[-1] if xa.ndim else 1, xa.shape)


def fp16(x: np.ndarray) -> np.ndarray:
    """Fake-quant IEEE FP16 (RNE, overflow to inf); returns float32."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float16).astype(np.float32)
