"""ANT's adaptive numeric types, emulated in numpy (Guo et al., MICRO 2022).

ANT (§III–IV) quantizes each tensor with the one of several 4-bit types that fits its
distribution best, chosen offline per tensor, and keeps a few layers at 8 bits ("ANT4-8"). The
types are int, PoT (powers of two) and flint (a float/int hybrid whose exponent is encoded by the
position of the first 1, so small values get mantissa bits and large ones range). Hardware (§V):
a decoder at the edge of the systolic array turns flint/PoT codes into exponent-integer pairs;
the PEs are 4-bit integer MACs with a shifter, fused in fours for 8 bits.

Everything follows the authors' code (``ant_quantization/antquant/quant_modules.py`` in
github.com/clevercool/ANT-Quantization, commit bc84067):

* grids (``int_value``, ``pot_value``, ``flint_value``; only the ratio to the grid's maximum
  matters): signed int-4 ``{−8, …, 7}``; signed PoT-4 ``{0, ±2^0, …, ±2^6}``; signed flint-4
  ``{0, ±0.25, ±0.5, ±0.75, ±1, ±1.5, ±2, ±4}``; unsigned (a tensor without negative values,
  ``update_signed``) int ``{0 … 15}``, PoT ``{0, 2^0 … 2^14}``, flint with 4 value bits;
* ``scale = alpha / max(grid)``; nearest grid point (ties to the larger magnitude);
* ``alpha`` by MSE search (``search_mse``): weights per output channel over ``absmax_row · i/100``,
  activations one per tensor over ``absmax · i/100``, i = 80 … 149 (the BERT scripts' ``-wl=80
  -wu=150 -al=80 -au=150``; at 8 bits i starts at 95);
* **type selection by MSE** (``search_adaptive_numeric_type``, mode ``ant-int-pot-flint``): per
  tensor, each type's best MSE after its own alpha search, the smallest wins (ties: int, PoT,
  flint, the order we search). 8-bit tensors are int (``bit > 6``);
* **8-bit fallback** (ANT4-8): the authors' ``set_8_bit_layer_n`` sets the ``n`` layers of largest
  weight + input MSE (and the last two layers) to 8 bits, ``n`` chosen per model. A per-GEMM
  simulator cannot rank against layers it does not see; :mod:`accel_sim.dataflow.ant` falls back
  when the GEMM's 4-bit relative output error on calibration tokens exceeds a budget.
"""

from __future__ import annotations

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.quant.formats import best_of
from accel_sim.quant.olive import grid_round

_SRC = "accel_sim.quant.ant"
TYPES = ("int", "pot", "flint")
#: alpha ratios searched, percent of absmax (BERT scripts: 80 ≤ i < 150; at 8 bits from 95)
ALPHA_PERCENT = {4: tuple(range(80, 150)), 8: tuple(range(95, 150))}


def _flint_magnitudes(value_bits: int) -> list[float]:
    """``flint_value`` (exp_base 0): the magnitudes of a flint with ``value_bits`` bits."""
    vb = value_bits
    mags = []
    for i in range(vb):  # negative exponents: exp_bit = i + 2, exponent −(i + 1)
        mant = vb - (i + 2)
        if mant >= 0:
            mags += [2.0 ** -(i + 1) * (1 + j / 2**mant) for j in range(2**mant)]
    mags += [1 + j / 2 ** (vb - 2) for j in range(2 ** (vb - 2))]  # exponent 0
    for i in range(1, vb - 1):  # positive exponents
        mant = vb - (i + 2)
        mags += [2.0**i * (1 + j / 2**mant) for j in range(2**mant)]
    return mags + [2.0 ** (vb - 1)]


def grid(kind: str, bits: int = 4, signed: bool = True) -> np.ndarray:
    """The sorted values of an ANT type (module docstring), normalised to a maximum of 1."""
    if bits not in (4, 8) or kind not in TYPES or (bits == 8 and kind != "int"):
        raise UserInputError(_SRC, f"ANT types: {TYPES} at 4 bits, int at 8, got {kind!r} at "
                             f"{bits!r} bits", "kind")  # fmt: skip
    B = bits - 1 if signed else bits
    if kind == "int":
        mags = list(range(1, 2**B))
        extra = [-(2.0**B)] if signed else []
    elif kind == "pot":
        mags, extra = [2.0**i for i in range(2**B - 1)], []
    else:
        mags, extra = _flint_magnitudes(B), []
    mags = np.array(mags, dtype=np.float64)
    values = np.concatenate([[0.0], mags, -mags if signed else [], extra])
    values = np.unique(values)
    return values / values.max()


def search(x: np.ndarray, kind: str, bits: int, per_row: bool) -> tuple[np.ndarray, float]:
    """(alpha, MSE) of the best ratio; per row of ``x`` if ``per_row`` (MSE summed over rows,
    the authors' score), else one alpha for the tensor."""
    x = np.asarray(x, dtype=np.float64)
    g = grid(kind, bits, signed=bool(x.min() < 0))
    base = np.abs(x).max(axis=1, keepdims=True) if per_row else np.abs(x).max()
    base = np.where(base > 0, base, 1.0)

    def error(alpha: np.ndarray) -> np.ndarray:
        err = (grid_round(x / alpha, g) * alpha - x) ** 2
        return err.mean(axis=1, keepdims=True) if per_row else err.mean()

    best_a, best_e = best_of((base * (pct * 0.01) for pct in ALPHA_PERCENT[bits]), error)
    return best_a, float(np.sum(best_e))


def select(x: np.ndarray, bits: int, per_row: bool) -> tuple[str, np.ndarray, float]:
    """(type, alpha, MSE) for ``x``: at 4 bits the type of smallest MSE, at 8 bits int."""
    kinds = TYPES if bits == 4 else ("int",)
    scored = [(search(x, k, bits, per_row), i, k) for i, k in enumerate(kinds)]
    (alpha, mse), _, kind = min(scored, key=lambda s: (s[0][1], s[1]))
    return kind, alpha, mse


def fake_quant(x: np.ndarray, kind: str, bits: int, alpha, signed: bool) -> np.ndarray:
    """``x`` quantized to the ANT type and back in its own units."""
    x = np.asarray(x, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    return grid_round(x / alpha, grid(kind, bits, signed)) * alpha


def y_ant(X_calib: np.ndarray, X: np.ndarray, W: np.ndarray,
          bits: int = 4) -> tuple[np.ndarray, dict[str, str]]:  # fmt: skip
    """ANT's Y = X·Wᵀ (X M×K, W N×K) and the types chosen: W per output channel, X with a
    static per-tensor alpha (and type) chosen on ``X_calib``; products of the decoded values
    are exact, so float64 is the hardware's result up to accumulator rounding."""
    kind_w, a_w, _ = select(W, bits, per_row=True)
    kind_x, a_x, _ = select(X_calib, bits, per_row=False)
    Wq = fake_quant(W, kind_w, bits, a_w, signed=bool(np.min(W) < 0))
    Xq = fake_quant(X, kind_x, bits, a_x, signed=bool(np.min(X_calib) < 0))
    return Xq @ Wq.T, {"w": kind_w, "x": kind_x}
