"""``prefixquant-fig6``: PrefixQuant Fig. 6 — W4A4 Llama-2-7B vs FP16 on an RTX 3090.

The paper (PrefixQuant §5.4, Fig. 6) measures Llama-2-7B on an RTX 3090: prefill of 2048 tokens
(latency) and decode of 256 new tokens after a 2048-token prompt (tokens/s), FP16 vs
PrefixQuant-O2 W4A4 (INT4 per-channel weights, per-tensor static INT4 activations; KV cache not
quantized in the speed test, "KV quantization is not considered"). It reports FP16 489 ms /
43 tokens/s and O2 178 ms (2.74×) / 93 tokens/s (2.16×). Llama-2-7B has o = 3 prefixed tokens
(Table 5: ``.``, ``\\n``, [BOS]) kept in the KV cache.

We run the same workloads through :func:`accel_sim.model_run.simulate_model` on
``arch_configs/rtx3090_like.yaml``. **Calibration** (FP16 rows only): the file's ``efficiency``
factors (``matmul``, ``vector``; the engine divides each op's cycles by its factor) are the
solution of the two linear equations

    m_p / e_matmul + v_p / e_vector = 489 ms · f_clk      (FP16 prefill)
    m_d / e_matmul + v_d / e_vector = 256 / 43 s · f_clk  (FP16 decode)

with m (matmul cycles: linear layers + attention) and v (vector cycles) of the *uncalibrated*
FP16 runs; :func:`calibrate_rtx3090` derives them and a test checks that the YAML holds them,
rounded to 3 decimals. W4A4 is then a prediction with the same factors, never tuned.

A sensitivity row shows how much the prediction depends on where the calibration puts the FP16
shortfall: per-phase matmul factors from each phase's FP16 row alone (vector factor 1), the
split a compute-bound / memory-bound efficiency would give (the engine has one matmul factor).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from accel_sim.arch.load import load_arch
from accel_sim.model_run import simulate_model
from accel_sim.tables.osc_table2 import arch_path
from accel_sim.tables.registry import TableResult, register_table

ARCH = "rtx3090_like"
MODEL = "llama-2-7b"
PREFILL_TOKENS = 2048
DECODE_TOKENS = 256
PREFIX_TOKENS = 3  # PrefixQuant Table 5: Llama-2-7B ".", "\n", [BOS]
FLOWS = {"FP16": "fp16", "W4A4 (PrefixQuant-O2)": "w4a4_static"}
#: PrefixQuant Fig. 6 (RTX 3090): prefill ms, decode tokens/s.
PAPER = {"FP16": {"prefill": 489.0, "decode": 43.0},
         "W4A4 (PrefixQuant-O2)": {"prefill": 178.0, "decode": 93.0}}  # fmt: skip
PAPER_SPEEDUP = {"prefill": 2.74, "decode": 2.16}
UNIT = {"prefill": "ms", "decode": "tokens/s"}


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors derived from the uncalibrated FP16 rows (module docstring)."""

    matmul: float
    vector: float
    matmul_cycles: dict[str, int]  # uncalibrated, per phase
    vector_cycles: dict[str, int]
    target_cycles: dict[str, float]

    def factors(self, digits: int = 3) -> dict[str, float]:
        return {"matmul": round(self.matmul, digits), "vector": round(self.vector, digits)}


@lru_cache(maxsize=4)
def _uncalibrated(arch: str = ARCH):
    """The architecture with its efficiency map emptied (kept alive: the engine caches by id)."""
    return load_arch(arch).model_copy(update={"efficiency": {}})


def _run(arch, phase: str, flow: str):
    prefix = PREFIX_TOKENS if flow == "w4a4_static" else 0
    if phase == "prefill":
        return simulate_model(arch, MODEL, "prefill", PREFILL_TOKENS, dataflows=(flow,),
                              stats_from=None, extra_prefix_tokens=prefix)  # fmt: skip
    return simulate_model(arch, MODEL, "decode", DECODE_TOKENS, kv_len=PREFILL_TOKENS,
                          dataflows=(flow,), stats_from=None,
                          extra_prefix_tokens=prefix)  # fmt: skip


def _split(result) -> tuple[int, int]:
    """(matmul cycles, vector cycles) of a one-dataflow model run."""
    t = result.totals.iloc[0]
    return int(t["linear_cycles"] + t["attention_cycles"]), int(t["vector_cycles"])


def target_cycles(clock_hz: float) -> dict[str, float]:
    """The paper's FP16 row in cycles: 489 ms prefill, 256 tokens at 43 tokens/s."""
    return {"prefill": PAPER["FP16"]["prefill"] * 1e-3 * clock_hz,
            "decode": DECODE_TOKENS / PAPER["FP16"]["decode"] * clock_hz}  # fmt: skip


def calibrate_rtx3090(arch: str = ARCH) -> Calibration:
    """Solve the two FP16 equations of the module docstring for (e_matmul, e_vector)."""
    base = _uncalibrated(arch)
    m, v = {}, {}
    for phase in ("prefill", "decode"):
        m[phase], v[phase] = _split(_run(base, phase, "fp16"))
    target = target_cycles(base.clock_hz)
    a = np.array([[m["prefill"], v["prefill"]], [m["decode"], v["decode"]]], dtype=float)
    inv_m, inv_v = np.linalg.solve(a, [target["prefill"], target["decode"]])
    e_m, e_v = 1 / inv_m, 1 / inv_v
    if not (0 < e_m <= 1 and 0 < e_v <= 1):
        raise ValueError(f"calibration has no solution in (0, 1]: matmul {e_m}, vector {e_v}")
    return Calibration(float(e_m), float(e_v), m, v, target)


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
            })  # fmt: skip
            for r in res.by_kind.itertuples(index=False):
                detail.append({"phase": phase, "method": method, "group": r.group,
                               "kind": r.kind, "cycles": int(r.cycles),
                               "ms": r.cycles * ms, "share": r.share})  # fmt: skip
    table = pd.DataFrame(rows)
    # prefill: ms for the 2048-token prompt; decode: ms per generated token
    table.insert(10, "ms", table["linear_ms"] + table["attention_ms"] + table["vector_ms"])
    for col in ("ms", "linear_ms", "attention_ms", "vector_ms"):
        table[col] = table[col].round(3)
    sensitivity = _sensitivity(arch, calib)
    header = _header(arch, cal_arch, calib)
    notes = _notes(table, sensitivity)
    detail_df = pd.DataFrame(detail)

    def plot(path: str) -> None:
        _plot(table, sensitivity, path)

    return TableResult("prefixquant-fig6", "W4A4 Llama-2-7B vs FP16 on rtx3090_like "
                       "(PrefixQuant Fig. 6)", header, table, plot, notes,
                       {"detail": detail_df, "sensitivity": sensitivity,
                        "calibration": calib})  # fmt: skip


def _sensitivity(arch: str, calib: Calibration) -> pd.DataFrame:
    """W4A4 speedup under per-phase matmul factors (vector 1), each from its phase's FP16 row."""
    base = _uncalibrated(arch)
    rows = []
    for phase in ("prefill", "decode"):
        fp16, w4 = (_split(_run(base, phase, f)) for f in ("fp16", "w4a4_static"))
        e_m = fp16[0] / (calib.target_cycles[phase] - fp16[1])
        fp16_c = fp16[0] / e_m + fp16[1]
        w4_c = w4[0] / e_m + w4[1]
        speedup = fp16_c / w4_c
        rows.append(
            {
                "phase": phase,
                "matmul_factor": round(e_m, 3),
                "vector_factor": 1.0,
                "w4a4": round(_metric(phase, w4_c, base.clock_hz), 2),
                "unit": UNIT[phase],
                "speedup": round(speedup, 3),
                "paper_speedup": PAPER_SPEEDUP[phase],
                "speedup_dev_%": round(100 * (speedup / PAPER_SPEEDUP[phase] - 1), 1),
            }
        )
    return pd.DataFrame(rows)  # fmt: skip


def _header(arch: str, cal_arch, calib: Calibration) -> list[str]:
    f = calib.factors()
    m, v, t = calib.matmul_cycles, calib.vector_cycles, calib.target_cycles
    return [
        f"architecture: {arch_path(arch, cal_arch)} (RTX 3090 as one 16x16x164 FP16 cube, "
        f"{cal_arch.clock_hz / 1e9:.3f} GHz, GDDR6X 936 GB/s)",
        f"model: workloads/models/{MODEL}.yaml; prefill {PREFILL_TOKENS} tokens (batch 1, LM "
        f"head over all tokens); decode {DECODE_TOKENS} tokens after a {PREFILL_TOKENS}-token "
        "prompt (tokens/s over the decode steps only)",
        f"W4A4 = w4a4_static (PrefixQuant-O2), o = {PREFIX_TOKENS} prefixed tokens in the KV "
        "cache (Table 5); attention and KV cache FP16 for both (the paper's speed test does not "
        "quantize KV); no trace statistics needed (both dataflows are data-independent)",
        f"calibration (FP16 rows only): efficiency {{matmul: {f['matmul']}, vector: "
        f"{f['vector']}}} in the YAML = calibrate_rtx3090(): solves m/e_matmul + v/e_vector = "
        f"target for prefill (m={m['prefill']:,}, v={v['prefill']:,}, target {t['prefill']:,.0f}"
        f" cycles = 489 ms) and decode (m={m['decode']:,}, v={v['decode']:,}, target "
        f"{t['decode']:,.0f} cycles = 256 tokens at 43 tokens/s); uncalibrated cycles",
        "W4A4 is a prediction with the same factors (not tuned toward the paper); ms, linear_ms, "
        "attention_ms, vector_ms: prefill latency, decode time per generated token",
    ]


def _notes(table: pd.DataFrame, sens: pd.DataFrame) -> list[str]:
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
                f"{r['attention_ms'] / total:.0%} / vector {r['vector_ms'] / total:.0%}"
            )
        per = "" if phase == "prefill" else " per token"
        notes.append(f"{phase}: where the time goes{per}: " + "; ".join(parts) +
                     f" (W4A4 speeds up only the linear layers: {fp['linear_ms']:.1f} → "
                     f"{w4['linear_ms']:.1f} ms{per})")  # fmt: skip
    pre = sens[sens["phase"] == "prefill"].iloc[0]
    dec = sens[sens["phase"] == "decode"].iloc[0]
    notes += [
        "why prefill deviates: one phase-independent matmul factor cannot give FP16 both a "
        "compute-bound prefill at ~489 ms and a memory-bound decode at 43 tokens/s (the decode "
        "fixes e_matmul near the DRAM efficiency); the solve then puts the rest of the FP16 "
        "prefill time into the vector factor, and W4A4 does not shorten vector work. On the real "
        "GPU much of that shortfall is in the FP16 GEMMs themselves (PyTorch FP16 GEMMs "
        "accumulate in FP32: 71 of the 142 TFLOPS), which INT4 kernels do not pay",
        f"sensitivity (not the calibration): per-phase matmul factors from each FP16 row alone "
        f"(vector 1) give W4A4 {pre['speedup']:.2f}× prefill (paper 2.74×, "
        f"{pre['speedup_dev_%']:+.1f} %) and {dec['speedup']:.2f}× decode (paper 2.16×, "
        f"{dec['speedup_dev_%']:+.1f} %); the engine would need separate compute- and "
        "memory-bound matmul efficiencies to use this as its calibration",
        "not modelled: PrefixQuant's online Hadamard rotations and INT4 (de)quantize kernels "
        "beyond the fused static scale, kernel launches, FlashAttention-style fusion "
        "(attention matmuls run head by head, softmax is an unfused vector pass through DRAM), "
        "sampling",
    ]
    return notes


def _plot(table: pd.DataFrame, sens: pd.DataFrame, path: str) -> None:
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
