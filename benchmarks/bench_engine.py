"""Engine speed and fidelity: our DES vs SCALE-Sim, the closed-form model vs the DES on a random
grid, and the worst cases.

Run: ``python benchmarks/bench_engine.py [--quick] [--grid N] [--seed S] [--grid-only]``
(SCALE-Sim needs ``.ci/setup_scalesim.sh``; ``--grid-only``: part 3 alone). Prints, measured in
this run:
1. per GEMM: SCALE-Sim wall time, our DES wall time, their ratio, and that both report the same
   cycles (our compute_cycles vs SCALE-Sim's Total Cycles, stall-free CALC mode);
2. DES vs closed-form model wall time on the same GEMMs;
3. |model − DES| / DES over a random grid (every shipped arch × fp16, w8a8, w8a8_static,
   w4a4_static × log-uniform shapes 1…8192): median, p90, max, per arch, and the worst cases;
4. the slowest single GEMM up to 2048×4096×12288 over every shipped architecture and a few
   dataflows (target < 0.2 s), 16777216³ on every arch (target < 10 s, < 1 GB), and peak Python
   memory for small vs large GEMMs (flat);
5. the Qwen3-8B prefill GEMMs (W8A8 × 36 layers): DES time and simulated steps before and after
   the collapse reused self-maps, and the whole model under four dataflows (target < 5 s).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from machine import describe  # noqa: E402
from scalesim_ref import run_scalesim, scalesim_available  # noqa: E402

import accel_sim  # noqa: E402
from accel_sim.arch.load import arch_from_dict  # noqa: E402
from accel_sim.arch.scalesim_import import arch_dict_from_scalesim  # noqa: E402
from accel_sim.engine import des_check  # noqa: E402
from accel_sim.engine.agreement import agreement, grid_ops  # noqa: E402
from accel_sim.engine.mapper import _CACHE as _MAPPINGS  # noqa: E402
from accel_sim.engine.run import _CACHE  # noqa: E402


def _scalesim_arch(rows: int, cols: int, dataflow: str):
    cfg = {"run_name": "bench", "array_rows": rows, "array_cols": cols, "dataflow": dataflow,
           "ifmap_sram_kb": 4096, "filter_sram_kb": 4096, "ofmap_sram_kb": 4096,
           "bandwidth_mode": "CALC", "bandwidths": [10], "sparsity_support": False}  # fmt: skip
    return arch_from_dict(arch_dict_from_scalesim(cfg, f"scalesim_{rows}x{cols}_{dataflow}"),
                          "bench")  # fmt: skip


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def compare_scalesim(cases) -> None:
    print("1. SCALE-Sim 3.0.0 vs accel-sim DES (same GEMM, same array, CALC mode)")
    # the first simulation of a process pays one-off lazy imports and first-call paths; it is
    # timed apart (on a GEMM not in the list) so that the ratios compare per-GEMM costs
    _, t_first = _timed(lambda: accel_sim.simulate(_scalesim_arch(8, 8, "os"), (8, 8, 8), "fp16"))
    print(f"   (first simulation in this process, 8x8x8 on an 8x8 OS array: {t_first:.4f} s, "
          "one-off; not in the ratios)")
    print(f"{'array':>10} {'df':>3} {'GEMM MxKxN':>16} {'SCALE-Sim s':>12} {'DES s':>9} "
          f"{'ratio':>8}  cycles equal")  # fmt: skip
    for rows, cols, df, (m, k, n) in cases:
        arch = _scalesim_arch(rows, cols, df)
        ref, t_ref = _timed(
            lambda: run_scalesim(
                rows, cols, df, [(m, k, n)], sram_kb=(4096, 4096, 4096), timeout_s=3600
            )
        )
        _CACHE.clear()
        ours, t_des = _timed(lambda: accel_sim.simulate(arch, (m, k, n), "fp16"))
        same = ours.compute_cycles == ref[0]["total_cycles"]
        print(f"{rows}x{cols:<6} {df:>3} {f'{m}x{k}x{n}':>16} {t_ref:12.2f} {t_des:9.4f} "
              f"{t_ref / t_des:7.0f}x  {same} ({ours.compute_cycles})")  # fmt: skip


def compare_twin(gemms) -> None:
    print("\n2. DES vs closed-form twin (ascend_like_cube, w8a8)")
    for gemm in gemms:
        _CACHE.clear()
        des, t_des = _timed(lambda: accel_sim.simulate("ascend_like_cube", gemm, "w8a8"))
        _CACHE.clear()
        twin, t_twin = _timed(
            lambda: accel_sim.simulate("ascend_like_cube", gemm, "w8a8", engine="twin")
        )
        print(f"  {gemm:>16}: DES {t_des * 1e3:7.1f} ms, twin {t_twin * 1e3:6.2f} ms "
              f"({t_des / t_twin:5.0f}x), cycles DES {des.cycles} twin {twin.cycles} "
              f"({(twin.cycles - des.cycles) / des.cycles:+.2%})")  # fmt: skip


def twin_grid(n: int, seed: int = 7) -> None:
    import numpy as np

    print(f"\n3. Closed-form model vs DES, random grid ({n} GEMMs, seed {seed}, single-core "
          "archs; chips: bench_chip.py --agreement): |model - DES| / DES")  # fmt: skip
    start = time.perf_counter()
    rows = [agreement(*case) for case in grid_ops(seed=seed, n=n)]
    took = time.perf_counter() - start
    errors = np.array([abs(r.error) for r in rows])

    def line(label, e):
        return (f"  {label:<22} n={e.size:4d}  median {np.median(e):7.2%}  p90 "
                f"{np.percentile(e, 90):7.2%}  max {e.max():7.2%}")  # fmt: skip

    print(line("all", errors) + f"   (target p90 <= 2 %, max <= 10 %; {took:.1f} s)")
    geomean = float(np.exp(np.mean(np.log([r.des for r in rows]))))
    print(f"  DES cycles of the mapper's choices: geometric mean {geomean:,.1f} (how good the "
          "mappings the model picks are; compare across versions on one seed)")
    for arch in sorted({r.arch for r in rows}):
        print(line(arch, np.array([abs(r.error) for r in rows if r.arch == arch])))
    print("  largest gaps (model - DES):")
    for r in sorted(rows, key=lambda r: -abs(r.error))[:8]:
        print(f"    {r.arch:>20} {r.dataflow:>12} {r.op.M}x{r.op.K}x{r.op.N} {r.op.precision:>5}: "
              f"DES {r.des:>10,} model {r.twin:>10,} ({r.error:+.1%})")


def huge() -> None:
    import resource

    print("\n   16777216^3 on every arch (target < 10 s, < 1 GB):")
    for arch in accel_sim.list_archs():
        flow = "fp16" if accel_sim.load_arch(arch).compute.rates.get("fp16") else "w8a8"
        _CACHE.clear()
        _MAPPINGS.clear()
        des_check.clear()
        res, t = _timed(lambda: accel_sim.simulate(arch, (2**24,) * 3, flow))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"  {arch:>20} {flow:>5}: {t:6.2f} s, {res.cycles:.3e} cycles, "
              f"peak RSS so far {rss:.2f} GB")


def worst_case() -> None:
    print("\n4. Slowest single GEMM (2048x4096x12288 and 2048x12288x4096), every shipped arch")
    worst = (0.0, "")
    for arch in accel_sim.list_archs():
        rates = accel_sim.load_arch(arch).compute.rates
        flows = [f for f, p in (("fp16", "fp16"), ("w8a8", "int8"), ("w4a4_static", "int4"))
                 if p in rates]  # fmt: skip
        for gemm in ("2048x4096x12288", "2048x12288x4096"):
            for flow in flows:
                _CACHE.clear()
                _MAPPINGS.clear()
                des_check.clear()
                _, t = _timed(lambda: accel_sim.simulate(arch, gemm, flow))
                worst = max(worst, (t, f"{arch} {gemm} {flow}"))
                print(f"  {arch:>20} {gemm:>16} {flow:>12}: {t * 1e3:7.1f} ms")
    print(f"  slowest: {worst[1]} in {worst[0]:.3f} s (target < 0.2 s; mapping search included)")
    huge()
    print("\n   peak Python memory (tracemalloc) by GEMM size, systolic_32x32_ws fp16:")
    for gemm in ("64x512x512", "512x4096x4096", "2048x4096x12288"):
        _CACHE.clear()
        tracemalloc.start()
        accel_sim.simulate("systolic_32x32_ws", gemm, "fp16")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {gemm:>16}: {peak / 1e6:6.2f} MB")


#: DES seconds per Qwen3-8B prefill GEMM (W8A8, × 36 layers, the mapper's mapping on the cube)
#: before the collapse reused self-maps and compared classes (commit 22cc96d, same machine class)
QWEN_BEFORE = {(2048, 4096, 4096): (1.66, 12800), (2048, 4096, 12288): (2.69, 16000),
               (2048, 12288, 4096): (4.01, 6701), (2048, 4096, 1024): (0.97, 6400)}  # fmt: skip


def qwen_gemms() -> None:
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.engine.des import simulate_program
    from accel_sim.engine.mapper import mapped_program
    from accel_sim.workload.gemm import Gemm

    print("\n5. Qwen3-8B prefill GEMMs (T=2048, W8A8, count=36 layers) on ascend_like_cube: "
          "DES time (mapping excluded), before -> after")
    arch, flow = accel_sim.load_arch("ascend_like_cube"), get_dataflow("w8a8")
    for (m, k, n), (before, steps_before) in QWEN_BEFORE.items():
        op = flow.build(Gemm(m, k, n, count=36), arch, None, flow.resolve_knobs(None)).matmuls[-1]
        program = mapped_program(arch, op)
        timing, t = _timed(lambda: simulate_program(program))
        print(f"  {f'{m}x{k}x{n}':>16}: {before:5.2f} s -> {t:5.3f} s ({before / t:4.0f}x), "
              f"simulated steps {steps_before:>6,} -> {timing.simulated_steps:>5,} "
              f"of {program.n_steps:,}")
    _CACHE.clear()
    _MAPPINGS.clear()
    des_check.clear()
    import contextlib
    import io

    from accel_sim.cli import main as cli

    flows = ["fp16", "w8a8", "w8a8_static", "w4a4_static"]
    argv = ["model", "qwen3-8b", "--phase", "prefill", "--tokens", "2048", "--dataflow", *flows]
    with contextlib.redirect_stdout(io.StringIO()):
        _, t = _timed(lambda: cli(argv))
    print(f"  whole model, prefill 2048 tokens x {len(flows)} dataflows (mapping included): "
          f"{t:.1f} s (target < 5 s; 32 s before)")


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the slow SCALE-Sim cases")
    parser.add_argument("--grid", type=int, default=300, help="GEMMs in the model-vs-DES grid")
    parser.add_argument("--seed", type=int, default=7, help="seed of the model-vs-DES grid")
    parser.add_argument("--grid-only", action="store_true",
                        help="run only the model-vs-DES grid (part 3)")  # fmt: skip
    args = parser.parse_args()
    if args.grid_only:
        twin_grid(args.grid, args.seed)
        return
    print(describe())
    cases = [(32, 32, "ws", (64, 1024, 1024)), (32, 32, "os", (256, 1024, 512)),
             (16, 16, "is", (128, 512, 512))]  # fmt: skip
    if not args.quick:
        cases.append((32, 32, "ws", (16, 4096, 4096)))
    if scalesim_available():
        compare_scalesim(cases)
    else:
        print("1. SCALE-Sim venv missing (run .ci/setup_scalesim.sh): comparison skipped")
    compare_twin(["16x4096x4096", "2048x4096x4096", "64x12288x4096"])
    twin_grid(args.grid, args.seed)
    worst_case()
    qwen_gemms()


if __name__ == "__main__":
    main()
