"""The interface every compute unit implements (its mapping space, step timing, actions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, StrictInt

from accel_sim.arch.base import DEFAULT_RATES, MAX_RATE, Precision, Strict
from accel_sim.errors import UserInputError


@dataclass(frozen=True)
class StepTile:
    """Elements one step of the unit covers: ``C[tm×tn] += A[tm×tk]·B[tk×tn]``.

    A step is the unit's natural work item: a SCALE-Sim fold on a systolic array, a group of
    cube blocks on a cube unit. Edge steps cover less; :meth:`ComputeUnit.step_cycles` prices them.
    """

    tm: int
    tk: int
    tn: int


def pow2_multiples(block: int, limit: int) -> list[int]:
    """``block, 2·block, 4·block, …`` up to the first value ≥ ``limit``, plus the exact cover
    ``ceil(limit/block)·block``. The set for ``limit + 1`` contains a tile ≥ ``limit`` for every
    tile of the set for ``limit``, which keeps the mapping space monotone in the GEMM size."""
    sizes, size = [], block
    while True:
        sizes.append(size)
        if size >= limit:
            break
        size *= 2
    exact = -(-limit // block) * block
    return sorted(set(sizes) | {exact})


class ComputeUnit(Strict):
    """Base of every ``compute.kind``. Subclasses add their geometry and implement the methods.

    ``rates`` maps a precision to MACs per cycle relative to FP16 (1:2:4 = FP16:FP8:FP4 by default);
    a precision missing from it (or at 0) is not supported by the unit.
    """

    kind: str
    rates: dict[Precision, Annotated[StrictInt, Field(ge=0, le=MAX_RATE)]] = Field(
        default_factory=lambda: dict(DEFAULT_RATES),
        description="MACs per cycle relative to FP16 per precision (0 = unsupported, ≤ 64)",
    )

    # ------------------------------------------------------------------ shared behaviour
    def rate(self, precision: str, origin: str = "compute", what: str = "matmul") -> int:
        """MACs per cycle of ``precision`` relative to FP16; a one-line error if unsupported."""
        rate = self.rates.get(precision)  # type: ignore[call-overload]
        if rate is None or rate <= 0:
            raise UserInputError(
                origin,
                f"{what}: the compute unit has no {precision} rate; it supports "
                f"{sorted(k for k, v in self.rates.items() if v > 0)}",
                "compute.rates",
            )
        return rate

    def peak_macs_per_cycle(self, precision: str) -> int:
        return self.fp16_macs_per_cycle * self.rate(precision)

    def energy_actions(self) -> tuple[str, ...]:
        """The energy-table actions this unit performs: a MAC per supported precision."""
        return tuple(f"mac_{p}" for p, r in sorted(self.rates.items()) if r > 0)

    def decode_actions(self) -> tuple[str, ...]:
        """Energy-table actions the unit performs only for the dataflows that ask for them: its
        operand decoders at the array edge, ``decode_<scheme>`` (pJ/op per decoded element,
        ``MatmulOp.decode``). Their entries are not required at load (``Arch.energy_needs``); a
        plan that uses one checks it (``Arch.require_energy``), and an entry for one counts as
        used. None by default."""
        return ()

    # ------------------------------------------------------------------ per kind
    @property
    def fp16_macs_per_cycle(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def step_dims(self, M: int, K: int, N: int, rate: int) -> tuple[list[int], ...]:
        """Candidate step sizes along m, k and n (elements, ascending) for an ``M×K×N`` matmul
        at ``rate``: the unit's step tiles are every combination (:meth:`step_tiles`)."""
        raise NotImplementedError  # pragma: no cover

    def step_tiles(self, M: int, K: int, N: int, rate: int) -> list[StepTile]:
        """Candidate step tiles for an ``M×K×N`` matmul at ``rate`` (the mapper's unit space):
        every combination of :meth:`step_dims`, m outermost."""
        ms, ks, ns = self.step_dims(M, K, N, rate)
        return [StepTile(tm, tk, tn) for tm in ms for tk in ks for tn in ns]

    def step_cycles(self, tile: StepTile, rate: int, m: int, k: int, n: int) -> int:
        """Cycles the unit is busy on one step of actual extents ``m×k×n`` (≤ the tile)."""
        raise NotImplementedError  # pragma: no cover

    def once_cycles(self, tile: StepTile, rate: int) -> int:
        """Cycles added once per matmul (pipeline fill/drain, or a reference's convention)."""
        return 0

    def streamed_dim(self) -> str | None:
        """The GEMM dimension (``"m"``, ``"k"`` or ``"n"``) a step streams through the array
        (a longer stream amortises a fold's fill), or ``None`` when steps are fixed blocks. The
        mapper also scores steps with a halved or quartered stream: more folds, but a block of
        the streamed operand may then stay resident across the other dimension's tiles."""
        return None

    def output_tile_side(self) -> int:
        """Side of the output square the unit finishes together (OPS's skip granularity)."""
        raise NotImplementedError  # pragma: no cover

    def describe(self) -> str:
        """One line for reports: geometry and rates."""
        raise NotImplementedError  # pragma: no cover
