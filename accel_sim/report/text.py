"""Human-readable reports for the terminal."""

from __future__ import annotations

import pandas as pd

from accel_sim.api import SimResult


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3f} {prefix}{unit}"
    return f"{value:.3f} {unit}"


def single_report(r: SimResult) -> str:
    """The detailed report of one GEMM under one dataflow."""
    lines = [
        f"accel-sim · {r.arch} · {r.dataflow} · GEMM {r.gemm} (M={r.M}, K={r.K}, N={r.N}"
        + (f", ×{r.count}" if r.count > 1 else "")
        + ")",
        "",
        f"  cycles          {r.cycles:>16,}",
        f"  time            {_si(r.time_s, 's'):>16}",
        f"  compute cycles  {r.compute_cycles:>16,}",
        f"  stall cycles    {r.stall_cycles:>16,}",
        f"  utilization     {r.utilization:>16.1%}",
        f"  MACs            {r.macs:>16,}",
        f"  energy          {_si(r.energy_pj * 1e-12, 'J'):>16}",
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
    key = ["gemm", "M", "K", "N"]
    base = df[df["dataflow"] == baseline][key + ["cycles"]].rename(columns={"cycles": "_base"})
    out = df.merge(base, on=key, how="left")
    out[f"speedup_vs_{baseline}"] = out["_base"] / out["cycles"]
    return out.drop(columns="_base")


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
