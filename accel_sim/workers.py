"""How many worker processes a parallel job starts by default, one fork pool for them, and
groups of independent calls (e.g. simulations of GEMM rows) spread over it.

Every job that can spread its work over processes (``accel-sim run``, ``model``, ``table``,
``sweep``) asks :func:`default_workers` unless ``--jobs N`` says otherwise: the
``ACCEL_SIM_WORKERS`` environment variable if set (1 … 64; anything else is an error), else
the CPUs this process may run on (its affinity, not the machine's count: a container limited
to 2 of 64 cores gets 2), at most :data:`MAX_DEFAULT`.
Results never depend on the number: each task is simulated in its own process, and the
engine's caches change a result's cost, never the result.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

from accel_sim.errors import UserInputError

#: The most workers started without being asked (each is a copy of this process, ~200 MB).
MAX_DEFAULT = 8
#: The most workers a user may ask for (``--jobs`` of ``accel-sim run`` and ``model``).
MAX_JOBS = 64


def usable_cpus() -> int:
    """CPUs this process may run on (``sched_getaffinity`` where the OS has it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    """``ACCEL_SIM_WORKERS`` if set (an integer 1 … :data:`MAX_JOBS`; anything else is a
    :class:`UserInputError` naming it, as a bad ``--jobs`` is), else min(usable CPUs, 8)."""
    env = os.environ.get("ACCEL_SIM_WORKERS", "").strip()
    if not env:
        return min(usable_cpus(), MAX_DEFAULT)
    if not (env.isascii() and env.isdigit() and 1 <= int(env) <= MAX_JOBS):
        raise UserInputError("ACCEL_SIM_WORKERS", f"must be a whole number of worker processes "
                             f"from 1 to {MAX_JOBS} (or unset: one per usable CPU, at most "
                             f"{MAX_DEFAULT}), got {env[:40]!r}")  # fmt: skip
    return int(env)


def can_fork() -> bool:
    """Whether worker processes can be forked here: the system has fork (not Windows; fork is
    what keeps the loaded state without re-importing) and this process is not itself a pool's
    worker (a daemonic process may not have children)."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)  # fmt: skip


def fork_map(func: Callable[[Any], Any], tasks: list, workers: int,
             forked: Callable[[], Any] | None = None) -> Iterator[Any]:  # fmt: skip
    """``func(task)`` for each task, in order, on ``workers`` forked processes (in this process
    when ``workers`` ≤ 1, there is one task, or fork is unavailable). Lazy: results are yielded
    as they arrive, so a caller can drive a progress bar. ``forked()`` is called in this
    process once no more processes will be forked (e.g. to start a thread, which must not be
    running at a fork): after the workers exist, or first thing when the tasks run here."""
    if workers <= 1 or len(tasks) < 2 or not can_fork():
        if forked is not None:
            forked()
        yield from map(func, tasks)
        return
    with multiprocessing.get_context("fork").Pool(min(workers, len(tasks))) as pool:
        if forked is not None:
            forked()
        yield from pool.imap(func, tasks, chunksize=1)


def parse_jobs(text: str) -> int:
    """``--jobs N`` of the command line: an integer in 1 .. :data:`MAX_JOBS`."""
    if not re.fullmatch(r"[0-9]+", text) or not 1 <= int(text) <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"expected an integer in 1 .. {MAX_JOBS}, got "
                                         f"{text[:40]!r}")  # fmt: skip
    return int(text)


parse_jobs.__name__ = "integer"  # argparse names the type in its message


def _call_group(task: tuple[Callable, dict]) -> dict:
    """``{key: func(*args)}`` of one group, in one process (its calls share its caches); a key
    whose call raised a :class:`UserInputError` is left out."""
    func, calls = task
    out = {}
    for key, args in calls.items():
        try:
            out[key] = func(*args)
        except UserInputError:
            pass  # raised again, in order, by the caller's own call
    return out


def map_groups(func: Callable, groups: list[dict], jobs: int,
               forked: Callable[[], Any] | None = None) -> Iterator[dict]:  # fmt: skip
    """Per group (``{key: args}``, in the order given) ``{key: func(*args)}``, the groups on
    ``jobs`` forked processes; nothing where ``jobs`` ≤ 1, there is one group, or this process
    cannot fork (the caller then calls ``func`` itself, and meets any error in order). Calls
    that share work (e.g. simulations of one matmul) belong in one group. ``forked`` as in
    :func:`fork_map`."""
    if jobs <= 1 or len(groups) < 2 or not can_fork():
        return
    yield from fork_map(_call_group, [(func, g) for g in groups], jobs, forked)
