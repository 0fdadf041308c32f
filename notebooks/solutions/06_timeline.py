"""Worked answers to the exercises of ``06_timeline.ipynb`` (reveal after trying).

Each function returns the values of the notebook's ✎ variables, computed the way a student
would — from the architecture file and the numbers the notebook printed — not by asking the
simulator for the answer. ``tests/test_notebooks.py`` runs the notebook with these filled in and
every check strict, so an answer that stops matching the simulator fails CI.
"""

from __future__ import annotations

import accel_sim


def overlap() -> dict:
    """Perfect overlap: the GEMM takes as long as its busier unit. The matrix unit's busy time
    (the matmul alone) exceeds the vector unit's (one fused absmax+quantize pass), so the answer is
    the matrix unit's busy cycles. The simulator adds a little: the first row block must be
    quantized before the cube can start, and the last one multiplied after the vector unit is
    done (a pipeline's fill and drain)."""
    busy = accel_sim.simulate("ascend_like_cube", "2048x1024x1024", "w8a8").units_busy
    return {"my_overlapped_cycles": max(busy.values())}


def decode() -> dict:
    """Bytes: W is 4096 × 4096 INT4 = 8,388,608 B; its per-output-channel FP32 scales 4096 × 4 B
    = 16,384 B; X is 4096 INT4 values = 2,048 B. Total 8,407,040 B. At 37 B/cycle of HBM that is
    227,217 cycles; the simulator adds the first tile's latency and the drain of the output."""
    K = N = 4096
    weights = K * N * 4 // 8
    scales = N * 32 // 8
    x = K * 4 // 8
    nbytes = weights + scales + x
    hbm = accel_sim.load_arch("ascend_like_cube").memory[0].read_bytes_per_cycle
    return {"my_decode_bytes": nbytes, "my_decode_cycles": nbytes / hbm}


def third_buffer() -> dict:
    """(A "try it", not checked in the notebook.) A third buffer does not help: with two buffers
    the largest stall is HBM→L2, i.e. HBM bandwidth, which a deeper buffer cannot raise, and the
    L1→L0A stalls are already almost gone. It even costs 1.2 % (165,005 against 162,994
    cycles): with more room the mapper picks a
    different mapping that its closed-form cost model ranks ahead but the cycle-level engine
    finds slower — the mapper's guarantee is "more hardware never costs more than a few %"
    (docs/engine.md, *Monotonicity: why a slack*), a teachable limit of cost models."""
    arch = accel_sim.load_arch("ascend_like_cube")
    cycles = {}
    for n in (2, 3):
        levels = [m if i == 0 else m.model_copy(update={"buffers": n})
                  for i, m in enumerate(arch.memory)]  # fmt: skip
        cycles[n] = accel_sim.simulate(arch.model_copy(update={"memory": levels}),
                                       "512x1024x1024", "fp16").cycles  # fmt: skip
    return {"cycles_2": cycles[2], "cycles_3": cycles[3]}
