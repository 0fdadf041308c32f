"""The dataflow registry: every dataflow declared by a plan module of this package, by name.

A plan module (``fp16.py``, ``w8a8.py``...) declares its dataflows with ``@register`` from
:mod:`accel_sim.dataflow.base` (see there for what a dataflow is). This module imports every
module of the package once (:func:`pkgutil.iter_modules`, sorted by name) and collects the
declared :class:`Dataflow` objects in file order, so adding a dataflow is one new module; the
plan modules never import the registry (no import cycle).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import accel_sim.dataflow as _package
from accel_sim.dataflow.base import Builder, Dataflow, register
from accel_sim.errors import UserInputError

__all__ = ["DATAFLOWS", "Builder", "Dataflow", "dataflow_names", "get_dataflow", "register"]


def _declared(module: ModuleType) -> list[Dataflow]:
    """The dataflows declared by ``@register`` on the functions defined in ``module``."""
    return [
        flow
        for obj in vars(module).values()
        if callable(obj) and getattr(obj, "__module__", None) == module.__name__
        for flow in getattr(obj, "dataflows", ())
    ]


def _collect() -> dict[str, Dataflow]:
    found: dict[str, Dataflow] = {}
    for info in pkgutil.iter_modules(_package.__path__):
        if info.name == "registry":
            continue
        module = importlib.import_module(f"{_package.__name__}.{info.name}")
        for flow in _declared(module):
            if flow.name in found:
                raise RuntimeError(f"dataflow {flow.name!r} declared twice ({module.__name__})")
            found[flow.name] = flow
    return found


DATAFLOWS: dict[str, Dataflow] = _collect()


def get_dataflow(name: str, source: str = "--dataflow") -> Dataflow:
    if name not in DATAFLOWS:
        raise UserInputError(source, f"unknown dataflow {name!r}; known: {list(DATAFLOWS)}")
    return DATAFLOWS[name]


def dataflow_names() -> list[str]:
    return list(DATAFLOWS)
