"""``osc-table2``: OSC paper Table 2 — OSC (MXFP4 base + FP16 branch) vs W8A8 on the cube.

The paper (OSC §3.3.2, Table 2) sweeps K and N over {512, 768, 2048, 4096, 12288} with M fixed,
on "a modern architecture with a 1:2:4 (FP16:FP8:FP4) performance ratio", and reports the speedup
of OSC over W8A8 per group size G as a min–max in the memory-bound regime (M ∈ [16, 64]) and one
value for M ≥ 128. We run the same sweep on ``arch_configs/ascend_like_cube.yaml`` (one Da Vinci
core, 1:2:4 rates) through :func:`accel_sim.simulate` with the DES engine, and with OSC's branch
width at the table's upper bound K' = ceil(K/G) (the paper's Table 2 assumption: no trace).

Besides the end-to-end speedup (W8A8 cycles / OSC cycles) we report two decompositions computed
from our own breakdowns, so a deviation from the paper is explained rather than tuned away:

* matrix-unit-only speedup (ratio of ``compute_cycles``): the paper's arithmetic argument,
  0.5 / (0.25 + 1/G) when K/G fills the cube's K block;
* matmul-op speedup (ratio of the matmul operations' cycles, memory stalls included, vector
  passes excluded), and the share of each scheme's cycles spent in vector passes (W8A8's
  per-token absmax + quantize, OSC's gather + MX quantize) and in memory stalls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from accel_sim.api import simulate
from accel_sim.arch.load import ARCH_DIR, load_arch, resolve_arch_path
from accel_sim.tables.registry import TableResult, register_table

ARCH = "ascend_like_cube"
SIZES = (512, 768, 2048, 4096, 12288)
M_MEMORY = (16, 32, 64)
M_COMPUTE = (128, 256, 512, 1024, 2048)
GROUPS = (16, 32, 64)
#: OSC Table 2: (min, max) per G and regime; M ≥ 128 is a single value.
PAPER = {
    16: {"memory": (1.50, 1.59), "compute": (1.60, 1.60)},
    32: {"memory": (1.64, 1.76), "compute": (1.78, 1.78)},
    64: {"memory": (1.72, 1.86), "compute": (1.88, 1.88)},
}
MXFP4_BITS = 4 + 8 / 32
REGIME_LABEL = {"memory": "M=16-64 (memory-bound)", "compute": "M>=128 (compute-bound)"}


def arch_path(arch, arch_obj) -> str:
    """The architecture file as a path relative to the repository when it is a shipped one."""
    path = resolve_arch_path(arch) if isinstance(arch, str) else Path(arch_obj.origin)
    try:
        return str(Path(path).resolve().relative_to(ARCH_DIR.parent))
    except ValueError:
        return str(path)


def compute_formula(G: int) -> float:
    """Matrix-unit speedup with K' = K/G at rates 1:2:4: W8A8 K/2 vs OSC K/4 + K/G."""
    return 0.5 / (0.25 + 1 / G)


def bytes_formula(G: int) -> float:
    """Weight-bytes ratio (the memory-bound limit): INT8 W vs MXFP4 W + K/G FP16 rows of W_L."""
    return 8 / (MXFP4_BITS + 16 / G)


def _sum(ops, kinds: Sequence[str], field: str = "cycles") -> int:
    return sum(op[field] for op in ops if op["kind"] in kinds)


def _mem_stalls(result) -> int:
    return sum(v for k, v in result.stalls.items() if k.startswith(("load:", "store:")))


def sweep(arch=ARCH, sizes=SIZES, ms=M_MEMORY + M_COMPUTE, groups=GROUPS,
          engine: str = "des") -> pd.DataFrame:  # fmt: skip
    """One row per (M, K, N, G): W8A8 and OSC cycles and their breakdowns."""
    arch = load_arch(arch)
    block_k = getattr(arch.compute, "block_k", 1)
    rows = []
    for M in ms:
        for K in sizes:
            for N in sizes:
                base = simulate(arch, (M, K, N), "w8a8", engine=engine)
                base_vec = _sum(base.ops, ("vector",))
                base_mm = _sum(base.ops, ("matmul",))
                for G in groups:
                    osc = simulate(arch, (M, K, N), "osc", {"G": G}, engine=engine)
                    osc_vec = _sum(osc.ops, ("vector", "transfer"))
                    osc_mm = _sum(osc.ops, ("matmul",))
                    rows.append({
                        "M": M, "K": K, "N": N, "G": G,
                        "regime": "memory" if M < 128 else "compute",
                        "k_branch": osc.knobs["table_channels"],
                        "k_branch_aligned": osc.knobs["table_channels"] % block_k == 0,
                        "w8a8_cycles": base.cycles, "osc_cycles": osc.cycles,
                        "speedup": base.cycles / osc.cycles,
                        "matrix_speedup": base.compute_cycles / osc.compute_cycles,
                        "matmul_speedup": base_mm / osc_mm,
                        "w8a8_vector_share": base_vec / base.cycles,
                        "osc_vector_share": osc_vec / osc.cycles,
                        "w8a8_mem_stall_share": _mem_stalls(base) / base.cycles,
                        "osc_mem_stall_share": _mem_stalls(osc) / osc.cycles,
                        "w8a8_energy_pj": base.energy_pj, "osc_energy_pj": osc.energy_pj,
                    })  # fmt: skip
    return pd.DataFrame(rows)


def _summary(detail: pd.DataFrame, ms_by_regime: dict[str, tuple[int, ...]]) -> pd.DataFrame:
    rows = []
    for G, by_g in detail.groupby("G", sort=True):
        for regime in ("memory", "compute"):
            part = by_g[by_g["regime"] == regime]
            if part.empty:
                continue
            lo, hi = part["speedup"].min(), part["speedup"].max()
            p_lo, p_hi = PAPER[int(G)][regime]
            aligned = part[part["k_branch_aligned"]]
            rows.append({
                "G": int(G),
                "regime": REGIME_LABEL[regime],
                "M": ",".join(str(m) for m in ms_by_regime[regime]),
                "ours_min": lo, "ours_max": hi, "ours_median": part["speedup"].median(),
                "paper_min": p_lo, "paper_max": p_hi,
                "dev_min_%": 100 * (lo / p_lo - 1), "dev_max_%": 100 * (hi / p_hi - 1),
                "matrix_only_min": part["matrix_speedup"].min(),
                "matrix_only_max": part["matrix_speedup"].max(),
                "matrix_only_aligned": aligned["matrix_speedup"].median()
                if not aligned.empty else np.nan,
                "limit": bytes_formula(int(G)) if regime == "memory"
                else compute_formula(int(G)),
                "matmul_ops_min": part["matmul_speedup"].min(),
                "matmul_ops_max": part["matmul_speedup"].max(),
                "w8a8_vector_%": 100 * part["w8a8_vector_share"].median(),
                "osc_vector_%": 100 * part["osc_vector_share"].median(),
                "w8a8_mem_stall_%": 100 * part["w8a8_mem_stall_share"].median(),
                "osc_mem_stall_%": 100 * part["osc_mem_stall_share"].median(),
            })  # fmt: skip
    return pd.DataFrame(rows).round(3)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _notes(detail: pd.DataFrame, arch) -> list[str]:
    notes = []
    comp = detail[detail["regime"] == "compute"]
    mem = detail[detail["regime"] == "memory"]
    block_k = getattr(arch.compute, "block_k", 1)
    if not comp.empty:
        aligned = comp[comp["k_branch_aligned"]]
        unaligned = comp[~comp["k_branch_aligned"]]
        parts = []
        for G in sorted(aligned["G"].unique()):
            a = aligned[aligned["G"] == G]["matrix_speedup"]
            parts.append(f"G={G}: {a.min():.3f}-{a.max():.3f} vs {compute_formula(G):.3f}")
        text = (
            "matrix-unit-only speedup (compute_cycles ratio) at M>=128 where K'=K/G is a "
            f"multiple of the cube's {block_k}-deep K block: " + "; ".join(parts) + "."
        )
        if not unaligned.empty:
            shapes = sorted({(int(r.K), int(r.G), int(r.k_branch)) for r in unaligned.itertuples()})
            text += (" Where K' is not (" + ", ".join(f"K={k} G={g} K'={kb}" for k, g, kb in shapes)
                     + ") path B is padded to the K block, so the matrix-only speedup drops to "
                     f"{unaligned['matrix_speedup'].min():.3f}-"
                     f"{unaligned['matrix_speedup'].max():.3f}.")  # fmt: skip
        notes.append(text)
        notes.append(
            "M>=128: the paper's single value is the matrix-unit ratio; our end-to-end speedup "
            f"spans {comp['speedup'].min():.2f}-{comp['speedup'].max():.2f} because (i) W8A8's "
            "per-token absmax + quantize vector passes take "
            f"{_pct(comp['w8a8_vector_share'].min())}-{_pct(comp['w8a8_vector_share'].max())} "
            f"(median {_pct(comp['w8a8_vector_share'].median())}) of its cycles and OSC's "
            "gather + MXFP4 quantize (3 vector ops/element) + table read take "
            f"{_pct(comp['osc_vector_share'].min())}-{_pct(comp['osc_vector_share'].max())} "
            f"(median {_pct(comp['osc_vector_share'].median())}) of its cycles: these passes "
            "are about as long in both schemes, so they pull the ratio toward 1 (Amdahl); "
            "(ii) memory stalls: median "
            f"{_pct(comp['w8a8_mem_stall_share'].median())} of W8A8's and "
            f"{_pct(comp['osc_mem_stall_share'].median())} of OSC's cycles (HBM is 37 B/cycle "
            "per core; OSC writes Y from two matmuls, path A and path B, so small-K shapes "
            "with a large M×N output are store-bound and can even run slower than W8A8: "
            f"min matmul-op speedup {comp['matmul_speedup'].min():.2f}); where W8A8 is "
            "memory-stalled and OSC is not, ours exceeds the matrix-only ratio "
            f"(max {comp['speedup'].max():.2f})."
        )  # fmt: skip
    if not mem.empty:
        parts = [f"G={G}: {bytes_formula(G):.2f}" for G in sorted(mem["G"].unique())]
        notes.append(
            "M=16-64: W8A8 and OSC are both bound by HBM loads of W (load stalls are median "
            f"{_pct(mem['w8a8_mem_stall_share'].median())} of W8A8's cycles), so the speedup "
            "tends to the weight-bytes ratio 8 / (4.25 + 16/G) (MXFP4 W plus K/G FP16 rows of "
            "W_L): " + "; ".join(parts) + f". Ours reaches {mem['speedup'].max():.2f} at large "
            f"K·N and falls to {mem['speedup'].min():.2f} at small K·N, where fixed costs "
            "that W8A8 does not pay weigh most: the 500-cycle HBM latency of OSC's "
            "lookup-table read, path B's second pass over the output tiles and its latency, "
            "and the vector passes' startup."
        )  # fmt: skip
    notes.append(
        "no parameter was tuned toward the paper; the rates (1:2:4), bandwidths and latencies "
        "are those of the architecture file."
    )
    return notes


def _plot(detail: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(detail["G"].unique())
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.8), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, G in zip(axes, groups):
        part = detail[detail["G"] == G]
        stats = part.groupby("M")["speedup"].agg(["min", "median", "max"])
        ms = stats.index.to_numpy()
        ax.fill_between(ms, stats["min"], stats["max"], alpha=0.25, color="C0",
                        label="ours: min-max over K, N")  # fmt: skip
        ax.plot(ms, stats["median"], "o-", color="C0", label="ours: median")
        matrix = part.groupby("M")["matrix_speedup"].median()
        ax.plot(matrix.index, matrix.to_numpy(), ":", color="C2", label="ours: matrix unit only")
        lo, hi = PAPER[int(G)]["memory"]
        mem_ms = [m for m in ms if m < 128]
        if mem_ms:
            ax.errorbar([np.sqrt(min(mem_ms) * max(mem_ms))], [(lo + hi) / 2],
                        yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], fmt="s", color="C3",
                        capsize=5, label="paper (M=16-64: min-max)")  # fmt: skip
        comp_ms = [m for m in ms if m >= 128]
        if comp_ms:
            value = PAPER[int(G)]["compute"][0]
            ax.plot(comp_ms, [value] * len(comp_ms), "D", color="C3", mfc="none",
                    label="paper (M>=128)")  # fmt: skip
        ax.axhline(compute_formula(int(G)), color="gray", lw=0.8, ls="--",
                   label="0.5/(0.25+1/G)")  # fmt: skip
        ax.axhline(1.0, color="black", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms], rotation=45)
        ax.set_title(f"G = {G}")
        ax.set_xlabel("M (tokens)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("speedup over W8A8 (cycles)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("OSC vs W8A8 on ascend_like_cube (K, N in {512..12288}, K' = ceil(K/G))")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@register_table("osc-table2", "OSC Table 2: OSC vs W8A8 speedup per G and M regime, on the cube")
def build(arch: str = ARCH, sizes: Sequence[int] = SIZES, m_memory: Sequence[int] = M_MEMORY,
          m_compute: Sequence[int] = M_COMPUTE, groups: Sequence[int] = GROUPS,
          engine: str = "des") -> TableResult:  # fmt: skip
    start = time.perf_counter()
    arch_obj = load_arch(arch)
    detail = sweep(arch_obj, tuple(sizes), tuple(m_memory) + tuple(m_compute), tuple(groups),
                   engine)  # fmt: skip
    table = _summary(detail, {"memory": tuple(m_memory), "compute": tuple(m_compute)})
    elapsed = time.perf_counter() - start
    arch_file = arch_path(arch, arch_obj)
    header = [
        f"architecture: {arch_file} ({arch_obj.description}); rates {dict(arch_obj.compute.rates)}",
        "statistics: none — OSC branch width K' = ceil(K/G), the lookup table's upper bound "
        "and the paper's Table 2 assumption (no trace); MXFP4 base (4.25 bits/element), "
        "no down-projection fallback (kind-less GEMMs)",
        f"sweep: K, N in {list(sizes)}; M in {list(m_memory)} (memory-bound) and "
        f"{list(m_compute)} (compute-bound); G in {list(groups)}; "
        f"{len(detail) // max(1, len(groups))} shapes x (W8A8 + {len(groups)} OSC)",
        f"engine: {engine} (cycle-level DES, steady-state collapse); built in {elapsed:.1f} s",
        "speedup = W8A8 cycles / OSC cycles (W8A8: per-token absmax + quantize + INT8 matmul); "
        "matrix_only = compute_cycles ratio; matmul_ops = matmul operations' cycles (memory "
        "stalls in, vector passes out); limit = 8/(4.25+16/G) (weight bytes) for memory-bound "
        "rows, 0.5/(0.25+1/G) for compute-bound rows; shares are medians over the shapes",
        "paper: OSC (seed OSC) §3.3.2, Table 2; dev_% = ours/paper - 1 (of the min and of the max)",
    ]
    return TableResult(
        name="osc-table2",
        title="OSC vs W8A8 speedup (OSC paper Table 2)",
        header=header,
        table=table,
        plot=lambda path: _plot(detail, path),
        notes=_notes(detail, arch_obj),
        extra={"detail": detail.round(4), "seconds": elapsed},
    )
