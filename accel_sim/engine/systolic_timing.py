"""Closed-form timing of one GEMM on an R×C systolic array, exactly as SCALE-Sim v3 counts it.

GEMM convention: ``C[M×N] = A[M×K] · B[K×N]`` (A = activations/ifmap, B = weights/filter).
All results are in array clock cycles.

Derivation (``scalesim==3.0.0``, ``compute/systolic_compute_{ws,os,is}.py``): for every fold
SCALE-Sim builds one block of "demand" lines (one line = one cycle) per operand, pads it
with null requests for fill/drain and skews it by the array size; the three blocks have the
same height P, the blocks of all folds are stacked, and the memory model replays them one
line per cycle. Its COMPUTE_REPORT "Total Cycles" is the cycle *index* of the last OFMAP
line, ``max(ofmap_serviced_cycles)`` with lines numbered from 0, i.e.
``F·P − 1 + stalls`` (stalls = 0 in CALC mode). The −1 is an off-by-one of that report
(SCALE-Sim issue #125: a 4×4×4 OS GEMM on a 4×4 array shows 9 cycles, the array is busy
for 10); :attr:`SystolicFolds.busy_cycles` is the true count ``F·P``.

Per fold, with T the streamed length (rows of the stream operand fed per fold):

* **WS** (B stationary): rows tile K, cols tile N, A streams its M rows (T = M).
  ``P = 2R + C + T − 2`` = R cycles to shift the weight tile in + T input rows + R − 1
  for partial sums to descend the rows (input-row skew) + C − 1 for inputs to cross the
  columns (OFMAP prefix ``2R − 1`` + T lines, skewed by C − 1).
* **IS** (A stationary): rows tile K, cols tile M, B streams its N columns (T = N).
  Same shape as WS: ``P = 2R + C + T − 2``.
* **OS** (C stationary): rows tile M, cols tile N, K streams (T = K).
  ``P = T + R + C − 2``: T operand pairs per PE plus R − 1 / C − 1 skew; PE (R−1, C−1)
  does its last MAC in cycle P − 1. The R result rows of each column are written during the
  skew tail of the same fold (OFMAP prefix T − 1, R rows, skew C − 1), i.e. SCALE-Sim
  overlaps the output drain with compute and the next fold's fill.

Folds: ``F = ceil(rows_dim / R) · ceil(cols_dim / C)``; partial folds cost a full P
(SCALE-Sim pads them with null requests).

``drain_overlap=False`` (not SCALE-Sim) adds a drain per fold: OS must shift its R×C
stationary results out through the columns before the accumulators are reused, R cycles
(one result row per cycle per column). WS/IS already pay their drain inside P (partial
sums leave the bottom edge and SCALE-Sim counts their full traversal), so their drain is 0.

Packed rate r (r MACs per PE per cycle on low-precision operands) packs K r-fold:
WS/IS hold r·R elements of K per stationary fold (row folds = ceil(K / (r·R)), P
unchanged); OS streams ``T = ceil(K / r)``. r = 1 is exactly SCALE-Sim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dataflow = Literal["ws", "os", "is"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class SystolicFolds:
    """Fold plan and cycle count of one GEMM (all cycle fields in array clock cycles).

    Attributes:
        dataflow: ``"ws"``, ``"os"`` or ``"is"``.
        rows, cols: array height R and width C (PEs).
        M, K, N: GEMM dims (``C[M×N] = A[M×K]·B[K×N]``).
        rate: MACs per PE per cycle (K packed ``rate``-fold).
        drain_overlap: True = SCALE-Sim (drain hidden); False adds ``drain_cycles`` per fold.
        row_dim, col_dim, stream_dim: GEMM dim tiled by the array rows / columns / streamed
            in time (WS: K, N, M; OS: M, N, K; IS: K, M, N).
        row_folds, col_folds: folds along the rows / columns of the array.
        tm, tk, tn: GEMM extent covered by the largest (first) fold; tk counts packed K
            elements (r·R for WS/IS).
        stream_len: T, streamed lines per fold (M for WS, N for IS, ceil(K/r) for OS).
        cycles_per_fold: P in cycles, including ``drain_cycles`` when not overlapped.
        drain_cycles: drain added to every fold when ``drain_overlap`` is False (else 0).
        total_cycles: SCALE-Sim's "Total Cycles" (CALC mode): ``folds·P − 1``.
    """

    dataflow: Dataflow
    rows: int
    cols: int
    M: int
    K: int
    N: int
    rate: int
    drain_overlap: bool
    row_dim: str
    col_dim: str
    stream_dim: str
    row_folds: int
    col_folds: int
    tm: int
    tk: int
    tn: int
    stream_len: int
    cycles_per_fold: int
    drain_cycles: int
    total_cycles: int

    @property
    def folds(self) -> int:
        """Number of folds (array tiles) executed."""
        return self.row_folds * self.col_folds

    @property
    def busy_cycles(self) -> int:
        """Cycles the array is occupied, ``folds·P`` (SCALE-Sim reports one less)."""
        return self.folds * self.cycles_per_fold

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates, M·K·N."""
        return self.M * self.K * self.N

    @property
    def utilization(self) -> float:
        """Useful MACs / (R·C·rate·busy_cycles), in [0, 1]."""
        return self.macs / (self.rows * self.cols * self.rate * self.busy_cycles)


def fold_plan(
    dataflow: str,
    rows: int,
    cols: int,
    M: int,
    K: int,
    N: int,
    rate: int = 1,
    drain_overlap: bool = True,
) -> SystolicFolds:
    """Fold a ``C[M×N] = A[M×K]·B[K×N]`` GEMM onto an R×C array; see the module docstring.

    Args:
        dataflow: ``"ws"`` (weights stationary), ``"os"`` (outputs) or ``"is"`` (inputs).
        rows, cols: PE rows R and columns C.
        M, K, N: GEMM dims (elements), all ≥ 1.
        rate: MACs per PE per cycle; packs K ``rate``-fold (1 = SCALE-Sim).
        drain_overlap: True reproduces SCALE-Sim; False adds the per-fold drain (OS: R).

    Returns:
        The :class:`SystolicFolds`; ``total_cycles`` equals SCALE-Sim v3's CALC-mode
        "Total Cycles" when ``rate == 1`` and ``drain_overlap`` is True.
    """
    for name, value in (("rows", rows), ("cols", cols), ("M", M), ("K", K), ("N", N)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if rate < 1:
        raise ValueError(f"rate must be >= 1, got {rate}")
    R, C = rows, cols
    if dataflow == "ws":
        row_dim, col_dim, stream_dim = "K", "N", "M"
        row_folds, col_folds = _ceil_div(K, rate * R), _ceil_div(N, C)
        tm, tk, tn = M, min(K, rate * R), min(N, C)
        T = M
        per_fold = 2 * R + C + T - 2
        drain = 0
    elif dataflow == "is":
        row_dim, col_dim, stream_dim = "K", "M", "N"
        row_folds, col_folds = _ceil_div(K, rate * R), _ceil_div(M, C)
        tm, tk, tn = min(M, C), min(K, rate * R), N
        T = N
        per_fold = 2 * R + C + T - 2
        drain = 0
    elif dataflow == "os":
        row_dim, col_dim, stream_dim = "M", "N", "K"
        row_folds, col_folds = _ceil_div(M, R), _ceil_div(N, C)
        tm, tk, tn = min(M, R), K, min(N, C)
        T = _ceil_div(K, rate)
        per_fold = T + R + C - 2
        drain = R
    else:
        raise ValueError(f"dataflow must be 'ws', 'os' or 'is', got {dataflow!r}")
    drain_cycles = 0 if drain_overlap else drain
    per_fold += drain_cycles
    total = row_folds * col_folds * per_fold - 1
    return SystolicFolds(
        dataflow=dataflow,  # type: ignore[arg-type]
        rows=R,
        cols=C,
        M=M,
        K=K,
        N=N,
        rate=rate,
        drain_overlap=drain_overlap,
        row_dim=row_dim,
        col_dim=col_dim,
        stream_dim=stream_dim,
        row_folds=row_folds,
        col_folds=col_folds,
        tm=tm,
        tk=tk,
        tn=tn,
        stream_len=T,
        cycles_per_fold=per_fold,
        drain_cycles=drain_cycles,
        total_cycles=total,
    )
