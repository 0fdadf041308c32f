"""Energy = Σ action counts × per-action energy at the chip's node + leakage × time.

Counts come from the engine (``engine/counts.py``); this module only prices them. The table is
keyed by ``(component, action)`` (``arch.energy[component][action]``, see ``docs/energy.md``);
each entry is moved from its source's node to ``arch.node_nm`` by ``energy/scaling.py``.
Coverage is checked when the architecture loads; a missing entry here is still an error (never a
silent default). Every breakdown component names the entry, the scaling and the source it used.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_sim.arch.schema import Arch, EnergyEntry
from accel_sim.energy.scaling import CITATION, scale_factor
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


def _entry(arch: Arch, component: str, action: str, unit: str | None = None) -> EnergyEntry:
    key = f"energy.{component}.{action}"
    entry = arch.energy.get(component, {}).get(action)
    if entry is None:
        raise UserInputError(arch.origin, "no energy entry (needed to price this run)", key)
    if unit is not None and entry.unit != unit:
        raise UserInputError(arch.origin, f"must be in {unit}, got {entry.unit}", f"{key}.unit")
    return entry


def energy_at_node(arch: Arch, component: str, action: str) -> float:
    """The energy ``arch`` charges per ``(component, action)``: its entry at ``arch.node_nm``."""
    entry = _entry(arch, component, action)
    return entry.value * scale_factor(entry.node_nm, arch.node_nm, entry.scaling)


def _g(x: float) -> str:
    return f"{x:.4g}"


def entry_at_node(arch: Arch, component: str, action: str, unit: str) -> tuple[float, str]:
    """``(value at arch.node_nm, source text)`` of ``arch.energy[component][action]``.

    The text reads e.g. ``compute.mac_int8: 0.3 pJ/MAC @45 nm → 0.01666 @7 nm (Stillmaker &
    Baas 2017, logic) — <the entry's source>``.
    """
    entry = _entry(arch, component, action, unit)
    value = entry.value * scale_factor(entry.node_nm, arch.node_nm, entry.scaling)
    head = f"{component}.{action}: {_g(entry.value)} {entry.unit}"
    if entry.scaling == "none":
        how = f"{head} (not node-scaled)"
    else:
        how = (
            f"{head} @{entry.node_nm} nm → {_g(value)} @{arch.node_nm} nm "
            f"({CITATION}, {entry.scaling})"
        )
    return value, f"{how} — {entry.source}"


def price(arch: Arch, counts: ActionCounts, cycles: int) -> EnergyReport:
    """Price ``counts`` on ``arch``; leakage is charged for ``cycles`` at ``arch.clock_hz``.

    Breakdown components: ``mac_<precision>``, ``decode_<decoder>`` (elements decoded at the
    array edge × the unit's pJ per decode), ``<level>_read``, ``<level>_write``, ``vector``,
    ``early_bird`` and ``leakage``.
    """
    breakdown: dict[str, float] = {}
    sources: dict[str, str] = {}

    def charge(name: str, component: str, action: str, unit: str, amount: float) -> None:
        if amount <= 0:
            return
        per_action, text = entry_at_node(arch, component, action, unit)
        breakdown[name] = breakdown.get(name, 0.0) + amount * per_action
        sources[name] = text

    for precision, macs in sorted(counts.macs.items()):
        charge(f"mac_{precision}", "compute", f"mac_{precision}", "pJ/MAC", macs)
    for decoder, decodes in sorted(counts.decodes.items()):
        charge(f"decode_{decoder}", "compute", f"decode_{decoder}", "pJ/op", decodes)
    for level in arch.memory:
        name = level.name
        charge(f"{name}_read", name, "read", "pJ/byte", counts.bytes_read[name])
        charge(f"{name}_write", name, "write", "pJ/byte", counts.bytes_written[name])
    charge("vector", "vector", "op", "pJ/op", counts.vector_ops)
    charge("early_bird", "early_bird", "compare", "pJ/op", counts.comparator_ops)
    seconds = cycles / arch.clock_hz
    # mW × s = mJ = 1e9 pJ
    charge("leakage", "chip", "leakage", "mW", seconds * 1e9)
    return EnergyReport(breakdown_pj=breakdown, sources=sources)
