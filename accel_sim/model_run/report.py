"""The terminal report of a whole-model run."""

from __future__ import annotations

from accel_sim.model_run.simulate import ModelResult


def format_report(result: ModelResult) -> str:
    """Header, per-dataflow totals (time in ms, energy in mJ), per-kind cycle shares, notes."""
    tot = result.totals.copy()
    tot["time_ms"] = tot["time_s"] * 1e3
    tot["energy_mJ"] = tot["energy_pj"] * 1e-9
    cols = ["dataflow", "cycles", "time_ms", "tokens_per_s", "energy_mJ", "linear_cycles",
            "attention_cycles", "vector_cycles"] + \
        (["speedup_vs_w8a8"] if "speedup_vs_w8a8" in tot else [])  # fmt: skip
    kinds = result.by_kind.pivot_table(index=["group", "kind"], columns="dataflow",
                                       values="share", sort=False)  # fmt: skip
    kinds = kinds[[c for c in result.totals["dataflow"] if c in kinds.columns]]
    fmt = {"time_ms": "{:.3f}".format, "tokens_per_s": "{:.2f}".format,
           "energy_mJ": "{:.3f}".format, "speedup_vs_w8a8": "{:.3f}".format}  # fmt: skip
    lines = [result.header(), "", "totals per dataflow",
             tot[cols].to_string(index=False, formatters=fmt), "",
             "share of cycles per layer kind",
             kinds.to_string(float_format=lambda v: f"{v:.1%}"), ""]  # fmt: skip
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
