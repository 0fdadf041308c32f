"""accel-sim: a cycle-level, discrete-event simulator of accelerators for quantized LLMs.

Public API::

    import accel_sim
    r = accel_sim.simulate("ascend_like_cube", "2048x4096x4096", "w8a8")
    r.cycles, r.energy_pj, r.energy_breakdown_pj
"""

import os as _os

import numba as _numba

# Parallel jobs fork worker processes (accel_sim/workers.py); a process that has run a numba
# ``parallel=True`` kernel on GNU OpenMP (numba's first choice on Linux) cannot fork safely, and
# its children abort. "forksafe" takes TBB if installed, else numba's own workqueue. A user's
# NUMBA_THREADING_LAYER wins.
if "NUMBA_THREADING_LAYER" not in _os.environ:
    _numba.config.THREADING_LAYER = "forksafe"

from accel_sim.api import SimResult, dataflows, explain, simulate, simulate_many
from accel_sim.arch.load import list_archs, load_arch
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_gemm

__all__ = [
    "__version__",
    "explain",
    "Gemm",
    "SimResult",
    "UserInputError",
    "dataflows",
    "list_archs",
    "load_arch",
    "parse_gemm",
    "simulate",
    "simulate_many",
]


def _version() -> str:
    """The installed distribution's version (``setup.cfg`` is its one source)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("accel-sim")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


__version__ = _version()
