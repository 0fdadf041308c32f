"""Worked answers to the exercises of ``07_capstone.ipynb`` (reveal after trying).

Each exercise function returns the notebook's ✎ variables, worked the way a student would — from
the trace's stored errors, the GEMM shapes and the bits per weight — not by asking the simulator
for the answer. ``tests/test_notebooks.py`` runs the notebook with these filled in and every check
strict. ``decode_front`` and ``which_to_build`` answer the notebook's "try it" and its closing
question; they simulate, and are not run by the tests.
"""

from __future__ import annotations

import dataclasses


def front_most_accurate() -> dict:
    """The most accurate point of any set is on its Pareto front (nothing can beat it on error),
    unless another point ties on error with fewer cycles. So: the smallest MAC-weighted error in
    the trace's stored errors. FP16 is the guess most people make, but INT16 keeps more bits: a
    per-tensor INT16 grid has 65,536 levels, an FP16 value an 11-bit significand; on SmolLM2's
    tensors INT16's error is smaller. OPS ties with INT16 exactly (its default τ = −1 keeps the
    early bird off: exact INT16 slicing), but OPS is INT16 *plus* slicing passes, so INT16 has
    fewer cycles and OPS is dominated."""
    from accel_sim.workload.trace import load_trace

    trace = load_trace("smollm2-135m")
    macs = sum(g.macs for g in trace.gemms)

    def mean(key: str) -> float:
        return sum(g.macs * trace.stats_for(g)["errors"][key] for g in trace.gemms) / macs

    errors = {f: mean(f) for f in ("fp16", "int16", "llm_int8", "w8a8")}
    best = min(errors, key=errors.get)  # int16 (OPS at τ = -1 ties with it and costs more)
    return {"my_front_most_accurate": best}


def decode_gemv() -> dict:
    """A GEMV reads every weight once: cycles ≈ weight bytes ÷ HBM bytes per cycle. INT8 is 8
    bits per weight, INT4 is 4, so 2×. (With the FP32 scale per output channel and X:
    (884,736 + 6,144 + 576) / (442,368 + 6,144 + 288) = 1.99×; the simulator's is a little lower
    because HBM's 500-cycle first-tile latency does not halve.)"""
    return {"my_gemv_speedup": 8 / 4}


def decode_model() -> dict:
    """Decode is bytes. Weights of the 211 GEMMs: the 210 layer GEMMs hold 30 × 3,538,944 =
    106,168,320 weights, the LM head 576 × 49,152 = 28,311,552. W8A8: 1 byte each. W4A4: half a
    byte for the layers, but 2 bytes (FP16) for the LM head:
    (106,168,320 + 28,311,552) / (53,084,160 + 56,623,104) = 1.226×."""
    from accel_sim.workload.trace import load_trace

    gemms = load_trace("smollm2-135m").gemms
    w8 = sum(g.K * g.N * 1.0 for g in gemms)
    w4 = sum(g.K * g.N * (2.0 if g.kind == "lm_head_in" else 0.5) for g in gemms)
    return {"my_decode_speedup": w8 / w4}


def decode_front() -> dict:
    """(The "try it", not checked.) Every dataflow on the trace's GEMMs at M = 1. The decode
    step is HBM-bound, so the cycles follow the bytes per weight: OliVe-4 (4-bit everywhere, the
    LM head included) is fastest, ~1.9× W8A8, then OSC (~1.46×; 4-bit FP plus a narrow FP16
    branch, MXFP8 on the down-projections), W4A4 only ~1.2× (its FP16 LM head), and ANT ~1.1×
    — it runs 8-bit on the layers, like W8A8, but 4-bit on the LM head (no sample error there:
    no fallback), which is a fifth of the bytes. FP16, INT16 and OPS read 2 bytes per weight:
    ~0.5×."""
    import accel_sim
    from accel_sim.report.text import totals
    from accel_sim.tables.ops_fig3_baselines import sample_errors, with_errors
    from accel_sim.workload.trace import load_trace

    trace = with_errors(load_trace("smollm2-135m"), sample_errors("smollm2-135m"))
    decode = [dataclasses.replace(g, M=1) for g in trace.gemms]
    stats = {id(d): trace.stats_for(g) for d, g in zip(decode, trace.gemms)}
    df = accel_sim.simulate_many("ascend_like_cube", decode, accel_sim.dataflows(),
                                 stats_for=lambda g: stats[id(g)])  # fmt: skip
    tot = totals(df).set_index("dataflow")
    return {"speedup_vs_w8a8": tot["speedup_vs_w8a8"].round(2).to_dict(),
            "mean_rel_error": tot["mean_rel_error"].round(4).to_dict()}  # fmt: skip


def which_to_build() -> dict:
    """(The closing question, not checked.) A worked discussion; the numbers are the notebook's.

    *Prefill, compute-bound (long prompts, an embedding encoder such as all-MiniLM-L6-v2 that
    never decodes).* The cycles front is INT16 → FP16 → LLM.int8() → W8A8 → W8A8-static → OSC.
    The knee is per-token dynamic W8A8: 1.59× FP16's speed at a mean output error of 0.025, and
    its vector pass overlaps the matmul. Static W8A8 buys almost nothing more here (1.01×) for
    almost 3× the error (0.070), so on this cube the dynamic scale is worth its pass. OSC is the
    fastest point (1.29× W8A8) at 0.091: worth it only if the model's task accuracy survives
    ~9 % per-layer output error — the notebook cannot tell, that needs a perplexity or task
    evaluation. LLM.int8() is the choice if 0.025 is too much: 0.018 at 1.26× W8A8's cycles.
    I would build a cube with INT8 and FP4/INT4 rates and run W8A8 (dynamic) as the default,
    with OSC as a per-layer option for layers whose error stays small (its down-projections
    already fall back to MXFP8).

    *Decode, memory-bound (a chat model generating token by token).* Cycles follow bytes per
    weight, so 4-bit weights are what matter: a 4-bit GEMV is ~1.9× an 8-bit one. For a small
    model like SmolLM2-135M the LM head is a fifth of the weights, so whatever scheme is chosen
    must quantize the LM head too: W4A4 as PrefixQuant builds it (FP16 LM head) gives only
    1.21× in decode, while OliVe-4 with a 4-bit LM head gives ~1.9× (at a sample error of
    ~0.13, which is large). For a 7B model (LM head ~2 % of the weights) W4A4's 2× is nearly
    all there, and its prefill error (0.35 on SmolLM2, which was not trained for it) is what
    would need checking — PrefixQuant reports its accuracy on larger models.

    *What I would not build on this cube:* OPS (at its default τ = −1, and at τ=auto with a
    budget of 0.05, its early bird never fires, so it is INT16 plus slicing, 2.2× INT16's cycles;
    its bit-slice array is its home)
    and FP16 (INT16 is more accurate and cheaper in energy).

    *Caveats:* OliVe's and ANT's errors are from layer-0 samples (within 10–20 % for W8A8); the
    errors are per-layer output errors on 128 held-out tokens of one text, not task accuracy;
    one architecture and default knobs.
    """
    return {"prefill": "w8a8 (dynamic), osc per layer where the error allows",
            "decode, small model": "4-bit weights including the LM head",
            "decode, 7B": "w4a4_static, after checking its accuracy"}  # fmt: skip
