"""The terminal report of a whole-model run (``--json`` / ``--out`` keep base units)."""

from __future__ import annotations

from accel_sim.model_run.simulate import ModelResult
from accel_sim.report.text import count_text, display_table, pj_text, ratio_text, seconds_text


def _rate(value: float) -> str:
    return f"{value:,.2f}"


def format_report(result: ModelResult) -> str:
    """Header, per-dataflow totals (time and energy with SI prefixes, cycles with thousands
    separators), per-kind cycle shares, notes."""
    columns = [("dataflow", "dataflow", None), ("cycles", "cycles", count_text),
               ("time_s", "time", seconds_text), ("tokens_per_s", "tokens/s", _rate),
               ("energy_pj", "energy", pj_text), ("linear_cycles", "linear cycles", count_text),
               ("attention_cycles", "attention cycles", count_text),
               ("vector_cycles", "vector cycles", count_text),
               ("speedup_vs_w8a8", "vs w8a8", ratio_text)]  # fmt: skip
    kinds = result.by_kind.pivot_table(index=["group", "kind"], columns="dataflow",
                                       values="share", sort=False)  # fmt: skip
    kinds = kinds[[c for c in result.totals["dataflow"] if c in kinds.columns]]
    lines = [result.header(), "", "totals per dataflow",
             display_table(result.totals, columns), "",
             "share of cycles per layer kind",
             kinds.to_string(float_format=lambda v: f"{v:.1%}"), ""]  # fmt: skip
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
