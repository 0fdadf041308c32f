"""Throughput of the statistics kernels (numba) against their numpy references.

Run: ``python benchmarks/bench_stats.py [--threads N] [--M 2048 --K 4096 --N 4096]``.
Also times every dataflow on every GEMM of the SmolLM2 trace (target < 10 s, cold caches).
X is M×K float32 N(0, 1) with planted outlier channels (×30 in 16 channels, and a few isolated
spikes); W is N×K N(0, 0.02²) with a few large weights. JIT compile time is excluded (one warm-up
call). Per-tensor kernels report elements of X per second; the early-bird kernels report
M·N·K multiply positions per second (the reference runs on a smaller problem: it materialises
M·N·ceil(K/chunk) partial sums).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from accel_sim.workload import stats as S
from accel_sim.workload import stats_ops as O


def _best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_inputs(M: int, K: int, N: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((M, K), dtype=np.float32)
    X[:, rng.choice(K, 16, replace=False)] *= 30.0
    X[rng.integers(0, M, 64), rng.integers(0, K, 64)] = 50.0
    W = (rng.standard_normal((N, K), dtype=np.float32) * 0.02).astype(np.float32)
    W[rng.integers(0, N, 32), rng.integers(0, K, 32)] = 0.15
    return X, W


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, default=2048)
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=0, help="numba threads (0 = all)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        numba.set_num_threads(args.threads)
    M, K, N = args.M, args.K, args.N
    X, W = make_inputs(M, K, N)
    T = S.osc_threshold(X)
    G = 32
    table = S.osc_lookup_table(X, G, T)
    rows: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("absmax", lambda: S.absmax(X), lambda: S.absmax_ref(X)),
        ("mean_abs", lambda: S.mean_abs(X), lambda: S.mean_abs_ref(X)),
        (
            "osc_lookup_table G=32",
            lambda: S.osc_lookup_table(X, G, T),
            lambda: S.osc_lookup_table_ref(X, G, T),
        ),
        (
            "clustering_density G=32",
            lambda: S.clustering_density(X, G, T),
            lambda: S.clustering_density_ref(X, G, T),
        ),
        (
            "table_hit_rate G=32",
            lambda: S.table_hit_rate(X, table, G, T),
            lambda: S.table_hit_rate_ref(X, table, G, T),
        ),
        (
            "osc_branch_coverage",
            lambda: S.osc_branch_coverage(X, table, G, T),
            lambda: S.osc_branch_coverage_ref(X, table, G, T),
        ),
        ("outlier_channels", lambda: O.outlier_channels(X), lambda: O.outlier_channels_ref(X)),
        ("quantize_int16", lambda: O.quantize_int16(X), lambda: O.quantize_int16_ref(X)),
        (
            "int16_hi_zero_fraction",
            lambda: O.int16_hi_zero_fraction(X),
            lambda: O.int16_hi_zero_fraction_ref(X),
        ),
        (
            "int16_hi_zero_tile_map 128x64",
            lambda: O.int16_hi_zero_tile_map(X, 128, 64),
            lambda: O.int16_hi_zero_tile_map_ref(X, 128, 64),
        ),
        ("tensor_stats (all)", lambda: O.tensor_stats(X), None),
    ]
    print(f"numba threads: {numba.get_num_threads()}   X: {M}x{K} float32   W: {N}x{K}")
    print(f"{'kernel':32s} {'numba Melem/s':>14s} {'numpy Melem/s':>14s} {'speedup':>8s}")
    for name, fast, ref in rows:
        fast()  # JIT warm-up
        tf = _best(fast, args.repeat)
        tr = _best(ref, 2) if ref is not None else float("nan")
        print(f"{name:32s} {M * K / tf / 1e6:14.0f} {M * K / tr / 1e6:14.0f} {tr / tf:8.1f}")

    chunk, tau = 16, 2.0
    fz, fs = O.early_bird_stats(X, W, chunk, tau)
    print(
        f"\nearly bird chunk={chunk} tau={tau}: fraction P_hi==0 {fz:.4f}, skipped {fs:.4f}; "
        f"hi-zero X {O.int16_hi_zero_fraction(X):.4f}, W {O.int16_hi_zero_fraction(W):.4f}"
    )
    print(f"{'kernel':32s} {'numba GMAC/s':>14s} {'numpy GMAC/s':>14s} {'speedup':>8s}")
    ms, ns = min(M, 256), min(N, 512)
    for name, fast, ref in [
        (
            "early_bird_stats",
            lambda: O.early_bird_stats(X, W, chunk, tau),
            lambda: O.early_bird_stats_ref(X[:ms], W[:ns], chunk, tau),
        ),
        (
            "early_bird_skip_map 128x128",
            lambda: O.early_bird_skip_map(X, W, chunk, tau, 128, 128),
            lambda: O.early_bird_skip_map_ref(X[:ms], W[:ns], chunk, tau, 128, 128),
        ),
    ]:
        fast()
        tf = _best(fast, args.repeat)
        tr = _best(ref, 1)
        gf, gr = M * N * K / tf / 1e9, ms * ns * K / tr / 1e9
        print(f"{name:32s} {gf:14.2f} {gr:14.2f} {gf / gr:8.1f}")
    Xd = np.random.default_rng(1).standard_normal((M, K), dtype=np.float32)  # no outliers: dense hi
    O.early_bird_stats(Xd[:64], W[:64], chunk, tau)
    tf = _best(lambda: O.early_bird_stats(Xd, W, chunk, tau), 1)
    print(
        f"{'early_bird_stats, dense-hi X':32s} {M * N * K / tf / 1e9:14.2f}   "
        f"(hi-zero X {O.int16_hi_zero_fraction(Xd):.3f}: worst case, {tf:.1f} s)"
    )


def bench_trace_dataflows() -> None:
    """All dataflows × all SmolLM2 GEMMs on the cube and on a systolic array (with OPS)."""
    import accel_sim
    from accel_sim.api import unsupported_reason
    from accel_sim.engine.run import _CACHE
    from accel_sim.workload.trace import load_trace

    trace = load_trace("smollm2-135m")
    for arch in ("ascend_like_cube", "systolic_32x32_ws"):
        first = trace.gemms[0]
        flows = [f for f in accel_sim.dataflows()
                 if not unsupported_reason(arch, f, first, trace.stats_for(first))]  # fmt: skip
        _CACHE.clear()
        start = time.perf_counter()
        df = accel_sim.simulate_many(arch, trace.gemms, flows, stats_for=trace.stats_for)
        took = time.perf_counter() - start
        print(
            f"all dataflows × SmolLM2 trace on {arch}: {len(trace.gemms)} GEMMs × "
            f"{len(flows)} dataflows = {len(df)} runs in {took:.2f} s (target < 10 s)"
        )


if __name__ == "__main__":
    main()
    print()
    bench_trace_dataflows()
