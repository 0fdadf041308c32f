"""Worked answers to the exercises of ``08_energy_and_design_space.ipynb`` (reveal after trying).

Each function returns the values of the notebook's ✎ variables, computed the way a student
would — from the architecture file (``arch_configs/ascend_like_cube.yaml``) and the numbers the
notebook printed — not by asking the simulator for the answer. ``tests/test_notebooks.py`` runs
the notebook with these filled in and every check strict, so an answer that stops matching the
simulator fails CI.
"""

from __future__ import annotations

import accel_sim


def decode_energy() -> dict:
    """Bytes from HBM for the W8A8 GEMV 1×4096×4096: the INT8 weights 4096 × 4096 × 1 B =
    16,777,216 B, their per-output-channel FP32 scales 4096 × 4 B = 16,384 B and the INT8
    activation row 4096 B: 16,797,696 B. At ``HBM.read`` = 31.2 pJ/byte (3.9 pJ/bit, not
    node-scaled) that is 524.1 µJ; over 16,777,216 MACs ≈ 31.2 pJ/MAC — one weight byte per MAC,
    each priced at a DRAM access. The simulator's HBM read is exactly these bytes (the
    notebook checks within 1 %)."""
    K = N = 4096
    nbytes = K * N * 1 + N * 4 + K * 1
    pj_per_byte = accel_sim.load_arch("ascend_like_cube").energy["HBM"]["read"].value
    hbm_pj = nbytes * pj_per_byte
    return {"my_decode_hbm_uj": hbm_pj / 1e6, "my_decode_dram_pj_per_mac": hbm_pj / (K * N)}


def sweep_knobs() -> dict:
    """Decode streams every weight byte once and does one MAC per byte: HBM-bound, so bandwidth
    is the knob (the cube is busy at most 29 % of the decode cycles, on the 8×16×8 cube at
    74 B/cycle, and less on larger cubes or at lower bandwidth). Prefill reuses each weight
    2048 times: compute-bound on the small cube, so the array size is the knob.

    Decode at 74 B/cycle: 16,797,696 B (see ``decode_energy``) / 74 = 226,996 cycles; the
    simulator adds HBM latency and the output's drain (< 1 %).
    Prefill on the 8×16×8 cube: 1,024 FP16 MACs per cycle × 2 (INT8 rate) = 2,048 MACs per
    cycle; 2048 × 4096 × 4096 / 2048 = 16,777,216 cycles (the bandwidth of 37 B/cycle is ample:
    the cube is the bottleneck)."""
    arch = accel_sim.load_arch("ascend_like_cube")
    K = N = 4096
    decode_bytes = K * N + N * 4 + K
    block = 8 * arch.compute.block_k * 8 * arch.compute.rates["int8"]
    return {
        "my_decode_knob": "bandwidth",
        "my_prefill_knob": "array",
        "my_decode_cycles_74": decode_bytes / 74,
        "my_prefill_cycles_block8": 2048 * K * N / block,
    }


def try_w4a4() -> dict:
    """(A "try it", not checked in the notebook.) W4A4 halves decode's weight bytes again, so
    decode is still HBM-bound: bandwidth stays its knob (cycles ≈ 8.4 MB / bandwidth). In prefill
    INT4 runs at 4× the FP16 rate, so the big cube becomes memory-bound sooner and bandwidth
    matters more there than for W8A8; the front still ends at the biggest cube. Two points each,
    simulated on copies of the architecture."""

    def arch_with(bw: float, block: int):
        arch = accel_sim.load_arch("ascend_like_cube")
        hbm = arch.memory[0].model_copy(update={"read_bytes_per_cycle": bw,
                                                "write_bytes_per_cycle": bw})  # fmt: skip
        compute = arch.compute.model_copy(update={"block_m": block, "block_n": block})
        return arch.model_copy(update={"memory": [hbm, *arch.memory[1:]], "compute": compute})

    out = {}
    for bw in (18.5, 74):
        for block in (8, 32):
            for gemm in ("1x4096x4096", "2048x4096x4096"):
                r = accel_sim.simulate(arch_with(bw, block), gemm, "w4a4_static")
                out[f"{gemm} bw={bw} block={block}"] = r.cycles
    return out
