"""Whole-model runs: a model lowered to GEMMs and vector work, every row simulated per dataflow.

* :mod:`~accel_sim.model_run.simulate`: :func:`simulate_model` and :class:`ModelResult` (the
  modelling assumptions are in its docstring and in every result's ``notes``).
* :mod:`~accel_sim.model_run.stats`: :class:`KindStats`, a trace's statistics by layer kind.
* :mod:`~accel_sim.model_run.report`: :func:`format_report`, the terminal report.
* :mod:`~accel_sim.model_run.command`: :func:`add_parser`, the ``accel-sim model`` command.

Nothing here imports :mod:`accel_sim.cli` (the CLI imports this package, not the reverse).
"""

from __future__ import annotations

import lazy_loader as _lazy

from accel_sim.model_run.command import add_parser
from accel_sim.model_run.defaults import DEFAULT_ARCH, DEFAULT_STATS

# imported on first use: the command line adds its parser without the engine
__getattr__, __dir__, _ = _lazy.attach(__name__, submod_attrs={
    "report": ["format_report"],
    "simulate": ["ModelResult", "attention_dataflow", "simulate_model"],
    "stats": ["KindStats"],
})  # fmt: skip

__all__ = ["DEFAULT_ARCH", "DEFAULT_STATS", "KindStats", "ModelResult", "add_parser",
           "attention_dataflow", "format_report", "simulate_model"]  # fmt: skip
