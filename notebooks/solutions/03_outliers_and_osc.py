"""Worked answers to the exercises of ``03_outliers_and_osc.ipynb`` (reveal after trying).

Each function returns the notebook's ✎ variables, worked from OSC's cost model, not by asking
the simulator. ``tests/test_notebooks.py`` runs the notebook with these filled in and every
check strict.
"""

from __future__ import annotations


def osc_speedups() -> dict:
    """Compute-bound: W8A8 takes M·K·N/2 (rate 2); OSC takes M·K·N/4 (MXFP4 at rate 4) plus
    M·(K/G)·N at rate 1 for the FP16 branch: speedup (1/2) / (1/4 + 1/G) = 1.778 at G = 32.
    Memory-bound GEMV: time ∝ weight bits, 8 for INT8 against 4.25 (MXFP4 with its 8-bit scale
    per 32) + 16/G (the FP16 rows of the branch, one per group) for OSC: 8 / 4.5 = 1.778 at
    G = 64."""
    G_compute, G_gemv = 32, 64
    return {"my_compute_speedup_g32": 0.5 / (0.25 + 1 / G_compute),
            "my_gemv_speedup_g64": 8 / (4.25 + 16 / G_gemv)}  # fmt: skip


def try_alpha() -> dict:
    """(A "try it", not checked in the notebook.) A lower α lowers T, so more tokens count as
    afflicted and more groups get a live entry (a wider FP16 branch, more cycles); a higher α
    leaves only the largest outliers. The error moves little once the few large channels are
    in the table: the branch takes what MXFP4 handles worst."""
    import numpy as np

    from accel_sim.quant import reference as ref
    from accel_sim.workload import stats
    from accel_sim.workload.trace import load_trace

    samples = load_trace("smollm2-135m").samples()
    X = samples["X_4"].astype(np.float32)
    W = samples["W_4"].astype(np.float32)
    G = 16
    out = {}
    for alpha in (3.0, 5.0, 8.0):
        table = stats.osc_lookup_table(X, G, stats.osc_threshold(X, alpha))
        local = np.where(table >= 0, table - np.arange(len(table)) * G, -1)
        out[alpha] = {"live": int((table >= 0).sum()),
                      "error": ref.relative_error(ref.y_osc(X, W, local, G), ref.y_exact(X, W))}
    return out
