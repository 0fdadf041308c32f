"""``prefixquant-fig6``: PrefixQuant Fig. 6 — W4A4 Llama-2-7B vs FP16 on an RTX 3090.

The paper (PrefixQuant §5.4, Fig. 6) measures Llama-2-7B on an RTX 3090: prefill of 2048 tokens
(latency) and decode of 256 new tokens after a 2048-token prompt (tokens/s), FP16 vs
PrefixQuant-O2 W4A4 (INT4 per-channel weights, per-tensor static INT4 activations; KV cache not
quantized in the speed test, "KV quantization is not considered"). It reports FP16 489 ms /
43 tokens/s and O2 178 ms (2.74×) / 93 tokens/s (2.16×). Llama-2-7B has o = 3 prefixed tokens
(Table 5: ``.``, ``\\n``, [BOS]) kept in the KV cache.

We run the same workloads through :func:`accel_sim.model_run.simulate_model` on
``arch_configs/rtx3090_like.yaml``. Its ``efficiency`` map has three kinds of entries:

* **cited, not fitted**: ``launch_us`` — a fixed cost per GPU kernel (each matmul and vector op of
  a step, attention's heads batched), charged by the model run as its own stall (``launch``); the
  value and its sources are in the YAML. ``vector`` stays 1.
* **fitted on the FP16 rows only** (:func:`calibrate_rtx3090`): ``matmul`` (divides the matrix
  unit's per-step time of FP16 matmuls) and ``dram`` (multiplies DRAM bandwidth on every hop
  touching DRAM), with the launch cost in place, so the fixed per-kernel time is no longer
  folded into ``dram``;
* **derived, not fitted**: ``matmul_int8`` / ``matmul_int4`` = the same kernel-overhead fraction of
  each precision's own GA102 peak (:data:`PEAK_SHARE`): the cube's FP16 rate is the 142 TFLOPS
  FP16-accumulate peak, the FP32-accumulate kernels run at half of it (71), so the fitted
  ``matmul`` = 0.5 × fraction; INT8 (284 TOPS) and INT4 (568 TOPS) are the cube's rates in full,
  so they get 1.0 × fraction. No published achieved INT4 fraction on a GA102 was found to cite
  instead (docs/modelling.md, "PrefixQuant on a GPU").

The engine pipelines compute and memory (a step takes the max of both), so FP16 time is a
non-linear, non-increasing function of each factor; :func:`calibrate_rtx3090` finds the pair for
which

    FP16 prefill of 2048 tokens      = 489 ms               (mostly compute-bound → matmul)
    FP16 decode of 256 tokens @ 2048 = 256 / 43 s           (memory-bound → dram)

by alternating 1-D solves (:func:`_solve`, a bracketed secant in the slowdown 1/factor):
``dram`` so that decode hits its target at the current ``matmul``, then ``matmul`` so that
prefill hits its target at that ``dram``, repeated until a round starts with decode already
within 0.5 % (both targets then hold at the same point). The search runs on the closed-form twin
engine (fast), then the same procedure is repeated with the DES (the engine of the table) from
the twin's answer; the factors are rounded to 3 decimals and the FP16 rows re-run with them.
A test checks that the YAML holds exactly these factors. W4A4 is then a prediction: the
``w4a4_static`` plan with its online work (static INT4 quantize of each linear input, PrefixQuant's
R4 Hadamard rotation before down_proj, LM head in FP16; ``dataflow/w4a4.py``), never tuned toward
the paper's speedups. The FP16 rows alone cannot separate the launch cost from per-byte DRAM time
(one decode row, two unknowns): that is why ``launch_us`` is cited, not fitted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accel_sim.arch.load import load_arch
from accel_sim.engine.chip import scope
from accel_sim.tables.osc_table2 import arch_path
from accel_sim.tables.prefixquant_calibration import (  # noqa: F401 - some only re-exported
    ARCH,
    BARE_W4A4,
    DECODE_TOKENS,
    FLOWS,
    MODEL,
    PAPER,
    PAPER_SPEEDUP,
    PREFILL_TOKENS,
    PREFIX_TOKENS,
    TOLERANCE,
    UNIT,
    Calibration,
    _run,
    _solve,
    calibrate_rtx3090,
    target_cycles,
)
from accel_sim.tables.registry import TableResult, register_table


def _metric(phase: str, cycles: float, clock_hz: float) -> float:
    seconds = cycles / clock_hz
    return seconds * 1e3 if phase == "prefill" else DECODE_TOKENS / seconds


def _speedup(phase: str, base: float, value: float) -> float:
    return base / value if phase == "prefill" else value / base


@register_table("prefixquant-fig6", "PrefixQuant Fig. 6: W4A4 vs FP16 Llama-2-7B on a 3090-like")
def build(arch: str = ARCH) -> TableResult:
    calib = calibrate_rtx3090(arch)
    cal_arch = load_arch(arch)
    clock = cal_arch.clock_hz
    rows, detail = [], []
    base_metric: dict[str, float] = {}
    for phase in ("prefill", "decode"):
        for method, flow in FLOWS.items():
            res = _run(cal_arch, phase, flow)
            tot = res.totals.iloc[0]
            ours = _metric(phase, tot["cycles"], clock)
            base_metric.setdefault(phase, ours)
            paper = PAPER[method][phase]
            speedup = _speedup(phase, base_metric[phase], ours)
            paper_speedup = 1.0 if flow == "fp16" else PAPER_SPEEDUP[phase]
            per = 1 if phase == "prefill" else DECODE_TOKENS
            ms = 1e3 / clock / per
            rows.append({
                "phase": phase, "method": method, "dataflow": flow, "unit": UNIT[phase],
                "ours": round(ours, 2), "paper": paper, "dev_%": round(100 * (ours / paper - 1), 1),
                "speedup": round(speedup, 3), "paper_speedup": paper_speedup,
                "speedup_dev_%": round(100 * (speedup / paper_speedup - 1), 1),
                "linear_ms": tot["linear_cycles"] * ms,
                "attention_ms": tot["attention_cycles"] * ms,
                "vector_ms": tot["vector_cycles"] * ms,
                "launch_ms": tot["launch_cycles"] * ms,
            })  # fmt: skip
            for r in res.by_kind.itertuples(index=False):
                detail.append({"phase": phase, "method": method, "group": r.group,
                               "kind": r.kind, "cycles": int(r.cycles),
                               "ms": r.cycles * ms, "share": r.share})  # fmt: skip
    table = pd.DataFrame(rows)
    # prefill: ms for the 2048-token prompt; decode: ms per generated token
    table.insert(10, "ms", table["linear_ms"] + table["attention_ms"] + table["vector_ms"])
    for col in ("ms", "linear_ms", "attention_ms", "vector_ms", "launch_ms"):
        table[col] = table[col].round(3)
    bare = {}  # W4A4 without its online work: what quantize, R4 and the FP16 LM head cost
    for phase in ("prefill", "decode"):
        cycles = _run(cal_arch, phase, "w4a4_static", knobs=BARE_W4A4).totals.iloc[0]["cycles"]
        bare[phase] = _metric(phase, cycles, clock)
    header = _header(arch, cal_arch, calib)
    notes = _notes(table, bare, calib.factors()["dram"])
    detail_df = pd.DataFrame(detail)

    def plot(path: str) -> None:
        _plot(table, path)

    return TableResult("prefixquant-fig6", "W4A4 Llama-2-7B vs FP16 on rtx3090_like "
                       "(PrefixQuant Fig. 6)", header, table, plot, notes,
                       {"detail": detail_df, "calibration": calib, "bare_w4a4": bare})  # fmt: skip


def _header(arch: str, cal_arch, calib: Calibration) -> list[str]:
    f = calib.factors()
    clock = cal_arch.clock_hz
    t, a = calib.target_cycles, calib.achieved_cycles
    pre, dec = _metric("prefill", a["prefill"], clock), _metric("decode", a["decode"], clock)
    n = {(e, p): calib.evaluation_count(e, p) for e in ("twin", "des") for p in t}
    return [
        f"architecture: {arch_path(arch, cal_arch)} ({scope(cal_arch)}: RTX 3090 as one "
        "16x16x164 FP16 cube, "
        f"{clock / 1e9:.3f} GHz, GDDR6X 936 GB/s)",
        f"model: workloads/models/{MODEL}.yaml; prefill {PREFILL_TOKENS} tokens (batch 1, LM "
        f"head over all tokens); decode {DECODE_TOKENS} tokens after a {PREFILL_TOKENS}-token "
        "prompt (tokens/s over the decode steps only)",
        f"W4A4 = w4a4_static (PrefixQuant-O2), o = {PREFIX_TOKENS} prefixed tokens in the KV "
        "cache (Table 5); attention and KV cache FP16 for both (the paper's speed test does not "
        "quantize KV); no trace statistics needed (both dataflows are data-independent); W4A4 "
        "does its online work as kernels of its own: the static INT4 quantize of every linear "
        "input and the R4 Hadamard rotation before down_proj (fast Walsh-Hadamard transform + "
        "dense 172x172 factor for 11008 = 172x64), LM head in FP16 as PrefixQuant's code leaves "
        "it (dataflow/w4a4.py)",
        f"cited, not fitted: launch_us {f['launch_us']:g} µs per GPU kernel (every matmul and "
        "vector op of a step; attention's heads batched in one kernel), its own stall "
        "(launch_ms); the FP16 rows alone cannot separate it from per-byte DRAM time",
        f"calibration (FP16 rows only, with the launch cost in place): efficiency {{matmul: "
        f"{f['matmul']}, dram: {f['dram']}, vector: {f['vector']} (not fitted)}} in the YAML = "
        "calibrate_rtx3090(): alternating "
        f"1-D solves, dram for FP16 decode = {t['decode']:,.0f} cycles (256 tokens at 43 "
        f"tokens/s), matmul for FP16 prefill = {t['prefill']:,.0f} cycles (489 ms), each to "
        f"{TOLERANCE:.1%}; twin engine first ({n['twin', 'decode']} decode + "
        f"{n['twin', 'prefill']} "
        f"prefill runs), then the DES from the twin's answer ({n['des', 'decode']} + "
        f"{n['des', 'prefill']} runs); rounded to 3 decimals, the DES gives FP16 {pre:.1f} ms "
        f"prefill and {dec:.2f} tokens/s decode",
        f"derived, not fitted: matmul_int8 {f['matmul_int8']} and matmul_int4 {f['matmul_int4']}"
        f" = the same kernel-overhead fraction ({f['matmul']} / 0.5) of the INT8/INT4 peaks "
        "(GA102 whitepaper: FP16 with FP32 accumulate 71 TFLOPS = half the cube's FP16 rate; "
        "INT8 284 and INT4 568 TOPS dense = its rates 2 and 4 in full)",
        "W4A4 is a prediction with these factors (nothing tuned toward the paper); ms, "
        "linear_ms, attention_ms, vector_ms: prefill latency, decode time per generated token "
        "(linear_ms includes W4A4's quantize and rotation kernels); launch_ms: the launch "
        "share of ms (already inside the three groups)",
    ]


def _notes(table: pd.DataFrame, bare: dict[str, float], dram: float) -> list[str]:
    def row(phase, flow):
        return table[(table["phase"] == phase) & (table["dataflow"] == flow)].iloc[0]

    notes = []
    for phase in ("prefill", "decode"):
        fp, w4 = row(phase, "fp16"), row(phase, "w4a4_static")
        parts = []
        for label, r in (("FP16", fp), ("W4A4", w4)):
            total = r["ms"]
            parts.append(
                f"{label} linear {r['linear_ms'] / total:.0%} / attention "
                f"{r['attention_ms'] / total:.0%} / vector {r['vector_ms'] / total:.0%} "
                f"(launches {r['launch_ms'] / total:.0%})"
            )
        per = "" if phase == "prefill" else " per token"
        notes.append(f"{phase}: where the time goes{per}: " + "; ".join(parts) +
                     f" (W4A4 speeds up only the linear layers: {fp['linear_ms']:.1f} → "
                     f"{w4['linear_ms']:.1f} ms{per})")  # fmt: skip
    pre, dec = row("prefill", "w4a4_static"), row("decode", "w4a4_static")
    base = {p: row(p, "fp16")["ours"] for p in ("prefill", "decode")}
    bare_speedup = {p: _speedup(p, base[p], bare[p]) for p in bare}
    notes += [
        f"W4A4 predictions (no factor fitted on them): prefill {pre['ours']:.1f} ms vs the "
        f"paper's 178 ms ({pre['dev_%']:+.1f} %), {pre['speedup']:.2f}× vs 2.74× "
        f"({pre['speedup_dev_%']:+.1f} %); decode {dec['ours']:.1f} tokens/s vs 93 "
        f"({dec['dev_%']:+.1f} %), {dec['speedup']:.2f}× vs 2.16× ({dec['speedup_dev_%']:+.1f} %)",
        "what changed (issue 9, item 3): before, two factors fitted on FP16 (matmul 0.476, dram "
        "0.667) were applied to INT4 unchanged and nothing else was charged: 2.60× prefill, "
        "3.14× decode. The per-kernel launch cost was folded into dram and shrank with W4A4's "
        "4× fewer weight bytes; now it is a cited fixed cost per kernel (dram re-fits to the "
        f"bandwidth alone: 0.667 → {dram}) and W4A4 pays it for its extra kernels too. INT4 "
        "matmuls now run at their own peak's fraction instead of the FP16 (half-rate) factor, "
        "which raises the prefill speedup; the online work lowers it",
        f"W4A4 without its online work (knobs quantize/hadamard off, LM head INT4): prefill "
        f"{bare['prefill']:.1f} ms ({bare_speedup['prefill']:.2f}×), decode "
        f"{bare['decode']:.1f} tokens/s ({bare_speedup['decode']:.2f}×): the quantize and R4 "
        "kernels, their launches and the FP16 LM head cost the difference",
        "prefill still over-predicts: matmul_int4 assumes INT4 kernels reach the same fraction of "
        "their peak as FP16 ones (no cited achieved INT4 fraction on GA102 was found); if INT4 "
        "kernels fall further short of their peak, the prediction drops toward the paper; the "
        "FP16 rows cannot tell, so this is not fitted",
        "launch cost: the cited range is 5-20 µs of CPU-side launch time per kernel (PyTorch "
        "eager); the low end is used, and it is charged in full on top of every kernel even when "
        "a long kernel would hide the next launch (a pessimistic, simple rule); higher values "
        "lower the W4A4 decode speedup (more of its kernels are tiny)",
        "not modelled: kernel fusion beyond the plan's ops (q/k/v and gate/up each quantize "
        "their shared input: 3 of a layer's 7 quantize kernels are duplicates), R3 (Q/K "
        "rotation, only for KV quantization; knob r3_head_dim), FlashAttention-style fusion "
        "(attention matmuls run head by head, softmax is an unfused vector pass through DRAM), "
        "sampling",
    ]
    return notes


def _plot(table: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, phase in zip(axes, ("prefill", "decode")):
        part = table[table["phase"] == phase]
        x = np.arange(len(part))
        bottom = np.zeros(len(part))
        for col, color in (("linear_ms", "C0"), ("attention_ms", "C1"), ("vector_ms", "C2")):
            vals = part[col].to_numpy()  # decode: already per generated token
            ax.bar(x - 0.2, vals, 0.4, bottom=bottom, color=color,
                   label=f"ours: {col[:-3]}")  # fmt: skip
            bottom += vals
        paper_ms = [p if phase == "prefill" else 1e3 / p for p in part["paper"]]
        ax.bar(x + 0.2, paper_ms, 0.4, color="0.6", label="paper")
        for xi, (s, ps) in enumerate(zip(part["speedup"], part["paper_speedup"])):
            ax.text(xi, max(bottom[xi], paper_ms[xi]) * 1.02, f"{s:.2f}× / {ps:.2f}×",
                    ha="center", fontsize=8)  # fmt: skip
        ax.set_xticks(x, ["FP16", "W4A4 O2"])
        ax.set_ylabel("prefill latency (ms)" if phase == "prefill" else "ms per token")
        ax.set_title(f"{phase} (speedup ours / paper)")
        ax.legend(fontsize=7)
    fig.suptitle("Llama-2-7B on rtx3090_like vs PrefixQuant Fig. 6 (RTX 3090)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")  # the CLI writes to a suffix-less temp file
    plt.close(fig)
