"""``prefixquant-fig6``: PrefixQuant Fig. 6 — W4A4 Llama-2-7B vs FP16 on an RTX 3090.

The paper (PrefixQuant §5.4, Fig. 6) measures Llama-2-7B on an RTX 3090: prefill of 2048 tokens
(latency) and decode of 256 new tokens after a 2048-token prompt (tokens/s), FP16 vs
PrefixQuant-O2 W4A4 (INT4 per-channel weights, per-tensor static INT4 activations; KV cache not
quantized in the speed test, "KV quantization is not considered"). It reports FP16 489 ms /
43 tokens/s and O2 178 ms (2.74×) / 93 tokens/s (2.16×). Llama-2-7B has o = 3 prefixed tokens
(Table 5: ``.``, ``\\n``, [BOS]) kept in the KV cache.

We run the same workloads through :func:`accel_sim.model_run.simulate_model` on
``arch_configs/rtx3090_like.yaml``. **Calibration** (FP16 rows only): the file's ``efficiency``
map holds two fitted factors, ``matmul`` (divides the matrix unit's per-step compute time:
FP32-accumulate FP16 GEMMs, kernel overheads) and ``dram`` (multiplies DRAM bandwidth on every
hop touching DRAM: achieved vs peak bandwidth); ``vector`` stays 1 (not fitted). The engine
pipelines compute and memory (a step takes the max of both), so FP16 time is a non-linear,
non-increasing function of each factor; :func:`calibrate_rtx3090` finds the pair for which

    FP16 prefill of 2048 tokens      = 489 ms               (mostly compute-bound → matmul)
    FP16 decode of 256 tokens @ 2048 = 256 / 43 s           (memory-bound → dram)

by alternating 1-D solves (:func:`_solve`, a bracketed secant in the slowdown 1/factor):
``dram`` so that decode hits its target at the current ``matmul``, then ``matmul`` so that
prefill hits its target at that ``dram``, repeated until a round starts with decode already
within 0.5 % (both targets then hold at the same point). The search runs on the closed-form twin
engine (fast), then the same procedure is repeated with the DES (the engine of the table) from
the twin's answer; the factors are rounded to 3 decimals and the FP16 rows re-run with them.
A test checks that the YAML holds exactly these factors. W4A4 is then a prediction with the same
factors, never tuned toward the paper's speedups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from accel_sim.arch.load import arch_from_dict, load_arch, resolve_arch_path
from accel_sim.model_run import simulate_model
from accel_sim.tables.osc_table2 import arch_path
from accel_sim.tables.registry import TableResult, register_table
from accel_sim.yaml_io import load_yaml_text

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
#: Calibration: relative tolerance on FP16 cycles, evaluations per 1-D solve, rounds per engine,
#: largest slowdown (1 / factor) searched.
TOLERANCE = 5e-3
MAX_EVALS = 12
MAX_ROUNDS = 4
MAX_SLOWDOWN = 20.0


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors fitted on the FP16 rows (module docstring)."""

    matmul: float  # unrounded DES solution
    dram: float
    target_cycles: dict[str, float]  # per phase
    achieved_cycles: dict[str, int]  # DES, with the rounded factors
    evaluations: tuple[tuple[str, str, float, float, int], ...] = field(repr=False)
    vector: float = 1.0  # not fitted

    def factors(self, digits: int = 3) -> dict[str, float]:
        """The YAML ``efficiency`` map (rounded)."""
        return {"matmul": round(self.matmul, digits), "dram": round(self.dram, digits),
                "vector": self.vector}  # fmt: skip

    def evaluation_count(self, engine: str, phase: str) -> int:
        return sum(1 for e in self.evaluations if e[0] == engine and e[1] == phase)


@lru_cache(maxsize=4)
def _arch_data(arch: str) -> tuple[str, str]:
    path = resolve_arch_path(arch)
    return str(path), path.read_text(encoding="utf-8")


def candidate_arch(arch: str, matmul: float, dram: float):
    """``arch`` with efficiency {matmul, dram, vector 1}, validated like a file."""
    path, text = _arch_data(arch)
    data = load_yaml_text(text, path)
    data["efficiency"] = {"matmul": matmul, "dram": dram, "vector": 1.0}
    return arch_from_dict(data, f"{path} (calibration candidate matmul {matmul}, dram {dram})")


def _run(arch, phase: str, flow: str, engine: str = "des"):
    prefix = PREFIX_TOKENS if flow == "w4a4_static" else 0
    if phase == "prefill":
        return simulate_model(arch, MODEL, "prefill", PREFILL_TOKENS, dataflows=(flow,),
                              stats_from=None, extra_prefix_tokens=prefix,
                              engine=engine)  # fmt: skip
    return simulate_model(arch, MODEL, "decode", DECODE_TOKENS, kv_len=PREFILL_TOKENS,
                          dataflows=(flow,), stats_from=None, extra_prefix_tokens=prefix,
                          engine=engine)  # fmt: skip


def target_cycles(clock_hz: float) -> dict[str, float]:
    """The paper's FP16 row in cycles: 489 ms prefill, 256 tokens at 43 tokens/s."""
    return {"prefill": PAPER["FP16"]["prefill"] * 1e-3 * clock_hz,
            "decode": DECODE_TOKENS / PAPER["FP16"]["decode"] * clock_hz}  # fmt: skip


def _solve(cycles_at: Callable[[float], int], target: float, start: float) -> float:
    """The factor e in [1/MAX_SLOWDOWN, 1] with ``cycles_at(e)`` within TOLERANCE of ``target``.

    ``cycles_at`` is non-increasing in e. Works in the slowdown x = 1/e, in which cycles grow
    about affinely while one resource binds: the first step is proportional (x·target/cycles),
    later ones secant through the last two points, replaced by bisection when they leave the
    bracket found so far. At most MAX_EVALS evaluations; the first is at ``start``.
    """
    lo, hi = 1.0, MAX_SLOWDOWN  # bracket on x: cycles(lo) ≤ target ≤ cycles(hi) once seen
    seen_lo = seen_hi = False
    prev: tuple[float, int] | None = None
    x = 1.0 / start
    for _ in range(MAX_EVALS):
        c = cycles_at(1.0 / x)
        if abs(c / target - 1) <= TOLERANCE:
            return 1.0 / x
        if c < target:
            lo, seen_lo = x, True
        else:
            hi, seen_hi = x, True
        if c > target and x == 1.0:
            raise ValueError(
                f"FP16 is slower than the paper even at factor 1 ({c:,} > {target:,.0f} "
                "cycles): the two-factor fit is impossible (a vector factor would be needed)"
            )
        if c < target and x == MAX_SLOWDOWN:
            raise ValueError(f"FP16 still faster than the paper at factor 1/{MAX_SLOWDOWN}")
        if prev is None or prev[1] == c:
            nxt = x * target / c
        else:
            nxt = x + (target - c) * (x - prev[0]) / (c - prev[1])
        if (seen_lo and seen_hi) and not lo < nxt < hi:
            nxt = (lo + hi) / 2
        prev, x = (x, c), min(max(nxt, 1.0), MAX_SLOWDOWN)
    raise ValueError(f"calibration did not converge in {MAX_EVALS} evaluations")


def _alternate(
    arch: str, engine: str, matmul: float, dram: float, log: list
) -> tuple[float, float]:
    """Alternate the decode (dram) and prefill (matmul) solves on ``engine`` until a round
    starts with decode already on target (module docstring)."""
    target = target_cycles(load_arch(arch).clock_hz)

    def cycles(phase: str, e_m: float, e_d: float) -> int:
        res = _run(candidate_arch(arch, e_m, e_d), phase, "fp16", engine)
        c = int(res.totals.iloc[0]["cycles"])
        log.append((engine, phase, e_m, e_d, c))
        return c

    for round_ in range(MAX_ROUNDS):
        before = len(log)
        dram = _solve(lambda e, m=matmul: cycles("decode", m, e), target["decode"], dram)
        if round_ > 0 and len(log) - before == 1:
            return matmul, dram  # decode on target where prefill just was: both hold
        matmul = _solve(lambda e, d=dram: cycles("prefill", e, d), target["prefill"], matmul)
    raise ValueError(f"calibration ({engine}) did not converge in {MAX_ROUNDS} rounds")


@lru_cache(maxsize=4)
def calibrate_rtx3090(arch: str = ARCH) -> Calibration:
    """Fit efficiency {matmul, dram} (vector 1) on the two FP16 rows (module docstring).

    Twin search from (1, 1), then DES search from the twin's answer, then one DES run per phase
    with the factors rounded to 3 decimals (the YAML's values).
    """
    log: list[tuple[str, str, float, float, int]] = []
    matmul, dram = _alternate(arch, "twin", 1.0, 1.0, log)
    matmul, dram = _alternate(arch, "des", matmul, dram, log)
    calib = Calibration(matmul, dram, target_cycles(load_arch(arch).clock_hz), {}, ())
    f = calib.factors()
    rounded = candidate_arch(arch, f["matmul"], f["dram"])
    achieved = {p: int(_run(rounded, p, "fp16").totals.iloc[0]["cycles"])
                for p in ("prefill", "decode")}  # fmt: skip
    return Calibration(matmul, dram, calib.target_cycles, achieved, tuple(log))


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
    header = _header(arch, cal_arch, calib)
    notes = _notes(table)
    detail_df = pd.DataFrame(detail)

    def plot(path: str) -> None:
        _plot(table, path)

    return TableResult("prefixquant-fig6", "W4A4 Llama-2-7B vs FP16 on rtx3090_like "
                       "(PrefixQuant Fig. 6)", header, table, plot, notes,
                       {"detail": detail_df, "calibration": calib})  # fmt: skip


def _header(arch: str, cal_arch, calib: Calibration) -> list[str]:
    f = calib.factors()
    clock = cal_arch.clock_hz
    t, a = calib.target_cycles, calib.achieved_cycles
    pre, dec = _metric("prefill", a["prefill"], clock), _metric("decode", a["decode"], clock)
    n = {(e, p): calib.evaluation_count(e, p) for e in ("twin", "des") for p in t}
    return [
        f"architecture: {arch_path(arch, cal_arch)} (RTX 3090 as one 16x16x164 FP16 cube, "
        f"{clock / 1e9:.3f} GHz, GDDR6X 936 GB/s)",
        f"model: workloads/models/{MODEL}.yaml; prefill {PREFILL_TOKENS} tokens (batch 1, LM "
        f"head over all tokens); decode {DECODE_TOKENS} tokens after a {PREFILL_TOKENS}-token "
        "prompt (tokens/s over the decode steps only)",
        f"W4A4 = w4a4_static (PrefixQuant-O2), o = {PREFIX_TOKENS} prefixed tokens in the KV "
        "cache (Table 5); attention and KV cache FP16 for both (the paper's speed test does not "
        "quantize KV); no trace statistics needed (both dataflows are data-independent)",
        f"calibration (FP16 rows only): efficiency {{matmul: {f['matmul']}, dram: {f['dram']}, "
        f"vector: {f['vector']} (not fitted)}} in the YAML = calibrate_rtx3090(): alternating "
        f"1-D solves, dram for FP16 decode = {t['decode']:,.0f} cycles (256 tokens at 43 "
        f"tokens/s), matmul for FP16 prefill = {t['prefill']:,.0f} cycles (489 ms), each to "
        f"{TOLERANCE:.1%}; twin engine first ({n['twin', 'decode']} decode + "
        f"{n['twin', 'prefill']} "
        f"prefill runs), then the DES from the twin's answer ({n['des', 'decode']} + "
        f"{n['des', 'prefill']} runs); rounded to 3 decimals, the DES gives FP16 {pre:.1f} ms "
        f"prefill and {dec:.2f} tokens/s decode",
        "W4A4 is a prediction with the same factors (not tuned toward the paper); ms, linear_ms, "
        "attention_ms, vector_ms: prefill latency, decode time per generated token",
    ]


def _notes(table: pd.DataFrame) -> list[str]:
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
    pre, dec = row("prefill", "w4a4_static"), row("decode", "w4a4_static")
    notes += [
        f"W4A4 predictions (no factor fitted on them): prefill {pre['ours']:.1f} ms vs the "
        f"paper's 178 ms ({pre['dev_%']:+.1f} %), {pre['speedup']:.2f}× vs 2.74× "
        f"({pre['speedup_dev_%']:+.1f} %); decode {dec['ours']:.1f} tokens/s vs 93 "
        f"({dec['dev_%']:+.1f} %), {dec['speedup']:.2f}× vs 2.16× ({dec['speedup_dev_%']:+.1f} %)",
        f"decode deviates most: our W4A4 token takes {dec['ms']:.2f} ms, the paper's "
        f"{1e3 / 93:.2f} ms (FP16 {row('decode', 'fp16')['ms']:.2f} ms in both). In the model "
        "W4A4 decode is weight streaming at the FP16-fitted DRAM efficiency, so the linear "
        f"layers shrink ~4× ({row('decode', 'fp16')['linear_ms']:.1f} → "
        f"{dec['linear_ms']:.1f} ms). Likely sources of the over-prediction: the FP16 fit folds "
        "any per-token cost that does not scale with bytes (kernel launches, synchronization) "
        "into the dram factor, where it then shrinks with the bytes (the FP16 decode row alone "
        "cannot separate fixed from per-byte time); INT4 GEMV kernels may reach less of the "
        "peak bandwidth than FP16 ones; PrefixQuant's online Hadamard rotations and activation "
        "quantization are not modelled",
        "prefill: the matmul factor derates FP16 and INT4 steps alike; the FP16 shortfall is "
        "largely FP16 GEMMs accumulating in FP32 at half rate (71 of 142 TFLOPS, cf. matmul "
        "≈ 0.46), which INT32-accumulating INT4 kernels do not pay, while INT4 kernels pay "
        "overheads the model lacks (rotations, quantization); the two pull in opposite "
        "directions, so the close prefill agreement need not mean both are right",
        "not modelled: PrefixQuant's online Hadamard rotations and INT4 (de)quantize kernels "
        "beyond the fused static scale, kernel launches, FlashAttention-style fusion "
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
