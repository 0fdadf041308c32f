"""Human-readable reports for the terminal."""

from __future__ import annotations

import pandas as pd

from accel_sim.api import SimResult

_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"),
                (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))  # fmt: skip


def si(value: float, unit: str) -> str:
    """``value`` in ``unit`` with the SI prefix that puts it in [1, 1000): 9.56e-3 s → '9.560 ms'.

    Zero prints as ``0 <unit>``; values below the smallest prefix keep it (femto)."""
    if value == 0:
        return f"0 {unit}"
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
        f"  energy / MAC    {r.pj_per_mac:>13.3f} pJ",
    ]
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


TABLE_COLUMNS = ["gemm", "dataflow", "M", "K", "N", "cycles", "compute_cycles", "stall_cycles",
                 "utilization", "energy_pj", "pj_per_mac"]  # fmt: skip


def table_report(df: pd.DataFrame, baseline: str | None = "w8a8") -> str:
    """A compact table of many runs, with speedup over ``baseline`` when it is present."""
    cols = [c for c in TABLE_COLUMNS if c in df.columns]
    extra = [c for c in ("speedup_vs_w8a8", "rel_error") if c in df.columns]
    view = df[cols + extra].copy()
    view["utilization"] = view["utilization"].map(lambda u: f"{u:.1%}")
    view["energy_pj"] = view["energy_pj"].map(lambda e: f"{e:.4g}")
    view["pj_per_mac"] = view["pj_per_mac"].map(lambda e: f"{e:.3f}")
    return view.to_string(index=False)


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
    speed = f"speedup_vs_{baseline}"
    lines = [f"{'dataflow':<14}{'cycles':>16}{'time':>14}{'energy':>14}"
             f"{'vs ' + baseline:>10}{'rel. error':>12}"]  # fmt: skip
    for row in tot.to_dict("records"):
        speedup = f"{row[speed]:.2f}×" if speed in row else "-"
        error = row.get("mean_rel_error")
        error = "-" if error is None or pd.isna(error) else f"{error:.4f}"
        lines.append(
            f"{row['dataflow']:<14}{row['total_cycles']:>16,}"
            f"{si(row['total_cycles'] / clock_hz, 's'):>14}"
            f"{si(row['total_energy_pj'] * 1e-12, 'J'):>14}{speedup:>10}{error:>12}"
        )
    return "\n".join(lines)
