"""The public API's argument checks: every mistake in a call to ``simulate``,
``simulate_many``, ``simulate_timeline`` or ``explain`` is one :class:`UserInputError` naming
the argument, before anything runs."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

from accel_sim.arch.load import load_arch
from accel_sim.arch.schema import Arch
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_gemm

ENGINES = ("des", "twin")


def _as_gemm(gemm: Gemm | str | tuple) -> Gemm:
    """A :class:`Gemm` from a Gemm, ``"MxKxN"`` or ``(M, K, N)`` (positive integers ≤ 2**24)."""
    if isinstance(gemm, Gemm):
        return gemm
    if isinstance(gemm, str):
        return parse_gemm(gemm, "gemm")
    if isinstance(gemm, tuple | list) and len(gemm) == 3:
        return Gemm(*gemm)
    raise UserInputError("gemm", f"expected a Gemm, 'MxKxN' or (M, K, N), got {_clip(gemm)}")


def _clip(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_call(dataflow: object, knobs: object, stats: object, engine: object, where: str) -> None:
    """Types and finiteness of :func:`simulate`'s arguments (one :class:`UserInputError`)."""
    if not isinstance(dataflow, str):
        raise UserInputError(
            where, f"dataflow must be a name such as 'w8a8', got {_clip(dataflow)}"
        )
    if engine not in ENGINES:
        raise UserInputError(where, f"engine must be one of {ENGINES}, got {_clip(engine)}")
    if knobs is not None:
        if not isinstance(knobs, Mapping):
            raise UserInputError(where, f"knobs must be a mapping, got {_clip(knobs)}", "knobs")
        for key, value in knobs.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise UserInputError(where, f"knob {dataflow}.{key} is {value}; knobs must be "
                                     "finite", f"knobs.{key}")  # fmt: skip
    if stats is not None and not isinstance(stats, Mapping):
        raise UserInputError(where, f"stats must be a mapping, got {_clip(stats)}", "stats")
    check_stats(stats, where)


def _check_overlap(overlap: object, where: str) -> None:
    if not isinstance(overlap, bool):
        raise UserInputError(where, f"overlap must be True or False, got {_clip(overlap)}")


def _check_collapse(collapse: object, where: str) -> None:
    if not isinstance(collapse, bool):
        raise UserInputError(where, f"collapse must be True or False, got {_clip(collapse)}")


def _as_lists(gemms, dataflows, knobs, where: str) -> tuple:
    """The batch entry points' GEMMs and dataflows as lists (a single one, ``(M, K, N)``
    included, taken as a list of one), and their knobs checked to be a mapping dataflow →
    knobs."""
    one_tuple = (isinstance(gemms, tuple) and len(gemms) == 3
                 and all(isinstance(x, numbers.Integral) and not isinstance(x, bool)
                         for x in gemms))  # fmt: skip
    if isinstance(gemms, str | Gemm) or one_tuple:
        gemms = [gemms]
    if isinstance(dataflows, str):
        dataflows = [dataflows]
    for name, value in (("gemms", gemms), ("dataflows", dataflows)):
        if isinstance(value, Mapping) or not isinstance(value, Iterable):
            raise UserInputError(where, f"{name} must be a list (or a single one), got "
                                 f"{_clip(value)}", name)  # fmt: skip
    check_knob_map(knobs, where)
    return gemms, dataflows


def check_knob_map(knobs: object, where: str) -> None:
    """``knobs`` is None or maps dataflow → its knobs (``{"G": 64}`` is a knob, not that)."""
    if knobs is None:
        return
    if not isinstance(knobs, Mapping):
        raise UserInputError(where, f"knobs must map dataflow → knobs, got {_clip(knobs)}",
                             "knobs")  # fmt: skip
    for flow, given in knobs.items():
        if not isinstance(given, Mapping):
            raise UserInputError(where, f"knobs must map dataflow → knobs, e.g. "
                                 f"{{'osc': {{'G': 64}}}}; got {_clip(flow)}: "
                                 f"{_clip(given)}", "knobs")  # fmt: skip


def check_jobs(jobs: object, where: str) -> None:
    """A whole number of worker processes ≥ 1."""
    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or jobs < 1:
        raise UserInputError(where, f"jobs must be a whole number ≥ 1, got {_clip(jobs)}", "jobs")


def unique(items) -> list:
    """``items`` in their order, each once (a dataflow named twice runs once: its rows would
    count twice); unhashable items are compared by equality, so a bad one is reported later."""
    out: list = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _check_batch(knobs, flows: list[str], jobs: object, stats_for: object, where: str) -> None:
    """Knobs only for the dataflows that run (anything else would be silently unused), a
    whole number of jobs ≥ 1, ``stats_for`` callable or None."""
    unused = sorted(str(f) for f in set(knobs or {}) - set(flows))
    if unused:
        raise UserInputError(where, f"knobs for {', '.join(unused)}, which this run does not "
                             f"include (its dataflows: {', '.join(flows)})", "knobs")  # fmt: skip
    check_jobs(jobs, where)
    if stats_for is not None and not callable(stats_for):
        raise UserInputError(where, "stats_for must be a function gemm → statistics (or None), "
                             f"got {_clip(stats_for)}", "stats_for")  # fmt: skip


def _loaded(arch, gemms, dataflows, where: str) -> tuple[Arch, list[Gemm], list[str]]:
    """The architecture loaded and the GEMMs parsed; at least one GEMM and one dataflow."""
    arch = load_arch(arch)
    gemms = [_as_gemm(g) for g in gemms]
    flows = unique(dataflows)
    if not gemms or not flows:
        raise UserInputError(where, "needs at least one GEMM and one dataflow")
    return arch, gemms, flows


def _fraction(value: object) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= 1)  # fmt: skip


def _magnitude(value: object) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)  # fmt: skip


def _count(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0


def _each(test, nullable: bool = False):
    """A test of a mapping whose every value passes ``test`` (or is None, if ``nullable``)."""
    return lambda v: isinstance(v, Mapping) and all(
        (x is None and nullable) or test(x) for x in v.values())  # fmt: skip


def _ops_skip(value: object) -> bool:
    """{'chunk:tau': {sets, tiles, rows}}; tiles and rows may be missing (a plan that needs
    them says so)."""
    return isinstance(value, Mapping) and all(
        isinstance(e, Mapping) and "sets" in e and set(e) <= {"sets", "tiles", "rows"}
        and _fraction(e["sets"]) and all(_each(_fraction)(e[k]) for k in ("tiles", "rows")
                                         if k in e)
        for e in value.values())  # fmt: skip


#: What each statistic of a GEMM must be (the keys of ``workload/trace_schema.GemmStats``):
#: the test and, for the message, what it expects
STATISTICS = {
    "shape": (lambda v: isinstance(v, list | tuple) and len(v) == 2
              and all(_count(x) and x > 0 for x in v), "[M, K] of positive integers"),
    "absmax": (_magnitude, "a finite number ≥ 0"),
    "mean_abs": (_magnitude, "a finite number ≥ 0"),
    "osc_alpha": (lambda v: _magnitude(v) and v > 0, "a finite number > 0"),
    "osc_threshold": (_magnitude, "a finite number ≥ 0"),
    "clustering_density": (_each(_fraction, True), "{G: a fraction in [0, 1] or None}"),
    "outlier_channels": (_count, "an integer ≥ 0"),
    "int16_hi_zero_fraction": (_fraction, "a fraction in [0, 1]"),
    "osc_table_channels": (_each(_count), "{G: an integer ≥ 0}"),
    "osc_table_hit_rate": (_each(_fraction, True), "{G: a fraction in [0, 1] or None}"),
    "osc_outlier_coverage": (_each(_fraction, True), "{G: a fraction in [0, 1] or None}"),
    "int16_hi_zero_fraction_w": (_fraction, "a fraction in [0, 1]"),
    "ops_skip": (_ops_skip, "{'chunk:tau': {sets[, tiles, rows]} of fractions in [0, 1]}"),
    "errors": (_each(_magnitude), "{dataflow: a finite number ≥ 0}"),
}


def check_stats(stats: Mapping | None, where: str) -> None:
    """A GEMM's statistics as a trace stores them (``trace_schema.GemmStats``; any subset of
    its keys): an unknown key (a misspelt one would be silently unused) or a value of the wrong
    kind is one :class:`UserInputError` naming it."""
    for key, value in (stats or {}).items():
        if key not in STATISTICS:
            raise UserInputError(where, f"unknown statistic {_clip(key)}; known: "
                                 f"{', '.join(STATISTICS)}", "stats")  # fmt: skip
        test, expected = STATISTICS[key]
        if not test(value):
            raise UserInputError(where, f"expected {expected}, got {_clip(value)}",
                                 f"stats.{key}")  # fmt: skip
