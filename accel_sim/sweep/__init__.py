"""Design-space sweeps on Dask: a YAML grid of architectures × dataflows × knobs × workloads.

``workloads/sweeps/example.yaml`` documents the sweep file; ``accel-sim sweep SWEEP.yaml --out
DIR`` runs it. Modules, in the order a run uses them:

* :mod:`~accel_sim.sweep.spec` — the file's schema; :mod:`~accel_sim.sweep.grid` — its size
  (at most :data:`MAX_POINTS` points, counted without expanding) and architecture steps;
* :mod:`~accel_sim.sweep.points` — the points and the content hash naming each point's file;
* :mod:`~accel_sim.sweep.store` — ``OUT/points/<hash>.parquet``, each with a checksum of its row
  (a file that fails it is named on stderr and recomputed), and the ``--out`` check;
* :mod:`~accel_sim.sweep.run` — Dask execution, the table and outputs;
  :mod:`~accel_sim.sweep.results` — speedup and Pareto front;
  :mod:`~accel_sim.sweep.plot` / :mod:`~accel_sim.sweep.labels` — the figures;
* :mod:`~accel_sim.sweep.cli` — the ``sweep`` command.

A rerun skips trusted point files and rebuilds the table from the files, so a killed and
restarted sweep ends with the same table.
"""

from __future__ import annotations

import lazy_loader as _lazy

from accel_sim.sweep.cli import add_parser
from accel_sim.sweep.grid import MAX_POINTS

# imported on first use: the command line adds its parser without pandas
__getattr__, __dir__, _ = _lazy.attach(__name__, submod_attrs={
    "points": ["Point", "expand"],
    "run": ["run_sweep"],
    "spec": ["Sweep", "SweepSpec", "load_spec"],
})  # fmt: skip

__all__ = ["MAX_POINTS", "Point", "Sweep", "SweepSpec", "add_parser", "expand", "load_spec",
           "run_sweep"]  # fmt: skip
