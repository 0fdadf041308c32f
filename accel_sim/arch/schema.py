"""Typed, validated model of an architecture file (``arch_configs/*.yaml``).

Units are in the field names: ``*_bytes``, ``*_bytes_per_cycle``, ``*_cycles``, ``*_hz``.
Unknown keys are rejected everywhere (``extra="forbid"``); objects are immutable once loaded.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import (
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from accel_sim.arch.base import (
    DEFAULT_RATES,
    MAX_BYTES_PER_CYCLE,
    MAX_CAPACITY_BYTES,
    MAX_CLOCK_HZ,
    MAX_CORES,
    MAX_DMA_QUEUE_STEPS,
    MAX_ENERGY_VALUE,
    MAX_LATENCY_CYCLES,
    MAX_PARALLEL,
    MIN_BURST_BYTES,
    MIN_BYTES_PER_CYCLE,
    MIN_CLOCK_HZ,
    MIN_EFFICIENCY,
    PRECISIONS,
    Operand,
    Precision,
    Strict,
)
from accel_sim.arch.units import ComputeUnit, unit_classes
from accel_sim.arch.units.cube import CubeUnit
from accel_sim.arch.units.systolic import SystolicArray
from accel_sim.errors import UserInputError

__all__ = ["DEFAULT_RATES", "PRECISIONS", "Operand", "Precision", "Strict", "ComputeUnit",
           "CubeUnit", "SystolicArray", "Arch", "MemoryLevel"]  # fmt: skip

#: ``compute:`` is any registered unit kind (``accel_sim/arch/units/``), chosen by its ``kind``.
AnyComputeUnit = Annotated[Union[tuple(unit_classes())], Field(discriminator="kind")]  # noqa: UP007


class VectorUnit(Strict):
    """SIMD unit for element-wise work (absmax, quantize, dequantize, softmax, norms)."""

    bytes_per_cycle: StrictInt = Field(
        ge=2,
        le=int(MAX_BYTES_PER_CYCLE),
        description=f"FP16 lanes × 2 bytes processed per cycle (at least one lane), "
                    f"2..{MAX_BYTES_PER_CYCLE:.0e}",
    )
    startup_cycles: StrictInt = Field(
        0,
        ge=0,
        le=MAX_LATENCY_CYCLES,
        description=f"fixed issue cost per vector op, cycles, 0..{MAX_LATENCY_CYCLES}",
    )

    @property
    def lanes(self) -> int:
        """FP16 elements the unit processes per cycle (an odd byte count's last byte is idle)."""
        return self.bytes_per_cycle // 2


class EarlyBirdComparator(Strict):
    """OPS's early-bird comparator (OPS §III): compares a hi×hi partial sum with τ."""

    comparators: StrictInt = Field(
        gt=0, le=MAX_PARALLEL, description=f"comparisons per cycle, 1..{MAX_PARALLEL}"
    )
    latency_cycles: StrictInt = Field(
        ge=0, le=MAX_LATENCY_CYCLES, description=f"cycles, 0..{MAX_LATENCY_CYCLES}"
    )


_BANDWIDTH = (
    f"bytes per cycle at this level's port, {MIN_BYTES_PER_CYCLE}..{MAX_BYTES_PER_CYCLE:.0e}"
)


class MemoryLevel(Strict):
    """One level of the hierarchy. Listed outermost (DRAM/HBM) first in the file."""

    name: str
    kind: Literal["sram", "dram"] | None = Field(
        None,
        description="'dram' for the off-chip level (only the outermost), 'sram' on chip; "
        "omitted = dram for the outermost level, sram for the others",
    )
    capacity_bytes: StrictInt = Field(
        gt=0, le=MAX_CAPACITY_BYTES, description="bytes, 1..2**50 (1 PiB)"
    )
    read_bytes_per_cycle: float = Field(ge=MIN_BYTES_PER_CYCLE, le=MAX_BYTES_PER_CYCLE,
                                        description=_BANDWIDTH)  # fmt: skip
    write_bytes_per_cycle: float = Field(ge=MIN_BYTES_PER_CYCLE, le=MAX_BYTES_PER_CYCLE,
                                         description=_BANDWIDTH)  # fmt: skip
    latency_cycles: StrictInt = Field(
        0,
        ge=0,
        le=MAX_LATENCY_CYCLES,
        description=f"cycles from request to usable data, 0..{MAX_LATENCY_CYCLES}",
    )
    shared_port: StrictBool = Field(
        False,
        description="reads and writes share one port (DRAM/HBM buses); then the read "
        "bandwidth applies to both",
    )
    max_inflight_bytes: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_CAPACITY_BYTES,
        description="DRAM (bytes, 1..2**50): bytes of requests the memory side keeps in flight "
        "(outstanding requests × request size). A stream runs at min(bandwidth, in-flight / "
        "latency) (Little's law); None = enough to cover latency × bandwidth",
    )
    burst_bytes: StrictInt | None = Field(
        None,
        ge=MIN_BURST_BYTES,
        le=MAX_CAPACITY_BYTES,
        description=f"bytes ({MIN_BURST_BYTES}..2**50) a transfer into or out of this level "
        "moves per grant of its ports: a longer tile holds them a burst at a time and queues "
        "again, first come, first served, for the rest, so other requests interleave at burst "
        "granularity (a memory controller's); None = a whole tile per grant. Each burst costs "
        "the DES one event: a simulation grain, not a DRAM burst length",
    )
    holds: list[Operand] = Field(min_length=1, description="operands staged in this level")
    buffers: StrictInt = Field(
        2, ge=1, le=4, description="tiles in flight per operand (2 = double buffering)"
    )
    shared: StrictBool = Field(
        False,
        description="one level for the whole chip, shared by its cores (capacity and "
        "bandwidths are the chip's totals, divided among the cores a matmul keeps busy: "
        "engine/chip.py); false = one such level per core (capacity and bandwidths per core). "
        "Shared levels are the outermost ones; never the innermost level of an operand",
    )


def _energy_error(loc: tuple[str, ...], message: str, value: object = None) -> None:
    """Raise a validation error at ``loc`` (so the one-line user error names the exact key);
    a ``value`` given is shown after the message as ``(got ...)``."""
    from pydantic import ValidationError
    from pydantic_core import InitErrorDetails, PydanticCustomError

    error = PydanticCustomError("energy", message)
    raise ValidationError.from_exception_data(
        "energy", [InitErrorDetails(type=error, loc=loc, input={} if value is None else value)]
    )


class EnergyEntry(Strict):
    """One per-action energy with its provenance and how it moves to the chip's node.

    ``node_nm`` is the node of the SOURCE number; ``scaling`` says how it is moved to the
    architecture's ``node_nm`` (``accel_sim/energy/scaling.py``, Stillmaker & Baas 2017):
    ``logic`` and ``sram`` by the ratio of device energy factors, ``none`` used as written (DRAM
    device energy belongs to its DRAM technology; leakage power is stated at the chip's node), in
    which case ``node_nm`` may be omitted. See ``docs/energy.md``.
    """

    value: float = Field(
        ge=0,
        le=MAX_ENERGY_VALUE,
        description=f"in ``unit`` (pJ/byte, pJ/op, pJ/MAC or mW), 0..{MAX_ENERGY_VALUE:.0e}",
    )
    unit: Literal["pJ/byte", "pJ/op", "pJ/MAC", "mW"]
    node_nm: StrictInt | None = Field(
        None, gt=0, description="node of the source number (nm); required unless scaling: none"
    )
    scaling: Literal["logic", "sram", "none"] = Field(
        description="how the value moves to the arch's node: logic | sram (device energy "
        "factor, Stillmaker & Baas 2017) | none (as written: DRAM technology, leakage)"
    )
    source: str = Field(min_length=3, description="paper, datasheet or derivation rule")

    @model_validator(mode="after")
    def _check_node(self) -> EnergyEntry:
        from accel_sim.energy.scaling import node_problem

        if self.scaling != "none":
            if self.node_nm is None:
                _energy_error(("node_nm",), f"required with scaling: {self.scaling}")
            problem = node_problem(self.node_nm)
            if problem:
                _energy_error(("node_nm",), problem)
        return self


#: Keys of ``Arch.efficiency`` that are factors in [MIN_EFFICIENCY, 1] (``launch_us`` is not).
EFFICIENCY_FACTORS = ("matmul", *(f"matmul_{p}" for p in PRECISIONS), "dram", "vector")
#: Largest fixed cost per GPU kernel (``efficiency.launch_us``), microseconds.
MAX_LAUNCH_US = 1000.0

#: Energy-table components that are not memory levels (a level must not take these names).
ENERGY_COMPONENTS = ("compute", "vector", "early_bird", "chip")


class Arch(Strict):
    """A whole accelerator."""

    name: str
    description: str = ""
    clock_hz: float = Field(
        ge=MIN_CLOCK_HZ,
        le=MAX_CLOCK_HZ,
        description=f"matrix-unit clock, Hz, {MIN_CLOCK_HZ:.0e}..{MAX_CLOCK_HZ:.0e}",
    )
    cores: StrictInt = Field(
        1,
        ge=1,
        le=MAX_CORES,
        description=f"identical cores on the chip, 1..{MAX_CORES}: each has the compute unit, "
        "the vector unit, the early-bird comparator and one of every per-core memory level; "
        "levels marked shared are one for the chip (engine/chip.py partitions each matmul)",
    )
    dma_queue_steps: StrictInt = Field(
        32,
        ge=1,
        le=MAX_DMA_QUEUE_STEPS,
        description=f"steps a DMA mover may run ahead of the next stage, 1..{MAX_DMA_QUEUE_STEPS} "
        "(its command queue, counted in steps, also those in which the hop moves nothing; the "
        "buffers bound it too): an assumption, docs/engine.md 'The DES'",
    )
    compute: AnyComputeUnit
    vector: VectorUnit
    early_bird: EarlyBirdComparator | None = None
    memory: list[MemoryLevel] = Field(min_length=2)
    node_nm: StrictInt = Field(
        gt=0,
        description="technology node of the chip (nm); logic and SRAM energies are scaled "
        "to it (accel_sim/energy/scaling.py)",
    )
    energy: dict[str, dict[str, EnergyEntry]] = Field(
        description="per-action energies by component (compute, vector, early_bird, chip, or a "
        "memory level's name) then action (mac_<precision>, op, compare, leakage, read, write)"
    )
    efficiency: dict[str, float] = Field(
        default_factory=dict,
        description="optional derating of GPU proxies (calibrated on FP16 rows only): factors in "
        "[0.001, 1] -- 'matmul' divides the matrix unit's step time for every precision without "
        "its own key, 'matmul_<precision>' (e.g. matmul_int4) for that precision, 'dram' "
        "multiplies DRAM bandwidth, 'vector' divides vector-op time; and 'launch_us', a fixed "
        f"cost in microseconds [0, {MAX_LAUNCH_US:g}] per GPU kernel (each matmul or vector op "
        "of a model step), charged by model runs as the stall 'launch'",
    )

    @field_validator("efficiency")
    @classmethod
    def _check_efficiency(cls, value: dict[str, float]) -> dict[str, float]:
        for key, v in value.items():
            if key == "launch_us":
                if not 0 <= v <= MAX_LAUNCH_US:
                    raise ValueError(f"efficiency.launch_us must be in [0, {MAX_LAUNCH_US:g}] "
                                     f"microseconds, got {v!r}")  # fmt: skip
            elif key in EFFICIENCY_FACTORS:
                if not MIN_EFFICIENCY <= v <= 1:
                    raise ValueError(f"efficiency.{key} must be in [{MIN_EFFICIENCY}, 1], "
                                     f"got {v!r}")  # fmt: skip
            else:
                raise ValueError(f"efficiency: unknown key {key!r}; known: "
                                 f"{', '.join(EFFICIENCY_FACTORS)}, launch_us")  # fmt: skip
        return value

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
        if self.memory[0].kind == "sram":
            raise ValueError("the outermost memory level is the DRAM: kind must be dram")
        for level in self.memory[1:]:
            if level.kind == "dram":
                raise ValueError(f"memory level {level.name}: only the outermost level is dram")
            if level.max_inflight_bytes is not None:
                raise ValueError(f"memory level {level.name}: max_inflight_bytes is for dram")
        self._check_shared()
        return self

    def _check_shared(self) -> None:
        """Shared levels form the outer part of the hierarchy; no operand's innermost level
        (the one the unit reads or accumulates in) is shared."""
        for operand in ("A", "B", "C"):
            innermost = self.path(operand)[-1]
            if innermost.shared:
                raise ValueError(
                    f"memory level {innermost.name} is operand {operand}'s innermost "
                    "level (the compute unit's own buffer): it cannot be shared"
                )
        for outer, inner in zip(self.memory, self.memory[1:]):
            if inner.shared and not outer.shared:
                raise ValueError(
                    f"memory level {inner.name} is shared but {outer.name} outside "
                    "it is per-core: shared levels must be the outermost ones"
                )

    _origin: str = PrivateAttr("")

    @property
    def fingerprint(self) -> str:
        """A hash of the whole validated content, recomputed on every call (a cache key).

        Never memoised: a copy made with ``model_copy(update=...)`` inherits private attributes,
        so a stored hash would name the original's content."""
        import hashlib

        return hashlib.sha256(self.model_dump_json(warnings=False).encode()).hexdigest()

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

    # ------------------------------------------------------------------ energy table
    def energy_needs(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Every ``(component, action)`` this architecture performs → (unit, why it is needed)."""
        actions = getattr(self.compute, "energy_actions", None)
        macs = actions() if actions else [f"mac_{p}" for p, r in self.compute.rates.items() if r]
        needs = {("compute", a): ("pJ/MAC", f"compute.rates has {a[4:]} > 0") for a in macs}
        for level in self.memory:
            for action, verb in (("read", "read"), ("write", "written")):
                needs[(level.name, action)] = ("pJ/byte", f"memory level {level.name} is {verb}")
        needs[("vector", "op")] = ("pJ/op", "the vector unit runs element operations")
        if self.early_bird is not None:
            needs[("early_bird", "compare")] = ("pJ/op", "the arch has an early_bird unit")
        needs[("chip", "leakage")] = ("mW", "leakage is charged over the run time")
        return needs

    def energy_on_demand(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Actions the compute unit performs only for the dataflows that ask for them (its
        operand decoders, ``ComputeUnit.decode_actions``) → (unit, who needs it). Not required
        at load; a plan that uses one calls :meth:`require_energy`; an entry for one is used."""
        actions = getattr(self.compute, "decode_actions", None)
        why = "the plan decodes its operands at the array edge ({} decoders)"
        return {("compute", a): ("pJ/op", why.format(a.removeprefix("decode_")))
                for a in (actions() if actions else ())}  # fmt: skip

    def require_energy(self, component: str, action: str) -> None:
        """A one-line error naming ``energy.<component>.<action>`` unless this architecture
        states that on-demand entry (:meth:`energy_on_demand`; its unit is checked at load)."""
        unit, why = self.energy_on_demand()[(component, action)]
        if action not in self.energy.get(component, {}):
            raise UserInputError(self.origin, f"missing entry ({unit}), needed because {why}",
                                 f"energy.{component}.{action}")  # fmt: skip

    @property
    def unused_energy_entries(self) -> list[str]:
        """Energy entries nothing in this architecture uses (reported, not an error): neither
        needed (:meth:`energy_needs`) nor an on-demand action (:meth:`energy_on_demand`)."""
        used = {**self.energy_needs(), **self.energy_on_demand()}
        return [f"energy.{c}.{a}" for c, actions in self.energy.items() for a in actions
                if (c, a) not in used]  # fmt: skip

    @model_validator(mode="after")
    def _check_energy(self) -> Arch:
        """Coverage at load: every needed entry present, in its unit (on-demand entries: in their
        unit where present); DRAM and leakage unscaled."""
        from accel_sim.energy.scaling import node_problem

        problem = node_problem(self.node_nm)
        if problem:
            _energy_error(("node_nm",), problem)
        for level in self.memory:
            if level.name in ENERGY_COMPONENTS:
                _energy_error(("memory",), f"level name {level.name!r} is an energy component")
        known = {*ENERGY_COMPONENTS, *(level.name for level in self.memory)}
        for component in self.energy:  # a typo ("HMB") is an unknown key, not an unused entry
            if component not in known:
                _energy_error(("energy", component), "no such component in this architecture; "
                              f"the components are {', '.join(sorted(known))}")  # fmt: skip
        dram = self.memory[0].name
        stated = {key: need for key, need in self.energy_on_demand().items()
                  if key[1] in self.energy.get(key[0], {})}  # fmt: skip
        for (component, action), (unit, why) in {**stated, **self.energy_needs()}.items():
            entry = self.energy.get(component, {}).get(action)
            where = ("energy", component, action)
            if entry is None:
                _energy_error(where, f"missing entry, needed because {why}")
            elif entry.unit != unit:
                _energy_error((*where, "unit"), f"must be {unit}", entry.unit)
            elif entry.scaling != "none" and component == dram:
                _energy_error(
                    (*where, "scaling"),
                    "off-chip DRAM energy is per DRAM technology, not per logic node: use none",
                    entry.scaling,
                )
            elif entry.scaling != "none" and unit == "mW":
                _energy_error(
                    (*where, "scaling"),
                    "leakage power is stated at the chip's node: use none",
                    entry.scaling,
                )
        return self
