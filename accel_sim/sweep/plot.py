"""The sweep's plots, drawn on :class:`matplotlib.figure.Figure` objects (no pyplot state).

* ``pareto.png``: time vs energy, one panel per workload (at most :data:`MAX_PANELS`), each
  variant a colour, the Pareto front circled. Every panel uses the same scale on both axes — log
  when some panel spans more than a decade, else linear — and units chosen for the figure
  (time in ns/µs/ms/s, energy in pJ/nJ/µJ/mJ/J), without offset text: on log
  axes the smallest value reads ≥ 1, on linear axes the largest reads in [1, 1000).
* ``heatmap.png``: speedup over two parameters (grid paths, ``workload`` or ``variant``), one
  panel per non-baseline variant; cells are geometric means over every other parameter. All
  panels share one colour scale (and one colorbar), centred on 1×. Axis labels are human names
  with units (``L2 capacity (MiB)``).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps, ticker
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from accel_sim.sweep.labels import ENERGY_PJ, SECONDS, param_label, pick_unit, tick_text

MAX_PANELS = 6
DECADE = 10.0  # a panel spanning more than this ratio puts every panel on log axes


def _grid(n: int, width: float, height: float,
          layout: str | None = None) -> tuple[Figure, list[Any]]:  # fmt: skip
    """A figure with ``n`` visible panels, at most 3 per row; sizes in inches."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout=layout)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _span(values: pd.Series) -> float:
    """max / min of the positive values (1 when there are none)."""
    positive = values[values > 0]
    return float(positive.max() / positive.min()) if len(positive) else 1.0


def _plain(value: float, _pos: Any = None) -> str:
    return f"{value:g}"


def _format_axis(axis: Any, log: bool, low: float, high: float) -> None:
    """Plain numbers on an axis (no offset, no 1e9 text); log ticks at 1-2-5 per decade, or
    a few evenly spaced ones when the range is under a decade."""
    if not log:
        formatter = ticker.ScalarFormatter(useOffset=False)
        formatter.set_scientific(False)
        axis.set_major_formatter(formatter)
        return
    if low > 0 and high / low >= DECADE:
        axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        ticks = ticker.MaxNLocator(nbins=4).tick_values(low, high)
        axis.set_major_locator(ticker.FixedLocator([t for t in ticks if low <= t <= high]))
    axis.set_minor_locator(ticker.NullLocator())
    axis.set_major_formatter(ticker.FuncFormatter(_plain))


def pareto_figure(df: pd.DataFrame, title: str) -> Figure:
    """Time vs energy per workload, each variant a colour, the Pareto front drawn over it (time,
    not cycles: a sweep may change the clock)."""
    workloads = list(dict.fromkeys(df["workload"]))
    shown = workloads[:MAX_PANELS]
    fig, axes = _grid(len(shown), 5.0, 4.0)
    variants = list(dict.fromkeys(df["variant"]))
    colors = {v: colormaps["tab10"](i % 10) for i, v in enumerate(variants)}
    panels = [df[df["workload"] == w] for w in shown]
    log = any(max(_span(p["time_s"]), _span(p["energy_pj"])) > DECADE for p in panels)
    # the unit: the smallest value ≥ 1 on log axes, the largest < 1000 (when it can) on linear
    pick = (lambda v: v[v > 0].min() if (v > 0).any() else 1.0) if log else (lambda v: v.max())
    x_div, x_unit = pick_unit([pick(df["time_s"])], SECONDS)
    y_div, y_unit = pick_unit([pick(df["energy_pj"])], ENERGY_PJ)
    for ax, workload, sub in zip(axes, shown, panels):
        x, y = sub["time_s"] / x_div, sub["energy_pj"] / y_div
        for variant in dict.fromkeys(sub["variant"]):
            mine = sub["variant"] == variant
            ax.scatter(x[mine], y[mine], s=18, alpha=0.6, color=colors[variant], label=variant)
        front = sub["pareto"].to_numpy(bool)
        order = np.argsort(x.to_numpy(float)[front], kind="stable")
        fx, fy = x.to_numpy(float)[front][order], y.to_numpy(float)[front][order]
        ax.plot(fx, fy, "k-", drawstyle="steps-post", lw=1, zorder=3)
        ax.scatter(fx, fy, s=50, facecolors="none", edgecolors="k", linewidths=1.5, zorder=4,
                   label="Pareto front")  # fmt: skip
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        _format_axis(ax.xaxis, log, float(x.min()), float(x.max()))
        _format_axis(ax.yaxis, log, float(y.min()), float(y.max()))
        ax.set(title=str(workload), ylabel=f"energy ({y_unit})", xlabel=f"time ({x_unit})")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    more = f" (first {len(shown)} of {len(workloads)})" if len(workloads) > len(shown) else ""
    fig.suptitle(f"{title}: time vs energy per workload, Pareto front circled{more}")
    fig.tight_layout()
    return fig


def _geomean(values: pd.Series) -> float:
    values = values.dropna()
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def _order(values: pd.Series) -> list:
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:
        return unique


def heatmap_figure(df: pd.DataFrame, axes: list[str], baseline: str, title: str,
                   base_arch: dict | None = None) -> Figure:  # fmt: skip
    """Speedup over ``baseline`` on ``axes = [x, y]``; geometric mean over other parameters.
    ``base_arch`` (the parsed base architecture file) names memory levels given by index."""
    x, y = axes
    if "variant" in axes:
        panels = [("all variants", df)]
    else:
        names = [v for v in dict.fromkeys(df["variant"]) if v != baseline] or [baseline]
        panels = [(v, df[df["variant"] == v]) for v in names[:MAX_PANELS]]
    x_label, x_div = param_label(x, list(df[x]), base_arch)
    y_label, y_div = param_label(y, list(df[y]), base_arch)
    tables = []
    for _, sub in panels:
        table = sub.groupby([y, x], sort=False)["speedup"].apply(_geomean).unstack(x)
        tables.append(table.reindex(index=_order(sub[y]), columns=_order(sub[x])))
    # one colour scale for every panel (one colour = one speedup), centred on 1×
    finite = np.concatenate([t.to_numpy(float).ravel() for t in tables])
    finite = finite[np.isfinite(finite)]
    low, high = (finite.min(), finite.max()) if finite.size else (1.0, 1.0)
    norm = TwoSlopeNorm(1.0, min(low, 0.99), max(high, 1.01))
    fig, axs = _grid(len(panels), 5.5, 4.5, layout="constrained")
    image = None
    for ax, (name, _), table in zip(axs, panels, tables):
        values = table.to_numpy(float)
        image = ax.imshow(values, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
        for (i, j), value in np.ndenumerate(values):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(table.columns)), [tick_text(c, x_div) for c in table.columns],
                      rotation=30)  # fmt: skip
        ax.set_yticks(range(len(table.index)), [tick_text(c, y_div) for c in table.index])
        ax.set(xlabel=x_label, ylabel=y_label, title=str(name))
    bar = fig.colorbar(image, ax=axs[: len(panels)], label=f"speedup over {baseline} (×)")
    # ticks on both sides of 1× (the two halves have their own scales)
    steps = [1, 2, 5, 10]
    ticks = [1.0]
    if high > 1.0:
        ticks += [t for t in ticker.MaxNLocator(nbins=6, steps=steps).tick_values(1.0, norm.vmax)
                  if 1.0 < t <= norm.vmax]  # fmt: skip
    if low < 1.0:
        ticks += [t for t in ticker.MaxNLocator(nbins=3, steps=steps).tick_values(norm.vmin, 1.0)
                  if norm.vmin <= t < 1.0]  # fmt: skip
    bar.set_ticks(sorted({round(t, 6) for t in ticks}))
    text = (f"{title}: speedup over {baseline} (geometric mean over the other parameters; one "
            "colour scale)")  # fmt: skip
    # wrapped to the figure (one 5.5-inch panel holds ~60 characters of the title's font)
    fig.suptitle(textwrap.fill(text, max(40, int(11 * fig.get_figwidth()))))
    return fig


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as PNG (110 dpi) atomically."""
    from accel_sim.report.io import _atomic_write

    path = Path(path)
    _atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return path
