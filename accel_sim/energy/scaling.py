"""Move an on-chip energy from the technology node its source measured to the chip's node.

Rule (Stillmaker & Baas, "Scaling equations for the accurate prediction of CMOS device performance
from 180 nm to 7 nm", Integration, the VLSI Journal 58, 2017, pp. 74-81): the paper fits, per
node, the energy per operation of its HSpice benchmark circuits as a polynomial in the supply,
``E(V) = a2·V² + a1·V + a0`` (its Table 5; PTM models for 130-32 nm, ITRS projections for 20-7 nm).
A node's **device energy factor** here is that fit at the node's nominal supply (:data:`FITS`),
and an energy moves from node ``s`` to node ``t`` as ``E_t = E_s · F(t) / F(s)`` — the paper's own
recipe (§4.2.1, corrected example: ``E_x = F_x / F_y · E_y``).

* Between table nodes, ``log F`` is interpolated linearly in ``log node`` (a power law between
  neighbours); a node outside 7..130 nm is refused (:class:`UserInputError`), never extrapolated.
* For 45 nm and below the HP (high-performance) fits are used: accelerators and GPUs are built in
  HP-class processes. LP fits exist but are not used.
* ``sram`` uses the same device factor as ``logic``: an SRAM access's energy is mostly bit-line
  and word-line CV², which scales with the same device and wire capacitance. We know of no cited
  per-node SRAM factor to use instead, so none is applied.
* ``none``: the value is used as written (DRAM/HBM/GDDR device energy, which belongs to the DRAM
  technology, not to the logic node; leakage power stated at the chip's node).

Limits: the fits describe device-level circuits (FO4 chains, adders); they do not capture wire
energy that stops scaling at small nodes, FinFET- or foundry-specific variation, SRAM bit-cell
scaling slowing below 16 nm, or voltage choices away from nominal. Treat a scaled number as a
first-order estimate (the paper reports R² > 0.95 for its fits, not for products). The 180 nm row
of the paper is not included: its public transcription is a linear fit giving a 4.2x step from
130 nm that we could not check against the paper, and no shipped architecture needs it.

Factors at the nominal supplies (rounded; :func:`energy_factor`)::

    node nm   130    90     65     45     32     20     16     14     10     7
    F         6.304  3.212  1.681  0.861  0.457  0.201  0.138  0.096  0.070  0.048
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from accel_sim.errors import UserInputError

CITATION = "Stillmaker & Baas 2017"

Scaling = Literal["logic", "sram", "none"]

#: node (nm) -> (device model of the paper's fit, nominal supply in V, (a2, a1, a0) of the
#: energy fit ``E(V) = a2·V² + a1·V + a0`` from Stillmaker & Baas 2017, Table 5). Nominal
#: supplies: PTM's for 130-32 nm; for the ITRS nodes the HP supply the fit is centred on.
FITS: dict[int, tuple[str, float, tuple[float, float, float]]] = {
    130: ("PTM", 1.3, (7.171, -6.709, 2.904)),
    90: ("PTM", 1.2, (4.762, -4.781, 2.092)),
    65: ("PTM", 1.1, (3.755, -4.398, 1.975)),
    45: ("PTM HP", 1.0, (1.018, -0.3107, 0.1539)),
    32: ("PTM HP", 0.9, (0.8367, -0.4341, 0.1701)),
    20: ("ITRS HP", 0.9, (0.373, -0.1582, 0.04104)),
    16: ("ITRS HP", 0.85, (0.2958, -0.1241, 0.03024)),
    14: ("ITRS HP", 0.8, (0.2363, -0.09675, 0.02239)),
    10: ("ITRS HP", 0.75, (0.2068, -0.09311, 0.02375)),
    7: ("ITRS HP", 0.7, (0.1776, -0.09097, 0.02447)),
}

#: Smallest and largest node the rule covers, nm.
MIN_NODE_NM = min(FITS)
MAX_NODE_NM = max(FITS)


def energy_fit(node_nm: int, vdd: float) -> float:
    """The paper's fitted energy factor of a table node at supply ``vdd`` (V)."""
    _, _, (a2, a1, a0) = FITS[node_nm]
    return a2 * vdd * vdd + a1 * vdd + a0


def node_problem(node_nm: float) -> str | None:
    """Why ``node_nm`` cannot be scaled to or from, or None if it can."""
    if not MIN_NODE_NM <= node_nm <= MAX_NODE_NM:
        return (
            f"{node_nm} nm is outside the {MIN_NODE_NM}-{MAX_NODE_NM} nm range of the energy "
            f"scaling rule ({CITATION}); give an energy measured at a node in that range"
        )
    return None


@lru_cache(maxsize=256)
def energy_factor(node_nm: float) -> float:
    """Relative device energy per operation at ``node_nm`` (log-log interpolated between nodes).

    Raises:
        UserInputError: ``node_nm`` outside the table.
    """
    problem = node_problem(node_nm)
    if problem:
        raise UserInputError("energy scaling", problem, "node_nm")
    if node_nm in FITS:
        return energy_fit(int(node_nm), FITS[int(node_nm)][1])
    nodes = sorted(FITS)
    hi = next(n for n in nodes if n > node_nm)
    lo = max(n for n in nodes if n < node_nm)
    f_lo, f_hi = energy_factor(lo), energy_factor(hi)
    t = math.log(node_nm / lo) / math.log(hi / lo)
    return math.exp(math.log(f_lo) + t * math.log(f_hi / f_lo))


def scale_factor(from_nm: float | None, to_nm: float, scaling: Scaling) -> float:
    """Multiplier taking an energy at ``from_nm`` to ``to_nm`` under ``scaling``.

    ``logic`` and ``sram`` use the device factor ratio ``F(to) / F(from)``; ``none`` is 1.

    Raises:
        UserInputError: a node outside the table, or a scaled entry without a source node.
    """
    if scaling == "none":
        return 1.0
    if from_nm is None:
        raise UserInputError("energy scaling", f"scaling {scaling!r} needs the source's node_nm")
    return energy_factor(to_nm) / energy_factor(from_nm)


def scale_energy(value: float, from_nm: float | None, to_nm: float, scaling: Scaling) -> float:
    """``value`` (any energy or per-action energy unit) moved from ``from_nm`` to ``to_nm``."""
    return value * scale_factor(from_nm, to_nm, scaling)
