"""Energy = Σ action counts × per-action energy (the architecture's table) + leakage × time.

Counts come from the engine (``engine/counts.py``); this module only prices them. Every component
names the table entry it used, so a report can show the source of every number. A component
without an entry is an error (never a silent default).
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_sim.arch.schema import Arch, EnergyEntry
from accel_sim.engine.counts import ActionCounts
from accel_sim.errors import UserInputError


@dataclass(frozen=True)
class EnergyReport:
    """Energy per component in pJ, and the table entry each component was priced with."""

    breakdown_pj: dict[str, float]
    sources: dict[str, str]

    @property
    def total_pj(self) -> float:
        return float(sum(self.breakdown_pj.values()))


def _entry(arch: Arch, key: str, unit: str) -> EnergyEntry:
    entry = arch.energy.get(key)
    if entry is None:
        raise UserInputError(
            arch.origin, f"no energy entry {key!r} (needed to price this run)", f"energy.{key}"
        )
    if entry.unit != unit:
        raise UserInputError(
            arch.origin,
            f"energy entry {key!r} must be in {unit}, got {entry.unit}",
            f"energy.{key}",
        )
    return entry


def price(arch: Arch, counts: ActionCounts, cycles: int) -> EnergyReport:
    """Price ``counts`` on ``arch``; leakage is charged for ``cycles`` at ``arch.clock_hz``."""
    breakdown: dict[str, float] = {}
    sources: dict[str, str] = {}

    def charge(component: str, key: str, unit: str, amount: float) -> None:
        if amount <= 0:
            return
        entry = _entry(arch, key, unit)
        breakdown[component] = breakdown.get(component, 0.0) + amount * entry.value
        sources[component] = (
            f"{key}: {entry.value} {entry.unit} @ {entry.node_nm} nm — {entry.source}"
        )

    for precision, macs in sorted(counts.macs.items()):
        charge(f"mac_{precision}", f"mac_{precision}", "pJ/MAC", macs)
    for level in arch.memory:
        charge(f"{level.name}_read", f"{level.name}_read", "pJ/byte", counts.bytes_read[level.name])
        charge(
            f"{level.name}_write",
            f"{level.name}_write",
            "pJ/byte",
            counts.bytes_written[level.name],
        )
    charge("vector", "vector_op", "pJ/op", counts.vector_ops)
    charge("early_bird", "comparator_op", "pJ/op", counts.comparator_ops)
    seconds = cycles / arch.clock_hz
    # mW × s = mJ = 1e9 pJ
    charge("leakage", "leakage", "mW", seconds * 1e9)
    return EnergyReport(breakdown_pj=breakdown, sources=sources)
