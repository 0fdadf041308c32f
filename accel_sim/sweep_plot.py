"""Results of a sweep (``sweep.py``): point files, the final table and its plots (Agg backend).

* ``points/<hash>.parquet``: one row per finished point, written atomically (temp + rename).
* ``speedup`` = baseline cycles / cycles, the baseline being the same workload on the same
  architecture point under the baseline variant (a dataflow, or ``dataflow[knob=value]``).
* ``pareto`` marks, per workload, the points no other point beats on both cycles and energy.
* ``pareto.png``: cycles vs energy, one panel per workload, the front highlighted.
* ``heatmap.png``: speedup over two parameters (grid paths, ``workload`` or ``variant``), one panel
  per non-baseline variant; cells are geometric means over every other parameter.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from accel_sim.errors import UserInputError

MAX_PANELS = 6


def point_row(results: list) -> dict:
    """One point's metrics: its GEMMs' :class:`SimResult` summed in order (deterministic)."""
    row: dict = {"gemms": len(results)}
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


def pending(points: list, points_dir: Path) -> list:
    """Points without a result file; removes temp files a killed run left behind."""
    if points_dir.parent.exists() and not points_dir.parent.is_dir():
        raise UserInputError(str(points_dir.parent), "--out must be a directory")
    points_dir.mkdir(parents=True, exist_ok=True)
    for tmp in points_dir.glob(".*.tmp"):  # its rename never happened: the point is not done
        tmp.unlink(missing_ok=True)
    return [p for p in points if not (points_dir / f"{p.hash}.parquet").is_file()]


def write_point(path: Path, row: dict) -> None:
    """Write one point's row atomically: a reader sees the whole file or none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    try:
        pq.write_table(pa.Table.from_pylist([row]), tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_points(points: list, points_dir: Path, metrics: tuple, baseline: str | None,
                keys: list[str]) -> pd.DataFrame:  # fmt: skip
    """The results table from the point files, in expansion order; identifying columns come
    from the current expansion, metrics from the files."""
    import pyarrow.parquet as pq

    rows = []
    for point in points:
        stored = pq.ParquetFile(points_dir / f"{point.hash}.parquet").read().to_pylist()[0]
        kept = {k: v for k, v in stored.items() if k in metrics or k.startswith("energy_")}
        rows.append(point.columns() | kept)
    columns = list(dict.fromkeys(c for row in rows for c in row))
    energy = sorted(c for c in columns if c.startswith("energy_") and c != "energy_pj")
    ids = [c for c in columns if c not in metrics and c not in energy]
    df = pd.DataFrame({c: _column([row.get(c) for row in rows]) for c in columns})
    df[energy] = df[energy].fillna(0.0)  # a component a dataflow does not use costs nothing
    df = df[ids + [c for c in metrics if c in df.columns] + energy]
    return add_pareto(add_speedup(df, baseline, keys))


def _column(values: list):
    """One type per column; knobs of some dataflows only keep ints as (nullable) ints."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int} and None in values:
        return pd.array(values, dtype="Int64")
    if len(kinds) > 1 and not kinds <= {int, float}:
        return [None if v is None else str(v) for v in values]
    return values


def check_plots(baseline, heatmap, variants: list[tuple], params, source: str) -> None:
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


def pareto_mask(cycles: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """True where no other point has both fewer-or-equal cycles and less energy."""
    mask = np.zeros(len(cycles), dtype=bool)
    best = math.inf
    for i in np.lexsort((energy, cycles)):  # by cycles, then energy
        if energy[i] < best:
            mask[i], best = True, energy[i]
    return mask


def add_pareto(df: pd.DataFrame) -> pd.DataFrame:
    """Add a boolean ``pareto`` column (front of cycles vs energy within each workload)."""
    mask = pd.Series(False, index=df.index)
    for _, group in df.groupby("workload", sort=False):
        front = pareto_mask(group["cycles"].to_numpy(float), group["energy_pj"].to_numpy(float))
        mask[group.index] = front
    out = df.assign(pareto=mask)
    out.attrs = dict(df.attrs)
    return out


def write_outputs(df: pd.DataFrame, out: Path, heatmap_axes: list[str]) -> None:
    """``results.parquet``, ``results.csv``, ``pareto.png`` and ``heatmap.png`` in ``out``."""
    from accel_sim.report.io import write_table

    write_table(df, out / "results.parquet")
    write_table(df, out / "results.csv")
    plot_pareto(df, out / "pareto.png")
    plot_heatmap(df, out / "heatmap.png", heatmap_axes, df.attrs["baseline"])


def front_report(df: pd.DataFrame) -> str:
    """The Pareto-front rows, as printed by ``accel-sim sweep``."""
    params = [c for c in df.columns if "." in c and not c.startswith("knob.")]
    cols = ["workload", "variant", *params, "cycles", "energy_pj", "speedup"]
    title = f"Pareto front (cycles vs energy, per workload); speedup vs {df.attrs['baseline']}:"
    return title + "\n" + df.loc[df["pareto"], cols].to_string(index=False)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int, plt, width: float = 5.0, height: float = 4.0):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def plot_pareto(df: pd.DataFrame, path: str | Path) -> Path:
    """Cycles vs energy per workload, each variant a colour, the Pareto front drawn over it."""
    plt = _pyplot()
    workloads = list(dict.fromkeys(df["workload"]))
    shown = workloads[:MAX_PANELS]
    fig, axes = _grid(len(shown), plt)
    variants = list(dict.fromkeys(df["variant"]))
    colors = {v: plt.cm.tab10(i % 10) for i, v in enumerate(variants)}
    for ax, workload in zip(axes, shown):
        sub = df[df["workload"] == workload]
        for variant, group in sub.groupby("variant", sort=False):
            ax.scatter(group["cycles"], group["energy_pj"], s=18, alpha=0.6, color=colors[variant],
                       label=variant)  # fmt: skip
        front = sub[sub["pareto"]].sort_values("cycles")
        ax.plot(front["cycles"], front["energy_pj"], "k-", drawstyle="steps-post", lw=1, zorder=3)
        ax.scatter(front["cycles"], front["energy_pj"], s=50, facecolors="none", edgecolors="k",
                   linewidths=1.5, zorder=4, label="Pareto front")  # fmt: skip
        for axis, column in (("x", "cycles"), ("y", "energy_pj")):
            low, high = sub[column].min(), sub[column].max()
            if low > 0 and high / low > 10:
                getattr(ax, f"set_{axis}scale")("log")
                ticks = plt.matplotlib.ticker
                getattr(ax, f"{axis}axis").set_minor_locator(ticks.LogLocator(subs=(2, 5)))
                getattr(ax, f"{axis}axis").set_minor_formatter(ticks.LogFormatterSciNotation(
                    labelOnlyBase=False, minor_thresholds=(math.inf, math.inf)))  # fmt: skip
            else:
                ax.ticklabel_format(axis=axis, style="sci", scilimits=(0, 0))
        ax.set(title=str(workload), xlabel="cycles", ylabel="energy (pJ)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if len(workloads) > len(shown):
        fig.suptitle(f"first {len(shown)} of {len(workloads)} workloads")
    return _save(fig, path, plt)


def _geomean(values: pd.Series) -> float:
    values = values.dropna()
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def plot_heatmap(df: pd.DataFrame, path: str | Path, axes: list[str], baseline: str) -> Path:
    """Speedup over ``baseline`` on ``axes = [x, y]``; geometric mean over other parameters."""
    plt = _pyplot()
    x, y = axes
    if "variant" in axes:
        panels = [("all variants", df)]
    else:
        names = [v for v in dict.fromkeys(df["variant"]) if v != baseline] or [baseline]
        panels = [(v, df[df["variant"] == v]) for v in names[:MAX_PANELS]]
    fig, axs = _grid(len(panels), plt, 5.5, 4.5)
    for ax, (title, sub) in zip(axs, panels):
        table = sub.groupby([y, x], sort=False)["speedup"].apply(_geomean).unstack(x)
        table = table.reindex(index=_order(sub[y]), columns=_order(sub[x]))
        values = table.to_numpy(float)
        finite = values[np.isfinite(values)]
        low, high = (finite.min(), finite.max()) if finite.size else (1.0, 1.0)
        norm = plt.matplotlib.colors.TwoSlopeNorm(1.0, min(low, 0.99), max(high, 1.01))
        image = ax.imshow(values, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
        for (i, j), value in np.ndenumerate(values):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns], rotation=30)
        ax.set_yticks(range(len(table.index)), [str(c) for c in table.index])
        ax.set(xlabel=x, ylabel=y, title=f"{title} vs {baseline}")
        fig.colorbar(image, ax=ax, label="speedup (geomean)")
    return _save(fig, path, plt)


def _order(values: pd.Series) -> list:
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:
        return unique


def _save(fig, path: str | Path, plt) -> Path:
    from accel_sim.report.io import _atomic_write

    path = Path(path)
    fig.tight_layout()
    _atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
    return path
