"""Early-bird skips at the granularity hardware can act on: whole blocks of computation sets.

OPS's early bird decides per *computation set* (one output (m, n) × one K-chunk; conventions in
``stats_ops``). Hardware that cannot drop one set's work on its own drops a block of sets only
when *every* set in it is skipped:

* **row** (``tile_m = 1``, ``tile_n = C``): a lockstep array of ``C`` columns streams one row of X
  at a time with X's slices broadcast to every column; it can drop that row's remaining slice
  products for a chunk only when all ``C`` outputs of the row skip;
* **tile** (``tile_m = tile_n = T``): an array that issues whole output tiles drops a
  ``T × T`` tile × chunk only when all of its sets skip.

A block at the edge of the output (fewer than ``tile_m`` rows or ``tile_n`` columns left) counts
its real sets only: padding never prevents a skip. Fractions are over (block, chunk) pairs.

Two implementations that must agree (``tests/test_stats.py``): :func:`full_skip_fraction`, the
numba kernel of ``stats_ops`` (no M·N·C array: per block it counts the sets whose
``|P_hi| > τ``), and :func:`full_skip_fraction_of_sets`, the numpy reference over an explicit
boolean skip array (what ``workload/compact.py`` uses, since it already has the partial sums of
every set for its grid of τ).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.workload import stats_ops as SO
from accel_sim.workload.stats import positive_int


def full_skip_fraction(X: Any, W: Any, chunk: int, tau: float, tile_m: int, tile_n: int) -> float:
    """Fraction of (``tile_m × tile_n`` output block, K-chunk) pairs of Y = X·Wᵀ (W is N×K) whose
    every computation set the early bird skips (``|P_hi| ≤ τ``). numba; parallel over blocks of
    rows. ``tile_m = 1`` gives the row granularity of a ``tile_n``-column lockstep array."""
    _, gt, _ = SO._early_bird(X, W, chunk, tau, tile_m, tile_n, "full_skip_fraction")
    return float((gt == 0).mean())


def full_skip_fraction_of_sets(skip: np.ndarray, tile_m: int, tile_n: int) -> float:
    """numpy reference of :func:`full_skip_fraction` from ``skip``, bool[M, N, C] (True = the
    set is skipped): the fraction of (block, chunk) pairs whose every real set is True."""
    skip = np.asarray(skip)
    if skip.ndim != 3 or skip.dtype != bool:
        raise UserInputError("full_skip_fraction_of_sets", "skip must be a bool array [M, N, C], "
                             f"got {skip.dtype} {skip.shape}")  # fmt: skip
    tile_m = positive_int(tile_m, "tile_m", "full_skip_fraction_of_sets")
    tile_n = positive_int(tile_n, "tile_n", "full_skip_fraction_of_sets")
    M, N, C = skip.shape
    mt, nt = math.ceil(M / tile_m), math.ceil(N / tile_n)
    padded = np.ones((mt * tile_m, nt * tile_n, C), dtype=bool)  # padding never blocks a skip
    padded[:M, :N] = skip
    blocks = padded.reshape(mt, tile_m, nt, tile_n, C).all(axis=(1, 3))
    return float(blocks.mean())
