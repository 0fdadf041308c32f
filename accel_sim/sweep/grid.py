"""The grid: its size (counted, never materialised) and the architecture at each grid step.

A sweep may have at most :data:`MAX_POINTS` points (architecture steps × dataflow variants ×
workloads). The limit keeps expansion, the point files and the table within a few GB and within
hours on a laptop; a bigger study is several sweep files (each resumable on its own).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from accel_sim.errors import UserInputError

if TYPE_CHECKING:
    from accel_sim.sweep.spec import Axis, SweepSpec

MAX_POINTS = 100_000  # points per sweep file (see the module docstring)


def grid_size(spec: SweepSpec, axes: Sequence[Axis]) -> tuple[int, int, int]:
    """(architecture steps, dataflow variants, workloads), by arithmetic alone."""
    archs = math.prod(len(values) for _, values in axes)
    variants = sum(math.prod(len(v) for v in spec.knobs.get(name, {}).values())
                   for name in spec.dataflows)  # fmt: skip
    return archs, variants, len(spec.workloads)


def check_grid_size(spec: SweepSpec, axes: Sequence[Axis], source: str) -> int:
    """The number of points, or one :class:`UserInputError` when it exceeds :data:`MAX_POINTS`."""
    archs, variants, workloads = grid_size(spec, axes)
    total = archs * variants * workloads
    if total > MAX_POINTS:
        raise UserInputError(source, f"the grid has {total:,} points ({archs:,} architectures × "
                             f"{variants:,} dataflow variants × {workloads:,} workloads), over the "
                             f"limit of {MAX_POINTS:,} per sweep; split it into several sweep "
                             "files", "grid")  # fmt: skip
    return total


def set_path(arch: dict, path: str, value: Any, source: str) -> None:
    """``compute.rates.fp4`` / ``memory.HBM.read_bytes_per_cycle`` / ``memory.0.…`` := value."""
    *parents, leaf = path.split(".")
    node: Any = arch
    for part in parents:
        if isinstance(node, list):  # memory levels: by name or by index
            names = [m.get("name") for m in node]
            index = int(part) if part.isdigit() else names.index(part) if part in names else None
            if index is None or index >= len(node):
                raise UserInputError(source, f"no level {part!r}; levels: {names}", path)
            node = node[index]
        elif isinstance(node.get(part), dict | list):
            node = node[part]
        else:
            raise UserInputError(source, f"{part!r} is not a section of the architecture", path)
    if not isinstance(node, dict):
        raise UserInputError(source, "does not name an architecture field", path)
    node[leaf] = value


def arch_steps(base: dict, axes: Sequence[Axis], tie: dict[str, str],
               source: str) -> Iterator[tuple[dict[str, Any], dict]]:  # fmt: skip
    """(swept parameters, architecture dict) at every grid step, in a fixed order."""
    for combo in itertools.product(*(values for _, values in axes)):
        params = {p: v for (paths, _), vals in zip(axes, combo) for p, v in zip(paths, vals)}
        params |= {target: params[src] for target, src in tie.items()}
        arch = copy.deepcopy(base)
        for name, value in params.items():
            set_path(arch, name, value, source)
        yield params, arch
