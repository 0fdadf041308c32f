"""Compute units as components, registered by their YAML ``compute.kind``.

A unit kind is one module in this package defining a subclass of
:class:`~accel_sim.arch.units.base.ComputeUnit` decorated with :func:`register`. The schema's
``compute`` field is the discriminated union of every registered class, so adding a kind is one
module (plus an architecture file using it); nothing else branches on the unit's type.
"""

from __future__ import annotations

import importlib
import pkgutil

from accel_sim.arch.units.base import ComputeUnit

_REGISTRY: dict[str, type[ComputeUnit]] = {}


def register(cls: type[ComputeUnit]) -> type[ComputeUnit]:
    """Class decorator: make ``cls`` the unit for ``compute.kind == cls.kind``."""
    kind = cls.model_fields["kind"].default
    if kind in _REGISTRY and _REGISTRY[kind] is not cls:
        raise ValueError(f"compute kind {kind!r} registered twice")
    _REGISTRY[kind] = cls
    return cls


def unit_classes() -> tuple[type[ComputeUnit], ...]:
    """Every registered unit class (modules of this package are imported on first call)."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    return tuple(_REGISTRY[k] for k in sorted(_REGISTRY))


__all__ = ["ComputeUnit", "register", "unit_classes"]
