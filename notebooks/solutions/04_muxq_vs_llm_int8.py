"""Worked answers to the exercises of ``04_muxq_vs_llm_int8.ipynb`` (reveal after trying).

Each function returns the notebook's ✎ variables, worked from the numbers the notebook prints
and the MUXQ construction, not by asking the simulator. ``tests/test_notebooks.py`` runs the
notebook with these filled in and every check strict.
"""

from __future__ import annotations


def body_scale() -> dict:
    """Halving the outlier columns (largest 8.39) leaves them at 4.20, below the largest
    ordinary value 5.75 (printed as ``max|X without outlier columns|``, 5.7539...); so the Body's
    max is 5.7539 and its scale 5.7539 / 127 = 0.04531."""
    return {"my_body_scale_exp1": 5.75390625 / 127}


def aux_macs() -> dict:
    """Aux is X's n_out shifted outlier columns (M × n_out) times the matching n_out rows of W
    (n_out × N): M · n_out · N = 256 · 6 · 576 = 884,736 INT8 MACs, 0.4 % of the GEMM's
    256 · 1536 · 576."""
    M, n_out, N = 256, 6, 576
    return {"my_aux_macs": M * n_out * N}


def wider_vector_unit() -> dict:
    """(A "try it", not checked in the notebook.) At 512 outlier channels LLM.int8()'s FP16
    product on the NPU's vector unit dominates, so doubling the vector unit's width roughly
    halves that part: the 512-channel point drops by nearly 2×."""
    import accel_sim
    from accel_sim.workload.trace import load_trace

    g = load_trace("smollm2-135m").gemms[6]
    arch = accel_sim.load_arch("edge_npu_int8")
    wide = arch.model_copy(update={"vector": arch.vector.model_copy(
        update={"bytes_per_cycle": 2 * arch.vector.bytes_per_cycle})})  # fmt: skip
    knobs = {"outlier_channels": 512}
    return {"ratio": accel_sim.simulate(wide, g, "llm_int8", knobs=knobs).cycles
            / accel_sim.simulate(arch, g, "llm_int8", knobs=knobs).cycles}  # fmt: skip
