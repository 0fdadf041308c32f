"""The command line starts without the engine: ``--help`` and ``--version`` (and a mistyped flag)
answer at once instead of after ~1.5 s of imports (pandas, numba, pydantic, simpy)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "numba", "pydantic", "simpy", "matplotlib", "accel_sim.api")
_PROBE = """
import json, sys
from accel_sim.cli import build_parser
import accel_sim, accel_sim.model_run, accel_sim.sweep
build_parser()
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def test_the_parser_and_the_packages_import_nothing_heavy():
    code = _PROBE.format(heavy=repr(HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_public_names_still_resolve():
    import accel_sim
    import accel_sim.model_run as model_run
    import accel_sim.sweep as sweep

    assert callable(accel_sim.simulate) and accel_sim.Gemm(2, 3, 4).macs == 24
    assert callable(model_run.simulate_model) and model_run.DEFAULT_ARCH == "ascend910b_chip"
    assert callable(sweep.run_sweep) and sweep.MAX_POINTS > 0
    for module in (accel_sim, model_run, sweep):
        assert all(hasattr(module, name) for name in module.__all__), module.__name__
    assert "nothing" not in dir(accel_sim) and not hasattr(accel_sim, "nothing")


_BEFORE_FORK = """
import json, sys
import accel_sim.api, accel_sim.model_run.simulate, accel_sim.model_run.report
from accel_sim.model_run.stats import KindStats
from accel_sim.workload.trace import load_trace
KindStats(load_trace("smollm2-135m"))
print(json.dumps(sorted(m for m in ("pandas", "matplotlib") if m in sys.modules)))
"""


def test_a_model_run_forks_its_workers_before_pandas_loads():
    """What a model run does before its workers fork (the engine's modules, the trace and its
    statistics) loads no pandas: the workers never use it, and its ~0.5 s import then runs
    while they do (``report/warm.py``) instead of before them."""
    out = subprocess.run([sys.executable, "-c", _BEFORE_FORK], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert json.loads(out.stdout) == []
