"""OPS's offline τ and preset against an error budget (``--knob ops.tau=auto``, ops_tau.py)."""

from __future__ import annotations

import pytest

import accel_sim
from accel_sim.dataflow import ops_tau
from accel_sim.workload.trace import load_trace

TAUS = (-1, 0, 1, 4, 16)
BITSLICE = "ops_bitslice"


def _stats(errors: dict[tuple[float, str], float], chunk: int = 32) -> dict:
    """A hand-made stats dict: OPS errors as the compact trace keys them, plus skip fractions
    that grow with τ (τ = −1 skips nothing)."""
    skip = {-1: 0.0, 0: 0.5, 1: 0.7, 4: 0.9, 16: 0.99}
    return {
        "errors": {f"ops:chunk={chunk},tau={t:g},preset={p}": e for (t, p), e in errors.items()},
        "ops_skip": {f"{chunk}:{t:g}": {"sets": s, "tiles": {str(x): s / 2 for x in (16, 32, 64,
                                                                                    128)}}
                     for t, s in skip.items()},
        "int16_hi_zero_fraction": 0.9,
        "int16_hi_zero_fraction_w": 0.9,
    }  # fmt: skip


#: errors growing with τ; hi_only is closer than zero above τ = 0 (as in the real traces)
ERRORS = {(-1, "zero"): 1e-4, (-1, "hi_only"): 1e-4, (0, "zero"): 0.02, (0, "hi_only"): 0.02,
          (1, "zero"): 0.08, (1, "hi_only"): 0.06, (4, "zero"): 0.3, (4, "hi_only"): 0.2,
          (16, "zero"): 0.9, (16, "hi_only"): 0.5}  # fmt: skip


def test_largest_tau_within_budget_and_its_preset():
    stats = _stats(ERRORS)
    c = ops_tau.choose(stats, 32, 0.07)
    assert (c.tau, c.preset, c.error, c.met) == (1.0, "hi_only", 0.06, True)  # zero's 0.08 > 0.07
    assert ops_tau.choose(stats, 32, 0.25).tau == 4.0
    assert ops_tau.choose(stats, 32, 0.05).tau == 0.0
    # a preset fixed by the user restricts the choice: zero at τ=1 is 0.08 > 0.07
    assert ops_tau.choose(stats, 32, 0.07, ("zero",)).tau == 0.0
    # the largest τ wins even where the errors are not monotone in τ
    bumpy = {**ERRORS, (1, "hi_only"): 0.5, (1, "zero"): 0.5}
    assert ops_tau.choose(_stats(bumpy), 32, 0.25).tau == 4.0


def test_no_tau_within_budget_falls_back_to_early_bird_off():
    worse = {k: (e if k[0] < 0 else 0.5 + e) for k, e in ERRORS.items()}
    c = ops_tau.choose(_stats(worse), 32, 0.1)
    assert (c.tau, c.met) == (-1.0, True)  # only τ = −1 fits: early bird off
    assert "no τ ≥ 0 within the budget" in c.note() and "0.52" in c.note()
    c = ops_tau.choose(_stats(worse), 32, 1e-5)  # not even INT16 slicing fits
    assert (c.tau, c.met) == (-1.0, False) and "fallback" in c.note()


def test_budget_zero_gives_the_most_accurate_tau():
    for errors in (ERRORS, {k: e + 0.01 * (k[1] == "zero") for k, e in ERRORS.items()}):
        c = ops_tau.choose(_stats(errors), 32, 0.0)
        best = min(errors.values())
        assert c.tau == -1.0 and c.error == best


def test_larger_budget_never_more_tau_error_or_cycles():
    budgets = (0.0, 0.01, 0.02, 0.05, 0.07, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
    stats = _stats(ERRORS)
    taus = [ops_tau.choose(stats, 32, b).tau for b in budgets]
    assert taus == sorted(taus) and taus[0] == -1 and taus[-1] == 16
    cycles = [accel_sim.simulate(BITSLICE, "256x1024x1024", "ops",
                                 {"tau": "auto", "budget": b}, stats).cycles
              for b in budgets]  # fmt: skip
    assert all(a >= b for a, b in zip(cycles, cycles[1:])) and cycles[-1] < cycles[0]


@pytest.mark.parametrize("trace_name", ["all-minilm-l6-v2", "smollm2-135m"])
def test_real_trace_monotone_and_error_is_the_chosen_taus(trace_name):
    """On the bit-slice array (skip per computation set) a larger budget never costs cycles;
    the reported error is the trace's at the chosen (τ, preset) and within the budget."""
    trace = load_trace(trace_name)
    gemms = [next(g for g in trace.gemms if g.kind == kind) for kind in ("attn_in", "o_in")]
    for gemm in gemms:
        stats = trace.stats_for(gemm)
        last_cycles, last_tau = None, -2.0
        for budget in (0.0, 0.05, 0.25, 0.5, 0.75, 1.0, 1.5):
            r = accel_sim.simulate(BITSLICE, gemm, "ops", {"tau": "auto", "budget": budget},
                                   stats)  # fmt: skip
            tau, preset = r.knobs["tau"], r.knobs["preset"]
            key = f"ops:chunk=32,tau={tau:g},preset={preset}"
            assert r.extra["rel_error"] == stats["errors"][key]
            if r.knobs["ops_tau_met"]:
                assert r.extra["rel_error"] <= budget
            assert tau >= last_tau
            assert last_cycles is None or r.cycles <= last_cycles
            last_cycles, last_tau = r.cycles, tau
        assert last_tau >= 0  # a budget of 1.5 lets the early bird on


def test_fixed_tau_and_auto_preset():
    stats = _stats(ERRORS)
    fixed = accel_sim.simulate(BITSLICE, "256x1024x1024", "ops", {"tau": 4}, stats)
    assert fixed.knobs["preset"] == "zero" and fixed.extra["rel_error"] == 0.3
    auto = accel_sim.simulate(BITSLICE, "256x1024x1024", "ops", {"tau": 4, "preset": "auto"},
                              stats)  # fmt: skip
    assert auto.knobs["preset"] == "hi_only" and auto.extra["rel_error"] == 0.2
    assert auto.cycles == fixed.cycles  # the preset changes the error, not the skips


@pytest.mark.parametrize("knobs, stats, needle", [
    ({"tau": "fast"}, None, "float or 'auto'"),
    ({"tau": "auto", "budget": -0.1}, None, "budget"),
    ({"tau": "auto", "budget": "big"}, None, "expects float"),
    ({"tau": "auto"}, None, "run it on a trace"),
    ({"tau": "auto", "chunk": 16}, "stats", "chunk 32 only"),
    ({"tau": 0, "preset": "half"}, "stats", "preset must be"),
])  # fmt: skip
def test_knob_errors(knobs, stats, needle):
    with pytest.raises(accel_sim.UserInputError, match=needle):
        accel_sim.simulate(BITSLICE, "64x256x256", "ops", knobs,
                           _stats(ERRORS) if stats else None)  # fmt: skip


def test_plain_tau_knobs_still_work():
    flow = accel_sim.api.get_dataflow("ops")
    assert flow.resolve_knobs({"tau": 0})["tau"] == 0
    assert flow.resolve_knobs({"tau": 1.5})["preset"] == "zero"
    auto = flow.resolve_knobs({"tau": "auto"})
    assert (auto["tau"], auto["preset"], auto["budget"]) == ("auto", "auto", 0.05)
    assert flow.resolve_knobs({"tau": "auto", "preset": "zero"})["preset"] == "zero"


def test_cli_tau_auto(run_cli):
    code, out, err = run_cli(["run", "--trace", "all-minilm-l6-v2", "--dataflow", "ops",
                              "--knob", "ops.tau=auto", "--knob", "ops.budget=0.05"])  # fmt: skip
    assert code == 0, err
    assert "ops" in out and "rel. error" in out
    code, out, err = run_cli(["run", "--trace", "all-minilm-l6-v2", "--dataflow", "ops",
                              "--knob", "ops.tau=sometimes"])  # fmt: skip
    assert code != 0 and "float or 'auto'" in err
