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
