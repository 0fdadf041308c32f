"""accel-sim: a cycle-level, discrete-event simulator of accelerators for quantized LLMs.

Public API::

    import accel_sim
    r = accel_sim.simulate("ascend_like_cube", "2048x4096x4096", "w8a8")
    r.cycles, r.energy_pj, r.energy_breakdown_pj
"""

import os as _os
import sys as _sys

# Parallel jobs fork worker processes (accel_sim/workers.py); a process that has run a numba
# ``parallel=True`` kernel on GNU OpenMP (numba's first choice on Linux) cannot fork safely, and
# its children abort. "forksafe" takes TBB if installed, else numba's own workqueue. A user's
# NUMBA_THREADING_LAYER wins. (numba reads the variable when it is imported; if it already is,
# its config is set instead. Not importing numba here keeps it off the commands that need none.)
if "NUMBA_THREADING_LAYER" not in _os.environ:
    _os.environ["NUMBA_THREADING_LAYER"] = "forksafe"
    if "numba" in _sys.modules:
        _sys.modules["numba"].config.THREADING_LAYER = "forksafe"

import lazy_loader as _lazy

# the public names, imported on first use: ``import accel_sim`` and the command line's
# ``--help`` / ``--version`` then load no engine, pandas or pydantic
__getattr__, __dir__, _ = _lazy.attach(__name__, submod_attrs={
    "api": ["SimResult", "dataflows", "explain", "simulate", "simulate_many"],
    "arch.load": ["list_archs", "load_arch"],
    "errors": ["UserInputError"],
    "workload.gemm": ["Gemm", "parse_gemm"],
})  # fmt: skip

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
