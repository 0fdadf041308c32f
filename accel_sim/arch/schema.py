"""Typed, validated model of an architecture file (``arch_configs/*.yaml``).

Units are in the field names: ``*_bytes``, ``*_bytes_per_cycle``, ``*_cycles``, ``*_hz``.
Unknown keys are rejected everywhere (``extra="forbid"``); objects are immutable once loaded.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    model_validator,
)

#: Precisions a matmul can run at. The rate table maps each to MACs per cycle relative to FP16.
PRECISIONS = ("fp16", "bf16", "fp8", "fp4", "int16", "int8", "int4")
Precision = Literal["fp16", "bf16", "fp8", "fp4", "int16", "int8", "int4"]
Operand = Literal["A", "B", "C"]  # A = activations X, B = weights W, C = outputs Y

DEFAULT_RATES = {"fp16": 1, "bf16": 1, "fp8": 2, "fp4": 4, "int16": 1, "int8": 2, "int4": 4}


class Strict(BaseModel):
    # no NaN or infinity anywhere; integers and booleans are strict (``rows: true`` is not 1)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SystolicArray(Strict):
    """An R×C systolic array; timing follows SCALE-Sim v3 (see ``engine/systolic_timing.py``).

    At a precision with rate r (``rates``), a PE does r MACs per cycle on packed operands: the
    reduction dimension K is packed r-fold (WS/IS hold r·R rows of K; OS streams ceil(K/r)).
    """

    kind: Literal["systolic"] = "systolic"
    rows: StrictInt = Field(gt=0, description="PE rows R")
    cols: StrictInt = Field(gt=0, description="PE columns C")
    dataflow: Literal["ws", "os", "is"]
    drain_overlap: StrictBool = Field(
        True,
        description="overlap each fold's output drain with the next fold's fill, as SCALE-Sim "
        "v3 does (its issue #4 discusses changing this); False adds the drain to every fold",
    )
    rates: dict[Precision, StrictInt] = Field(default_factory=lambda: dict(DEFAULT_RATES))

    @property
    def fp16_macs_per_cycle(self) -> int:
        return self.rows * self.cols


class CubeUnit(Strict):
    """An Ascend-like cube: one ``block_m×block_k×block_n`` FP16 block per cycle.

    At rate r the K depth of a block grows r-fold (FP8: 16×32×16, FP4: 16×64×16).
    """

    kind: Literal["cube"] = "cube"
    block_m: StrictInt = Field(16, gt=0)
    block_k: StrictInt = Field(16, gt=0)
    block_n: StrictInt = Field(16, gt=0)
    pipeline_latency_cycles: StrictInt = Field(
        0, ge=0, description="fill + drain of the cube pipeline, paid once per matmul"
    )
    rates: dict[Precision, StrictInt] = Field(default_factory=lambda: dict(DEFAULT_RATES))

    @property
    def fp16_macs_per_cycle(self) -> int:
        return self.block_m * self.block_k * self.block_n


class VectorUnit(Strict):
    """SIMD unit for element-wise work (absmax, quantize, dequantize, softmax, norms)."""

    bytes_per_cycle: StrictInt = Field(gt=0, description="FP16 lanes × 2 bytes processed per cycle")
    startup_cycles: StrictInt = Field(0, ge=0, description="fixed issue cost per vector op")


class EarlyBirdComparator(Strict):
    """OPS's early-bird comparator (OPS §III): compares a hi×hi partial sum with τ."""

    comparators: StrictInt = Field(gt=0, description="comparisons per cycle")
    latency_cycles: StrictInt = Field(ge=0)


class MemoryLevel(Strict):
    """One level of the hierarchy. Listed outermost (DRAM/HBM) first in the file."""

    name: str
    capacity_bytes: StrictInt = Field(gt=0)
    read_bytes_per_cycle: float = Field(gt=0)
    write_bytes_per_cycle: float = Field(gt=0)
    latency_cycles: StrictInt = Field(0, ge=0)
    shared_port: StrictBool = Field(
        False,
        description="reads and writes share one port (DRAM/HBM buses); then the read "
        "bandwidth applies to both",
    )
    holds: list[Operand] = Field(min_length=1, description="operands staged in this level")
    buffers: StrictInt = Field(
        2, ge=1, le=4, description="tiles in flight per operand (2 = double buffering)"
    )


class EnergyEntry(Strict):
    """One per-action energy with its provenance."""

    value: float = Field(ge=0)
    unit: Literal["pJ", "pJ/byte", "pJ/op", "pJ/MAC", "mW"]
    node_nm: StrictInt = Field(gt=0, description="technology node the number is for")
    source: str = Field(min_length=3, description="paper, datasheet or derivation rule")


class Arch(Strict):
    """A whole accelerator."""

    name: str
    description: str = ""
    clock_hz: float = Field(gt=0)
    compute: SystolicArray | CubeUnit = Field(discriminator="kind")
    vector: VectorUnit
    early_bird: EarlyBirdComparator | None = None
    memory: list[MemoryLevel] = Field(min_length=2)
    energy: dict[str, EnergyEntry]
    efficiency: dict[str, Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=dict,
        description="optional efficiency factors in (0, 1]: 'matmul' scales the matrix unit's "
        "step time (cycles / factor), 'dram' the DRAM bandwidth (× factor), 'vector' vector "
        "ops (cycles / factor). For GPU proxies, calibrated on FP16 rows only",
    )

    @model_validator(mode="after")
    def _check(self) -> Arch:
        names = [m.name for m in self.memory]
        if len(set(names)) != len(names):
            raise ValueError(f"memory level names must be unique, got {names}")
        for operand in ("A", "B", "C"):
            if not any(operand in m.holds for m in self.memory):
                raise ValueError(f"no memory level holds operand {operand}")
        if set(self.memory[0].holds) != {"A", "B", "C"}:
            raise ValueError("the outermost memory level (DRAM/HBM) must hold A, B and C")
        return self

    _origin: str = PrivateAttr("")
    _fingerprint: str = PrivateAttr("")

    @property
    def fingerprint(self) -> str:
        """A hash of the whole validated content: equal for equal architectures (cache key)."""
        if not self._fingerprint:
            import hashlib

            self._fingerprint = hashlib.sha256(self.model_dump_json().encode()).hexdigest()
        return self._fingerprint

    @property
    def origin(self) -> str:
        """Where this architecture came from (its file), for error messages."""
        return self._origin or self.name

    def path(self, operand: str) -> tuple[MemoryLevel, ...]:
        """Levels that stage ``operand``, outermost first."""
        return tuple(m for m in self.memory if operand in m.holds)

    @property
    def dram(self) -> MemoryLevel:
        return self.memory[0]
