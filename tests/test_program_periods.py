"""The collapse's proofs that a stretch of steps has the classes of the stretch one period
earlier (``engine/program_periods.py``) against a step-by-step scan, on random programs that
repeat an op many times (``count``) and random periods: :meth:`class_mismatch` (its vectorised
search, and the skip of every middle instance or block that one proven cycle implies,
:meth:`_periodic_end`) must return the first step whose class differs, never a later one.
"""

from __future__ import annotations

import random

import pytest

from accel_sim.arch.load import load_arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.mapper import mapped_program

ARCHS = ("ascend_like_cube", "systolic_32x32_ws", "edge_npu_int8")


def _first_mismatch_by_scan(program, x0: int, period: int, stop: int) -> int:
    canon, code = program.canonical_list, program.code
    for x in range(x0, stop):
        if canon[code(x)] != canon[code(x - period)]:
            return x
    return stop


def _programs(seed: int, n: int):
    """Random programs: half of them a small matmul repeated thousands of times (the middle
    instances the periodic skip proves from one), half a larger one a few times."""
    rng = random.Random(seed)
    for i in range(n):
        arch = load_arch(rng.choice(ARCHS))
        precision = "int8" if arch.name == "edge_npu_int8" else rng.choice(["fp16", "int8"])
        bits = 16 if precision == "fp16" else 8
        many = i % 2 == 0
        M, K, N = (rng.randint(256, 1024) if many else rng.randint(1, 300) for _ in range(3))
        count = rng.randint(20, 200) if many else rng.choice([5, 7, 40])
        op = MatmulOp("m", M, K, N, precision, bits, bits, 16, count=count)
        yield rng, mapped_program(arch, op)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_class_mismatch_finds_the_first_differing_step(seed):
    checked = 0
    for rng, program in _programs(seed, 12):
        n = program.n_steps
        if n > 200_000:
            continue  # (the scan is step by step)
        strides = [s for _, s in program._loop_cycles]
        for _ in range(6):
            # (a loop's stride: the collapse's usual periods, where the skip applies)
            period = rng.choice([*strides, *strides, rng.randint(1, max(1, n // 3))])
            if period >= n:
                continue
            x0 = rng.randint(period, min(n - 1, period + n // 10))  # (long stretches)
            stop = rng.choice([n, rng.randint(x0 + 1, n)])
            expected = _first_mismatch_by_scan(program, x0, period, stop)
            got = program.class_mismatch(x0, period, stop, budget=1 << 40)
            assert got == expected, (program.count, x0, period, stop)
            checked += 1
    assert checked >= 20


def test_many_instances_cost_the_same_each():
    """A matmul repeated 2**18 times (a batch's attention heads): the collapse proves the
    middle instances from one cycle of them (``_periodic_end``), and each middle instance adds
    the same cycles, so the totals grow by the same amount per doubling of the middle."""
    import accel_sim
    from accel_sim.workload.gemm import Gemm

    def cycles(count: int) -> int:
        return accel_sim.simulate("ascend_like_cube", Gemm(512, 512, 512, count=count),
                                  "w8a8").cycles  # fmt: skip

    c16, c17, c18 = cycles(2**16), cycles(2**17), cycles(2**18)
    assert c18 - c17 == 2 * (c17 - c16)


def test_the_periodic_skip_stops_before_the_last_instance(monkeypatch):
    """A case where one proven instance proves the middle ones and the first differing step
    is the last one (the last instance's edge): the skip must end before it. (A skip over the
    whole cycle of the instance loop instead of its middle returned n_steps here.)"""
    from accel_sim.engine import program_periods

    op = MatmulOp("m", 531, 368, 895, "fp16", 16, 16, 16, count=67)
    program = mapped_program(load_arch("systolic_32x32_ws"), op)
    extended = []
    periodic_end = program_periods.ClassPeriods._periodic_end

    def spy(self, x0, hi, period, stop):
        end = periodic_end(self, x0, hi, period, stop)
        extended.append(end > hi)
        return end

    monkeypatch.setattr(program_periods.ClassPeriods, "_periodic_end", spy)
    x0, period, n = 620, 336, program.n_steps
    expected = _first_mismatch_by_scan(program, x0, period, n)
    assert program.class_mismatch(x0, period, n, budget=1 << 40) == expected
    assert any(extended)  # (the case exercises the skip)
