"""Simulate a model run's distinct GEMM rows in forked worker processes (``accel-sim model
--jobs N``). Each row is one :func:`accel_sim.api.simulate` call, independent of the others (the
engine's caches never change a result, only its cost), so the result does not depend on the
number of processes; a row whose simulation raises a
:class:`~accel_sim.errors.UserInputError` is left to the caller, which raises it in order."""

from __future__ import annotations

from typing import Any

from accel_sim.api import simulate
from accel_sim.errors import UserInputError
from accel_sim.workers import can_fork, fork_map


def _group(tasks: dict[tuple, tuple]) -> dict[tuple, Any]:
    """``{key: SimResult}`` of one group, in one process (its simulations share its caches);
    a key whose simulation raised a :class:`UserInputError` is left out."""
    out = {}
    for key, args in tasks.items():
        try:
            out[key] = simulate(*args)
        except UserInputError:
            pass  # raised again, in order, by the caller's own call
    return out


def prefetch(groups: list[dict[tuple, tuple]], jobs: int) -> dict[tuple, Any]:
    """``{key: SimResult}`` of ``simulate(*args)`` for every ``key: args`` of every group, a
    group per task on ``jobs`` forked processes (groups in the order given); empty for ``jobs``
    ≤ 1, one group, or no ``fork`` on this system (the caller then simulates in its own
    process)."""
    if jobs <= 1 or len(groups) < 2 or not can_fork():
        return {}
    out: dict[tuple, Any] = {}
    for part in fork_map(_group, groups, jobs):
        out.update(part)
    return out
