"""``accel-sim trace stats FILE``: outlier statistics of every GEMM of a trace or 2-D array.

Accepted inputs: a compact trace directory (its stored statistics), a full trace directory
(``gemms.csv`` + ``X_<i>.npy``; computed now), an ``.npz`` of float arrays or a single ``.npy``
(each 2-D array is an activation X).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import parse_dim
from accel_sim.workload.npio import load_arrays, load_npy
from accel_sim.workload.stats_ops import tensor_stats

SUMMARY_KEYS = ("shape", "absmax", "mean_abs", "osc_threshold", "clustering_density",
                "outlier_channels", "int16_hi_zero_fraction", "osc_table_channels",
                "osc_table_hit_rate", "int16_hi_zero_fraction_w")  # fmt: skip


def array_stats(path: Path) -> list[dict[str, Any]]:
    arrays = load_arrays(path)  # sizes checked before allocation (accel_sim.workload.npio)
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
    from accel_sim.report.io import read_csv_rows
    from accel_sim.workload.trace import load_trace

    if (path / "stats.json").is_file():
        trace = load_trace(path)
        return [
            {"name": g.name, "kind": g.kind, "layer": g.layer, "M": g.M, "K": g.K, "N": g.N,
             **{k: s[k] for k in SUMMARY_KEYS if k in s}}
            for g, s in zip(trace.gemms, trace.stats)
        ]  # fmt: skip
    csv_path = path / "gemms.csv"
    out = []
    rows = read_csv_rows(csv_path, ["index", "name", "kind", "M", "K", "N"])
    for number, row in enumerate(rows, start=1):
        where = f"{csv_path} (data row {number})"
        index = row["index"].strip()
        if not index.isascii() or not index.isdigit():
            raise UserInputError(where, f"index={row['index']!r} must be a non-negative integer",
                                 "index")  # fmt: skip
        dims = {d: parse_dim(row[d], d, where) for d in "MKN"}
        x_path = path / f"X_{int(index)}.npy"
        X = load_npy(x_path)
        out.append({"name": row["name"], "kind": row["kind"], **dims,
                    **tensor_stats(X, source=str(x_path))})  # fmt: skip
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
