"""The sweep file: its schema and :func:`load_spec`, which validates it before any work.

``workloads/sweeps/example.yaml`` documents the keys. Every problem is one
:class:`~accel_sim.errors.UserInputError` naming the file and the key; a grid of more than
:data:`~accel_sim.sweep.grid.MAX_POINTS` points is refused here, counted without expanding it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import pydantic as pyd

from accel_sim import resources
from accel_sim.arch.load import load_arch, resolve_arch_path
from accel_sim.errors import UserInputError, user_error_from_validation
from accel_sim.sweep.grid import check_grid_size
from accel_sim.yaml_io import load_yaml_text, read_yaml

Scalar = pyd.StrictBool | pyd.StrictInt | pyd.StrictFloat | pyd.StrictStr
Values = Annotated[list[Scalar], pyd.BeforeValidator(lambda v: v if isinstance(v, list) else [v]),
                   pyd.Field(min_length=1)]  # a scalar is a one-value list  # fmt: skip
Strict = pyd.ConfigDict(extra="forbid", frozen=True)
Axis = tuple[tuple[str, ...], tuple[tuple, ...]]  # (dotted paths, one value tuple per step)


class WorkloadSpec(pyd.BaseModel):
    """One workload: exactly one of ``gemm``, ``gemms``, ``trace``, ``model``."""

    model_config = Strict
    name: str | None = None
    gemm: str | None = None
    gemms: list[str] | None = pyd.Field(None, min_length=1)
    trace: str | None = None
    model: str | None = None
    phase: Literal["prefill", "decode"] | None = None
    tokens: pyd.PositiveInt | None = None
    batch: pyd.PositiveInt = 1
    kv_len: pyd.NonNegativeInt = 0
    extra_prefix_tokens: pyd.NonNegativeInt = 0
    logits: Literal["all", "last"] = "all"
    attention: pyd.StrictBool = True  # include the attention matmuls (QKᵀ, PV)

    @pyd.model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        given = [k for k in ("gemm", "gemms", "trace", "model") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of gemm, gemms, trace, model (got {given})")
        model_keys = set(self.model_fields_set) - {"name", *given}
        if self.model is None and model_keys:
            raise ValueError(f"{sorted(model_keys)} only apply to a model workload")
        if self.model is not None and (self.phase is None or self.tokens is None):
            raise ValueError("a model workload needs phase and tokens")
        return self


class SweepSpec(pyd.BaseModel):
    """A sweep file: architecture grid × dataflows × knob grid × workloads."""

    model_config = Strict
    name: str = ""
    description: str = ""
    base_arch: str
    engine: Literal["des", "twin"] = "des"
    grid: dict[str, Values] = {}
    zip: list[dict[str, Values]] = []
    tie: dict[str, str] = {}
    dataflows: list[str] = pyd.Field(min_length=1)
    knobs: dict[str, dict[str, Values]] = {}
    workloads: list[WorkloadSpec] = pyd.Field(min_length=1)
    baseline: str | None = None
    heatmap: list[str] | None = pyd.Field(None, min_length=2, max_length=2)

    @pyd.field_validator("dataflows")
    @classmethod
    def _each_once(cls, flows: list[str]) -> list[str]:
        twice = sorted({f for f in flows if flows.count(f) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(twice)} more than once")
        return flows

    @pyd.field_validator("heatmap")
    @classmethod
    def _two_different_axes(cls, axes: list[str] | None) -> list[str] | None:
        if axes is not None and axes[0] == axes[1]:
            raise ValueError(f"needs two different parameters, got {axes[0]!r} twice")
        return axes


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file with its base architecture file (parsed and hashed)."""

    path: Path
    spec: SweepSpec
    base: dict  # the base architecture file, parsed
    base_sha256: str
    axes: tuple[Axis, ...]

    @property
    def name(self) -> str:
        """The sweep's name (its file's stem when it has none)."""
        return self.spec.name or self.path.stem


def load_spec(path: str | Path) -> Sweep:
    """Parse and validate a sweep file and count its grid; every problem is one
    :class:`UserInputError`."""
    path, src = resources.resolve("sweep", path), str(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise UserInputError(src, "a sweep file is a mapping (base_arch:, dataflows:, "
                             f"workloads:, ...), got {got}")  # fmt: skip
    try:
        spec = SweepSpec.model_validate(data)
    except pyd.ValidationError as err:
        raise user_error_from_validation(err, src) from None
    axes: list[Axis] = [((p,), tuple((v,) for v in vs)) for p, vs in spec.grid.items()]
    for i, group in enumerate(spec.zip):
        if len({len(v) for v in group.values()}) != 1:
            raise UserInputError(src, "lists of a zip group differ in length", f"zip.{i}")
        axes.append((tuple(group), tuple(zip(*group.values()))))
    swept = [p for paths, _ in axes for p in paths]
    if len(set(swept)) != len(swept):
        raise UserInputError(src, "a parameter appears in more than one axis", "grid")
    for target, source in spec.tie.items():
        if target in swept:
            raise UserInputError(src, f"{target} is swept already; tie a parameter that is not",
                                 f"tie.{target}")  # fmt: skip
        if source not in swept:
            raise UserInputError(src, f"{source!r} is not a swept parameter (grid or zip: "
                                 f"{swept})", f"tie.{target}")  # fmt: skip
    check_grid_size(spec, axes, src)  # before the base architecture is even read
    arch_path = resolve_arch_path(spec.base_arch)
    load_arch(arch_path)  # a bad base architecture is reported against its own file
    raw = arch_path.read_bytes()
    base = load_yaml_text(raw.decode("utf-8"), str(arch_path))
    return Sweep(path, spec, base, hashlib.sha256(raw).hexdigest(), tuple(axes))
