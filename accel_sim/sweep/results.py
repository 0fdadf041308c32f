"""A sweep's table: one point's metrics, the table of all points, speedup and the Pareto front.

* ``speedup`` = baseline cycles / cycles, the baseline being the same workload on the same
  architecture point under the baseline variant (a dataflow, or ``dataflow[knob=value]``).
* ``pareto`` marks, per workload, the points no other point beats on both cycles and energy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from accel_sim.errors import UserInputError
from accel_sim.report.text import count_text, display_table, pj_text, ratio_text, seconds_text

# metrics of a point (cycles in clock cycles, time in s, energy in pJ; energy_<component>_pj too)
METRICS = ("gemms", "cycles", "compute_cycles", "stall_cycles", "utilization", "macs", "time_s",
           "energy_pj", "pj_per_mac", "rel_error")  # fmt: skip


def point_row(results: Sequence[Any]) -> dict[str, Any]:
    """One point's metrics: its GEMMs' :class:`SimResult` summed in order (deterministic)."""
    row: dict[str, Any] = {"gemms": len(results)}
    for key in ("cycles", "compute_cycles", "stall_cycles", "macs", "time_s", "energy_pj"):
        row[key] = sum(getattr(r, key) for r in results)
    busy = sum(r.utilization * r.cycles for r in results)
    row["utilization"] = busy / row["cycles"] if row["cycles"] else 0.0
    row["pj_per_mac"] = row["energy_pj"] / row["macs"]
    errs = [(r.extra["rel_error"], r.macs) for r in results if r.extra.get("rel_error") is not None]
    # MAC-weighted mean relative output error over the GEMMs that have one (trace workloads)
    row["rel_error"] = sum(e * m for e, m in errs) / sum(m for _, m in errs) if errs else None
    for comp in sorted({c for r in results for c in r.energy_breakdown_pj}):
        row[f"energy_{comp}_pj"] = sum(r.energy_breakdown_pj.get(comp, 0.0) for r in results)
    return row


def model_point_row(arch, canon: dict[str, Any], dataflow: str, knobs: dict[str, Any],
                    engine: str) -> dict[str, Any]:  # fmt: skip
    """One point's metrics for a model workload: the rows ``accel-sim model`` costs
    (``model_run.simulate_model``, the default trace's statistics by layer kind), summed as
    :func:`point_row` sums GEMMs; ``attention: false`` drops the attention rows. Its energy is
    not broken down by component (the model's rows carry totals only)."""
    from accel_sim.model_run.simulate import simulate_model

    ran = simulate_model(arch, canon["ref"], canon["phase"], canon["tokens"], canon["batch"],
                         canon["kv_len"], dataflows=[dataflow], knobs={dataflow: knobs},
                         extra_prefix_tokens=canon["extra_prefix_tokens"], engine=engine,
                         logits=canon["logits"])  # fmt: skip
    rows = ran.table
    if not canon["attention"]:
        rows = rows[rows["group"] != "attention"]
    row: dict[str, Any] = {"gemms": int((rows["op"] == "gemm").sum())}
    for key in ("cycles", "compute_cycles", "stall_cycles", "macs"):
        row[key] = int(rows[key].sum())
    row["time_s"] = row["cycles"] / arch.clock_hz
    row["energy_pj"] = float(rows["energy_pj"].sum())
    busy = float((rows["utilization"] * rows["cycles"]).sum())
    row["utilization"] = busy / row["cycles"] if row["cycles"] else 0.0
    row["pj_per_mac"] = row["energy_pj"] / row["macs"] if row["macs"] else None
    errs = rows[["rel_error", "macs"]].dropna() if "rel_error" in rows else None
    weight = float(errs["macs"].sum()) if errs is not None else 0.0
    row["rel_error"] = float((errs["rel_error"] * errs["macs"]).sum()) / weight if weight else None
    return row


def build_table(rows: list[dict[str, Any]], baseline: str | None,
                keys: list[str]) -> pd.DataFrame:  # fmt: skip
    """The results table from rows (identifying columns + metrics), in the given order, with
    ``speedup`` over ``baseline`` matched on ``keys`` and the ``pareto`` column."""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    energy = sorted(c for c in columns if c.startswith("energy_") and c != "energy_pj")
    ids = [c for c in columns if c not in METRICS and c not in energy]
    df = pd.DataFrame({c: _column([row.get(c) for row in rows]) for c in columns})
    # a component a dataflow does not use costs nothing (a model workload's row has none: its
    # energy is not broken down, so its components stay empty)
    broken_down = df[energy].notna().any(axis=1)
    df.loc[broken_down, energy] = df.loc[broken_down, energy].fillna(0.0)
    df = df[ids + [c for c in METRICS if c in df.columns] + energy]
    return add_pareto(add_speedup(df, baseline, keys))


def is_metric(column: str) -> bool:
    """True for a metric column (kept from a point file; the rest comes from the expansion)."""
    return column in METRICS or column.startswith("energy_")


def _column(values: list) -> Any:
    """One type per column; knobs of some dataflows only keep ints as (nullable) ints."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int} and None in values:
        return pd.array(values, dtype="Int64")
    if len(kinds) > 1 and not kinds <= {int, float}:
        return [None if v is None else str(v) for v in values]
    return values


def check_plots(baseline: str | None, heatmap: list[str] | None, variants: list[tuple],
                params: list[str], source: str) -> None:  # fmt: skip
    """Fail before any work when ``baseline`` or ``heatmap`` name nothing in the sweep;
    ``variants``: (dataflow, swept knobs, resolved knobs, label) tuples."""
    resolve_baseline([v[3] for v in variants], [v[0] for v in variants], baseline, source)
    for axis in heatmap or []:
        if axis not in [*params, "workload", "variant"]:
            raise UserInputError(source, f"{axis!r} is not a grid parameter, 'workload' or "
                                 "'variant'", "heatmap")  # fmt: skip


def resolve_baseline(variants: list[str], dataflows: list[str], baseline: str | None,
                     source: str = "sweep") -> str:  # fmt: skip
    """The baseline variant label: given as a variant or a dataflow (its first variant)."""
    if baseline is None:
        return variants[0]
    if baseline in variants:
        return baseline
    for variant, flow in zip(variants, dataflows):
        if flow == baseline:
            return variant
    raise UserInputError(source, f"{baseline!r} is not a dataflow or variant of this sweep; "
                         f"variants: {sorted(set(variants))}", "baseline")  # fmt: skip


def add_speedup(df: pd.DataFrame, baseline: str | None, keys: list[str]) -> pd.DataFrame:
    """Add ``speedup`` over ``baseline`` matched on ``keys`` (architecture params + workload)."""
    baseline = resolve_baseline(list(df["variant"]), list(df["dataflow"]), baseline)
    key = pd.Series(list(zip(*(df[k] for k in keys))) if keys else [()] * len(df), index=df.index)
    is_base = df["variant"] == baseline
    ref = dict(zip(key[is_base], df.loc[is_base, "cycles"]))
    df = df.assign(speedup=key.map(ref).astype(float) / df["cycles"])
    df.attrs["baseline"] = baseline
    return df


def pareto_mask(time: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """True where no other point is at least as good in both and better in one (less time or
    less energy): points equal in both are on the front together."""
    mask = np.zeros(len(time), dtype=bool)
    best, last = math.inf, None  # least energy in less time; (time, energy) of the last kept
    order = np.lexsort((energy, time))  # by time, then energy
    for i in order:
        if last is not None and (time[i], energy[i]) == last:
            mask[i] = True  # a tie with a front point
        elif energy[i] < best:
            mask[i], best, last = True, energy[i], (time[i], energy[i])
    return mask


def add_pareto(df: pd.DataFrame) -> pd.DataFrame:
    """Add a boolean ``pareto`` column (front of time vs energy within each workload: time, not
    cycles, since a sweep may change the clock; at one clock the two fronts are the same)."""
    mask = pd.Series(False, index=df.index)
    for _, group in df.groupby("workload", sort=False):
        front = pareto_mask(group["time_s"].to_numpy(float), group["energy_pj"].to_numpy(float))
        mask[group.index] = front
    out = df.assign(pareto=mask)
    out.attrs = dict(df.attrs)
    return out


def front_report(df: pd.DataFrame) -> str:
    """The Pareto-front rows, as printed by ``accel-sim sweep``: time and energy with SI prefixes,
    cycles with thousands separators (the results files keep ``time_s`` and ``energy_pj``)."""
    # the swept architecture parameters: every identifying column but the point's own, the
    # workload's, the dataflow's and the knobs' (top-level ones such as cores too)
    ids = ("point", "point_hash", "workload", "dataflow", "variant", "pareto", "speedup")
    params = [c for c in df.columns if c not in ids and not is_metric(c)
              and not c.startswith("knob.")]  # fmt: skip
    columns = [("workload", "workload", None), ("variant", "variant", None),
               *((p, p, None) for p in params), ("cycles", "cycles", count_text),
               ("time_s", "time", seconds_text), ("energy_pj", "energy", pj_text),
               ("speedup", "speedup", ratio_text)]  # fmt: skip
    title = f"Pareto front (time vs energy, per workload); speedup vs {df.attrs['baseline']}:"
    return title + "\n" + display_table(df.loc[df["pareto"]], columns)
