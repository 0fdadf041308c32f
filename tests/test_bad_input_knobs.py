"""Knobs, input combinations and copied architectures that used to run silently or misleadingly
(found by a new-user review): each is one stderr line, exit code 2, before any work."""

from __future__ import annotations

import pytest
import yaml

import accel_sim
from accel_sim.arch.load import load_arch
from accel_sim.errors import UserInputError

GEMM = ["--gemm", "64x64x64"]


def _one_line_error(result, *needles):
    code, out, err = result
    line = err.rstrip("\n")
    assert code == 2, (code, err)
    assert line and "\n" not in line and "Traceback" not in line, err
    assert out == ""
    for needle in needles:
        assert needle in line, (needle, line)


@pytest.mark.parametrize(("args", "needles"), [
    (["--dataflow", "llm_int8", "--knob", "llm_int8.outlier_channels=0.5"],
     ("llm_int8.outlier_channels", "expects int", "0.5")),
    (["--dataflow", "llm_int8", "--knob", "llm_int8.outlier_channels=1e30"],
     ("llm_int8.outlier_channels", "expects int")),
    (["--dataflow", "llm_int8", "--knob", "llm_int8.outlier_channels=-3"],
     ("llm_int8.outlier_channels", "-1", "-3")),
    (["--dataflow", "osc", "--knob", "osc.alpha=1e400"], ("osc.alpha", "finite")),
    (["--dataflow", "osc", "--knob", "osc.G=99999999999"], ("osc.G", "finite number within")),
    (["--dataflow", "all", "--knob", "osc.nosuch=1"], ("nosuch", "unknown knob")),
    (["--dataflow", "w8a8", "--knob", "osc.G=16"], ("--knob", "osc", "does not include")),
], ids=["int-knob-float", "int-knob-huge-float", "outliers-below-minus-1", "float-knob-inf",
        "knob-over-limit", "unknown-knob-under-all", "knob-for-flow-not-run"])  # fmt: skip
def test_bad_knobs(run_cli, args, needles):
    _one_line_error(run_cli(["run", *GEMM, *args]), *needles)


def test_a_knob_that_rules_out_its_dataflow_is_an_error_not_a_skip(run_cli):
    result = run_cli(["run", "--trace", "all-minilm-l6-v2", "--dataflow", "all",
                      "--knob", "osc.G=48"])  # fmt: skip
    _one_line_error(result, "--knob", "osc", "G")


def test_gemm_and_trace_together_are_refused(run_cli):
    _one_line_error(run_cli(["run", *GEMM, "--trace", "all-minilm-l6-v2"]), "--trace", "--gemm")


def test_heatmap_naming_one_parameter_twice(run_cli, tmp_path):
    spec = yaml.safe_load(open(accel_sim.resources.resolve("sweep", "example")))
    spec["heatmap"] = [spec["heatmap"][0]] * 2
    path = tmp_path / "dup_heatmap.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "sweep"
    _one_line_error(run_cli(["sweep", path, "--out", out]), str(path), "heatmap", "twice")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--arch", "--gemms"])
def test_a_directory_where_a_file_belongs(run_cli, tmp_path, flag):
    args = ["run", flag, tmp_path] + (GEMM if flag == "--arch" else [])
    _one_line_error(run_cli(args), str(tmp_path), "exists but is not")


def test_trace_given_a_file(run_cli, tmp_path):
    path = tmp_path / "gemms.csv"
    path.write_text("M,K,N\n1,2,3\n")
    _one_line_error(run_cli(["trace", "stats", path]), str(path), "not a trace directory")


def test_an_invalid_copy_of_an_architecture_is_refused():
    arch = load_arch("ascend_like_cube")
    assert accel_sim.simulate(arch, "64x64x64", "w8a8").cycles > 0
    broken = arch.model_copy(update={"clock_hz": -5.0})  # pydantic does not validate copies
    with pytest.raises(UserInputError, match="clock_hz"):
        accel_sim.simulate(broken, "64x64x64", "w8a8")


def test_multi_row_json_has_totals_and_rows(run_cli):
    import json

    code, out, err = run_cli(["run", "--gemm", "64x64x64", "--gemm", "16x64x64",
                              "--dataflow", "fp16", "--dataflow", "w8a8", "--json"])  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["rows"]) == 4 and [t["dataflow"] for t in doc["totals"]] == ["fp16", "w8a8"]
    by_flow = {t["dataflow"]: t["total_cycles"] for t in doc["totals"]}
    assert by_flow["w8a8"] == sum(r["cycles"] for r in doc["rows"] if r["dataflow"] == "w8a8")


@pytest.mark.parametrize(("args", "needles"), [
    (["--dataflow", "all", "--knob", "osc.G=48"], ("G", "OSC tables")),
    (["--dataflow", "w8a8", "--knob", "osc.G=16"], ("osc", "does not include")),
], ids=["knob-rules-out-its-flow", "knob-for-flow-not-run"])  # fmt: skip
def test_model_knobs(run_cli, args, needles):
    _one_line_error(run_cli(["model", "smollm2-135m", "--tokens", "8", *args]), *needles)


@pytest.mark.parametrize("flow", ["llm_int8", "muxq"])
@pytest.mark.parametrize("value", ["-1", "0"])
def test_outlier_threshold_must_be_positive(run_cli, flow, value):
    # (said before the missing outlier count, which would otherwise be the complaint)
    code, _, err = run_cli(["run", "--gemm", "64x512x512", "--dataflow", flow,
                            "--knob", f"{flow}.threshold={value}"])  # fmt: skip
    assert code == 2 and f"{flow}.threshold: must be > 0" in err and "\n" not in err.strip()


def test_an_outlier_count_above_k_is_capped_and_said(run_cli):
    # (a model's GEMMs of several K share one knob, so this is no error; the note says it)
    code, out, err = run_cli(["run", "--gemm", "64x512x512", "--dataflow", "muxq",
                              "--knob", "muxq.outlier_channels=100000"])  # fmt: skip
    assert code == 0, err
    assert "n_out=512 (knob 100000, capped at K = 512)" in out
