"""OPS's offline choice of τ and preset against an error budget (``--knob ops.tau=auto``).

OPS (§II) determines "the optimal threshold and preset values through offline layer-wise
validation", maximizing the computation skipped at a small accuracy loss; the paper states no
budget, no validation set and no grid. Ours, from what a compact trace stores:

* **candidates**: the (τ, preset) pairs of the trace's ``errors`` for OPS at the knob's chunk,
  ``ops:chunk=<c>,tau=<τ>,preset=<p>`` (``workload/compact.py`` stores them for chunk 32 only,
  τ ∈ {−1, 0, 1, 4, 16}, presets ``zero`` and ``hi_only``);
* **rule**: the largest τ (the most skipping: the early bird's skipped sets at τ contain those at
  any smaller τ) whose relative output error ‖Y − Y_fp32‖/‖Y_fp32‖ is ≤ the budget with some
  allowed preset; at that τ the preset of the smaller error (ties: the order of
  :data:`PRESETS`). If no τ ≥ 0 fits, **τ = −1**: the early bird is off (exact INT16 slicing,
  nothing skipped), whatever τ = −1's own error;
* **tokens**: the trace's errors are measured on its *held-out* tokens (the second half; the
  first half calibrates OSC and the static scales) and the trace stores no OPS error on the
  calibration half. The choice is therefore made on the same tokens that report the chosen
  τ's error: selection on the evaluation set, an optimistic error for the chosen τ. The skip
  fractions (``ops_skip``, hence cycles) are over all tokens of the trace;
* **per GEMM** on a trace run (each GEMM has its own errors: per layer, as OPS); **per layer
  kind** in a model run (``model_run.KindStats`` gives each kind the median of its GEMMs'
  errors, so τ is chosen against the kind's median error: about half of that kind's trace
  layers may exceed the budget at the chosen τ).

The preset is chosen too when the knob ``preset`` is ``auto`` (the default with ``tau=auto``;
an explicit ``zero`` or ``hi_only`` restricts the choice to it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accel_sim.errors import UserInputError

#: the presets OPS can write into a skipped set's partial sum (``quant/reference.y_ops``)
PRESETS = ("zero", "hi_only")
#: the default error budget: relative output error per GEMM (module docstring of ``ops.py``)
DEFAULT_BUDGET = 0.05
_KEY = re.compile(r"^ops:chunk=(\d+),tau=([^,]+),preset=(\w+)$")


@dataclass(frozen=True)
class Choice:
    """The chosen τ and preset, its stored error, and whether the budget was met."""

    tau: float
    preset: str
    error: float | None  # the trace's error at (τ, preset); None if it has none
    met: bool  # False: no τ ≥ 0 within the budget, early bird off
    budget: float
    best_on: float | None  # smallest stored error at any τ ≥ 0 (for the fallback's note)

    def note(self) -> str:
        err = "no stored error" if self.error is None else f"error {self.error:.3g}"
        if self.met and self.tau >= 0:
            return (
                f"τ=auto (budget {self.budget:g}): τ={self.tau:g}, preset {self.preset} "
                f"({err} on the trace's held-out tokens, the tokens it was chosen on)"
            )
        best = "" if self.best_on is None else f"; smallest error at τ ≥ 0: {self.best_on:.3g}"
        if self.met:  # only τ = −1 is within the budget
            return (
                f"τ=auto (budget {self.budget:g}): no τ ≥ 0 within the budget{best}; "
                f"early bird off (τ = −1, {err})"
            )
        return (
            f"τ=auto (budget {self.budget:g}): no τ within the budget{best}; fallback: "
            f"early bird off (τ = −1, {err})"
        )


def candidates(stats: Mapping[str, Any] | None, chunk: int) -> dict[tuple[float, str], float]:
    """{(τ, preset): relative error} of the trace's OPS errors at ``chunk``."""
    out = {}
    for key, err in ((stats or {}).get("errors") or {}).items():
        m = _KEY.match(key)
        if m and int(m.group(1)) == chunk and err is not None:
            try:
                tau = float(m.group(2))
            except ValueError:
                continue
            out[(tau, m.group(3))] = float(err)
    return out


def choose(stats: Mapping[str, Any] | None, chunk: int, budget: float,
           presets: tuple[str, ...] = PRESETS) -> Choice:  # fmt: skip
    """The largest τ of the trace's OPS errors within ``budget`` (module docstring)."""
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget >= 0:
        raise UserInputError("knobs", f"the error budget must be a number ≥ 0, got {budget!r}",
                             "ops.budget")  # fmt: skip
    if stats is None:
        raise UserInputError("ops", "τ=auto chooses τ from a trace's errors: run it on a trace "
                             "(--trace)", "ops.tau")  # fmt: skip
    errs = {k: e for k, e in candidates(stats, chunk).items() if k[1] in presets}
    if not errs:
        raise UserInputError("knobs", f"τ=auto needs the trace's OPS errors at chunk {chunk}, "
                             f"preset {'/'.join(presets)}; the compact trace stores them for "
                             f"chunk 32 only", "ops.chunk")  # fmt: skip

    def best_preset(tau: float) -> tuple[str, float | None]:
        at = [(errs[(tau, p)], i, p) for i, p in enumerate(presets) if (tau, p) in errs]
        if not at:
            return presets[0], None
        err, _, preset = min(at)
        return preset, err

    on = [e for (t, _), e in errs.items() if t >= 0]
    best_on = min(on) if on else None
    fitting = sorted({t for (t, _), e in errs.items() if e <= budget}, reverse=True)
    if fitting:
        tau = fitting[0]
        preset, err = best_preset(tau)
        if tau < 0:
            tau = -1.0
        return Choice(tau, preset, err, True, float(budget), best_on)
    preset, err = best_preset(-1.0)
    return Choice(-1.0, preset, err, False, float(budget), best_on)


def preset_at(stats: Mapping[str, Any] | None, chunk: int, tau: float) -> str:
    """``preset=auto`` at a fixed τ: the preset of the smaller stored error (``zero`` if the
    trace has no error there, or at τ < 0, where no set gets a preset)."""
    errs = candidates(stats, chunk)
    at = [(errs[(tau, p)], i, p) for i, p in enumerate(PRESETS) if (tau, p) in errs]
    return min(at)[2] if at and tau >= 0 else PRESETS[0]


def resolve(
    stats: Mapping[str, Any] | None, knobs: Mapping[str, Any]
) -> tuple[dict, Choice | None]:
    """``knobs`` with ``tau`` and ``preset`` made concrete (``auto`` chosen from ``stats``) and
    the :class:`Choice` when τ was ``auto``."""
    out = dict(knobs)
    if out.get("tau") == "auto":
        presets = PRESETS if out.get("preset") == "auto" else (out.get("preset"),)
        choice = choose(stats, out["chunk"], out["budget"], presets)
        out["tau"], out["preset"] = choice.tau, choice.preset
        return out, choice
    if out.get("preset") == "auto":
        out["preset"] = preset_at(stats, out["chunk"], float(out["tau"]))
    return out, None
