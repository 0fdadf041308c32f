"""Outlier-channel helpers shared by MUXQ and LLM.int8()."""

from __future__ import annotations

from accel_sim.errors import UserInputError


def outlier_channel_count(gemm, stats, knobs, scheme: str) -> tuple[int, str]:
    """Number of outlier channels (any |x| > threshold): the ``outlier_channels`` knob when set,
    else the trace statistics; with neither, an error (never a hidden constant)."""
    threshold = knobs.get("threshold", 6.0)
    if not threshold > 0:  # (|x| > a negative threshold: every channel, a meaningless setting)
        raise UserInputError("knobs", f"must be > 0 (an outlier is |x| > threshold), got "
                             f"{threshold}", f"{scheme}.threshold")  # fmt: skip
    given = knobs.get("outlier_channels", -1)
    if given < -1:
        raise UserInputError("knobs", f"must be -1 (from the trace) or a count ≥ 0, got {given}",
                             f"{scheme}.outlier_channels")  # fmt: skip
    if given >= 0:  # more than K channels cannot be outliers: all K are (said in the note, as
        # a model's GEMMs of several K may share one knob)
        if given > gemm.K:
            return gemm.K, f"knob {given}, capped at K = {gemm.K}"
        return given, "knob"
    if stats and "outlier_channels" in stats:
        if knobs["threshold"] != 6.0:
            raise UserInputError("knobs", "the compact trace counts outlier channels at "
                                 "|x| > 6 only; capture a full trace for another threshold",
                                 "threshold")  # fmt: skip
        return min(int(stats["outlier_channels"]), gemm.K), "trace"
    raise UserInputError(
        f"{scheme} on {gemm.label}",
        f"needs the number of outlier channels: run it on a trace (--trace) or set "
        f"--knob {scheme}.outlier_channels=N (in Python: stats= or knobs=)",
    )
