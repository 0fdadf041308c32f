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
from pydantic import ValidationError

from accel_sim import resources
from accel_sim.errors import UserInputError, user_error_from_validation
from accel_sim.report.io import read_csv_rows, read_json_file
from accel_sim.workload import trace_schema
from accel_sim.workload.gemm import GEMM_KINDS, Gemm, parse_dim
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
    gemms = []
    for row_number, row in enumerate(read_csv_rows(csv_path, GEMM_COLUMNS), start=1):
        where = f"{csv_path} (data row {row_number})"
        dims = [parse_dim(row[d], d, where) for d in "MKN"]
        kind = row["kind"].strip()
        if kind not in GEMM_KINDS:
            raise UserInputError(where, f"unknown kind {kind!r} of GEMM {row['name']!r}; "
                                 f"expected one of {', '.join(k for k in GEMM_KINDS if k)} "
                                 "or empty", "kind")  # fmt: skip
        gemms.append(Gemm(*dims, name=row["name"], kind=kind,
                          layer=_parse_layer(row["layer"], where)))  # fmt: skip
    names = [g.name for g in gemms]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserInputError(str(csv_path), f"GEMM name {dup!r} appears twice; names key the "
                             "statistics and must be unique", "name")  # fmt: skip
    return gemms


def _validated(model: type, data: Any, source: str, **kwargs: Any) -> Any:
    """``model.model_validate(data)``; a problem is one :class:`UserInputError` whose key reads
    ``gemms[3].osc_table_channels.32`` (list items in brackets, as in the NaN check)."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        error = user_error_from_validation(err, source, **kwargs)
        key = re.sub(r"^gemms\.([0-9]+)", r"gemms[\1]", error.key) if error.key else None
        raise UserInputError(error.source, error.message, key) from None


def load_trace(name_or_path: str | Path) -> Trace:
    """Load a compact trace by shipped name (``smollm2-135m``) or directory path.

    Checked here, before any work: ``manifest.json`` is a JSON object with the keys the code
    reads; ``gemms.csv`` has at least one row of strict integers and known kinds; ``stats.json``
    is an object whose ``gemms`` list has one entry per GEMM, each valid against
    :mod:`~accel_sim.workload.trace_schema` (types, ranges, and shape, counts and table keys
    consistent with the GEMM and the grid); no JSON file holds NaN or Infinity."""
    path = resolve_trace_path(name_or_path)
    manifest = read_json_file(path / "manifest.json", "file (not a compact trace?)")
    if not isinstance(manifest, dict):
        raise UserInputError(str(path / "manifest.json"), "expected a JSON object at the top "
                             f"level, got {type(manifest).__name__}")  # fmt: skip
    _validated(trace_schema.Manifest, manifest, str(path / "manifest.json"))
    gemms = _gemms(path)
    expected = manifest.get("gemm_count")
    if isinstance(expected, int) and expected != len(gemms):  # (a cut file: blame the right one)
        raise UserInputError(str(path / "gemms.csv"), f"{len(gemms)} GEMM rows but manifest.json "
                             f"says gemm_count {expected} (truncated or edited?)")  # fmt: skip
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
    checked = _validated(trace_schema.StatsFile, stats, str(stats_path),
                         expected_keys=trace_schema.expected_keys)  # fmt: skip
    for i, (gemm, entry) in enumerate(zip(gemms, per_gemm)):
        trace_schema.check_against(entry, gemm.M, gemm.K, checked.grid, str(stats_path),
                                   f"gemms[{i}]")  # fmt: skip
    return Trace(path, manifest, tuple(gemms), tuple(per_gemm))
