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

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.report.io import read_csv_checked
from accel_sim.workload.gemm import Gemm

TRACE_DIR = Path(__file__).resolve().parents[2] / "traces"
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
        with np.load(path) as data:
            return {k: data[k] for k in data.files}


def resolve_trace_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.is_dir():
        return path
    shipped = TRACE_DIR / str(name_or_path)
    if shipped.is_dir():
        return shipped
    known = sorted(p.name for p in TRACE_DIR.glob("*") if p.is_dir())
    raise UserInputError(str(name_or_path), f"no such trace directory; shipped traces: {known}")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise UserInputError(str(path), "missing file (not a compact trace?)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserInputError(
            str(path), f"malformed or truncated JSON ({err.__class__.__name__})"
        ) from None


def load_trace(name_or_path: str | Path) -> Trace:
    """Load a compact trace by shipped name (``smollm2-135m``) or directory path."""
    path = resolve_trace_path(name_or_path)
    manifest = _read_json(path / "manifest.json")
    df = read_csv_checked(path / "gemms.csv", GEMM_COLUMNS)
    gemms = []
    for row_number, row in enumerate(df.itertuples(index=False), start=2):
        try:
            gemms.append(Gemm(int(row.M), int(row.K), int(row.N), name=str(row.name),
                              kind=str(row.kind), layer=int(row.layer)))  # fmt: skip
        except (TypeError, ValueError) as err:
            raise UserInputError(f"{path / 'gemms.csv'}:{row_number}", f"bad row: {err}") from None
    stats = _read_json(path / "stats.json")
    per_gemm = stats.get("gemms") if isinstance(stats, dict) else None
    if not isinstance(per_gemm, list) or len(per_gemm) != len(gemms):
        raise UserInputError(
            str(path / "stats.json"), f"expected 'gemms' with {len(gemms)} entries (one per GEMM)"
        )
    return Trace(path, manifest, tuple(gemms), tuple(per_gemm))
