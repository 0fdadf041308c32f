"""The collapse's self-map reuse and class comparison (``engine/des.py``, ``Program.match_end``).

* ``match_end`` never claims more than is true: every step before its answer has the class of the
  step one period earlier (brute force over whole small programs), and on small programs it finds
  the first step that does not;
* multi-instance, multi-block GEMMs shaped like a model's layers give the same cycles and stalls
  with the collapse on and off, and the self-maps were actually used;
* the Qwen3-8B down projection (2048×12288×4096 × 36 layers, W8A8: 884,736 steps) is simulated
  step by step for at most 2,000 of them (6,701 before self-maps were reused, 381 with them): a
  guard against the collapse silently getting lazier.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from accel_sim.arch.load import load_arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine import des
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapper import mapped_program
from accel_sim.workload.gemm import Gemm

CUBE = "ascend_like_cube"


def _w8a8(M, K, N, count):
    flow = get_dataflow("w8a8")
    arch = load_arch(CUBE)
    return flow.build(Gemm(M, K, N, count=count), arch, None, flow.resolve_knobs(None)).matmuls[-1]


@pytest.mark.parametrize("seed", range(12))
def test_match_end_is_safe_and_exact_on_small_programs(seed):
    rng = random.Random(seed)
    op = MatmulOp("m", rng.randint(64, 1024), rng.randint(64, 2048), rng.randint(64, 1024),
                  "int8", 8, 8, count=rng.choice([1, 2, 3]))  # fmt: skip
    program = mapped_program(load_arch(CUBE), op)
    n = program.n_steps
    if n < 8:
        pytest.skip("too few steps to compare stretches")
    classes = program.codes_at(np.arange(n))
    for _ in range(40):
        period = rng.randint(1, n - 1)
        lo = rng.randint(period, n - 1)
        stop = rng.choice([n, rng.randint(lo, n)])
        found = program.match_end(lo, period, stop)
        assert lo <= found <= stop
        assert np.array_equal(classes[lo:found], classes[lo - period:found - period])
        if n <= 4096 and found < stop:
            assert classes[found] != classes[found - period]
        # out of budget, the class search stops early but never claims a stretch that differs
        cut = program.class_mismatch(lo, period, stop, budget=rng.choice([1, 8, 64]))
        assert lo <= cut <= stop
        assert np.array_equal(classes[lo:cut], classes[lo - period:cut - period])


@pytest.mark.parametrize("M,K,N,count", [(512, 1024, 2048, 3), (1024, 512, 1536, 2),
                                         (512, 4096, 1024, 3), (1024, 1024, 1024, 4),
                                         (2048, 512, 512, 4)])  # fmt: skip
def test_reused_self_maps_are_exact(M, K, N, count, monkeypatch):
    program = mapped_program(load_arch(CUBE), _w8a8(M, K, N, count))
    used = []
    longest = des._Engine._longest_jump

    def spy(self, *args):
        best = longest(self, *args)
        used.append(best is not None and best[4] is None)  # a jump taken from a self-map
        return best

    monkeypatch.setattr(des._Engine, "_longest_jump", spy)
    fast = simulate_program(program, collapse=True)
    slow = simulate_program(program, collapse=False)
    assert (fast.cycles, fast.stalls) == (slow.cycles, slow.stalls)
    assert fast.simulated_steps + fast.collapsed_steps == program.n_steps
    assert any(used)


def test_model_sized_gemm_collapses_to_few_steps():
    program = mapped_program(load_arch(CUBE), _w8a8(2048, 12288, 4096, 36))
    timing = simulate_program(program)
    assert timing.simulated_steps <= 2000
    assert timing.simulated_steps + timing.collapsed_steps == program.n_steps
