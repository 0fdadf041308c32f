"""Load and validate architecture files. Validation happens once, here, at the edge."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from accel_sim import resources
from accel_sim.arch.schema import Arch
from accel_sim.arch.units import unit_classes
from accel_sim.errors import UserInputError, user_error_from_validation
from accel_sim.yaml_io import read_yaml

#: Shipped architecture files (``arch_configs/``; see :mod:`accel_sim.resources`).
ARCH_DIR = resources.data_dir("arch")


def list_archs() -> list[str]:
    """Names of the shipped architecture files (without ``.yaml``)."""
    return resources.list_names("arch")


def resolve_arch_path(name_or_path: str | Path) -> Path:
    """A path as given, or a shipped architecture by name (``ascend_like_cube``)."""
    return resources.resolve("arch", name_or_path)


def _union_tags() -> frozenset[str]:
    """The ``kind`` tags of the compute-unit union (left out of error keys)."""
    return frozenset(cls.model_fields["kind"].default for cls in unit_classes())


def arch_from_dict(data: object, source: str) -> Arch:
    """Validate a parsed YAML mapping; any problem becomes one :class:`UserInputError`."""
    if not isinstance(data, dict):
        raise UserInputError(source, "expected a YAML mapping at the top level")
    try:
        arch = Arch.model_validate(data)
    except ValidationError as err:
        raise user_error_from_validation(err, source, drop_loc=_union_tags()) from None
    arch._origin = source
    return arch


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime_ns: int) -> Arch:
    return arch_from_dict(read_yaml(path), path)


_VALIDATED: dict[str, Arch] = {}


def _revalidated(arch: Arch) -> Arch:
    """``arch`` as validated from its content: ``model_copy(update=...)`` and attribute
    assignment skip pydantic's checks, so a copy with ``clock_hz=-5`` (or a level given as a
    dict, a number as a string) would otherwise reach the engine unchecked or unconverted. The
    validated copy is what runs; content already seen (by fingerprint) is not checked again."""
    extra = sorted(set(vars(arch)) - set(type(arch).model_fields))
    if extra:  # (model_copy(update=...) takes any name)
        raise UserInputError(arch.origin, f"unknown field(s) {', '.join(extra)}; the fields are "
                             f"{', '.join(type(arch).model_fields)}", extra[0])  # fmt: skip
    key = arch.fingerprint
    checked = _VALIDATED.get(key)
    if checked is None:
        checked = arch_from_dict(arch.model_dump(warnings=False), arch.origin)
        if len(_VALIDATED) > 4096:
            _VALIDATED.clear()
        _VALIDATED[key] = checked
    return checked


def load_arch(name_or_path: str | Path | Arch) -> Arch:
    """Load an architecture by shipped name or path; an :class:`Arch` is passed through."""
    if isinstance(name_or_path, Arch):
        return _revalidated(name_or_path)
    if not isinstance(name_or_path, str | Path):
        raise UserInputError("arch", f"expected an Arch, a shipped name or a YAML path, got "
                             f"{type(name_or_path).__name__}")  # fmt: skip
    path = resolve_arch_path(name_or_path)
    return _load_cached(str(path), path.stat().st_mtime_ns)
