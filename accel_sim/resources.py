"""Shipped data (architectures, models, sweeps, traces) and the one "name or path" resolver.

The data lives at the top of the repository (``arch_configs/``, ``workloads/models/``,
``workloads/sweeps/``, ``traces/``). A wheel carries the same tree as package data under
``accel_sim/_data/`` (``setup.cfg`` maps each folder into the package), so a non-editable
``pip install .`` finds it through :mod:`importlib.resources`; a source checkout or an editable
install has no ``_data`` and reads the repository's folders directly. Both layouts keep the
relative paths (``arch_configs/x.yaml``, ``traces/smollm2-135m``) that reports print.

Every lookup of a shipped file goes through :func:`resolve` (a path as given, else a shipped
name) and every listing through :func:`list_names`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from accel_sim.errors import UserInputError


@dataclass(frozen=True)
class Kind:
    """One kind of shipped data: its folder (relative to the data root) and how names map to
    entries in it (``suffix`` ``.yaml`` for files; ``""`` for directories such as traces)."""

    folder: str
    suffix: str
    label: str  # how error messages call one entry
    unknown: str  # the message for a name that is neither a path nor shipped ({known}: the names)


KINDS: dict[str, Kind] = {
    "arch": Kind(
        "arch_configs", ".yaml", "architecture file",
        "no such architecture file or shipped name; shipped: {known}",
    ),
    "model": Kind(
        "workloads/models", ".yaml", "model file", "unknown model; known models: {known}"
    ),
    "sweep": Kind(
        "workloads/sweeps", ".yaml", "sweep file",
        "no such sweep file or shipped name; shipped: {known}",
    ),
    "trace": Kind(
        "traces", "", "trace directory", "no such trace directory; shipped traces: {known}"
    ),
}
YAML_SUFFIXES = (".yaml", ".yml")


@cache
def data_root() -> Path:
    """The folder holding ``arch_configs/``, ``workloads/`` and ``traces/``: the package's
    ``_data`` in an installed wheel, else the repository root of a source checkout."""
    packaged = files("accel_sim") / "_data"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent


def data_dir(kind: str) -> Path:
    """The folder of one kind of shipped data (``data_dir("arch")`` → ``.../arch_configs``)."""
    return data_root() / _kind(kind).folder


def list_names(kind: str) -> list[str]:
    """Names of the shipped entries of ``kind``, sorted (file stems, or directory names)."""
    spec, folder = _kind(kind), data_dir(kind)
    if not folder.is_dir():
        return []
    if spec.suffix:
        return sorted(p.stem for p in folder.glob(f"*{spec.suffix}") if p.is_file())
    return sorted(
        p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
    )


def shipped(kind: str, name: str) -> Path | None:
    """The shipped entry called ``name`` (case-insensitive for files), or ``None``."""
    spec = _kind(kind)
    if not name or any(sep in name for sep in ("/", "\\")) or name.startswith("."):
        return None
    for candidate in dict.fromkeys((name, name.lower())):
        path = data_dir(kind) / f"{candidate}{spec.suffix}"
        if _is_entry(spec, path):
            return path
    return None


def resolve(kind: str, name_or_path: str | Path) -> Path:
    """A user's path as given, else a shipped name, else a shipped relative path.

    ``resolve("arch", "my/arch.yaml")`` is that file; ``resolve("arch", "ascend_like_cube")`` the
    shipped one; ``resolve("arch", "arch_configs/ascend_like_cube.yaml")`` the file in the current
    directory if there is one, else the shipped file (so the README's commands work from any
    directory). Anything else raises one :class:`UserInputError` listing the shipped names."""
    spec, text = _kind(kind), str(name_or_path)
    path = Path(text)
    if _is_entry(spec, path):
        return path
    looks_like_path = (
        isinstance(name_or_path, Path)
        or any(sep in text for sep in ("/", "\\"))
        or (bool(spec.suffix) and path.suffix.lower() in YAML_SUFFIXES)
    )
    if looks_like_path:
        folder = Path(spec.folder).parts
        inside = path.parts[: len(folder)] == folder and ".." not in path.parts
        if inside and not path.is_absolute():
            packaged = data_root() / path
            if _is_entry(spec, packaged):
                return packaged
        if path.exists():  # a directory for a file, a file for a directory, a device...
            article = "an" if spec.label[0] in "aeiou" else "a"
            raise UserInputError(text, f"exists but is not {article} {spec.label}")
        raise UserInputError(text, f"{spec.label} not found")
    found = shipped(kind, text)
    if found is not None:
        return found
    raise UserInputError(text, spec.unknown.format(known=", ".join(list_names(kind)) or "(none)"))


def _is_entry(spec: Kind, path: Path) -> bool:
    return path.is_file() if spec.suffix else path.is_dir()


def _kind(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown kind of shipped data {kind!r}; known: {sorted(KINDS)}") from None
