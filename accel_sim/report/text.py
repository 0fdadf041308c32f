"""Human-readable reports for the terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from accel_sim.api import SimResult

if TYPE_CHECKING:  # pandas loads on first use (worker processes fork without it)
    import pandas as pd

_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"),
                (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))  # fmt: skip


def si(value: float, unit: str) -> str:
    """``value`` in ``unit`` with the SI prefix that puts it in [1, 1000): 9.56e-3 s → '9.560 ms'.

    Zero prints as ``0 <unit>``; values below the smallest prefix keep it (femto). Seconds take
    no prefix above 1 (``Ms`` reads like ms): 831.3e6 s → '8.313e+08 s'."""
    if value == 0:
        return f"0 {unit}"
    if unit == "s" and abs(value) >= 1:
        return f"{value:.3f} s" if abs(value) < 1e4 else f"{value:.3e} s"
    factor, prefix = _SI_PREFIXES[-1]
    for factor, prefix in _SI_PREFIXES:  # noqa: B007 - the first prefix that fits is kept
        if abs(value) >= factor:
            break
    return f"{value / factor:.3f} {prefix}{unit}"


def single_report(r: SimResult) -> str:
    """The detailed report of one GEMM under one dataflow."""
    lines = [
        f"accel-sim · {r.arch} · {r.dataflow} · GEMM {r.gemm} (M={r.M}, K={r.K}, N={r.N}"
        + (f", ×{r.count}" if r.count > 1 else "")
        + ")",
        "",
        f"  cycles          {r.cycles:>16,}",
        f"  time            {si(r.time_s, 's'):>16}",
        f"  compute cycles  {r.compute_cycles:>16,}",
        f"  stall cycles    {r.stall_cycles:>16,}",
        f"  utilization     {r.utilization:>16.1%}",
        f"  MACs            {r.macs:>16,}",
        f"  energy          {si(r.energy_pj * 1e-12, 'J'):>16}",
        f"  energy / MAC    {si(r.pj_per_mac * 1e-12, 'J'):>16}",
    ]
    lines += _schedule_lines(r)
    if r.stalls:
        lines += ["", "  stall cycles by cause"]
        for cause, cycles in sorted(r.stalls.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {cause:<28}{cycles:>16,}  {cycles / r.cycles:6.1%}")
    lines += ["", "  energy by component (pJ)                        share   source"]
    for comp, pj in sorted(r.energy_breakdown_pj.items(), key=lambda kv: -kv[1]):
        source = r.energy_sources.get(comp, "").split(" — ")[-1]
        lines.append(f"    {comp:<20}{pj:>20,.0f}  {pj / r.energy_pj:6.1%}   {source[:60]}")
    for note in r.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _schedule_lines(r: SimResult) -> list[str]:
    """How the plan ran: overlap on or off, each unit's busy cycles, the cycles with two or more
    units busy, the critical path and each operation's place (cycles)."""
    how = ("on: the plan's ops as a graph on concurrent units, row block by row block"
           if r.overlap else "off: ops one after another")  # fmt: skip
    busy = " · ".join(f"{unit} {cycles:,} ({cycles / r.cycles:.1%})"
                      for unit, cycles in r.units_busy.items() if r.cycles)  # fmt: skip
    lines = ["", f"  overlap         {how}",
             f"  units busy      {busy}",
             f"  overlapped      {r.overlap_cycles:>16,}  cycles with two or more units busy",
             f"  in series       {r.sequential_cycles:>16,}  cycles, the same ops one by one",
             f"  critical path   {' > '.join(r.critical_path)}"]  # fmt: skip
    if len(r.ops) > 1:
        lines += ["", "  operation                     unit            alone        busy"
                      "    critical        start → end"]  # fmt: skip
        for op in r.ops:
            lines.append(f"    {op['name']:<28}{op['unit']:<10}{op['alone_cycles']:>12,}"
                         f"{op['busy_cycles']:>12,}{op['cycles']:>12,}  "
                         f"{op['start_cycle']:>12,} → {op['end_cycle']:,}")  # fmt: skip
    return lines


def _missing(value: Any) -> bool:
    try:
        import pandas as pd

        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def count_text(value: Any) -> str:
    """A count (cycles, MACs) with thousands separators: 4402646 → '4,402,646'; '-' if missing."""
    if _missing(value):
        return "-"
    exact = isinstance(value, (int, np.integer)) or float(value).is_integer()
    return f"{int(value) if exact else value:,}"  # ints exact (cycles can exceed 2**53)


def seconds_text(value: Any) -> str:
    """Seconds with an SI prefix below 1000 s (2.446e-3 → '2.446 ms'), whole seconds with
    thousands separators above (9.42e6 → '9,421,934 s', not '9.422 Ms'); '-' if missing."""
    if _missing(value):
        return "-"
    return f"{float(value):,.0f} s" if abs(float(value)) >= 1000 else si(float(value), "s")


def pj_text(value: Any) -> str:
    """Picojoules shown in joules with an SI prefix: 5.3e9 → '5.301 mJ'; '-' if missing."""
    return "-" if _missing(value) else si(float(value) * 1e-12, "J")


def ratio_text(value: Any) -> str:
    """A speedup: 1.2345 → '1.234×'; '-' if missing."""
    return "-" if _missing(value) else f"{float(value):.3f}×"


def percent_text(value: Any) -> str:
    """A fraction as a percentage: 0.0432 → '4.3%'; '-' if missing."""
    return "-" if _missing(value) else f"{float(value):.1%}"


def error_text(value: Any) -> str:
    """A relative error: 0.01234 → '0.0123'; '-' if missing."""
    return "-" if _missing(value) else f"{float(value):.4f}"


Column = tuple[str, str, "Callable[[Any], str] | None"]


def display_table(df: pd.DataFrame, columns: list[Column]) -> str:
    """``df`` as text for a terminal: ``columns`` = (column, header, formatter) for those
    present in ``df`` (a formatter of None prints the value as it is); values right-aligned.
    Machine outputs (JSON, CSV, Parquet) keep ``df``'s own columns and base units."""
    import pandas as pd

    view = pd.DataFrame(index=range(len(df)))
    for column, header, fmt in columns:
        if column in df.columns:
            values = df[column].tolist()
            view[header] = [fmt(v) for v in values] if fmt else values
    return view.to_string(index=False)


def table_report(df: pd.DataFrame, baseline: str | None = "w8a8") -> str:
    """A compact table of many runs (time and energy with SI prefixes, cycles with thousands
    separators), with speedup over ``baseline`` when it is present."""
    vs = f"vs {baseline}" if baseline else "speedup"
    columns = [("gemm", "gemm", None), ("dataflow", "dataflow", None), ("M", "M", None),
               ("K", "K", None), ("N", "N", None), ("cycles", "cycles", count_text),
               ("time_s", "time", seconds_text),
               ("compute_cycles", "compute cycles", count_text),
               ("stall_cycles", "stall cycles", count_text),
               ("utilization", "utilization", percent_text),
               ("energy_pj", "energy", pj_text), ("pj_per_mac", "energy/MAC", pj_text),
               (f"speedup_vs_{baseline or 'w8a8'}", vs, ratio_text),
               ("rel_error", "rel. error", error_text),
               ("busy_matrix_cycles", "matrix busy", count_text),
               ("busy_vector_cycles", "vector busy", count_text),
               ("overlap_cycles", "overlapped", count_text),
               ("critical_path", "critical path", None)]  # fmt: skip
    return display_table(df, columns)


def add_speedup(df: pd.DataFrame, baseline: str = "w8a8") -> pd.DataFrame:
    """Add ``speedup_vs_<baseline>`` = baseline cycles / cycles of the same GEMM."""
    if baseline not in set(df["dataflow"]):
        return df
    # the same GEMM may appear several times: pair its n-th row under each dataflow with the n-th
    # baseline row (a join on shape alone would multiply the rows)
    key = ["gemm", "M", "K", "N"]
    occurrence = df.groupby(key + ["dataflow"], sort=False).cumcount().rename("_nth")
    tagged = df.assign(_nth=occurrence.to_numpy())
    base = tagged[tagged["dataflow"] == baseline][key + ["_nth", "cycles"]]
    base = base.rename(columns={"cycles": "_base"})
    out = tagged.merge(base, on=key + ["_nth"], how="left")
    out[f"speedup_vs_{baseline}"] = out["_base"] / out["cycles"]
    return out.drop(columns=["_base", "_nth"])


def totals(df: pd.DataFrame) -> pd.DataFrame:
    """Per-dataflow totals over all GEMMs (each row's cycles already cover its ``count``)."""
    weighted = df.assign(total_cycles=df["cycles"], total_energy_pj=df["energy_pj"])
    out = weighted.groupby("dataflow", sort=False)[["total_cycles", "total_energy_pj"]].sum()
    if "rel_error" in df.columns:
        # MAC-weighted mean of the per-GEMM relative errors (None where the trace has none)
        err = df.dropna(subset=["rel_error"])
        weights = err["macs"].astype(float)
        mean = (err["rel_error"] * weights).groupby(err["dataflow"]).sum() / weights.groupby(
            err["dataflow"]
        ).sum()
        out["mean_rel_error"] = mean.reindex(out.index)
    if "w8a8" in out.index:
        out["speedup_vs_w8a8"] = out.loc["w8a8", "total_cycles"] / out["total_cycles"]
    return out.reset_index()


def summary_report(df: pd.DataFrame, clock_hz: float, baseline: str = "w8a8") -> str:
    """Totals per dataflow (cycles, time, energy, speedup over ``baseline``, MAC-weighted mean
    relative error) as a short table: what a user reads first."""
    tot = totals(df)
    tot["time_s"] = tot["total_cycles"] / clock_hz
    columns = [("dataflow", "dataflow", None), ("total_cycles", "cycles", count_text),
               ("time_s", "time", seconds_text), ("total_energy_pj", "energy", pj_text),
               (f"speedup_vs_{baseline}", f"vs {baseline}", ratio_text),
               ("mean_rel_error", "rel. error", error_text)]  # fmt: skip
    text = display_table(tot, columns)
    if f"speedup_vs_{baseline}" not in tot.columns:
        text += f"\n(no {baseline} row: speedups need --dataflow {baseline})"
    return text
