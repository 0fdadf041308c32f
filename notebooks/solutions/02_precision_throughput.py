"""Worked answers to the exercises of ``02_precision_throughput.ipynb`` (reveal after trying).

Each function returns the notebook's ✎ variables, computed from the architecture file's rate
table, not by asking the simulator. ``tests/test_notebooks.py`` runs the notebook with these
filled in and every check strict.
"""

from __future__ import annotations

import accel_sim

M, K, N = 2048, 4096, 4096


def _peak(rate: int) -> int:
    cube = accel_sim.load_arch("ascend_like_cube").compute
    return cube.block_m * cube.block_k * cube.block_n * rate


def w8a8_compute() -> dict:
    """INT8 runs at rate 2: 16×32×16 = 8,192 MACs per cycle; every block of this GEMM is full
    (all dimensions are multiples of the block), so 2048·4096·4096 / 8,192 = 4,194,304 cycles."""
    return {"my_w8a8_compute_cycles": M * K * N // _peak(2)}


def fast4() -> dict:
    """With INT4 at rate 8 the cube does 16×128×16 = 32,768 MACs per cycle: 1,048,576 cycles of
    compute, half of the 1:2:4 unit's. The simulator's total is larger: HBM now binds part of
    the time."""
    return {"my_fast4_compute_cycles": M * K * N // _peak(8)}


def halve_hbm() -> dict:
    """(A "try it", not checked in the notebook.) M = 1 is memory-bound: halving HBM bandwidth
    nearly doubles its cycles (the simulator: 2.00×). M = 4096 W4A4 sits at an intensity of
    ~584 MAC/B, just right of the ridge (~443); halving the bandwidth moves the ridge to ~886,
    so it becomes memory-bound too and slows down 1.52× — read the roofline before expecting
    "compute-bound, barely moves"."""
    arch = accel_sim.load_arch("ascend_like_cube")
    hbm = arch.memory[0]
    slow = arch.model_copy(update={"memory": [hbm.model_copy(update={
        "read_bytes_per_cycle": hbm.read_bytes_per_cycle / 2,
        "write_bytes_per_cycle": hbm.write_bytes_per_cycle / 2}), *arch.memory[1:]]})  # fmt: skip
    ratio = {}
    for m in (1, 4096):
        ratio[m] = (accel_sim.simulate(slow, (m, K, N), "w4a4_static").cycles
                    / accel_sim.simulate(arch, (m, K, N), "w4a4_static").cycles)  # fmt: skip
    return {"slowdown_m1": ratio[1], "slowdown_m4096": ratio[4096]}
