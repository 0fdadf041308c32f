"""``ops-fig3``: OPS Fig. 3 — normalized cycles of the dataflows on OPS's five networks.

OPS (Liu et al., §IV, Fig. 3) compares the normalized total execution cycles of accelerators on
BERT, GPT2-medium, GPT2-XL, OPT-6.7B and LLaMA-7B and reports average improvements of
1.30×–4.31× over its baselines (3.70× over ANT on GPT2-XL). The paper states neither the array
size nor the sequence length; we use:

* ``arch_configs/systolic_32x32_ws.yaml`` (OPS integrates with "existing hardware accelerators
  like systolic arrays"; this file has an early-bird comparator unit and the OSC paper's 1:2:4
  rate table, so a 4-bit slice product runs at 4× the INT16 MAC rate; OPS runs as separate
  hi×hi / compare / remaining-slice passes and saves cycles only on fully skipped 32×32 tiles);
* ``arch_configs/ops_bitslice.yaml`` (OPS's own array, ``compute.kind: bitslice``: 32×128 4-bit
  PEs, weight stationary, INT16 = 16 slice products, INT8 = 4, INT4 = 1, inline early-bird
  comparators; OPS is one interleaved pass that skips per computation set, ``granularity: set``,
  and, for comparison, per 128×128 output tile, ``granularity: tile``). The INT16, W8A8 and MUXQ
  baselines run on the same array (equal area); OSC needs FP4/FP16 rates, which it has not;
* prefill of 128 tokens for BERT-base (SST-2, GLUE's usual maximum length), 1024 for the GPT-2
  models (their context) and 2048 for OPT-6.7B and LLaMA-7B (Llama-2-7B's shape; WikiText
  perplexity at the model's context); batch 1, LM head over every token for the decoders;
* statistics by layer kind (``model_run``): BERT-base from ``traces/all-minilm-l6-v2``, the
  decoders from ``traces/smollm2-135m``; the OPS skip fractions, zero high-slice fractions and
  numerical errors are those traces' (MAC-weighted means over the linear GEMMs are reported).

Every run goes through :func:`accel_sim.model_run.simulate_model`: attention matmuls run in FP16
for every scheme on the systolic array (FP16 and INT16 share its rate) and as static INT8 on the
bit-slice array (no FP16), vector work is identical. The OliVe and ANT baselines of the paper
are not modelled yet (issue 10, item 4). OPS rows are shown at fixed τ over the trace's grid and
at ``τ=auto``: per layer kind, the largest τ of the grid whose error (the kind's median over the
trace's GEMMs, on the trace's held-out tokens: the tokens that also report it) is within the
budget ``ops.budget`` (default 0.05), preset chosen with it, else τ = −1 (``dataflow/ops_tau.py``);
the chosen τ per kind is in the ``tau_by_kind`` column and the notes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accel_sim.arch.load import load_arch
from accel_sim.dataflow import ops_tau
from accel_sim.engine.chip import scope
from accel_sim.model_run import simulate_model
from accel_sim.model_run.stats import KindStats
from accel_sim.tables import ops_fig3_baselines as FB
from accel_sim.tables.osc_table2 import arch_path
from accel_sim.tables.registry import TableResult, register_table
from accel_sim.workers import default_workers, fork_map
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.trace import load_trace

ARCH = "systolic_32x32_ws"
#: the bit-slice array the table adds beside ``arch`` (OPS's own PE array)
BITSLICE = "ops_bitslice"
#: (label, model file, prefill tokens, trace for the statistics)
MODELS = (("BERT-base", "bert-base", 128, "all-minilm-l6-v2"),
          ("GPT2-medium", "gpt2-medium", 1024, "smollm2-135m"),
          ("GPT2-XL", "gpt2-xl", 1024, "smollm2-135m"),
          ("OPT-6.7B", "opt-6.7b", 2048, "smollm2-135m"),
          ("LLaMA-7B", "llama-2-7b", 2048, "smollm2-135m"))  # fmt: skip
BASELINES = (("INT16", "int16"), ("W8A8", "w8a8"), ("OSC", "osc"), ("MUXQ", "muxq"))
TAUS = (-1.0, 0.0, 1.0, 4.0)
#: the error budget of the ``τ=auto`` row (``ops_tau.DEFAULT_BUDGET``)
BUDGET = ops_tau.DEFAULT_BUDGET
#: budgets at which the notes list the per-kind choice (no simulation: the choice only)
NOTE_BUDGETS = (0.05, 0.25, 0.5)
PAPER_SPEEDUP = (1.30, 4.31)  # OPS §IV: average improvement over the baselines
#: the row of OPS at accuracy parity with the more accurate of OliVe and ANT (bit-slice array)
PARITY = "OPS at parity"


def _weighted(part: pd.DataFrame, col: str) -> float:
    if col not in part or part[col].isna().all():
        return float("nan")
    ok = part[col].notna()
    return float(np.average(part.loc[ok, col], weights=part.loc[ok, "macs"]))


def _supported(arch_obj, flow: str) -> bool:
    """Whether the dataflow's matmul precisions exist on the unit (OSC needs FP4 and FP16)."""
    rates = arch_obj.compute.rates
    need = {"osc": ("fp4", "fp16")}.get(flow, ())
    return all(rates.get(p, 0) > 0 for p in need)


def _runs(arch_obj) -> list[tuple]:
    """(scheme label, dataflow, τ, granularity, knobs) of the rows for one architecture; on the
    bit-slice array also OliVe and ANT (``ops_fig3_baselines.BASELINES``) and OPS at accuracy
    parity with the more accurate of them (τ = ``"parity"``)."""
    from accel_sim.dataflow.ops import inline_early_bird

    runs = [(name, flow, None, None, None) for name, flow in BASELINES
            if _supported(arch_obj, flow)]  # fmt: skip
    on_bitslice = inline_early_bird(arch_obj)  # the paper's comparison: on OPS's own array
    if on_bitslice:
        runs += [(name, flow, None, None, {flow: dict(k)}) for name, flow, k in FB.BASELINES]
    grans = ("set", "tile") if on_bitslice else ("tile",)
    for gran in grans:
        for tau in TAUS:
            if tau < 0 and gran != grans[0]:
                continue  # τ < 0: nothing is skipped, the granularity makes no difference
            label = f"OPS τ={tau:g}" + ("" if gran == grans[0] else f" ({gran})")
            runs.append((label, "ops", tau, gran,
                         {"ops": {"tau": tau, "granularity": gran}}))  # fmt: skip
    runs.append((f"OPS τ=auto (budget {BUDGET:g})", "ops", "auto", grans[0],
                 {"ops": {"tau": "auto", "budget": BUDGET, "granularity": grans[0]}}))  # fmt: skip
    if on_bitslice:
        runs.append((PARITY, "ops", "parity", grans[0],
                     {"ops": {"tau": "auto", "budget": 1.0, "granularity": grans[0]}}))  # fmt: skip
    return runs


def kind_choices(kind_stats: KindStats, kinds, budget: float) -> dict[str, ops_tau.Choice]:
    """The ``τ=auto`` choice per layer kind (what the builder picks from the kind's stats)."""
    chunk = 32  # the OPS knob's default, the chunk of the trace's stored errors
    return {k: ops_tau.choose(kind_stats.stats_for(Gemm(1, 64, 1, kind=k)), chunk, budget)
            for k in kinds}  # fmt: skip


def _by_kind(choices: dict[str, ops_tau.Choice]) -> str:
    return ", ".join(f"{k} {c.tau:g}" + (f"/{c.preset}" if c.tau > 0 else "")
                     for k, c in choices.items())  # fmt: skip


def _task(item: tuple) -> list[dict]:
    arch, label, model, tokens, trace = item
    return _rows(arch, load_arch(arch), label, model, tokens, trace)


def _rows(arch, arch_obj, label, model, tokens, trace) -> list[dict]:
    runs = _runs(arch_obj)
    flows = [f for _, f, _, _, knobs in runs if knobs is None]
    plain = KindStats(load_trace(trace))
    by_kind = FB.sample_errors(trace)
    kind_stats = KindStats(FB.with_errors(plain.trace, by_kind))

    def run(flows: list[str], knobs=None, stats=kind_stats):
        return simulate_model(arch, model, "prefill", tokens, dataflows=flows, knobs=knobs,
                              stats_from=stats.trace)  # fmt: skip

    base = run(flows)
    rows = []
    for name, flow, tau, gran, knobs in runs:
        stats, choices = kind_stats, None
        if tau == "parity":  # OPS at the more accurate baseline's sample error, per kind
            better = min((r for r in rows if r["scheme"] in dict.fromkeys(
                b[0] for b in FB.BASELINES)), key=lambda r: r["sample_error"])  # fmt: skip
            budget = {k: e[FB.sample_key(better["dataflow"], better["knobs"], k, None,
                                         kind_stats)] for k, e in by_kind.items()}  # fmt: skip
            stats = KindStats(FB.parity_trace(plain.trace, by_kind, budget))
            name = f"{PARITY} ({better['scheme']})"
        res = base if knobs is None else run([flow], knobs, stats)
        part = res.table[res.table["dataflow"] == flow]
        linear = part[part["group"] == "linear"].copy()
        tot = res.totals[res.totals["dataflow"] == flow].iloc[0]
        kinds = list(dict.fromkeys(linear["kind"]))
        if tau in ("auto", "parity"):
            choices = kind_choices(stats, kinds, knobs["ops"]["budget"])
        if tau == "parity":  # the run's errors are ratios: report the plain trace's
            err = {k: plain.stats_for(Gemm(1, 64, 1, kind=k))["errors"].get(
                FB.ops_key(c.tau, c.preset)) for k, c in choices.items()}  # fmt: skip
            linear["rel_error"] = linear["kind"].map(err).astype(float)
        linear["sample_error"] = [
            by_kind.get(k, {}).get(FB.sample_key(flow, knobs, k, (choices or {}).get(k),
                                                 kind_stats), np.nan)
            for k in linear["kind"]]  # fmt: skip
        rows.append({
            "arch": arch_obj.name, "model": label, "tokens": tokens, "stats_from": trace,
            "scheme": name, "dataflow": flow,
            "tau": float("nan") if isinstance(tau, str) else tau,
            "budget": knobs["ops"]["budget"] if isinstance(tau, str) else float("nan"),
            "tau_by_kind": _by_kind(choices) if choices else "",
            "granularity": gran,
            "cycles": int(tot["cycles"]), "linear_cycles": int(tot["linear_cycles"]),
            "set_skip": _weighted(linear, "ops_set_skip_fraction") if flow == "ops" else 0.0,
            "tile_skip": _weighted(linear, "ops_tile_skip_fraction") if flow == "ops" else 0.0,
            "rel_error": _weighted(linear, "rel_error"),
            "sample_error": _weighted(linear, "sample_error"),
            "knobs": knobs,
        })  # fmt: skip
    df = pd.DataFrame(rows).drop(columns="knobs")
    ref = df[df["dataflow"] == "int16"].iloc[0]
    df.insert(df.columns.get_loc("cycles") + 1, "norm_cycles", df["cycles"] / ref["cycles"])
    df.insert(df.columns.get_loc("linear_cycles") + 1, "norm_linear",
              df["linear_cycles"] / ref["linear_cycles"])  # fmt: skip
    return df.to_dict("records")


def speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Per architecture, OPS row and baseline: mean over the models of baseline cycles / OPS
    cycles."""
    out = []
    for arch, part in table.groupby("arch", sort=False):
        ops_rows = part[part["dataflow"] == "ops"]
        for scheme in dict.fromkeys(ops_rows["scheme"]):
            ops = ops_rows[ops_rows["scheme"] == scheme].set_index("model")
            for name in [b[0] for b in BASELINES] + [b[0] for b in FB.BASELINES]:
                b = part[part["scheme"] == name].set_index("model")
                if b.empty:
                    continue
                ratio = (b["cycles"] / ops["cycles"]).reindex(ops.index)
                out.append({"arch": arch, "scheme": scheme, "tau": ops["tau"].iloc[0],
                            "granularity": ops["granularity"].iloc[0], "baseline": name,
                            "mean_speedup": float(ratio.mean()),
                            "min": float(ratio.min()), "max": float(ratio.max())})  # fmt: skip
    return pd.DataFrame(out)


def _progress(total: int):
    """A tqdm bar on stderr when it is a terminal (disabled otherwise: logs stay clean)."""
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="ops-fig3", unit="step", leave=False,
                disable=not sys.stderr.isatty())  # fmt: skip


@register_table("ops-fig3", "OPS Fig. 3: normalized cycles of OliVe/ANT/OPS, INT16/W8A8/OSC/MUXQ")
def build(arch: str = ARCH, models=MODELS, bitslice: str | None = BITSLICE) -> TableResult:
    archs = [arch] + ([bitslice] if bitslice else [])
    arch_objs = {a: load_arch(a) for a in archs}
    rows = []
    workers = default_workers()
    # OliVe's and ANT's errors on the traces' sample tensors first, in this process (~15 s per
    # trace; its numba kernels use every core already), so the workers forked next inherit
    # them; then one task per architecture and model, the most tokens first; results in order
    traces = list(dict.fromkeys(m[3] for m in models))
    work = [(a, *m) for a in archs for m in models]
    order = sorted(range(len(work)), key=lambda i: -work[i][3])  # most tokens first
    done: dict[int, list[dict]] = {}
    # ~1 min: a bar on a terminal (stderr), nothing otherwise
    with _progress(len(traces) + len(work)) as bar:
        for trace in traces:
            bar.set_postfix_str(f"OliVe/ANT errors on {trace}'s samples")
            FB.sample_errors(trace)
            bar.update()
        for i, part in zip(order, fork_map(_task, [work[i] for i in order], workers)):
            done[i] = part
            bar.set_postfix_str(f"{work[i][1]} on {work[i][0]}")
            bar.update()
    for i in range(len(work)):
        rows += done[i]
    table = pd.DataFrame(rows)
    for col in ("norm_cycles", "norm_linear", "set_skip", "tile_skip"):
        table[col] = table[col].round(4)
    for col in ("rel_error", "sample_error"):
        table[col] = table[col].map(lambda e: float(f"{e:.4g}"))
    sp = speedups(table)
    first = arch_objs[arch]
    header = [
        f"architecture: {arch_path(arch, first)} ({scope(first)}; {first.compute.describe()}, a "
        "separate "
        f"early-bird comparator unit); the OPS paper states no array size",
    ]
    if bitslice:
        bs = arch_objs[bitslice]
        header.append(
            f"architecture: {arch_path(bitslice, bs)} ({scope(bs)}; {bs.compute.describe()}; equal "
            "area for "
            "INT16/W8A8/MUXQ/OPS; attention as static INT8, no FP16; OSC needs FP4/FP16: no row)"
        )
    header += [
        "workloads: prefill, batch 1: " + ", ".join(f"{m[0]} {m[2]} tokens" for m in models) +
        " (sequence lengths: our assumption, the paper states none)",
        "statistics by layer kind: " + "; ".join(
            sorted({f"{m[3]} for {', '.join(x[0] for x in models if x[3] == m[3])}"
                    for m in models})) +
        " (medians per kind, counts scaled by K_model/K_trace; errors are the traces' models')",
        "norm_cycles: whole-model cycles / INT16's on the same architecture (attention and "
        "vector work identical for all schemes); norm_linear: linear layers only; OPS chunk 32, "
        "sign-magnitude, preset 0",
        "set_skip / tile_skip / rel_error: MAC-weighted means over the linear GEMMs; tile_skip "
        "is over fully skipped square tiles of the array's side (32 on the systolic array, 128 "
        "on the bit-slice array); cycles follow set_skip at granularity set, tile_skip at tile",
        *FB.HEADER,
        f"OPS τ=auto (budget b): per layer kind, the largest τ of the trace's grid whose "
        f"relative error (the kind's median) is ≤ b, preset chosen with it, else τ = −1 (early "
        f"bird off); b = {BUDGET:g} by default (ops.budget); tau_by_kind lists the choice "
        "(kind τ[/preset]); the errors are on the trace's held-out tokens, which also report "
        "the chosen τ's error (selection on the evaluation set; the traces store no OPS error "
        "on their calibration half)",
    ]  # fmt: skip
    notes = _notes(table, sp, arch_objs[bitslice].name if bitslice else None)
    notes += _auto_notes(dict.fromkeys(m[3] for m in models))
    if bitslice:
        notes += FB.paper_notes(table, sp, arch_objs[bitslice].name)

    def plot(path: str) -> None:
        FB.plot(table, path)

    return TableResult("ops-fig3", "OPS Fig. 3: normalized cycles on a 32x32 WS systolic array"
                       + (" and a 32x128 4-bit bit-slice array" if bitslice else ""),
                       header, table, plot, notes, {"speedups": sp})  # fmt: skip


def _notes(table: pd.DataFrame, sp: pd.DataFrame, bitslice: str | None) -> list[str]:
    notes = []
    lo_p, hi_p = PAPER_SPEEDUP
    for (arch, scheme), part in sp.groupby(["arch", "scheme"], sort=False):
        if part["tau"].iloc[0] < 0 and arch == bitslice:
            continue  # identical to INT16 on the bit-slice array
        lo, hi = part["mean_speedup"].min(), part["mean_speedup"].max()
        per = ", ".join(f"{r.baseline} {r.mean_speedup:.2f}×" for r in part.itertuples())
        rows = table[(table["arch"] == arch) & (table["scheme"] == scheme)]
        notes.append(f"{arch}, {scheme}: mean speedup over the models: {per}; range "
                     f"{lo:.2f}–{hi:.2f}× vs paper {lo_p:.2f}–{hi_p:.2f}× over its baselines "
                     f"(deviation {100 * (lo / lo_p - 1):+.0f} % / "
                     f"{100 * (hi / hi_p - 1):+.0f} %; the baselines differ, so near or far "
                     f"says nothing; median relative error "
                     f"{rows['rel_error'].median():.2g})")  # fmt: skip
    ops = table[table["dataflow"] == "ops"]
    err = ops[ops["arch"] == ops["arch"].iloc[0]].groupby("tau")["rel_error"].median()
    notes.append("OPS numerical error (median over models, trace statistics; the same on both "
                 "arrays and at both granularities: the same sets get the preset): " +
                 ", ".join(f"τ={t:g}: {e:.3g}" for t, e in err.items()) +
                 "; with per-tensor INT16 scales most high slices are zero, so any τ ≥ 0 skips "
                 "most computation sets and loses most of the output")  # fmt: skip
    first = table["arch"].iloc[0]
    tau4 = ops[(ops["arch"] == first) & (ops["tau"] == 4.0)]
    tau0 = ops[(ops["arch"] == first) & (ops["tau"] == 0.0)]
    notes.append(f"why OPS is not faster on {first}: a 4-bit slice product runs at 4× the "
                 "INT16 rate (1:2:4 packing), so the 16 slice products of a 16×16-bit MAC take 4 "
                 "INT16 MAC slots; zero high slices cut them to ~10–12 (2.5–3 slots), so OPS "
                 f"stays above INT16 (τ=0: {tau0['norm_cycles'].median():.2f}× INT16's cycles "
                 "end to end, median over the models) unless whole 32x32 output tiles are "
                 "skipped (τ=4 skips "
                 f"{tau4['tile_skip'].median():.0%} of the tiles, at a relative error of "
                 f"{tau4['rel_error'].median():.2f})")  # fmt: skip
    if bitslice:
        bs = table[table["arch"] == bitslice]
        med = bs.groupby("scheme", sort=False)["norm_linear"].median()
        w8 = med.get("W8A8", float("nan"))
        s0 = med.get("OPS τ=0", float("nan"))
        t0 = med.get("OPS τ=0 (tile)", float("nan"))
        notes.append(
            f"what moved on {bitslice}: the rates are 1:4:16 (INT8 = 4, INT16 = 16 slice "
            f"products), so W8A8's linear layers take {w8:.2f}× INT16's (median) instead of "
            "~0.5×; OPS is one interleaved pass (hi×hi item first, inline comparators, one per "
            "column, never stalling at chunk 32; no 32-bit partial sums written out, W loaded "
            f"once per fold) and skips per computation set: at τ=0 its linear layers take "
            f"{s0:.2f}× INT16's (median) at granularity set, {t0:.2f}× at tile (a lockstep "
            "array dropping only fully skipped 128×128 tiles); beyond τ=0 the gain flattens: "
            "the pass still streams 16-bit X from DRAM once per 128-column fold (twice W8A8's "
            "bytes; the skip is decided on chip) and pays each fold's fixed cost (weight-slice "
            "load 4R + skew R + C − 2 cycles), most visible at BERT's 128 tokens")  # fmt: skip
        notes.append(
            "a lockstep 1×128 array drops a row's work only when all 128 columns skip: "
            "--knob ops.granularity=row uses the traces' row statistics (ops_skip.rows), between "
            "set and tile")  # fmt: skip
        notes.append(
            "overlap: every plan's ops run on concurrent units (engine/schedule.py); on the "
            "systolic and cube units OPS's comparator pass streams between its two slice "
            "matmuls and W8A8's quantize runs beside its matmul, which moved the OPS rows of "
            "the 32x32 array (before/after in docs/engine.md, Overlap and fusion)")  # fmt: skip
        notes.append(
            "still missing: OliVe/ANT errors over every GEMM of the traces (their emulation "
            "costs ~5–11 s per GEMM; the sample tensors are used), a τ grid finer than the "
            "trace's (−1, 0, 1, 4, 16) for τ=auto, OPS errors on calibration tokens (τ=auto "
            "selects on the held-out tokens it reports), set-level statistics by column (set "
            "granularity assumes balanced columns: an upper bound); the comparisons' energy on "
            "the bit-slice unit is not priced")  # fmt: skip
    return notes


def _auto_notes(traces) -> list[str]:
    """The τ=auto choice per layer kind of each trace at :data:`NOTE_BUDGETS` (the choice only,
    no simulation), and why the default budget keeps the early bird off."""
    notes = []
    for name in traces:
        ks = KindStats(load_trace(name))
        kinds = list(dict.fromkeys(g.kind for g in ks.trace.gemms))
        at = {b: kind_choices(ks, kinds, b) for b in NOTE_BUDGETS}
        chosen = kind_choices(ks, kinds, BUDGET)
        low = {k: c.best_on for k, c in chosen.items()}
        off = all(c.tau < 0 for c in chosen.values())
        notes.append(f"OPS τ=auto on {name} by kind (kind τ[/preset]): " + "; ".join(
            f"budget {b:g}: {_by_kind(c)}" for b, c in at.items()) +
            "; the smallest median error at any τ ≥ 0 per kind: " +
            ", ".join(f"{k} {e:.3g}" for k, e in low.items() if e is not None) +
            (f", so at budget {BUDGET:g} no kind turns the early bird on and the τ=auto row "
             "equals τ=−1 (INT16 cycles and error on the bit-slice array)" if off else
             f"; at budget {BUDGET:g}: {_by_kind(chosen)}"))  # fmt: skip
    return notes
