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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accel_sim.api import SimResult, dataflows, explain, simulate, simulate_many
    from accel_sim.arch.load import list_archs, load_arch
    from accel_sim.errors import UserInputError
    from accel_sim.workload.gemm import Gemm, parse_gemm

#: The public names and their modules, imported on first use (PEP 562): ``import accel_sim``
#: and the command line's ``--help`` / ``--version`` then load no engine, pandas or pydantic.
_LAZY = {
    "SimResult": "accel_sim.api", "dataflows": "accel_sim.api", "explain": "accel_sim.api",
    "simulate": "accel_sim.api", "simulate_many": "accel_sim.api",
    "list_archs": "accel_sim.arch.load", "load_arch": "accel_sim.arch.load",
    "UserInputError": "accel_sim.errors", "Gemm": "accel_sim.workload.gemm",
    "parse_gemm": "accel_sim.workload.gemm",
}  # fmt: skip


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_sim' has no attribute {name!r}")
    from importlib import import_module

    value = globals()[name] = getattr(import_module(module), name)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])

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
