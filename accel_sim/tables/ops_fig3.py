"""``ops-fig3``: OPS Fig. 3 — normalized cycles of the dataflows on OPS's five networks.

OPS (Liu et al., §IV, Fig. 3) compares the normalized total execution cycles of accelerators on
BERT, GPT2-medium, GPT2-XL, OPT-6.7B and LLaMA-7B and reports average improvements of
1.30×–4.31× over its baselines (3.70× over ANT on GPT2-XL). The paper states neither the array
size nor the sequence length; we use:

* ``arch_configs/systolic_32x32_ws.yaml`` (OPS integrates with "existing hardware accelerators
  like systolic arrays"; this file has the early-bird comparator unit OPS needs and the OSC
  paper's 1:2:4 rate table, so a 4-bit slice product runs at 4× the INT16 MAC rate);
* prefill of 128 tokens for BERT-base (SST-2, GLUE's usual maximum length), 1024 for the GPT-2
  models (their context) and 2048 for OPT-6.7B and LLaMA-7B (Llama-2-7B's shape; WikiText
  perplexity at the model's context); batch 1, LM head over every token for the decoders;
* statistics by layer kind (``model_run``): BERT-base from ``traces/all-minilm-l6-v2``, the
  decoders from ``traces/smollm2-135m``; the OPS skip fractions, zero high-slice fractions and
  numerical errors are those traces' (MAC-weighted means over the linear GEMMs are reported).

Every run goes through :func:`accel_sim.model_run.simulate_model`: attention matmuls run in FP16
for every scheme (FP16 and INT16 share the array's rate), vector work is identical. The
Olive- and ANT-like baselines are missing: modelling their encodings (outlier-victim pairs,
adaptive numeric types) faithfully needs their papers' PE and decoder designs, which cannot be
read here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accel_sim.arch.load import load_arch
from accel_sim.model_run import simulate_model
from accel_sim.tables.osc_table2 import arch_path
from accel_sim.tables.registry import TableResult, register_table

ARCH = "systolic_32x32_ws"
#: (label, model file, prefill tokens, trace for the statistics)
MODELS = (("BERT-base", "bert-base", 128, "all-minilm-l6-v2"),
          ("GPT2-medium", "gpt2-medium", 1024, "smollm2-135m"),
          ("GPT2-XL", "gpt2-xl", 1024, "smollm2-135m"),
          ("OPT-6.7B", "opt-6.7b", 2048, "smollm2-135m"),
          ("LLaMA-7B", "llama-2-7b", 2048, "smollm2-135m"))  # fmt: skip
BASELINES = (("INT16", "int16"), ("W8A8", "w8a8"), ("OSC", "osc"), ("MUXQ", "muxq"))
TAUS = (-1.0, 0.0, 1.0, 4.0)
PAPER_SPEEDUP = (1.30, 4.31)  # OPS §IV: average improvement over the baselines


def _weighted(part: pd.DataFrame, col: str) -> float:
    if col not in part or part[col].isna().all():
        return float("nan")
    ok = part[col].notna()
    return float(np.average(part.loc[ok, col], weights=part.loc[ok, "macs"]))


def _rows(arch, label, model, tokens, trace) -> list[dict]:
    runs = [(name, flow, None, None) for name, flow in BASELINES]
    runs += [(f"OPS τ={tau:g}", "ops", tau, {"ops": {"tau": tau}}) for tau in TAUS]
    base = simulate_model(arch, model, "prefill", tokens, dataflows=[f for _, f in BASELINES],
                          stats_from=trace)  # fmt: skip
    results = {flow: base for _, flow in BASELINES}
    rows = []
    for name, flow, tau, knobs in runs:
        res = (
            results[flow]
            if tau is None
            else simulate_model(
                arch, model, "prefill", tokens, dataflows=["ops"], knobs=knobs, stats_from=trace
            )
        )
        part = res.table[res.table["dataflow"] == flow]
        linear = part[part["group"] == "linear"]
        tot = res.totals[res.totals["dataflow"] == flow].iloc[0]
        rows.append({
            "model": label, "tokens": tokens, "stats_from": trace, "scheme": name,
            "dataflow": flow, "tau": tau, "cycles": int(tot["cycles"]),
            "linear_cycles": int(tot["linear_cycles"]),
            "set_skip": _weighted(linear, "ops_set_skip_fraction") if flow == "ops" else 0.0,
            "tile_skip": _weighted(linear, "ops_tile_skip_fraction") if flow == "ops" else 0.0,
            "rel_error": _weighted(linear, "rel_error"),
        })  # fmt: skip
    df = pd.DataFrame(rows)
    ref = df[df["dataflow"] == "int16"].iloc[0]
    df.insert(7, "norm_cycles", df["cycles"] / ref["cycles"])
    df.insert(9, "norm_linear", df["linear_cycles"] / ref["linear_cycles"])
    return df.to_dict("records")


def speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Per τ and baseline: mean over the models of baseline cycles / OPS cycles."""
    out = []
    for tau in TAUS:
        ops = table[(table["dataflow"] == "ops") & (table["tau"] == tau)].set_index("model")
        for name, flow in BASELINES:
            b = table[table["dataflow"] == flow].set_index("model")
            ratio = (b["cycles"] / ops["cycles"]).reindex(ops.index)
            out.append({"tau": tau, "baseline": name, "mean_speedup": float(ratio.mean()),
                        "min": float(ratio.min()), "max": float(ratio.max())})  # fmt: skip
    return pd.DataFrame(out)


@register_table("ops-fig3", "OPS Fig. 3: normalized cycles of INT16/W8A8/OSC/MUXQ/OPS")
def build(arch: str = ARCH, models=MODELS) -> TableResult:
    arch_obj = load_arch(arch)
    rows = []
    for label, model, tokens, trace in models:
        rows += _rows(arch_obj, label, model, tokens, trace)
    table = pd.DataFrame(rows)
    for col in ("norm_cycles", "norm_linear"):
        table[col] = table[col].round(4)
    for col in ("set_skip", "tile_skip"):
        table[col] = table[col].round(4)
    table["rel_error"] = table["rel_error"].map(lambda e: float(f"{e:.4g}"))
    sp = speedups(table)
    header = [
        f"architecture: {arch_path(arch, arch_obj)} (32x32 WS systolic, early-bird comparators, "
        "rates int16:int8:int4 = 1:2:4); the OPS paper states no array size",
        "workloads: prefill, batch 1: " + ", ".join(f"{m[0]} {m[2]} tokens" for m in models) +
        " (sequence lengths: our assumption, the paper states none)",
        "statistics by layer kind: " + "; ".join(
            sorted({f"{m[3]} for {', '.join(x[0] for x in models if x[3] == m[3])}"
                    for m in models})) +
        " (medians per kind, counts scaled by K_model/K_trace; errors are the traces' models')",
        "norm_cycles: whole-model cycles / INT16's (attention FP16 and vector work identical for "
        "all schemes); norm_linear: linear layers only; OPS chunk 32, sign-magnitude, preset 0",
        "set_skip / tile_skip / rel_error: MAC-weighted means over the linear GEMMs "
        "(tile_skip: fully skipped 32x32 output tiles, what saves cycles on the array)",
        "baselines missing: Olive (outlier-victim pairs) and ANT (adaptive numeric types) — "
        "their papers are not available here, so they cannot be modelled faithfully",
    ]  # fmt: skip
    notes = _notes(table, sp)

    def plot(path: str) -> None:
        _plot(table, path)

    return TableResult("ops-fig3", "OPS Fig. 3: normalized cycles on a 32x32 WS systolic array",
                       header, table, plot, notes,
                       {"speedups": sp})  # fmt: skip


def _notes(table: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    notes = []
    lo_p, hi_p = PAPER_SPEEDUP
    for tau in TAUS:
        part = sp[sp["tau"] == tau]
        lo, hi = part["mean_speedup"].min(), part["mean_speedup"].max()
        per = ", ".join(f"{r.baseline} {r.mean_speedup:.2f}×" for r in part.itertuples())
        notes.append(f"OPS τ={tau:g} mean speedup over the models: {per}; range "
                     f"{lo:.2f}–{hi:.2f}× vs paper {lo_p:.2f}–{hi_p:.2f}× over its baselines "
                     f"(deviation {100 * (lo / lo_p - 1):+.0f} % / "
                     f"{100 * (hi / hi_p - 1):+.0f} %; the baselines differ)")  # fmt: skip
    err = table[table["dataflow"] == "ops"].groupby("tau")["rel_error"].median()
    notes.append("OPS numerical error (median over models, trace statistics): " +
                 ", ".join(f"τ={t:g}: {e:.3g}" for t, e in err.items()) +
                 "; with per-tensor INT16 scales most high slices are zero, so any τ ≥ 0 skips "
                 "most computation sets and loses most of the output — the paper's per-layer "
                 "offline τ and preset tuning is not reproduced")  # fmt: skip
    tau4 = table[(table["dataflow"] == "ops") & (table["tau"] == 4.0)]
    notes.append("why OPS is not faster here: on this array a 4-bit slice product runs at 4× the "
                 "INT16 rate (1:2:4 packing), so the 16 slice products of a 16×16-bit MAC take 4 "
                 "INT16 MAC slots; zero high slices cut them to ~10–12 (2.5–3 slots), so OPS "
                 "stays above INT16 (matrix unit alone ~2.6× INT16's busy cycles; ~1.5× end to "
                 "end, as INT16 itself waits on DRAM) unless whole 32x32 output tiles are "
                 "skipped (τ=4 skips "
                 f"{tau4['tile_skip'].median():.0%} of the tiles, at a relative error of "
                 f"{tau4['rel_error'].median():.2f}); the paper's speedups are over Olive/ANT-like "
                 "accelerators, not over these dataflows")  # fmt: skip
    return notes


def _plot(table: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    models = list(dict.fromkeys(table["model"]))
    schemes = list(dict.fromkeys(table["scheme"]))
    width = 0.8 / len(schemes)
    x = np.arange(len(models))
    for i, scheme in enumerate(schemes):
        vals = [table[(table["model"] == m) & (table["scheme"] == scheme)]["norm_cycles"].iloc[0]
                for m in models]  # fmt: skip
        ax.bar(x + (i - len(schemes) / 2 + 0.5) * width, vals, width, label=scheme)
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(x, models)
    ax.set_ylabel("cycles / INT16")
    ax.set_title("normalized cycles (32x32 WS systolic)")
    ax.legend(fontsize=7, ncol=2)
    ops = table[table["dataflow"] == "ops"]
    for m in models:
        part = ops[ops["model"] == m]
        ax2.plot(part["set_skip"], part["rel_error"], marker="o", label=m)
        for r in part.itertuples():
            ax2.annotate(f"τ={r.tau:g}", (r.set_skip, r.rel_error), fontsize=6)
    ax2.set_xlabel("skipped computation sets")
    ax2.set_ylabel("relative output error")
    ax2.set_title("OPS early bird: skip vs error")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
