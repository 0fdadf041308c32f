"""The default number of worker processes and the fork pool every parallel job uses."""

from __future__ import annotations

import os

import pytest

from accel_sim import workers


@pytest.mark.parametrize("value, expected", [("3", 3), (" 5 ", 5), ("0", None), ("-2", None),
                                             ("two", None), ("", None)])  # fmt: skip
def test_the_environment_sets_the_default(monkeypatch, value, expected):
    monkeypatch.setenv("ACCEL_SIM_WORKERS", value)
    fallback = min(workers.usable_cpus(), workers.MAX_DEFAULT)
    assert workers.default_workers() == (expected if expected is not None else fallback)


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
