"""A trace's statistics by layer kind, for whole-model runs of data-dependent dataflows.

Per kind, the median over the trace's GEMMs of that kind of every fraction and error; counts
(``osc_table_channels``, ``outlier_channels``) are taken as a density per input channel (median
of count / K_trace), scaled by K_model and rounded to the nearest integer. A kind the trace lacks
uses the median over all its GEMMs. Numerical errors are those of the trace's model, not of the
simulated one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.models import ATTENTION_KINDS
from accel_sim.workload.trace import Trace

#: Statistics that are channel counts (scaled by K_model / K_trace), not fractions.
COUNT_KEYS = ("osc_table_channels", "outlier_channels")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _median_tree(items: list) -> Any:
    """Element-wise median of nested dicts of numbers (keys present in every item)."""
    first = items[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(i, dict) and k in i for i in items)]
        return {k: _median_tree([i[k] for i in items]) for k in keys}
    numbers = [float(i) for i in items if _is_number(i)]
    if numbers:
        return statistics.median(numbers)
    return None if _is_number(first) or first is None else first


def _scale(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to every number of a nested dict."""
    return {k: _scale(v, fn) for k, v in value.items()} if isinstance(value, dict) else fn(value)


#: The medians of the last traces, by the trace object (kept, so its id is not reused): a table
#: runs many models against one trace (ops-fig3: 95 model runs, 0.2 s of medians each).
_MEDIANS: dict[int, tuple[Trace, dict]] = {}
_MEDIANS_LIMIT = 16


def _medians(trace: Trace) -> dict[str, Any]:
    """Per layer kind (and ``"*"``: all), the element-wise medians of the trace's statistics,
    channel counts as fractions of K (cached by the trace object)."""
    hit = _MEDIANS.get(id(trace))
    if hit is not None and hit[0] is trace:
        return hit[1]
    groups: dict[str, list[dict]] = {}
    for gemm, stats in zip(trace.gemms, trace.stats):
        if not isinstance(stats, dict):
            continue
        scaled = {k: _scale(v, lambda x, K=gemm.K: float(x) / K) if k in COUNT_KEYS else v
                  for k, v in stats.items()}  # fmt: skip
        groups.setdefault(gemm.kind, []).append(scaled)
        groups.setdefault("*", []).append(scaled)
    if "*" not in groups:
        raise UserInputError(str(trace.path), "the trace has no per-GEMM statistics")
    medians = {kind: _median_tree(items) for kind, items in groups.items()}
    if len(_MEDIANS) >= _MEDIANS_LIMIT:
        _MEDIANS.clear()
    _MEDIANS[id(trace)] = (trace, medians)
    return medians


class KindStats:
    """A trace's statistics by layer kind (module docstring: medians, densities × K_model)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._median = _medians(trace)
        self.missing: set[str] = set()
        self._cache: dict[tuple[str, int], dict] = {}

    @property
    def description(self) -> str:
        """One phrase naming the statistics' source, for report headers."""
        return f"statistics from {self.trace.name} by layer kind"

    def stats_for(self, gemm: Gemm) -> dict[str, Any] | None:
        """Statistics for one model GEMM (``None`` for attention matmuls, which run FP16)."""
        if gemm.kind in ATTENTION_KINDS:
            return None
        key = (gemm.kind, gemm.K)
        if key not in self._cache:
            kind = gemm.kind if gemm.kind in self._median else "*"
            if kind == "*":
                self.missing.add(gemm.kind or "(none)")
            med = self._median[kind]

            def to_count(x: float) -> int:
                return int(math.floor(x * gemm.K + 0.5))

            self._cache[key] = {k: (_scale(v, to_count) if k in COUNT_KEYS else v)
                                for k, v in med.items()}  # fmt: skip
        return self._cache[key]
