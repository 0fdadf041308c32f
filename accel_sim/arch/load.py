"""Load and validate architecture files. Validation happens once, here, at the edge."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from accel_sim.arch.schema import Arch
from accel_sim.arch.units import unit_classes
from accel_sim.errors import UserInputError

#: Shipped architecture files (``arch_configs/`` at the repository root).
ARCH_DIR = Path(__file__).resolve().parents[2] / "arch_configs"


def list_archs() -> list[str]:
    """Names of the shipped architecture files (without ``.yaml``)."""
    return sorted(p.stem for p in ARCH_DIR.glob("*.yaml"))


def resolve_arch_path(name_or_path: str | Path) -> Path:
    """A path as given, or a shipped architecture by name (``ascend_like_cube``)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserInputError(str(path), "architecture file not found")
        return path
    shipped = ARCH_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    raise UserInputError(
        str(name_or_path), f"no such architecture file or shipped name; shipped: {list_archs()}"
    )


def _format_validation_error(err: ValidationError) -> tuple[str, str]:
    first = err.errors()[0]
    kinds = {cls.model_fields["kind"].default for cls in unit_classes()}
    key = ".".join(str(p) for p in first["loc"] if p not in kinds)  # drop the union's tag
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif "input" in first and not isinstance(first["input"], dict | list):
        message = f"{message} (got {first['input']!r})"
    more = len(err.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return key or "<root>", message


def arch_from_dict(data: object, source: str) -> Arch:
    """Validate a parsed YAML mapping; any problem becomes one :class:`UserInputError`."""
    if not isinstance(data, dict):
        raise UserInputError(source, "expected a YAML mapping at the top level")
    try:
        arch = Arch.model_validate(data)
    except ValidationError as err:
        key, message = _format_validation_error(err)
        raise UserInputError(source, message, key) from None
    arch._origin = source
    return arch


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime_ns: int) -> Arch:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserInputError(path, f"cannot read: {err.__class__.__name__}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "malformed YAML"
        raise UserInputError(path, f"malformed YAML{where}: {problem}") from None
    return arch_from_dict(data, path)


def load_arch(name_or_path: str | Path | Arch) -> Arch:
    """Load an architecture by shipped name or path; an :class:`Arch` is passed through."""
    if isinstance(name_or_path, Arch):
        return name_or_path
    path = resolve_arch_path(name_or_path)
    return _load_cached(str(path), path.stat().st_mtime_ns)
