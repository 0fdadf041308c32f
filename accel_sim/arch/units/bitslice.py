"""A bit-slice PE array: R×C PEs of ``slice_bits``-bit multipliers, weight stationary (OPS §III).

OPS (Liu et al.) computes 16-bit operands as 4-bit slices on "the PE array in 4-bit format";
weights are "pre-partitioned into high-order and low-order components ... then fixed in the
systolic array prior to computation" (§III, *Weight Preparation*), so the array is **weight
stationary**: each PE holds the ``s_w`` slices of one weight element of the fold's ``R×C`` tile
of W (K along the rows, N along the columns), and the rows of X stream through it.

**Slice products.** A ``b``-bit × ``b``-bit MAC is ``P = ceil(b/slice_bits)²`` slice products:
with 4-bit slices INT4 = 1, INT8 = 4, INT16 = 16, so the rates are int16:int8:int4 = 1:4:16 on
the same array (quadratic, not the 1:2:4 packing of the systolic and cube units). The rates are
derived from ``slice_bits`` (integer precisions only: floating point needs exponent alignment,
which this unit does not model); ``fp16_macs_per_cycle`` is the rate-1 reference, i.e. INT16
MACs per cycle ``R·C/16``. The unit has no FP16 rate. ``rates`` may be omitted (derived) or given
as a whole multiple ``k`` of the derived table: PEs that complete ``k`` slice products per cycle
(the repository's "more rate" edit; any other table is an error).

**Timing of one step (a fold).** A *slice-pair item* is one slice pair ``(i, j)`` of one row of X
reduced down one column: each PE multiplies ``x_i·w_j`` and adds it to the partial sum passing
down the column, so a column finishes one item per cycle once full. Its bottom holds the
precision-aware reduction (OPS §III, *Partial Sum Accumulation* / *Precision-Aware Reduction*):
the item's sum is shifted by ``slice_bits·(i+j)`` and added into the row's accumulator. A row of X
is ``P`` items, so with ``m`` streamed rows a fold is SCALE-Sim's WS fold with the stream
stretched ``P``-fold and the weight load ``s_w``-fold (the load path carries one slice per PE
column per cycle, 64 B/cycle on a 128-column 4-bit array)::

    cycles = s_w·R (load the slices of W)  +  R + C − 2 (skew fill and drain)  +  P·m (stream)

With ``P = s_w = 1`` (INT4) this is exactly SCALE-Sim's WS fold time ``2R + C + m − 2`` of an
R×C array (the weight load is not overlapped with the previous fold's stream, as in SCALE-Sim and
the ``systolic`` unit). Edge folds are padded to a full fold, as SCALE-Sim does. No cycles are
paid once per matmul (there is no reference simulator's convention to match).

**Energy actions.** A slice product (a 4×4 multiply and the add into the column's partial sum)
and the shift-add reduction (one 32-bit add per item at the column's foot, ``P/R`` per MAC) are
both proportional to ``P``; the engine prices MACs per precision (``energy.compute.mac_<p>``), so
the architecture file states each ``mac_<p>`` as ``P × (slice MAC + reduction / R)`` with its
derivation (``arch_configs/ops_bitslice.yaml``), and :meth:`energy_actions` is the inherited one.

**Operand decoders** (OliVe §5, ANT §V: the baselines OPS compares with on this array). OliVe's
and ANT's codes become exponent-integer pairs in decoders at the array edge, one per PE row on the
streamed X and one per column on the weight-load path, each decoding one element per cycle: an
element feeds ``P`` slice items (X) or ``s_w`` load cycles (W), so they keep up with the array by
construction and cost no throughput. :meth:`decode_actions` declares their energy,
``decode_<scheme>`` for :data:`DECODERS` (pJ per decoded element; the engine counts every element
of A and B entering the array, ``engine/counts.py``). Their pipeline stage is not in
:meth:`step_cycles`: one cycle per fold at most, against a fold of at least
``s_w·R + R + C − 2 + P·m`` cycles (≥ 191 on a 32×128 array), and hidden behind the previous
fold when the next tile is already buffered (docs/dataflows.md, *OliVe and ANT*).

**Early-bird comparators (inline).** One comparator per hi×hi partial sum tap: a *computation
set* (one output over one K-chunk) is a column's item sum when the chunk equals ``R`` (R/chunk
taps per column otherwise). The paper gives no comparator count; the default is derived from the
output rate: a column emits at most one item sum per cycle, so at most one hi×hi sum per cycle,
and ``comparators = cols`` keeps up with the array even when every set is skipped (each row is
then a single hi×hi item). :meth:`early_bird_issue` returns the cycles per streamed row and the
comparator stall if the field is set lower. The comparators' decision reaches the column's PEs
``R + 1`` cycles after the hi×hi item entered it; the hi×hi items of the next rows are issued
meanwhile ("interleaved computation", §I), so the decision latency costs no cycles (at most ~R at
the end of a fold, not counted). See ``dataflow/ops.py`` for how OPS uses it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from accel_sim.arch.base import MAX_PARALLEL
from accel_sim.arch.units import register
from accel_sim.arch.units.base import ComputeUnit, StepTile, pow2_multiples
from accel_sim.errors import UserInputError

#: Integer precisions the unit computes as slices, and their operand widths.
SLICED_BITS = {"int4": 4, "int8": 8, "int16": 16}
#: Operand decoders the array edge holds (``MatmulOp.decode``): OliVe's and ANT's, 4 and 8 bits.
DECODERS = ("ant4", "ant8", "olive4", "olive8")


def slice_products(bits: int, slice_bits: int) -> int:
    """Slice products of one ``bits``×``bits`` MAC: ``ceil(bits/slice_bits)²``."""
    return math.ceil(bits / slice_bits) ** 2


def derived_rates(slice_bits: int) -> dict[str, int]:
    """MACs per cycle relative to INT16: ``P(int16) / P(precision)`` (1:4:16 for 4-bit slices)."""
    p16 = slice_products(16, slice_bits)
    return {p: p16 // slice_products(b, slice_bits) for p, b in SLICED_BITS.items()}


@register
class BitSliceArray(ComputeUnit):
    """R×C ``slice_bits``-bit PEs, weight stationary; INT16/INT8/INT4 as slice products (OPS)."""

    kind: Literal["bitslice"] = "bitslice"
    rows: StrictInt = Field(gt=0, le=MAX_PARALLEL, description="PE rows R: K per fold (≤ 2^20)")
    cols: StrictInt = Field(gt=0, le=MAX_PARALLEL, description="PE columns C: N per fold (≤ 2^20)")
    slice_bits: Literal[1, 2, 4, 8] = Field(
        4, description="multiplier width of a PE; a b-bit MAC is ceil(b/slice_bits)^2 products "
        "(OPS: 4). Powers of two, so every rate is an integer",
    )  # fmt: skip
    dataflow: Literal["ws"] = Field(
        "ws", description="weight stationary: OPS §III fixes the pre-sliced weights in the array"
    )
    comparators: StrictInt = Field(
        gt=0, le=MAX_PARALLEL,
        description="inline early-bird comparisons per cycle; default cols (one per column: a "
        "column emits at most one hi×hi partial sum per cycle)",
    )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        sb = data.get("slice_bits", 4)
        if sb in (1, 2, 4, 8) and not isinstance(sb, bool):
            rates = derived_rates(sb)
            given = data.get("rates", rates)
            k = given.get("int16") if isinstance(given, dict) else None
            if not (
                isinstance(k, int) and k >= 1 and given == {p: k * r for p, r in rates.items()}
            ):
                raise ValueError(
                    f"a bitslice unit's rates follow from slice_bits (a b-bit MAC is "
                    f"ceil(b/slice_bits)^2 slice products: {rates}); omit compute.rates, or give "
                    "a whole multiple k of that table (k slice products per PE per cycle)"
                )
            data["rates"] = given
            if "comparators" not in data and isinstance(data.get("cols"), int):
                data["comparators"] = data["cols"] * k
        return data

    @model_validator(mode="after")
    def _check(self) -> BitSliceArray:
        p16 = slice_products(16, self.slice_bits)
        if (self.rows * self.cols) % p16:
            raise ValueError(f"rows x cols must be a multiple of {p16} (the slice products "
                             "of one INT16 MAC): INT16 MACs per cycle is an integer")  # fmt: skip
        return self

    # ------------------------------------------------------------------ slices
    @property
    def products_per_cycle(self) -> int:
        """Slice products a PE completes per cycle: 1, or ``k`` when ``rates`` is given as ``k``
        times the derived table (the repository's "more rate" edit)."""
        return self.rates["int16"]

    def products_per_mac(self, rate: int) -> int:
        """Slice products of one MAC at ``rate`` (16 / 4 / 1 for INT16 / INT8 / INT4)."""
        return slice_products(16, self.slice_bits) * self.products_per_cycle // rate

    def weight_slices(self, rate: int) -> int:
        """Slices of one weight element (square precisions: ``sqrt(P)``)."""
        return math.isqrt(self.products_per_mac(rate))

    @property
    def fp16_macs_per_cycle(self) -> int:
        """MACs per cycle at rate 1, which on this unit is INT16 (it has no FP16)."""
        return self.rows * self.cols // slice_products(16, self.slice_bits)

    def decode_actions(self) -> tuple[str, ...]:
        """``decode_<scheme>`` of each of :data:`DECODERS` (pJ/op per decoded element)."""
        return tuple(f"decode_{d}" for d in DECODERS)

    # ------------------------------------------------------------------ mapping and timing
    def step_dims(self, M: int, K: int, N: int, rate: int) -> tuple[list[int], ...]:
        # W stationary R×C (one weight element per PE at every precision); rows of X stream
        return pow2_multiples(1, M), [self.rows], [self.cols]

    def streamed_dim(self) -> str:
        return "m"  # rows of X stream through the stationary W slices

    def step_cycles(self, tile: StepTile, rate: int, m: int, k: int, n: int) -> int:
        R, C = self.rows, self.cols
        stream = -(-self.products_per_mac(rate) * m // self.products_per_cycle)
        return self.weight_slices(rate) * R + R + C - 2 + stream

    def output_tile_side(self) -> int:
        """A lockstep fold finishes ``m × C`` outputs together; OPS's tile granularity uses
        square C×C tiles of the trace (a subset of what a lockstep 1×C row could drop)."""
        return self.cols

    # ------------------------------------------------------------------ early bird
    def early_bird_issue(self, chunk: int, set_skip: float, rest: int = 15) -> tuple[float, float]:
        """Per streamed row of X in a fold, with the early bird on: ``(cycles, comparator
        stall)``. Each PE group (a column, or R/chunk groups of ``chunk`` rows of it) issues the
        hi×hi item first, and the ``rest`` other items only for a set it keeps, so a row costs
        ``1 + rest·(1 − set_skip)`` items on average, at :attr:`products_per_cycle` items per
        cycle; the comparators must take the row's
        ``(R/chunk)·C`` hi×hi sums, ``(R/chunk)·C / comparators`` cycles. The larger of the two
        is the row's time; their difference, if the comparators are slower, is the stall."""
        if chunk <= 0 or self.rows % chunk:
            raise UserInputError(
                "knobs", f"on the bit-slice unit a computation set must fit in one fold's "
                f"column: chunk must divide compute.rows ({self.rows})", "chunk",
            )  # fmt: skip
        items = (1 + rest * (1 - set_skip)) / self.products_per_cycle
        compare = (self.rows // chunk) * self.cols / self.comparators
        return max(items, compare), max(0.0, compare - items)

    def describe(self) -> str:
        return (f"bitslice {self.rows}x{self.cols} {self.slice_bits}-bit PEs WS, rates "
                f"{self.rates}, {self.comparators} early-bird comparators")  # fmt: skip
