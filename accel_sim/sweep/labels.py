"""Human names and units for the quantities a sweep plots.

``memory.1.capacity_bytes`` on a base architecture whose level 1 is L2, with values of a few
MiB, becomes ``("L2 capacity (MiB)", 1048576)``: the label and the divisor for tick values.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

BINARY = ((1, "B"), (2**10, "KiB"), (2**20, "MiB"), (2**30, "GiB"), (2**40, "TiB"))
HERTZ = ((1, "Hz"), (1e3, "kHz"), (1e6, "MHz"), (1e9, "GHz"))
ENERGY_PJ = ((1, "pJ"), (1e3, "nJ"), (1e6, "µJ"), (1e9, "mJ"), (1e12, "J"))  # divisors of pJ
COUNT = ((1, ""), (1e3, "thousands"), (1e6, "millions"), (1e9, "billions"), (1e12, "trillions"))
SECONDS = ((1e-12, "ps"), (1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1, "s"))

# leaf field -> (name, unit); a unit tuple is a ladder chosen by the values, a str is fixed
FIELDS: dict[str, tuple[str, Any]] = {
    "capacity_bytes": ("capacity", BINARY),
    "read_bytes_per_cycle": ("read bandwidth", "B/cycle"),
    "write_bytes_per_cycle": ("write bandwidth", "B/cycle"),
    "bytes_per_cycle": ("width", "B/cycle"),
    "latency_cycles": ("latency", "cycles"),
    "pipeline_latency_cycles": ("pipeline latency", "cycles"),
    "startup_cycles": ("startup", "cycles"),
    "max_inflight_bytes": ("in-flight limit", BINARY),
    "burst_bytes": ("burst", BINARY),
    "buffers": ("buffers", None),
    "clock_hz": ("clock", HERTZ),
    "block_m": ("block M", "elements"),
    "block_k": ("block K", "elements"),
    "block_n": ("block N", "elements"),
    "rows": ("PE rows", None),
    "cols": ("PE columns", None),
    "comparators": ("comparators", "per cycle"),
}
SPECIAL = {"workload": "workload", "variant": "dataflow variant"}


def pick_unit(values: Iterable[float], ladder: Sequence[tuple[float, str]]) -> tuple[float, str]:
    """The largest (divisor, unit) of ``ladder`` under which the largest |value| is ≥ 1."""
    finite = [abs(float(v)) for v in values if _is_number(v) and math.isfinite(float(v)) and v]
    top = max(finite, default=1.0)
    chosen = ladder[0]
    for divisor, unit in ladder:
        if top >= divisor:
            chosen = (divisor, unit)
    return chosen


def _is_number(value: Any) -> bool:
    """A real number (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _field(leaf: str) -> tuple[str, Any]:
    """(name, unit) of an architecture field, by table or by its unit suffix."""
    if leaf in FIELDS:
        return FIELDS[leaf]
    for suffix, unit in (("_bytes_per_cycle", "B/cycle"), ("_bytes", BINARY),
                         ("_cycles", "cycles"), ("_hz", HERTZ), ("_pj", ENERGY_PJ)):  # fmt: skip
        if leaf.endswith(suffix):
            return leaf.removesuffix(suffix).replace("_", " "), unit
    return leaf.replace("_", " "), None


def param_label(path: str, values: Sequence[Any], base_arch: dict | None) -> tuple[str, float]:
    """(axis label with its unit, divisor for the tick values) of a swept parameter."""
    if path in SPECIAL:
        return SPECIAL[path], 1.0
    parts = path.split(".")
    prefix = ""
    if parts[0] == "memory" and len(parts) >= 3:
        prefix = parts[1]
        levels = (base_arch or {}).get("memory") or []
        if parts[1].isdigit() and int(parts[1]) < len(levels):
            prefix = str(levels[int(parts[1])].get("name", f"level {parts[1]}"))
    elif parts[0] == "compute" and len(parts) == 3 and parts[1] == "rates":
        return f"{parts[2].upper()} rate (× base rate)", 1.0
    elif parts[0] == "compute":
        prefix = str((base_arch or {}).get("compute", {}).get("kind", "compute"))
    elif len(parts) > 1:
        prefix = " ".join(parts[:-1]).replace("_", " ")
    name, unit = _field(parts[-1])
    divisor: float = 1.0
    if isinstance(unit, tuple):
        divisor, unit = pick_unit(values, unit)
    label = f"{prefix} {name}".strip()
    return (f"{label} ({unit})" if unit else label), divisor


def tick_text(value: Any, divisor: float) -> str:
    """A tick label: a number divided by ``divisor`` (``%g``), anything else as text."""
    if _is_number(value) and math.isfinite(float(value)):
        return f"{value / divisor:g}"
    return str(value)
