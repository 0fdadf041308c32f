"""Simulate a model run's distinct GEMM rows in forked worker processes (``accel-sim model
--jobs N``). Each row is one :func:`accel_sim.api.simulate` call, independent of the others, so
the result does not depend on the number of processes; a row whose simulation raises a
:class:`~accel_sim.errors.UserInputError` is left to the caller, which raises it in order."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from accel_sim.api import simulate
from accel_sim.errors import UserInputError

#: Most worker processes (``--jobs``).
MAX_JOBS = 64


def _one(args: tuple) -> Any:
    try:
        return simulate(*args)
    except UserInputError:
        return None  # raised again, in order, by the caller's own call


def prefetch(tasks: dict[tuple, tuple], jobs: int) -> dict[tuple, Any]:
    """``{key: SimResult}`` of ``simulate(*args)`` for every ``key: args`` of ``tasks``, on
    ``jobs`` forked processes; empty for ``jobs`` ≤ 1, one task, or no ``fork`` on this system
    (the caller then simulates in its own process)."""
    if jobs <= 1 or len(tasks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return {}
    keys = list(tasks)
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(jobs, len(keys)), mp_context=context) as pool:
        results = list(pool.map(_one, [tasks[k] for k in keys], chunksize=1))
    return {k: r for k, r in zip(keys, results) if r is not None}
