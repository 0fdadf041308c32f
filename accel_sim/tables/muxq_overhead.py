"""``muxq-overhead``: MUXQ vs LLM.int8() vs W8A8 on an INT-only NPU and on the cube.

MUXQ (seed MUXQ, §3 and §4.5) keeps outlier channels in INT8 by splitting them into a Body (shifted
right by ``exp``) and an Aux matrix, claiming "only modest computational overhead" and a
hardware-friendly uniform-INT structure, as opposed to LLM.int8()'s FP16 outlier product, which
is "inefficient" on INT-oriented NPUs; the paper measures no latency (§4.3: "this study does not
include an experimental comparison of inference latency"). We measure it on
``arch_configs/edge_npu_int8.yaml`` (no FP matrix rate: LLM.int8()'s FP16 product runs on the
vector unit) and on ``arch_configs/ascend_like_cube.yaml`` (FP16 cube), per layer kind of the
SmolLM2-135M trace, with the number of outlier channels (any |x| > 6) of every GEMM from the trace.

For every scheme the *outlier work* is what it adds to handle outliers: LLM.int8()'s detection
pass, gather and FP16 outlier product; MUXQ's shift-and-gather of Aux and its Aux matmul (separate
form) or the part of the fused ``[Body | Aux]`` matmul beyond the plain M×K×N INT8 matmul (fused
form). Cycles and energy of each operation come from :func:`accel_sim.tables.tweo_static.op_costs`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from accel_sim.arch.load import load_arch
from accel_sim.engine.chip import scope
from accel_sim.tables.registry import TableResult, register_table
from accel_sim.tables.tweo_static import LINEAR_KINDS, arch_path, op_costs, trace_path
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.trace import load_trace

ARCHS = ("edge_npu_int8", "ascend_like_cube")
TRACE = "smollm2-135m"
#: (label, dataflow, knobs, error key in the trace)
SCHEMES = (
    ("w8a8", "w8a8", {}, "w8a8"),
    ("w8a8 static", "w8a8_static", {}, "w8a8_static"),
    ("llm_int8", "llm_int8", {}, "llm_int8"),
    ("muxq exp=1", "muxq", {"exp": 1}, "muxq:exp=1"),
    ("muxq exp=2", "muxq", {"exp": 2}, "muxq:exp=2"),
    ("muxq exp=1 fused", "muxq", {"exp": 1, "fused": True}, "muxq:exp=1"),
    ("muxq exp=2 fused", "muxq", {"exp": 2, "fused": True}, "muxq:exp=2"),
)
OUTLIER_OPS = ("detect_outliers", "gather_outliers", "fp16_outliers",
               "fp16_outliers_on_vector_unit", "shift_and_gather_aux", "aux")  # fmt: skip
QUANT_OPS = ("absmax", "quantize", "absmax_quantize")  # the last: fusion "tile"
BASE_MATMULS = ("matmul", "int8_part", "body")
FUSED = "body_aux_fused"


def _classify(ops, base_matmul) -> dict[str, float]:
    """Cycles and energy of one run split into quantization passes, the plain INT8 matmul and
    the outlier work (``base_matmul``: W8A8's matmul op of the same GEMM, for the fused form)."""
    out = defaultdict(float)
    for op in ops:
        name = op["name"]
        if name in QUANT_OPS:
            part = "quant"
        elif name in BASE_MATMULS:
            part = "matmul"
        elif name in OUTLIER_OPS:
            part = "outlier"
        elif name == FUSED:
            out["matmul_cycles"] += base_matmul["cycles"]
            out["matmul_pj"] += base_matmul["energy_pj"]
            out["outlier_cycles"] += op["cycles"] - base_matmul["cycles"]
            out["outlier_pj"] += op["energy_pj"] - base_matmul["energy_pj"]
            continue
        else:  # pragma: no cover - a new op in a plan must be classified here
            raise RuntimeError(f"muxq-overhead: unclassified operation {name!r}")
        out[f"{part}_cycles"] += op["cycles"]
        out[f"{part}_pj"] += op["energy_pj"]
        if part == "quant":  # the vector unit's time on it (its critical-path share can be all
            out["quant_busy"] += op["busy_cycles"]  # of a run it barely lengthens)
    return out


def _rows_for_arch(arch_name: str, trace, engine: str) -> list[dict]:
    arch = load_arch(arch_name)
    cache: dict = {}
    acc: dict = defaultdict(lambda: defaultdict(float))
    errs: dict = defaultdict(list)
    n_out: dict = defaultdict(list)
    for gemm, stats in zip(trace.gemms, trace.stats):
        if gemm.kind not in LINEAR_KINDS:
            continue
        n = int(stats["outlier_channels"])
        plain = Gemm(gemm.M, gemm.K, gemm.N, count=gemm.count)
        base_key = ("w8a8", (), gemm.M, gemm.K, gemm.N, gemm.count, 0)
        if base_key not in cache:
            cache[base_key] = op_costs(arch, plain, "w8a8", engine=engine)
        base_matmul = next(op for op in cache[base_key][1] if op["name"] == "matmul")
        for kind in (gemm.kind, "all"):
            n_out[kind].append(n)
        for label, flow, knobs, err_key in SCHEMES:
            plain_int8 = flow.startswith("w8a8")
            key = (flow, tuple(sorted(knobs.items())), gemm.M, gemm.K, gemm.N, gemm.count,
                   0 if plain_int8 else n)  # fmt: skip
            if key not in cache:
                stats_arg = None if plain_int8 else {"outlier_channels": n}
                cache[key] = op_costs(arch, plain, flow, knobs or None, stats_arg, engine)
            result, ops = cache[key]
            parts = _classify(ops, base_matmul)
            for kind in (gemm.kind, "all"):
                a = acc[(kind, label)]
                a["cycles"] += result.cycles
                a["pj"] += result.energy_pj
                for part, value in parts.items():
                    a[part] += value
                if err_key in (stats.get("errors") or {}):
                    errs[(kind, label)].append(float(stats["errors"][err_key]))
    rows = []
    kinds = [k for k in LINEAR_KINDS if (k, "w8a8") in acc] + ["all"]
    for kind in kinds:
        base = acc[(kind, "w8a8")]
        for label, *_ in SCHEMES:
            a = acc[(kind, label)]
            e = errs[(kind, label)]
            rows.append({
                "arch": arch_name, "kind": kind,
                "outlier_ch": float(np.mean(n_out[kind])),
                "scheme": label,
                "cycles": int(a["cycles"]),
                "overhead_%": 100 * (a["cycles"] / base["cycles"] - 1),
                "outlier_cycles": int(round(a["outlier_cycles"])),
                "outlier_%": 100 * a["outlier_cycles"] / base["cycles"],
                "quant_busy_cycles": int(a["quant_busy"]),
                "energy_uJ": a["pj"] * 1e-6,
                "energy_overhead_%": 100 * (a["pj"] / base["pj"] - 1),
                "outlier_uJ": a["outlier_pj"] * 1e-6,
                "rel_error": float(np.mean(e)) if e else np.nan,
            })  # fmt: skip
    return rows


def _plot(df: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archs = list(dict.fromkeys(df["arch"]))
    schemes = [s for s in dict.fromkeys(df["scheme"]) if s != "w8a8"]
    fig, axes = plt.subplots(2, len(archs), figsize=(6.5 * len(archs), 7.5), sharey="row")
    axes = np.atleast_2d(axes)
    width = 0.8 / len(schemes)
    for col, arch in enumerate(archs):
        part = df[df["arch"] == arch]
        kinds = list(dict.fromkeys(part["kind"]))
        x = np.arange(len(kinds))
        for row, (metric, label) in enumerate((("overhead_%", "cycles"),
                                                ("energy_overhead_%", "energy"))):  # fmt: skip
            ax = axes[row, col]
            for i, scheme in enumerate(schemes):
                values = [part[(part["kind"] == k) & (part["scheme"] == scheme)][metric].iloc[0]
                          for k in kinds]  # fmt: skip
                ax.bar(x + (i - (len(schemes) - 1) / 2) * width, values, width,
                       label=scheme, color=f"C{i}")  # fmt: skip
            ax.axhline(0, color="black", lw=0.6)
            ax.set_yscale("symlog", linthresh=10)
            ax.set_xticks(x)
            ax.set_xticklabels(kinds, fontsize=8)
            ax.grid(axis="y", alpha=0.3)
            ax.set_ylabel(f"{label} vs W8A8 (%)")
            if row == 0:
                ax.set_title(arch)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("MUXQ / LLM.int8() overhead over W8A8 per layer kind (SmolLM2-135M trace)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)


def _pass_exposure(rows: pd.DataFrame, arch: str) -> str:
    """How long W8A8's quantization pass keeps the vector unit busy on ``arch`` and how much it
    adds to W8A8's run (W8A8 − w8a8 static), both as shares of W8A8's cycles."""
    busy, cycles = rows.loc["w8a8", "quant_busy_cycles"], rows.loc["w8a8", "cycles"]
    added = -rows.loc["w8a8 static", "overhead_%"]
    return (f"{arch}: vector unit busy {busy:,} cycles ({100 * busy / cycles:.0f} % of W8A8's "
            f"run), W8A8 − static {added:.1f} % of it")  # fmt: skip


def _notes(df: pd.DataFrame) -> list[str]:
    notes = []
    alls = df[df["kind"] == "all"].set_index(["arch", "scheme"])
    archs = list(dict.fromkeys(df["arch"]))
    for arch in archs:
        get = alls.loc[arch]
        muxq = [s for s in get.index if s.startswith("muxq")]
        notes.append(
            f"{arch}, whole trace: LLM.int8() {get.loc['llm_int8', 'overhead_%']:+.1f} % cycles "
            f"(outlier work {get.loc['llm_int8', 'outlier_%']:.1f} % of W8A8's cycles), MUXQ "
            f"{min(get.loc[muxq, 'overhead_%']):+.1f} to {max(get.loc[muxq, 'overhead_%']):+.1f}"
            f" % (outlier work {min(get.loc[muxq, 'outlier_%']):.1f}-"
            f"{max(get.loc[muxq, 'outlier_%']):.1f} %); energy: LLM.int8() "
            f"{get.loc['llm_int8', 'energy_overhead_%']:+.1f} %, MUXQ "
            f"{min(get.loc[muxq, 'energy_overhead_%']):+.1f} to "
            f"{max(get.loc[muxq, 'energy_overhead_%']):+.1f} %."
        )  # fmt: skip
    if len(archs) == 2 and "edge_npu_int8" in archs:
        other = [a for a in archs if a != "edge_npu_int8"][0]
        notes.append(
            "LLM.int8()'s FP16 outlier product has no matrix rate on edge_npu_int8 and runs on "
            "its 16-lane FP16 vector unit (2 ops per MAC): its overhead over W8A8 is "
            f"{alls.loc[('edge_npu_int8', 'llm_int8'), 'overhead_%']:.0f} % there vs "
            f"{alls.loc[(other, 'llm_int8'), 'overhead_%']:.0f} % on {other} (FP16 cube) — "
            "the inefficiency MUXQ §1 describes. MUXQ's Aux product stays on the INT8 matrix "
            "unit on both."
        )  # fmt: skip
    notes.append(
        "MUXQ's plan here is per-tensor (the paper's NPU setting and the trace's error key): it "
        "has no per-token absmax pass, which W8A8 and LLM.int8() (per-token) pay — so MUXQ's "
        "total can be below W8A8's even though its outlier work is positive. Both MUXQ's and "
        "LLM.int8()'s plans detect the outlier channels online (one compare per element of X)."
    )
    notes.append(
        "overlap on (the default; docs/engine.md, 'Overlap and fusion'): each plan's operations "
        "run on concurrent units row block by row block, and an operation's cycles here "
        "(outlier_cycles) are its time on the critical path (they add up to the run's). The "
        "outlier detection has to see every token before the shift/gather and the quantize can "
        "start, so it stays exposed in full: the overheads over W8A8 are larger than with the "
        "passes in series (accel-sim run --no-overlap), where W8A8 paid its passes too. "
        "quant_busy_cycles is the vector unit's time on the quantization passes, beside the "
        "matmul; what W8A8's pass adds to its run is W8A8 − w8a8 static: "
        + "; ".join(_pass_exposure(alls.loc[arch], arch) for arch in archs)
        + "."
    )  # fmt: skip
    for arch in archs:
        over = alls.loc[arch, "overhead_%"]
        exp_cost = over["muxq exp=2"] - over["muxq exp=1"]
        fused_gain = over["muxq exp=2 fused"] - over["muxq exp=2"]
        notes.append(
            f"{arch}, exp: exp = 2 costs {exp_cost:+.1f} points of cycles over exp = 1 in the "
            "separate form (the Aux result is scaled by 2^exp - 1 = 3 and added, 2 ops per "
            "output, instead of a plain add: the 'additional overhead' of MUXQ §3) and nothing "
            "in the fused form (the scale is folded into the W_out rows offline); fused vs "
            f"separate: {fused_gain:+.1f} points (one matmul of inner size K + n_out instead of "
            "a second pass over the outputs)."
        )
    trace_all = df[(df["kind"] == "all")].drop_duplicates("scheme").set_index("scheme")
    err = trace_all["rel_error"]
    muxq_err = max(err["muxq exp=1"], err["muxq exp=2"])
    order = (
        err["w8a8 static"] > muxq_err
        and min(err["muxq exp=1"], err["muxq exp=2"]) > err["llm_int8"]
    )
    notes.append(
        f"error, whole trace: W8A8 per-token {err['w8a8']:.4f}, per-tensor static (naive) "
        f"{err['w8a8 static']:.4f}, MUXQ exp=1 {err['muxq exp=1']:.4f}, exp=2 "
        f"{err['muxq exp=2']:.4f}, LLM.int8() {err['llm_int8']:.4f}: "
        + (
            "as in MUXQ Table 1 (perplexity), MUXQ per-tensor is better than naive per-tensor "
            "quantization and worse than LLM.int8()."
            if order
            else "unlike MUXQ Table 1's ordering (naive per-tensor > MUXQ > LLM.int8()), see "
            "the per-kind rows."
        )
    )
    neg = df[df["outlier_cycles"] < 0]
    if not neg.empty:
        notes.append(
            "a fused matmul's excess over the plain INT8 matmul can be slightly negative ("
            + ", ".join(f"{r.arch} {r.kind}: {r.outlier_cycles}" for r in neg.drop_duplicates(
                ["arch", "kind"]).itertuples())
            + " cycles): the engine's tiler picks a different tile for inner size K + n_out "
            "than for K, and that tile stalls less."
        )  # fmt: skip
    notes.append(
        "energy: W8A8's pass reads X and writes its INT8 copy at the first on-chip level that "
        "holds both, else through DRAM (engine/run.py); w8a8 static saves that DRAM traffic only "
        "in the second case, so its energy saving jumps where X and its copy outgrow that level "
        "(on edge_npu_int8's 1 MB input buffer, down_in's X and copy do not fit, attn_in's do) "
        "rather than growing with X."
    )
    notes.append(
        "MUXQ reports perplexity only (GPT-2, WikiText-2) and 'modest computational overhead' "
        "without a latency or energy number; the comparison above is ours. Error = ‖Y − "
        "Y_fp32‖/‖Y_fp32‖ per GEMM from the trace (real tensors), averaged per kind."
    )
    return notes


@register_table("muxq-overhead", "MUXQ vs LLM.int8() vs W8A8: extra work per layer kind, INT NPU "
                "and cube")  # fmt: skip
def build(archs: Sequence[str] = ARCHS, trace: str = TRACE, engine: str = "des") -> TableResult:
    start = time.perf_counter()
    tr = load_trace(trace)
    rows = []
    for arch in archs:
        rows += _rows_for_arch(arch, tr, engine)
    table = pd.DataFrame(rows).round(4)
    elapsed = time.perf_counter() - start
    header = [
        "architectures: "
        + "; ".join(
            f"{arch_path(a, load_arch(a))} ({load_arch(a).description}; {scope(load_arch(a))})"
            for a in archs
        ),  # fmt: skip
        f"statistics: trace {tr.name} ({trace_path(tr)}; {tr.manifest.get('tokens')} tokens, "
        f"{len(tr.gemms)} GEMMs): outlier channels (any |x| > 6) per GEMM drive the plans; "
        "errors['w8a8'], ['w8a8_static'], ['llm_int8'], ['muxq:exp=1'], ['muxq:exp=2'] per "
        "GEMM, averaged per kind (outlier_ch = mean outlier channels per GEMM of the kind)",
        "schemes: w8a8 = per-token dynamic (absmax + quantize + INT8 matmul, the baseline); "
        "w8a8 static = per-tensor static INT8 (the naive per-tensor reference of MUXQ Table 1; "
        "no absmax or quantize pass); "
        "llm_int8 = per-token INT8 + FP16 outlier product (on the vector unit when the matrix "
        "unit has no FP16 rate); muxq = per-tensor INT8 Body + INT8 Aux, separate or fused; "
        "plans overlapped on concurrent units (cycles of an operation = its time on the "
        "critical path)",
        "overhead_% = cycles / W8A8 cycles - 1; outlier_cycles / outlier_uJ = the scheme's "
        "outlier work (detection, gather/shift, Aux or FP16 outlier product, the fused matmul's "
        "excess over the plain INT8 matmul); outlier_% = outlier_cycles / W8A8 cycles; "
        "quant_busy_cycles = the vector unit's time on the absmax + quantize passes",
        f"engine: {engine}; built in {elapsed:.1f} s",
    ]
    return TableResult(
        name="muxq-overhead",
        title="MUXQ vs LLM.int8() vs W8A8: overhead of outlier handling",
        header=header,
        table=table,
        plot=lambda path: _plot(table, path),
        notes=_notes(table),
        extra={"seconds": elapsed},
    )
