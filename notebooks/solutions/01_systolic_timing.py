"""Worked answers to the exercises of ``01_systolic_timing.ipynb`` (reveal after trying).

Each function returns the notebook's ✎ variables, computed by hand from the fold rules of the
notebook (SCALE-Sim v3's), not by asking the simulator. ``tests/test_notebooks.py`` runs the
notebook with these filled in and every check strict.
"""

from __future__ import annotations

import math


def ws_fold() -> dict:
    """WS maps K onto the array's rows and N onto its columns and streams the M rows of X:
    folds = ceil(K/R) · ceil(N/C) = ceil(40/16) · ceil(50/16) = 3 · 4 = 12; each fold loads the
    weight tile (R cycles), then streams T = M = 100 rows with the skew of R + C − 2, so
    P = 2R + C + M − 2 = 32 + 16 + 100 − 2 = 146; SCALE-Sim reports F·P − 1 = 1,751."""
    R = C = 16
    M, K, N = 100, 40, 50
    folds = math.ceil(K / R) * math.ceil(N / C)
    per_fold = 2 * R + C + M - 2
    return {"my_folds": folds, "my_cycles_per_fold": per_fold,
            "my_total_cycles": folds * per_fold - 1}  # fmt: skip


def fill_drain() -> dict:
    """OS: the wavefront needs R − 1 + C − 1 cycles to reach the far corner and as many to leave
    it: R + C − 2 = 254 on 128×128. WS (and IS) add the R cycles of loading the stationary tile:
    2R + C − 2 = 382."""
    R = C = 128
    return {"my_os_overhead": R + C - 2, "my_ws_overhead": 2 * R + C - 2}


def halve_dram() -> dict:
    """(A "try it", not checked in the notebook.) At M = 2048 WS on the 32×32 LPDDR file is
    delayed by DRAM but bound by compute (``--explain``: compute 572,415 cycles against the DRAM
    port's 430,080). Halving DRAM bandwidth doubles the port's work to ~860 k, now above the
    compute: the run becomes DRAM-bound and the simulator gives 1.44×, not 2× (the compute
    part does not slow down)."""
    import accel_sim

    base = accel_sim.load_arch("systolic_32x32_ws")
    slow = base.model_copy(update={"memory": [
        m.model_copy(update={"read_bytes_per_cycle": m.read_bytes_per_cycle / 2,
                             "write_bytes_per_cycle": m.write_bytes_per_cycle / 2})
        if i == 0 else m for i, m in enumerate(base.memory)]})  # fmt: skip
    before = accel_sim.simulate(base, (2048, 512, 512), "fp16").cycles
    after = accel_sim.simulate(slow, (2048, 512, 512), "fp16").cycles
    return {"ratio": after / before}
