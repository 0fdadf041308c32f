"""Mistakes a new user made in an audit (each was silent or misleading before): a dataflow
named twice, a GEMM name used twice, an energy entry for a component that does not exist, a
knob error naming its dataflow, a bad ``ACCEL_SIM_WORKERS``, an empty or repetitive sweep file,
and argparse's messages for values that look like options. Same rules as ``test_bad_input.py``.
"""

from __future__ import annotations

import re

import pytest
from bad_input_checks import GEMM, arch_variant, assert_user_error, run_args


def _cycles(stdout: str, flow: str) -> list[int]:
    """The cycles of every totals row of ``flow`` in ``accel-sim run``'s text output."""
    return [int(m.group(1).replace(",", ""))
            for m in re.finditer(rf"^\s*{flow}\s+([\d,]+)\s", stdout, re.M)]  # fmt: skip


def test_a_dataflow_named_twice_runs_once(run_cli):
    once = run_cli(["run", "--gemm", GEMM, "--gemm", "32x32x32", "--dataflow", "fp16",
                    "--dataflow", "w8a8"])  # fmt: skip
    twice = run_cli(["run", "--gemm", GEMM, "--gemm", "32x32x32", "--dataflow", "fp16",
                     "--dataflow", "fp16", "--dataflow", "w8a8"])  # fmt: skip
    assert once[0] == twice[0] == 0, twice[2]
    assert len(_cycles(twice[1], "fp16")) == 1  # one totals row, not a doubled one
    assert _cycles(twice[1], "fp16") == _cycles(once[1], "fp16")
    assert "2 GEMM(s) × 2 dataflow(s)" in twice[1]


def test_the_model_runs_a_repeated_dataflow_once():
    from accel_sim.model_run.simulate import simulate_model

    once = simulate_model("ascend_like_cube", "smollm2-135m", "decode", 2, dataflows=["w8a8"])
    twice = simulate_model("ascend_like_cube", "smollm2-135m", "decode", 2,
                           dataflows=["w8a8", "w8a8"])  # fmt: skip
    assert list(twice.totals["dataflow"]) == ["w8a8"]
    assert list(twice.totals["cycles"]) == list(once.totals["cycles"])


def test_a_gemm_name_used_twice_in_a_csv(tmp_path, run_cli):
    csv = tmp_path / "gemms.csv"
    csv.write_text("M,K,N,name\n64,64,64,a\n32,32,32,b\n16,16,16,a\n")
    out = tmp_path / "out.csv"
    args = ["run", "--gemms", str(csv), "--out", str(out)]
    line = assert_user_error(run_cli(args), f"{csv}:4", "'a'", "line 2", out=out)
    assert "unique" in line


def test_unnamed_gemms_may_repeat_in_a_csv(tmp_path, run_cli):
    csv = tmp_path / "gemms.csv"
    csv.write_text("M,K,N,name\n64,64,64,\n32,32,32,\n")
    code, _, err = run_cli(["run", "--gemms", str(csv), "--dataflow", "fp16"])
    assert code == 0, err


def test_energy_for_a_component_that_does_not_exist(tmp_path, run_cli):
    entry = {"value": 1.0, "unit": "pJ/byte", "node_nm": 45, "scaling": "sram",
             "source": "a typo of a level's name"}  # fmt: skip
    path = arch_variant(tmp_path, lambda d: d["energy"].update({"HMB": {"read": entry}}))
    args, out = run_args(tmp_path, "--arch", str(path))
    line = assert_user_error(run_cli(args), str(path), "energy.HMB", "no such component", out=out)
    assert "HBM" in line  # the components it could have meant are listed


def test_an_unused_energy_action_is_reported_by_run(tmp_path, run_cli):
    entry = {"value": 1.0, "unit": "pJ/MAC", "node_nm": 45, "scaling": "logic",
             "source": "an action no unit takes"}  # fmt: skip
    path = arch_variant(tmp_path, lambda d: d["energy"]["compute"].update({"mac_fp7": entry}))
    code, _, err = run_cli(["run", "--arch", path, "--gemm", GEMM, "--dataflow", "fp16"])
    assert code == 0, err
    assert err.strip() == f"note: {path}: energy entries nothing uses: energy.compute.mac_fp7"


@pytest.mark.parametrize("knob, key", [("osc.G=-1", "knobs: osc.G:"),
                                       ("osc.base=mxfp5", "knobs: osc.base:"),
                                       ("ops.chunk=48", "knobs: ops.chunk:"),
                                       ("ops.tau=0.3", "knobs: ops.tau:")])  # fmt: skip
def test_a_knob_error_names_the_dataflow_and_the_knob(tmp_path, run_cli, knob, key):
    flow = knob.split(".")[0]
    args = ["run", "--trace", "smollm2-135m", "--dataflow", flow, "--knob", knob]
    assert_user_error(run_cli(args), key)


@pytest.mark.parametrize("value", ["abc", "0", "65"])
def test_a_bad_worker_count_in_the_environment(monkeypatch, run_cli, value):
    monkeypatch.setenv("ACCEL_SIM_WORKERS", value)
    args = ["run", "--gemm", GEMM, "--gemm", "32x32x32", "--dataflow", "fp16"]
    assert_user_error(run_cli(args), "ACCEL_SIM_WORKERS", repr(value))


@pytest.mark.parametrize("text, needle", [
    ("", "got an empty file"),
    ("- fp16\n", "got list"),
    ("base_arch: ascend_like_cube\ndataflows: [w8a8, fp16, w8a8]\nworkloads: [{gemm: 16x16x16}]\n",
     "dataflows: lists w8a8 more than once"),
])  # fmt: skip
def test_sweep_files_that_say_nothing_or_repeat_a_dataflow(tmp_path, run_cli, text, needle):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(text)
    out = tmp_path / "out"
    assert_user_error(run_cli(["sweep", spec, "--out", out]), str(spec), needle, out=out)


@pytest.mark.parametrize("args, hint", [
    (["run", "--gemm", "-5x5x5"], "--flag=VALUE"),
    (["run", "--no-cache", "--gemm", GEMM], "--no-cache goes before the command"),
])  # fmt: skip
def test_argparse_messages_say_what_to_write(run_cli, args, hint):
    assert_user_error(run_cli(args), hint)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_the_largest_gemm_is_written_exactly(tmp_path, run_cli, suffix):
    """At the size limit the MACs (2**72) outgrow 64 bits: every format keeps them exact."""
    out = tmp_path / f"huge{suffix}"
    side = "16777216"
    code, _, err = run_cli(["run", "--arch", "systolic_32x32_ws", "--gemm", f"{side}x{side}x{side}",
                            "--dataflow", "fp16", "--out", out])  # fmt: skip
    assert code == 0, err
    if suffix == ".parquet":
        import pandas as pd

        assert int(pd.read_parquet(out)["macs"][0]) == 2**72
    else:
        assert str(2**72) in out.read_text()


@pytest.mark.parametrize("stats, needle", [
    ({"osc_table_channels": {"32": -5}}, "stats.osc_table_channels: expected {G: an integer ≥ 0}"),
    ({"osc_table_channels": {"32": float("nan")}}, "stats.osc_table_channels"),
    ({"osc_table_channels": {"32": "3"}}, "stats.osc_table_channels"),
    ({"osc_table_channel": {"32": 3}}, "unknown statistic 'osc_table_channel'"),
    ({"outlier_channels": 2.5}, "stats.outlier_channels: expected an integer ≥ 0"),
])  # fmt: skip
def test_statistics_given_by_hand_are_checked(stats, needle):
    """A misspelt statistic was silently unused, a negative or NaN count reached the plan."""
    import accel_sim
    from accel_sim.errors import UserInputError

    with pytest.raises(UserInputError, match=re.escape(needle)):
        accel_sim.simulate("ascend_like_cube", "256x1024x1024", "osc", stats=stats)


def test_every_shipped_trace_passes_the_statistics_check():
    from pathlib import Path

    from accel_sim.api_checks import check_stats
    from accel_sim.workload.trace import load_trace

    traces = [d for d in (Path(__file__).resolve().parents[1] / "traces").iterdir()
              if (d / "stats.json").exists()]  # fmt: skip
    assert traces
    for path in traces:
        trace = load_trace(path)
        for gemm in trace.gemms:
            check_stats(trace.stats_for(gemm), str(path))


@pytest.mark.parametrize("flow, knobs, needle", [
    ("muxq", {"exp": 0, "outlier_channels": 8}, "muxq.exp: exp must be an integer from 1 to 7"),
    ("muxq", {"exp": 64, "outlier_channels": 8}, "muxq.exp"),
    ("osc", {"alpha": -1.0}, "osc.alpha: alpha must be > 0"),
])  # fmt: skip
def test_knob_values_without_a_meaning_are_refused(flow, knobs, needle):
    """MUXQ's exp = 0 zeroes its Aux path (2^0 − 1) yet was charged like exp = 2."""
    import accel_sim
    from accel_sim.errors import UserInputError

    with pytest.raises(UserInputError, match=re.escape(needle)):
        accel_sim.simulate("ascend_like_cube", "256x1024x1024", flow, knobs)


def test_r3_on_a_gemm_that_is_not_attn_in_says_it_is_not_charged():
    import accel_sim

    r = accel_sim.simulate("ascend_like_cube", "64x256x256", "w4a4_static", {"r3_head_dim": 64})
    assert any("r3_head_dim applies to attn_in GEMMs only" in n for n in r.notes)
