"""``tweo-static``: W8A8 per-token dynamic vs per-tensor static activations (what TWEO enables).

TWEO (seed TWEO, §4.2 and §5) trains transformers without extreme outliers so that "the simplest,
most hardware-friendly per-tensor static quantization" of activations becomes usable; per-token
scaling is "Highest overhead" but the paper gives no latency or energy figure. We measure that
overhead on ``arch_configs/ascend_like_cube.yaml``: per-token dynamic W8A8 runs a per-token absmax
pass and a quantize pass over X on the vector unit before the INT8 matmul; per-tensor static
fuses the scalar scale into the producer of X and runs the matmul alone (``dataflow/w8a8.py``).
Per layer kind of the SmolLM2-135M trace (and of Qwen3-8B-shaped GEMMs at M = 16 and 2048) the
table gives the cycles and energy of that extra work (the ``absmax`` and ``quantize`` operations
of the plan, priced per operation), the speedup of static, and the numerical error of both from
the trace (``errors["w8a8"]``, ``errors["w8a8_static"]``: ‖Y − Y_fp32‖/‖Y_fp32‖ on the real X, W).

:func:`op_costs` (cycles and energy per plan operation) is shared with ``muxq_overhead``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from accel_sim.api import SimResult, simulate
from accel_sim.arch.load import ARCH_DIR, load_arch, resolve_arch_path
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.energy.model import price
from accel_sim.engine.chip import scope
from accel_sim.engine.run import run_plan
from accel_sim.tables.registry import TableResult, register_table
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.trace import load_trace

ARCH = "ascend_like_cube"
TRACE = "smollm2-135m"
QWEN_MS = (16, 2048)
LINEAR_KINDS = ("attn_in", "o_in", "up_gate_in", "down_in", "lm_head_in")
EXTRA_OPS = ("absmax", "quantize")
#: w8a8's ``fusion: tile`` pass does absmax and quantize in one read of X: counted as quantize
FUSED_EXTRA = {"absmax_quantize": "quantize"}


def arch_path(arch: str | Path, arch_obj) -> str:
    """The architecture file, relative to the repository when it is a shipped one."""
    path = resolve_arch_path(arch) if isinstance(arch, str | Path) else Path(arch_obj.origin)
    try:
        return str(Path(path).resolve().relative_to(ARCH_DIR.parent))
    except ValueError:
        return str(path)


def trace_path(trace) -> str:
    try:
        return str(trace.path.resolve().relative_to(ARCH_DIR.parent))
    except ValueError:
        return str(trace.path)


def op_costs(arch, gemm: Gemm, dataflow: str, knobs: Mapping[str, Any] | None = None,
             stats: Mapping[str, Any] | None = None,
             engine: str = "des") -> tuple[SimResult, list[dict[str, Any]]]:  # fmt: skip
    """:func:`accel_sim.simulate` plus the cycles and energy of each plan operation.

    ``SimResult.ops`` lists each operation's cycles (its time on the critical path: they add up
    to the run's) and ``busy_cycles`` (its unit's time on it); its energy is priced here from
    the same engine run (the matmul timing is cached by the engine, so this costs no second
    simulation): the operation's action counts at the architecture's energy table, with
    leakage over the operation's own cycles. The per-operation energies add up to
    ``SimResult.energy_pj``.
    """
    arch = load_arch(arch)
    result = simulate(arch, gemm, dataflow, knobs, stats, engine)
    flow = get_dataflow(dataflow)
    plan = flow.build(gemm, arch, stats, flow.resolve_knobs(knobs))
    ran = run_plan(arch, plan, engine=engine)
    ops = [{"name": op.name, "kind": op.kind, "cycles": op.cycles,
            "busy_cycles": op.busy_cycles, "compute_cycles": op.compute_cycles,
            "energy_pj": price(arch, op.counts, op.cycles).total_pj} for op in ran.ops]  # fmt: skip
    total = sum(op["energy_pj"] for op in ops)
    if sum(op["cycles"] for op in ops) != result.cycles or not np.isclose(
        total, result.energy_pj, rtol=1e-9
    ):  # pragma: no cover - a drift between simulate() and the per-op pricing is a bug
        raise RuntimeError(f"per-op costs of {dataflow} on {gemm.label} do not add up")
    return result, ops


def qwen3_gemms(M: int) -> list[Gemm]:
    """The linear layers of Qwen3-8B for ``M`` tokens (``workloads/models/qwen3-8b.yaml``)."""
    from accel_sim.workload.models import load_model, lower

    work = lower(load_model("qwen3-8b"), "prefill", tokens=M)
    return [g for g in work.gemms if g.kind in LINEAR_KINDS]


def _rows_for(arch, workload: str, gemms: Sequence[Gemm], stats_for, engine: str,
              cache: dict) -> list[dict]:  # fmt: skip
    acc: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    errs: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for gemm in gemms:
        key = (gemm.M, gemm.K, gemm.N, gemm.count)
        if key not in cache:
            plain = Gemm(gemm.M, gemm.K, gemm.N, count=gemm.count)
            cache[key] = {flow: op_costs(arch, plain, flow, engine=engine)
                          for flow in ("w8a8", "w8a8_static")}  # fmt: skip
        runs = cache[key]
        for kind in (gemm.kind, "all"):
            a = acc[kind]
            a["gemms"] += gemm.count
            for flow, tag in (("w8a8", "dyn"), ("w8a8_static", "static")):
                result, ops = runs[flow]
                a[f"{tag}_cycles"] += result.cycles
                a[f"{tag}_pj"] += result.energy_pj
                for op in ops:
                    name = FUSED_EXTRA.get(op["name"], op["name"])
                    name = name if name in EXTRA_OPS else "matmul"
                    a[f"{tag}_{name}_cycles"] += op["cycles"]
                    a[f"{tag}_{name}_busy"] += op["busy_cycles"]
                    a[f"{tag}_{name}_pj"] += op["energy_pj"]
            stats = stats_for(gemm) if stats_for else None
            errors = (stats or {}).get("errors") or {}
            for flow in ("w8a8", "w8a8_static"):
                if flow in errors:
                    errs[kind][flow].append(float(errors[flow]))
    rows = []
    kinds = [k for k in LINEAR_KINDS if k in acc] + ["all"]
    for kind in kinds:
        a = acc[kind]
        # what dynamic costs over static: the passes' cycles when they run in series; with
        # overlap, their exposed part plus the matmul's slowdown while they share HBM (the
        # passes' share of the critical path is no measure of it: where a pass is a little
        # longer than the matmul beside it, the whole chain runs through the pass)
        extra_cycles = a["dyn_cycles"] - a["static_cycles"]
        extra_pj = a["dyn_absmax_pj"] + a["dyn_quantize_pj"]
        e_dyn, e_static = errs[kind]["w8a8"], errs[kind]["w8a8_static"]
        rows.append({
            "workload": workload, "kind": kind, "gemms": int(a["gemms"]),
            "dynamic_cycles": int(a["dyn_cycles"]), "static_cycles": int(a["static_cycles"]),
            "pass_busy_cycles": int(a["dyn_absmax_busy"] + a["dyn_quantize_busy"]),
            "exposed_cycles": int(extra_cycles),
            "extra_%": 100 * extra_cycles / a["dyn_cycles"],
            "speedup_static": a["dyn_cycles"] / a["static_cycles"],
            "dynamic_uJ": a["dyn_pj"] * 1e-6, "static_uJ": a["static_pj"] * 1e-6,
            "extra_uJ": extra_pj * 1e-6,
            "energy_saving_%": 100 * (1 - a["static_pj"] / a["dyn_pj"]),
            "err_dynamic": np.mean(e_dyn) if e_dyn else np.nan,
            "err_static": np.mean(e_static) if e_static else np.nan,
            "err_static_max": np.max(e_static) if e_static else np.nan,
            # kept for the figure (not printed)
            "_dyn_matmul_pj": a["dyn_matmul_pj"],
            "_absmax_pj": a["dyn_absmax_pj"], "_quantize_pj": a["dyn_quantize_pj"],
            "_static_matmul_pj": a["static_matmul_pj"],
        })  # fmt: skip
    return rows


def _plot(df: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = df[df["kind"] != "all"].reset_index(drop=True)
    labels = [f"{w.split(' ')[0]}\n{k}" if i == 0 or df["workload"][i - 1] != w else k
              for i, (w, k) in enumerate(zip(df["workload"], df["kind"]))]  # fmt: skip
    x = np.arange(len(df))
    width = 0.38
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.75 * len(df) + 2), 7.5), sharex=True)
    # cycles: static's run and what dynamic adds to it (they stack to dynamic's run), beside
    # the vector unit's time on the absmax + quantize pass (mostly hidden behind the matmul)
    dyn = df["dynamic_cycles"].to_numpy(float)
    static, exposed, busy = (100 * df[c].to_numpy(float) / dyn
                             for c in ("static_cycles", "exposed_cycles", "pass_busy_cycles"))
    ax = axes[0]
    ax.bar(x - width / 2, static, width, color="C0", alpha=0.55, hatch="//",
           label="static run (INT8 matmul only)")
    ax.bar(x - width / 2, exposed, width, bottom=static, color="C1",
           label="dynamic - static (what the pass adds to the run)")
    ax.bar(x + width / 2, busy, width, color="C3",
           label="vector unit busy with absmax + quantize")
    ax.set_ylabel("cycles, % of dynamic W8A8")
    ax.grid(axis="y", alpha=0.3)
    mm, ab, qu, st, total = (df[c].to_numpy(float) for c in
                             ("_dyn_matmul_pj", "_absmax_pj", "_quantize_pj", "_static_matmul_pj",
                              "dynamic_uJ"))
    mm, ab, qu, st = (100 * v / (total * 1e6) for v in (mm, ab, qu, st))
    ax = axes[1]
    ax.bar(x - width / 2, mm, width, color="C0", label="INT8 matmul (+ epilogue, stalls)")
    ax.bar(x - width / 2, ab, width, bottom=mm, color="C3", label="per-token absmax pass")
    ax.bar(x - width / 2, qu, width, bottom=mm + ab, color="C1", label="quantize pass")
    ax.bar(x + width / 2, st, width, color="C0", alpha=0.55, hatch="//",
           label="static: matmul only")
    ax.set_ylabel("energy, % of dynamic W8A8")
    ax.grid(axis="y", alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2, loc="lower right")
    axes[0].legend(fontsize=7, ncol=2, loc="lower right")
    axes[0].set_title("W8A8 per-token dynamic (left bar) vs per-tensor static (right bar, "
                      "hatched) on ascend_like_cube")  # fmt: skip
    axes[1].set_xticks(x)
    axes[1].set_xticklabels(labels, fontsize=7, rotation=0)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)


def _notes(df: pd.DataFrame) -> list[str]:
    notes = []
    allrows = df[df["kind"] == "all"]
    for _, row in allrows.iterrows():
        notes.append(
            f"{row['workload']}: static saves {row['extra_%']:.1f} % of the cycles "
            f"(speedup {row['speedup_static']:.3f}) and {row['energy_saving_%']:.1f} % of the "
            f"energy; the absmax + quantize pass keeps the vector unit busy for "
            f"{100 * row['pass_busy_cycles'] / row['dynamic_cycles']:.1f} % of the dynamic run's "
            "cycles, beside the matmul."
        )  # fmt: skip
    trace_rows = df[df["err_static"].notna() & (df["kind"] != "all")]
    if not trace_rows.empty:
        worst = trace_rows.loc[trace_rows["err_static_max"].idxmax()]
        ratio = trace_rows["err_static"] / trace_rows["err_dynamic"]
        notes.append(
            "numerical error (mean over the kind's GEMMs, real SmolLM2 tensors): per-tensor "
            f"static is {ratio.min():.1f}-{ratio.max():.1f}x the per-token error; worst single "
            f"GEMM {worst['err_static_max']:.3f} ({worst['kind']}). SmolLM2 was not trained with "
            "TWEO, so its outliers are still there: this is the error TWEO's training has to "
            "remove for static to be usable (TWEO Table 3: GPT-2 Medium W8(C)A8(T) PPL 1456.97 "
            "without TWEO vs 16.32 with it)."
        )  # fmt: skip
    notes.append(
        "energy: the dynamic pass reads X and writes its INT8 copy at the first on-chip level "
        "that holds both, else through DRAM (engine/run.py); static saves that DRAM traffic "
        "only in the second case, so its energy saving jumps where X and its copy outgrow that "
        "level rather than growing with X."
    )
    notes.append(
        "TWEO gives no speed or energy number for static vs per-token inference (it calls "
        "per-token scaling the 'highest overhead' and per-tensor static 'the fastest'); these "
        "are ours. With overlap on (the default; docs/engine.md, 'Overlap and fusion') the "
        "absmax and quantize are one vector pass over X (fusion 'tile'; pass_busy_cycles: the "
        "vector unit's time on it) running beside the matmul row block by row block: what stays "
        "exposed is the part the matmul cannot hide "
        "(its first row block, more where the pass is the longer of the two) and the matmul's "
        "slowdown while both share HBM, so static's cycle saving is small (extra_% = dynamic "
        "− static cycles; a large X, as "
        "down_in's at M = 2048, slows the matmul while the pass streams it from HBM); its "
        "energy saving (X not read and written again) stays. accel-sim run --no-overlap gives "
        "the earlier view: two passes, each reading X, "
        "in series before the matmul (an upper bound on their cost); fusion 'producer' (the pass "
        "in the previous layer's epilogue) a lower one."
    )
    return notes


@register_table("tweo-static", "W8A8 per-token dynamic vs per-tensor static (TWEO) per layer kind")
def build(arch: str = ARCH, trace: str = TRACE, qwen_ms: Sequence[int] = QWEN_MS,
          engine: str = "des") -> TableResult:  # fmt: skip
    start = time.perf_counter()
    arch_obj = load_arch(arch)
    tr = load_trace(trace)
    cache: dict = {}
    rows = _rows_for(arch_obj, f"{tr.name} (M={tr.gemms[0].M})",
                     [g for g in tr.gemms if g.kind in LINEAR_KINDS], tr.stats_for, engine,
                     cache)  # fmt: skip
    for M in qwen_ms:
        rows += _rows_for(arch_obj, f"qwen3-8b (M={M})", qwen3_gemms(M), None, engine, cache)
    full = pd.DataFrame(rows)
    table = full[[c for c in full.columns if not c.startswith("_")]].round(4)
    elapsed = time.perf_counter() - start
    header = [
        f"architecture: {arch_path(arch, arch_obj)} ({arch_obj.description}; {scope(arch_obj)})",
        f"statistics: trace {tr.name} ({trace_path(tr)}; {tr.manifest.get('tokens')} tokens, "
        f"{len(tr.gemms)} GEMMs): numerical errors errors['w8a8'] / errors['w8a8_static'] per "
        "GEMM, averaged per kind; qwen3-8b rows: shapes from workloads/models/qwen3-8b.yaml "
        "(prefill of M tokens, linear layers x 36 layers), no trace, so no error",
        "dynamic = w8a8 (per-token absmax + quantize on the vector unit, one pass overlapped "
        "with the INT8 matmul row block by row block); static = w8a8_static (INT8 matmul only: "
        "the per-tensor scale is fused into the producer of X); pass_busy_cycles = the vector "
        "unit's time on the absmax + quantize operations of the plan; exposed_cycles = dynamic "
        "− static cycles (what they add to the run); extra_uJ = their energy (leakage during "
        "their time on the critical path included); extra_% = exposed / dynamic cycles; "
        "speedup_static = dynamic / static cycles",
        f"engine: {engine}; built in {elapsed:.1f} s",
    ]
    return TableResult(
        name="tweo-static",
        title="W8A8 per-token dynamic vs per-tensor static (what TWEO enables)",
        header=header,
        table=table,
        plot=lambda path: _plot(full, path),
        notes=_notes(table),
        extra={"seconds": elapsed},
    )
