"""OliVe's outlier-victim pair (OVP) quantization, emulated in numpy (Guo et al., ISCA 2023).

OliVe (arXiv 2304.07493, §3–4) quantizes weights and activations to 4 or 8 bits. A *normal*
value uses a normal type (int, or flint at 4 bits); an *outlier* (beyond the normal range) uses
``abfloat``, a float with a biased exponent whose range starts where the normal range ends. Values
are taken in adjacent pairs; in a pair holding an outlier, the other value (the *victim*) is
pruned to 0 and its code becomes the identifier that marks the pair (§3.2), so every value keeps
its 4 (or 8) bits and memory stays aligned. Hardware (§5): an OVP decoder at the edge of the
systolic array turns each code into an exponent-integer pair; the PEs multiply the integers and
shift by the exponents.

Everything here follows the authors' code (``olive_quantization/antquant/quant_modules.py`` in
github.com/clevercool/ANT-Quantization, commit bc84067), in the units it uses (a *grid unit*:
normal values lie within ±32 of them after ``x / scale``):

* normal int-b (signed): ``{0, ±1, …, ±(2^(b−1)−1)} · 32 / 2^(b−1)`` (``int_value``: ±4 … ±28 at
  4 bits, ±0.25 … ±31.75 at 8 bits); normal flint-4: ``{0, ±2, ±4, ±6, ±8, ±12, ±16, ±32}``
  (``flint_value``);
* outliers, abfloat (``outlier_value``): ``±2^e · (1 + j / 2^m)`` for e = 5 … 8 (2 exponent bits,
  bias 5), m = b − 3 mantissa bits, without 2^5 itself: 48, 64, 96, 128, 192, 256, 384 at 4 bits;
* ``scale = alpha / max(normal grid)``; each value goes to the nearest point of normal ∪ outlier
  grid (the authors' CUDA kernel; ties, measure zero on real data, go to the larger magnitude);
* OVP (``_forward``): on the tensor flattened row-major, pairs (2i, 2i+1); a value above 32 in
  magnitude is an outlier; the odd member of a pair whose even member is an outlier is the victim,
  else the even member of a pair whose odd member is an outlier; victims become 0;
* ``alpha`` by MSE search (``search_mse``, OVP included): weights per output channel (a row of
  W[N×K]) over ``x_max · i / 100`` for i = 75, 77, …, 249 with ``x_max = max|mean ± 3·std|`` of
  the row; activations one per tensor over the same ratios (the LLM scripts' ``--a_low=75
  --a_up=250 --w_low=75 --w_up=250``), calibrated on calibration tokens and applied statically;
* normal type at 4 bits: int or flint, the one of smaller MSE after each's alpha search
  (``search_adaptive_numeric_type``, mode ``ant-int-flint`` of the LLM scripts); int at 8 bits.

Units: values are float64 in the tensor's own units unless a function says grid units.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from accel_sim.errors import UserInputError
from accel_sim.quant.formats import best_of

_SRC = "accel_sim.quant.olive"
#: the boundary between normal values and outliers, in grid units (authors' code)
OUTLIER_THRESHOLD = 32.0
#: alpha ratios searched, in percent of x_max (LLM scripts: 75 ≤ i < 250, step 2)
ALPHA_PERCENT = tuple(range(75, 250, 2))
BITS = (4, 8)


def _check_bits(bits: int) -> int:
    if bits not in BITS:
        raise UserInputError(_SRC, f"OliVe has 4- and 8-bit variants, got {bits!r}", "bits")
    return bits


def normal_grid(bits: int, kind: str = "int") -> np.ndarray:
    """Sorted signed normal values in grid units (module docstring)."""
    B = _check_bits(bits) - 1
    if kind == "int":
        mags = np.arange(1, 2**B, dtype=np.float64) * (32.0 / 2**B)
    elif kind == "flint" and bits == 4:
        mags = np.array([0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0]) * 8.0  # flint_value · 32 / 2^2
    else:
        raise UserInputError(_SRC, f"normal type must be 'int' (or 'flint' at 4 bits), got "
                             f"{kind!r} at {bits} bits", "kind")  # fmt: skip
    return np.concatenate([-mags[::-1], [0.0], mags])


def outlier_grid(bits: int) -> np.ndarray:
    """Sorted signed abfloat outlier values in grid units: 2 exponent bits, bias 5."""
    mant = _check_bits(bits) - 3
    mags = [2.0**e * (1 + j / 2**mant) for e in range(5, 9) for j in range(2**mant)]
    mags = np.array(sorted(mags[1:]))  # 2^5 · 1.0 = 32 is the normal range's edge, not a code
    return np.concatenate([-mags[::-1], mags])


def grid_round_ref(v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """numpy reference of :func:`grid_round`."""
    v = np.asarray(v, dtype=np.float64)
    i = np.clip(np.searchsorted(grid, v), 1, len(grid) - 1)
    lo, hi = grid[i - 1], grid[i]
    d_lo, d_hi = v - lo, hi - v
    up = (d_hi < d_lo) | ((d_hi == d_lo) & (np.abs(hi) >= np.abs(lo)))
    return np.clip(np.where(up, hi, lo), grid[0], grid[-1])


#: the most buckets :func:`_bucket_table` builds (a finer grid takes the binary search)
_MAX_BUCKETS = 1 << 16


@numba.njit(cache=True)
def _bucket_of(x: float, origin: float, scale: float) -> int:
    """The bucket of ``x`` ≥ ``origin``: monotone in ``x`` (a rounded subtraction, a rounded
    product by a positive number and a truncation each are), so every bucket is an interval."""
    return int((x - origin) * scale)


@numba.njit(cache=True)
def _bucket_table(grid: np.ndarray) -> tuple[np.ndarray, float]:
    """(per bucket ``b``, how many grid points lie in buckets below ``b``; the scale of
    :func:`_bucket_of`). Both sides use the same rounded bucket function, so for ``x`` in bucket
    ``b`` every point counted lies below ``x`` and no other does unless it shares the bucket;
    the scale makes buckets narrower than the smallest gap, and the table is empty (binary
    search instead) unless each grid point has a bucket of its own."""
    n = grid.size
    gap = np.inf
    for i in range(1, n):
        gap = min(gap, grid[i] - grid[i - 1])
    if n < 2 or not gap > 0 or (grid[n - 1] - grid[0]) / gap > _MAX_BUCKETS:
        return np.zeros(0, np.int64), 1.0
    scale = 2.0 / gap
    buckets = _bucket_of(grid[n - 1], grid[0], scale) + 1
    table = np.zeros(buckets + 1, np.int64)
    for i in range(n):
        b = _bucket_of(grid[i], grid[0], scale)
        if i and b == _bucket_of(grid[i - 1], grid[0], scale):
            return np.zeros(0, np.int64), 1.0  # two points share a bucket
        table[b + 1] += 1
    for b in range(1, buckets + 1):
        table[b] += table[b - 1]
    return table[:buckets], scale


@numba.njit(cache=True, parallel=True)
def _grid_round(v: np.ndarray, grid: np.ndarray, out: np.ndarray) -> None:
    n = grid.size
    table, scale = _bucket_table(grid)
    for t in prange(v.size):
        x = v[t]
        # a: the first index with grid[a] >= x (numpy's searchsorted, side left); NaN gives 0
        if not x > grid[0]:
            a = 0
        elif x > grid[n - 1]:
            a = n
        elif table.size:  # the points of the buckets below, then the one of x's own bucket
            a = table[_bucket_of(x, grid[0], scale)]
            a += grid[a] < x
        else:
            a, b = 0, n
            while a < b:
                mid = (a + b) // 2
                if grid[mid] < x:
                    a = mid + 1
                else:
                    b = mid
        i = min(max(a, 1), n - 1)
        lo, hi = grid[i - 1], grid[i]
        d_lo, d_hi = x - lo, hi - x
        # (bitwise, not short-circuit: no branch on the data, which a CPU mispredicts)
        up = (d_hi < d_lo) | ((d_hi == d_lo) & (abs(hi) >= abs(lo)))
        r = hi if up else lo
        out[t] = min(max(r, grid[0]), grid[n - 1])


def grid_round(v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Each value of ``v`` to the nearest point of the sorted ``grid`` (ties to the larger
    magnitude); values beyond the grid go to its ends. numba, one pass (the MSE scale searches
    call it once per candidate scale); :func:`grid_round_ref` is its numpy twin."""
    v = np.asarray(v, dtype=np.float64)
    flat = np.ascontiguousarray(v).reshape(-1)
    out = np.empty_like(flat)
    _grid_round(flat, np.ascontiguousarray(grid, dtype=np.float64), out)
    return out.reshape(v.shape)


def victims(q: np.ndarray) -> np.ndarray:
    """Boolean mask of the victims of the grid-unit codes ``q`` (flattened row-major pairs)."""
    flat = np.asarray(q).reshape(-1)
    out = np.abs(flat) > OUTLIER_THRESHOLD
    victim = np.zeros_like(out)
    n = flat.size - flat.size % 2
    even, odd = out[0:n:2], out[1:n:2]
    victim[1:n:2] = even  # odd member, its even neighbour is an outlier
    victim[0:n:2] = odd & ~even  # even member, its odd neighbour is an outlier (and kept)
    return victim.reshape(np.shape(q))


def ovp_codes(v: np.ndarray, bits: int, kind: str = "int") -> np.ndarray:
    """OVP quantization of ``v`` (already divided by the scale) in grid units: nearest grid
    point, then victims pruned to 0."""
    grid = np.union1d(normal_grid(bits, kind), outlier_grid(bits))
    q = grid_round(v, grid)
    return np.where(victims(q), 0.0, q)


def _alpha_base(x: np.ndarray, per_row: bool) -> np.ndarray:
    """``max|mean ± 3·std|`` per row (``per_row``) or of the whole tensor (authors' x_max)."""
    axis = 1 if per_row else None
    mean = x.mean(axis=axis, keepdims=per_row)
    std = x.std(axis=axis, ddof=1, keepdims=per_row)
    base = np.maximum(np.abs(mean + 3 * std), np.abs(mean - 3 * std))
    return np.where(base > 0, base, 1.0)


def search(x: np.ndarray, bits: int, kind: str, per_row: bool) -> tuple[np.ndarray, float]:
    """(alpha, MSE) of the best ratio of :data:`ALPHA_PERCENT`; per row of ``x`` if
    ``per_row`` (alpha of shape (rows, 1), MSE summed over rows as the authors' score), else one
    alpha for the tensor."""
    x = np.asarray(x, dtype=np.float64)
    top = float(normal_grid(bits, kind)[-1])
    base = _alpha_base(x, per_row)

    def error(alpha: np.ndarray) -> np.ndarray:
        scale = alpha / top
        err = (ovp_codes(x / scale, bits, kind) * scale - x) ** 2
        return err.mean(axis=1, keepdims=True) if per_row else err.mean()

    best_a, best_e = best_of((base * (pct * 0.01) for pct in ALPHA_PERCENT), error)
    return best_a, float(np.sum(best_e))


def quantizer(x: np.ndarray, bits: int, per_row: bool) -> tuple[str, np.ndarray]:
    """(normal type, alpha) for ``x``: at 4 bits the type of smaller MSE (int or flint)."""
    kinds = ("int", "flint") if bits == 4 else ("int",)
    found = [(search(x, bits, k, per_row)[::-1], i, k) for i, k in enumerate(kinds)]
    (_, alpha), _, kind = min(found, key=lambda f: (f[0][0], f[1]))
    return kind, alpha


def fake_quant(x: np.ndarray, bits: int, kind: str, alpha) -> np.ndarray:
    """OVP-quantized ``x`` back in its own units."""
    scale = np.asarray(alpha, dtype=np.float64) / float(normal_grid(bits, kind)[-1])
    return ovp_codes(np.asarray(x, dtype=np.float64) / scale, bits, kind) * scale


def y_olive(X_calib: np.ndarray, X: np.ndarray, W: np.ndarray, bits: int = 4) -> np.ndarray:
    """OliVe's Y = X·Wᵀ (X M×K, W N×K): W OVP-quantized per output channel, X with a static
    per-tensor alpha searched on ``X_calib``, both dequantized and multiplied in float64 (the
    decoded exponent-integer products are exact integers, so this is the hardware's result up
    to the accumulator's FP32/INT32 rounding)."""
    kind_w, a_w = quantizer(W, bits, per_row=True)
    kind_x, a_x = quantizer(X_calib, bits, per_row=False)
    Wq = fake_quant(W, bits, kind_w, a_w)
    Xq = fake_quant(X, bits, kind_x, a_x)
    return np.asarray(Xq, dtype=np.float64) @ np.asarray(Wq, dtype=np.float64).T


# --------------------------------------------------------------------------- 4-bit codes
#: the victim's code: int4 sign-magnitude "−0", which no normal value uses (OliVe §3.2)
IDENTIFIER = 0b1000


def encode4(q: np.ndarray) -> np.ndarray:
    """4-bit codes of int-normal OVP values ``q`` (grid units, after :func:`ovp_codes`): a normal
    ``4·i`` is sign-magnitude ``i`` (|i| ≤ 7); an outlier ``±2^(e+5)·(1 + m/2)`` is sign,
    2-bit exponent e, 1-bit mantissa m; a victim (a 0 paired with an outlier) is
    :data:`IDENTIFIER`."""
    q = np.asarray(q, dtype=np.float64)
    sign = (q < 0).astype(np.int64) << 3
    mag = np.abs(q)
    out = mag > OUTLIER_THRESHOLD
    normal = np.rint(mag / 4).astype(np.int64)
    e = np.floor(np.log2(np.where(out, mag, 64.0))).astype(np.int64)
    m = np.rint(np.where(out, mag, 64.0) / 2.0**e * 2 - 2).astype(np.int64)
    codes = np.where(out, sign | ((e - 5) << 1) | m, sign | normal)
    flat = codes.reshape(-1)
    partner = np.zeros_like(out.reshape(-1))
    n = flat.size - flat.size % 2
    partner[0:n:2], partner[1:n:2] = out.reshape(-1)[1:n:2], out.reshape(-1)[0:n:2]
    flat = np.where(partner & (q.reshape(-1) == 0), IDENTIFIER, flat)
    return flat.reshape(q.shape)


def decode4(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the OVP decoder hands a PE for each 4-bit code: ``(integer, exponent)`` with the
    value ``integer · 2^exponent`` in normal LSBs (a normal LSB is 4 grid units). A code is an
    outlier when its pair partner is :data:`IDENTIFIER`; an outlier (e, m) decodes to
    ``(±(2 + m), e + 2)``, a normal or the identifier to ``(±i, 0)`` / ``(0, 0)``."""
    c = np.asarray(codes, dtype=np.int64).reshape(-1)
    n = c.size - c.size % 2
    partner_id = np.zeros(c.size, dtype=bool)
    partner_id[0:n:2], partner_id[1:n:2] = c[1:n:2] == IDENTIFIER, c[0:n:2] == IDENTIFIER
    outlier = partner_id & (c != IDENTIFIER)
    sign = np.where(c & 0b1000, -1, 1)
    mag = c & 0b0111
    integer = np.where(outlier, sign * (2 + (mag & 1)), np.where(c == IDENTIFIER, 0, sign * mag))
    exponent = np.where(outlier, (mag >> 1) + 2, 0)
    return integer.reshape(np.shape(codes)), exponent.reshape(np.shape(codes))
