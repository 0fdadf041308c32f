"""The default number of worker processes and the fork pool every parallel job uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from accel_sim import workers
from accel_sim.errors import UserInputError


@pytest.mark.parametrize("value, expected", [("3", 3), (" 5 ", 5), ("64", 64), ("", None)])
def test_the_environment_sets_the_default(monkeypatch, value, expected):
    monkeypatch.setenv("ACCEL_SIM_WORKERS", value)
    fallback = min(workers.usable_cpus(), workers.MAX_DEFAULT)
    assert workers.default_workers() == (expected if expected is not None else fallback)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "65", "\uff13"])
def test_a_bad_environment_value_is_an_error_naming_it(monkeypatch, value):
    """As a bad ``--jobs`` is: not silently the CPU count (``\uff13`` is a full-width 3)."""
    monkeypatch.setenv("ACCEL_SIM_WORKERS", value)
    with pytest.raises(UserInputError, match="ACCEL_SIM_WORKERS: must be a whole number"):
        workers.default_workers()


def test_without_the_variable_the_usable_cpus_capped(monkeypatch):
    monkeypatch.delenv("ACCEL_SIM_WORKERS", raising=False)
    monkeypatch.setattr(workers, "usable_cpus", lambda: 64)
    assert workers.default_workers() == workers.MAX_DEFAULT
    monkeypatch.setattr(workers, "usable_cpus", lambda: 1)
    assert workers.default_workers() == 1


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


@pytest.mark.skipif(not workers.can_fork(), reason="no fork on this system")
def test_fork_map_keeps_the_order_and_uses_other_processes():
    out = list(workers.fork_map(_pid_and_square, list(range(12)), 2))
    assert [sq for _, sq in out] == [x * x for x in range(12)]
    assert os.getpid() not in {pid for pid, _ in out}


def test_fork_map_runs_in_this_process_with_one_worker():
    out = list(workers.fork_map(_pid_and_square, [1, 2, 3], 1))
    assert out == [(os.getpid(), 1), (os.getpid(), 4), (os.getpid(), 9)]


_AFTER_A_PARALLEL_KERNEL = """
import json
import numpy as np
import accel_sim
from accel_sim.quant import olive
from accel_sim.workers import fork_map
grid = np.union1d(olive.normal_grid(4, "int"), olive.outlier_grid(4))
v = np.linspace(-400, 400, 100_000)
olive.grid_round(v, grid)  # a numba parallel=True kernel in the parent, before the fork
def total(i):
    return float(olive.grid_round(v, grid).sum()) + i
print(json.dumps(list(fork_map(total, [0, 1, 2], 2))))
"""


@pytest.mark.skipif(not workers.can_fork(), reason="no fork on this system")
def test_a_process_that_ran_a_parallel_kernel_can_still_fork():
    """On GNU OpenMP (numba's default layer on Linux) the children of such a process abort and
    the pool waits forever; the package selects numba's fork-safe layer."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    proc = subprocess.run([sys.executable, "-c", _AFTER_A_PARALLEL_KERNEL], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-500:]
    values = json.loads(proc.stdout)
    assert len(values) == 3 and values[1] - values[0] == 1.0 and values[2] - values[1] == 1.0


def _nested(x: int) -> list[int]:
    return list(workers.fork_map(abs, [x, -x], 2))  # inside a pool's worker: in that process


@pytest.mark.skipif(not workers.can_fork(), reason="no fork on this system")
def test_a_pool_worker_runs_its_own_tasks_in_process():
    assert list(workers.fork_map(_nested, [1, 2], 2)) == [[1, 1], [2, 2]]


@pytest.mark.skipif(not workers.can_fork(), reason="no fork on this system")
def test_simulate_many_gives_the_same_table_on_forked_workers():
    """``jobs`` only spreads the GEMMs over processes (``accel-sim run --jobs``)."""
    import accel_sim

    gemms = ["16x64x128", "64x128x64", "16x64x128", "128x256x96"]
    tables = [accel_sim.simulate_many("ascend_like_cube", gemms, ["fp16", "w8a8"], jobs=jobs)
              for jobs in (1, 2)]  # fmt: skip
    assert len(tables[0]) == 8
    assert tables[0].equals(tables[1])
