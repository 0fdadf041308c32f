"""Compact traces: the GEMMs of a real model run and the statistics the dataflows need.

A compact trace is a directory (``traces/smollm2-135m/``) with

* ``manifest.json`` — model, packages + versions + sha256, token count, the exact commands, and
  the grid of knobs the statistics cover;
* ``gemms.csv`` — ``index,layer,name,kind,M,K,N`` one row per Linear call;
* ``stats.json`` — per GEMM: the statistics of its real X and W over the knob grid, and the
  relative output error of each dataflow computed with real formats (``quant/reference.py``);
* ``samples.npz`` — a few float16 sample tensors (``X_<index>``, ``W_<index>``) for tests.

Full traces (every X and W as ``.npy``) are written by ``accel-sim trace capture`` outside git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from accel_sim import resources
from accel_sim.errors import UserInputError
from accel_sim.report.io import read_csv_checked, read_json_file
from accel_sim.workload.gemm import Gemm, parse_dim
from accel_sim.workload.npio import load_npz

TRACE_DIR = resources.data_dir("trace")  # shipped compact traces (see accel_sim.resources)
GEMM_COLUMNS = ["index", "layer", "name", "kind", "M", "K", "N"]


@dataclass(frozen=True)
class Trace:
    """A loaded compact trace."""

    path: Path
    manifest: dict[str, Any]
    gemms: tuple[Gemm, ...]
    stats: tuple[dict[str, Any], ...]

    @property
    def name(self) -> str:
        return self.manifest.get("model", self.path.name)

    def stats_for(self, gemm: Gemm) -> dict[str, Any] | None:
        return self._by_name.get(gemm.name)

    @cached_property
    def _by_name(self) -> dict[str, dict[str, Any]]:
        return {g.name: s for g, s in zip(self.gemms, self.stats)}

    def samples(self) -> dict[str, np.ndarray]:
        path = self.path / "samples.npz"
        if not path.is_file():
            raise UserInputError(str(path), "this trace has no sample tensors")
        return load_npz(path)


def resolve_trace_path(name_or_path: str | Path) -> Path:
    return resources.resolve("trace", name_or_path)


_LAYER = re.compile(r"-?[0-9]{1,9}")


def _parse_layer(text: str, source: str) -> int:
    """A layer index: an ASCII decimal integer >= -1 (-1 = not applicable)."""
    value = text.strip()
    if not _LAYER.fullmatch(value) or int(value) < -1:
        raise UserInputError(source, f"layer={text!r} must be an integer >= -1", "layer")
    return int(value)


def _gemms(path: Path) -> list[Gemm]:
    """The GEMMs of ``gemms.csv``; M, K, N strict ASCII integers (``16.7`` is not truncated)."""
    csv_path = path / "gemms.csv"
    df = read_csv_checked(csv_path, GEMM_COLUMNS, dtype=str)
    gemms = []
    for row_number, row in enumerate(df.itertuples(index=False), start=1):
        where = f"{csv_path} (data row {row_number})"
        dims = [parse_dim(getattr(row, d), d, where) for d in "MKN"]
        gemms.append(Gemm(*dims, name=str(row.name), kind=str(row.kind).strip(),
                          layer=_parse_layer(str(row.layer), where)))  # fmt: skip
    names = [g.name for g in gemms]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserInputError(str(csv_path), f"GEMM name {dup!r} appears twice; names key the "
                             "statistics and must be unique", "name")  # fmt: skip
    return gemms


def load_trace(name_or_path: str | Path) -> Trace:
    """Load a compact trace by shipped name (``smollm2-135m``) or directory path.

    Checked here, before any work: ``manifest.json`` is a JSON object; ``gemms.csv`` has at least
    one row of strict integers; ``stats.json`` is an object whose ``gemms`` list has one object
    per GEMM; no JSON file holds NaN or Infinity."""
    path = resolve_trace_path(name_or_path)
    manifest = read_json_file(path / "manifest.json", "file (not a compact trace?)")
    if not isinstance(manifest, dict):
        raise UserInputError(str(path / "manifest.json"), "expected a JSON object at the top "
                             f"level, got {type(manifest).__name__}")  # fmt: skip
    gemms = _gemms(path)
    stats_path = path / "stats.json"
    stats = read_json_file(stats_path, "file (not a compact trace?)")
    if not isinstance(stats, dict):
        raise UserInputError(str(stats_path), "expected a JSON object at the top level, got "
                             f"{type(stats).__name__}")  # fmt: skip
    per_gemm = stats.get("gemms")
    if not isinstance(per_gemm, list) or len(per_gemm) != len(gemms):
        raise UserInputError(str(stats_path), f"expected a list with {len(gemms)} entries (one "
                             "per GEMM of gemms.csv)", "gemms")  # fmt: skip
    for i, entry in enumerate(per_gemm):
        if not isinstance(entry, dict):
            raise UserInputError(str(stats_path), f"expected an object, got "
                                 f"{type(entry).__name__}", f"gemms[{i}]")  # fmt: skip
    return Trace(path, manifest, tuple(gemms), tuple(per_gemm))
