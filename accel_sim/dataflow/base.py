"""What a dataflow is (:class:`Dataflow`) and ``@register``, which declares one on its builder.

A dataflow is a function ``build(gemm, arch, stats, knobs) -> Plan``:

* ``gemm`` — the GEMM to lower;
* ``arch`` — the architecture (a plan may adapt, e.g. run FP16 work on an INT-only unit's
  vector unit);
* ``stats`` — data-dependent statistics of the GEMM's real tensors (OSC table width, outlier
  channels, OPS skip fractions) or ``None`` when the scheme needs none or none is available;
* ``knobs`` — the scheme's parameters, validated against ``Dataflow.knobs`` (defaults there).

A plan module imports :func:`register` from here, never the registry: ``@register`` only attaches
the :class:`Dataflow` to its builder (``build.dataflows``), and :mod:`accel_sim.dataflow.registry`
imports the plan modules and collects them. The dependency runs one way, so there is no cycle.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import Plan
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm

Builder = Callable[[Gemm, Arch, Mapping[str, Any] | None, Mapping[str, Any]], Plan]


@dataclass(frozen=True)
class Dataflow:
    name: str
    build: Builder
    knobs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    needs_stats: bool = False
    #: the key of this dataflow's numerical error in a trace's ``errors`` table, from its knobs
    #: and the GEMM (``None``: the trace has no error for these knobs)
    error_key: Callable[[Mapping[str, Any], Gemm], str | None] = lambda knobs, gemm: None

    def numerical_error(self, stats, knobs, gemm) -> float | None:
        """Relative output error ‖Y − Y_fp32‖/‖Y_fp32‖ from the trace, if it has one."""
        errors = (stats or {}).get("errors") or {}
        key = self.error_key(knobs, gemm)
        return errors.get(key) if key else None

    def resolve_knobs(self, given: Mapping[str, Any] | None, source: str = "knobs") -> dict:
        """Defaults overlaid with ``given``; an unknown knob or a mistyped value is an error."""
        knobs = dict(self.knobs)
        for key, value in (given or {}).items():
            if key not in self.knobs:
                raise UserInputError(
                    source, f"unknown knob for {self.name}; known: {sorted(self.knobs)}", key
                )
            knobs[key] = _checked_knob(self.name, key, self.knobs[key], value, source)
        return knobs


#: The largest magnitude a numeric knob may take (GEMM dimensions stop at 2^24 too).
MAX_KNOB = 2**24


def _checked_knob(flow: str, key: str, default: Any, value: Any, source: str) -> Any:
    """``value`` if it has the default's type (an integer knob takes integers only, a float knob
    integers or floats), is finite and within ±:data:`MAX_KNOB`; else a :class:`UserInputError`."""
    expected = type(default).__name__
    if not isinstance(value, bool):  # numpy's integers and floats are numbers too
        if isinstance(value, numbers.Integral):
            value = int(value)
        elif isinstance(value, numbers.Real):
            value = float(value)
    if isinstance(default, bool) or not isinstance(default, int | float):
        ok = type(value) is type(default)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise UserInputError(source, f"{flow} knob expects {expected}, got {value!r}",
                             f"{flow}.{key}")  # fmt: skip
    if isinstance(value, int | float) and not isinstance(value, bool) and not (
            math.isfinite(value) and abs(value) <= MAX_KNOB):  # fmt: skip
        raise UserInputError(source, f"{value!r} is not a finite number within ±{MAX_KNOB}",
                             f"{flow}.{key}")  # fmt: skip
    return value


def register(name: str, knobs: dict[str, Any] | None = None, description: str = "",
             needs_stats: bool = False,
             error_key=None) -> Callable[[Builder], Builder]:  # fmt: skip
    """Declare the dataflow ``name`` built by the decorated function; ``error_key(knobs, gemm)``
    names its entry in a trace's errors (default: the dataflow's own name). Stacked decorators
    declare several dataflows on one builder, top one first."""

    def wrap(build: Builder) -> Builder:
        key = error_key or (lambda knobs, gemm: name)
        flow = Dataflow(name, _NamingKnobs(name, build), dict(knobs or {}), description,
                        needs_stats, key)  # fmt: skip
        build.dataflows = (flow, *getattr(build, "dataflows", ()))
        return build

    return wrap



@dataclass(frozen=True)
class _NamingKnobs:
    """A builder whose knob errors are keyed by the dataflow as a user writes the knob
    (``osc.G``, as in ``--knob osc.G=64``), not by the bare knob name (picklable: the
    builder is a module-level function)."""

    name: str
    build: Builder

    def __call__(self, gemm, arch, stats, knobs) -> Plan:
        try:
            return self.build(gemm, arch, stats, knobs)
        except UserInputError as err:
            if err.source != "knobs" or not err.key or err.key.startswith(f"{self.name}."):
                raise
            raise UserInputError("knobs", err.message, f"{self.name}.{err.key}") from None
