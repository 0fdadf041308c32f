"""``accel-sim trace stats FILE``: outlier statistics of every GEMM of a trace or 2-D array.

Accepted inputs: a compact trace directory (its stored statistics), a full trace directory
(``gemms.csv`` + ``X_<i>.npy``; computed now), an ``.npz`` of float arrays or a single ``.npy``
(each 2-D array is an activation X).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.workload.stats_ops import tensor_stats

SUMMARY_KEYS = ("shape", "absmax", "mean_abs", "osc_threshold", "clustering_density",
                "outlier_channels", "int16_hi_zero_fraction", "osc_table_channels",
                "osc_table_hit_rate", "int16_hi_zero_fraction_w")  # fmt: skip


def _load_arrays(path: Path) -> dict[str, np.ndarray]:
    try:
        if path.suffix == ".npy":
            return {path.stem: np.load(path, allow_pickle=False)}
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise UserInputError(str(path), f"not a readable .npy/.npz file (truncated?): {err}") \
            from None  # fmt: skip


def array_stats(path: Path) -> list[dict[str, Any]]:
    arrays = _load_arrays(path)
    if not arrays:
        raise UserInputError(str(path), "contains no arrays")
    out = []
    for name, X in arrays.items():
        if X.ndim != 2:
            raise UserInputError(str(path), f"array {name!r} has shape {X.shape}; expected 2-D "
                                 "activations (tokens × channels)", name)  # fmt: skip
        if not np.issubdtype(X.dtype, np.floating):
            raise UserInputError(str(path), f"array {name!r} has dtype {X.dtype}; expected float",
                                 name)  # fmt: skip
        out.append({"name": name, **tensor_stats(X, source=f"{path}:{name}")})
    return out


def trace_dir_stats(path: Path) -> list[dict[str, Any]]:
    from accel_sim.report.io import read_csv_checked
    from accel_sim.workload.trace import load_trace

    if (path / "stats.json").is_file():
        trace = load_trace(path)
        return [
            {"name": g.name, "kind": g.kind, "layer": g.layer, "M": g.M, "K": g.K, "N": g.N,
             **{k: s[k] for k in SUMMARY_KEYS if k in s}}
            for g, s in zip(trace.gemms, trace.stats)
        ]  # fmt: skip
    df = read_csv_checked(path / "gemms.csv", ["index", "name", "kind", "M", "K", "N"])
    out = []
    for row in df.itertuples(index=False):
        x_path = path / f"X_{row.index}.npy"
        X = _load_arrays(x_path)[x_path.stem]
        out.append({"name": row.name, "kind": row.kind, "M": int(row.M), "K": int(row.K),
                    "N": int(row.N), **tensor_stats(X, source=str(x_path))})  # fmt: skip
    return out


def trace_stats(path: str | Path) -> list[dict[str, Any]]:
    """One statistics object per GEMM (trace directory) or per 2-D array (.npz/.npy)."""
    from accel_sim.workload.trace import resolve_trace_path

    p = Path(path)
    if p.suffix in (".npz", ".npy"):
        if not p.is_file():
            raise UserInputError(str(p), "file not found")
        return array_stats(p)
    return trace_dir_stats(resolve_trace_path(path))
