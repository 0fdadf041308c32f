"""Whole-model runs (accel_sim/model_run/): totals, attention, vector work, stats, CLI."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys

import pytest

from accel_sim.arch.load import load_arch
from accel_sim.dataflow.plan import Plan, VectorOp
from accel_sim.engine.run import run_plan
from accel_sim.errors import UserInputError
from accel_sim.model_run import KindStats, add_parser, simulate_model
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.models import load_model, lower
from accel_sim.workload.trace import load_trace

ARCH = "ascend_like_cube"


@pytest.fixture(scope="module")
def prefill():
    return simulate_model(ARCH, "smollm2-135m", "prefill", 64,
                          dataflows=("fp16", "w8a8", "osc", "muxq", "w4a4_static"))  # fmt: skip


@pytest.fixture(scope="module")
def decode():
    return simulate_model(ARCH, "gpt2-small", "decode", 4, batch=2, kv_len=32,
                          dataflows=("fp16", "w8a8"), stats_from=None)  # fmt: skip


def test_totals_are_the_sum_of_rows(prefill):
    t = prefill.table
    for row in prefill.totals.itertuples():
        part = t[t["dataflow"] == row.dataflow]
        assert row.cycles == part["cycles"].sum()
        assert row.energy_pj == pytest.approx(part["energy_pj"].sum(), rel=1e-12)
        assert row.time_s == pytest.approx(row.cycles / prefill.clock_hz)
        by_group = part.groupby("group")["cycles"].sum()
        assert row.linear_cycles == by_group["linear"]
        assert row.attention_cycles == by_group["attention"]
        assert row.vector_cycles == by_group["vector"]
        assert row.linear_cycles + row.attention_cycles + row.vector_cycles == row.cycles
    # one row per (GEMM row, dataflow) plus the vector rows
    work = lower(load_model("smollm2-135m"), "prefill", 64)
    assert len(t) == 5 * (len(work.gemms) + len(work.vector_ops))
    w8 = prefill.totals.set_index("dataflow")
    assert w8.loc["w8a8", "speedup_vs_w8a8"] == 1.0
    assert w8.loc["fp16", "speedup_vs_w8a8"] == pytest.approx(
        w8.loc["w8a8", "cycles"] / w8.loc["fp16", "cycles"]
    )
    shares = prefill.by_kind.groupby("dataflow")["share"].sum()
    assert shares.to_numpy() == pytest.approx(1.0)


def test_attention_runs_fp16_for_every_dataflow(prefill):
    att = prefill.table[prefill.table["group"] == "attention"]
    assert set(att["kind"]) == {"attn_qk", "attn_pv"}
    assert set(att["run_as"]) == {"fp16"}
    per_flow = att.groupby("dataflow")["cycles"].sum()
    assert per_flow.nunique() == 1  # identical under w8a8, osc, w4a4_static...
    assert any("KV4 is out of scope" in n for n in prefill.notes)
    # an INT-only NPU has no FP16 rate: attention falls back to per-tensor static INT8
    npu = simulate_model("edge_npu_int8", "gpt2-small", "prefill", 16, dataflows=("w8a8",),
                         stats_from=None)  # fmt: skip
    assert set(npu.table[npu.table["group"] == "attention"]["run_as"]) == {"w8a8_static"}


def test_vector_rows_use_the_engine_vector_model():
    arch = load_arch("rtx3090_like")  # vector efficiency != 1: the engine's derate must apply
    res = simulate_model(arch, "gpt2-small", "prefill", 32, dataflows=("fp16", "w8a8"),
                         stats_from=None)  # fmt: skip
    vec = res.table[(res.table["group"] == "vector") & (res.table["dataflow"] == "fp16")]
    norm = vec[vec["row"] == "layers.*.input_layernorm"].iloc[0]
    op = VectorOp("n", norm["elements"], 7.0, 2 * norm["elements"], 2 * norm["elements"],
                  int(norm["count"]))  # fmt: skip
    expected = run_plan(arch, Plan("v", Gemm(1, 1, 1), (op,))).cycles
    assert norm["cycles"] == expected
    # the softmax of all heads is one op per layer
    spec = load_model("gpt2-small")
    soft = vec[vec["kind"] == "softmax"].iloc[0]
    assert soft["count"] == spec.layers and soft["elements"] == 32 * 32 * spec.heads
    w8 = res.table[(res.table["group"] == "vector") & (res.table["dataflow"] == "w8a8")]
    assert list(w8["cycles"]) == list(vec["cycles"])


def test_decode_tokens_per_second(decode):
    for row in decode.totals.itertuples():
        assert row.tokens_per_s == pytest.approx(4 * 2 / (row.cycles / decode.clock_hz))
    # 4 decode steps: attention rows per step (distinct KV lengths)
    att = decode.table[(decode.table["kind"] == "attn_qk") & (decode.table["dataflow"] == "fp16")]
    assert sorted(att["N"]) == [33, 34, 35, 36]


def test_statistics_by_layer_kind(prefill):
    trace = load_trace("smollm2-135m")
    kinds = KindStats(trace)
    ups = [(g, s) for g, s in zip(trace.gemms, trace.stats) if g.kind == "up_gate_in"]
    gemm = Gemm(64, 4096, 11008, kind="up_gate_in")
    stats = kinds.stats_for(gemm)
    zero = statistics.median(s["int16_hi_zero_fraction"] for _, s in ups)
    assert stats["int16_hi_zero_fraction"] == zero
    density = statistics.median(s["osc_table_channels"]["32"] / g.K for g, s in ups)
    assert stats["osc_table_channels"]["32"] == math.floor(density * 4096 + 0.5)
    downs = [(g, s) for g, s in zip(trace.gemms, trace.stats) if g.kind == "down_in"]
    dens = statistics.median(s["outlier_channels"] / g.K for g, s in downs)
    assert kinds.stats_for(Gemm(8, 11008, 4096, kind="down_in"))["outlier_channels"] == \
        math.floor(dens * 11008 + 0.5)  # fmt: skip
    assert kinds.stats_for(Gemm(8, 64, 64, kind="attn_qk")) is None
    assert any("statistics from smollm2-135m by layer kind" in n for n in prefill.notes)
    assert prefill.stats_source == "statistics from smollm2-135m by layer kind"
    osc = prefill.table[(prefill.table["dataflow"] == "osc") & (prefill.table["kind"] == "attn_in")]
    assert osc["rel_error"].notna().all() and (osc["table_channels"] > 0).all()


def test_all_skips_what_the_arch_cannot_run_and_explicit_errors():
    # the cube has no early-bird unit: OPS runs with the early bird off (τ = -1, the default);
    # switched on by the user's own knob it is refused, by name or under "all" (a knob the user
    # set never silently drops its dataflow); "all" skips, with a note, what cannot run by default
    res = simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("all",))
    assert "ops" in set(res.totals["dataflow"])
    res = simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("all",), stats_from=None)
    assert "muxq" not in set(res.totals["dataflow"])
    assert any(n.startswith("muxq skipped") for n in res.notes)
    on = {"ops": {"tau": 0.0}}
    with pytest.raises(UserInputError, match="early-bird"):
        simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("all",), knobs=on)
    with pytest.raises(UserInputError, match="early-bird"):
        simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("ops",), knobs=on)
    with pytest.raises(UserInputError, match="outlier channels"):
        simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("muxq",), stats_from=None)
    with pytest.raises(UserInputError, match="unknown model"):
        simulate_model(ARCH, "no-such-model", "prefill", 16)
    with pytest.raises(UserInputError, match="unknown dataflow"):
        simulate_model(ARCH, "gpt2-small", "prefill", 16, dataflows=("nope",))
    with pytest.raises(UserInputError, match="unknown knob"):
        simulate_model(ARCH, "gpt2-small", "prefill", 16, knobs={"w8a8": {"G": 3}})


def _cli(argv):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_report_json_and_out(tmp_path, capsys):
    assert _cli(["model", "gpt2-small", "--phase", "prefill", "--tokens", "16",
                 "--dataflow", "fp16", "w8a8", "--stats-from", "none"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "model gpt2-small" in text and "ascend910b_chip" in text and "prefill" in text
    assert "whole chip: 24 cores" in text  # the default is a chip and the header says so
    assert "share of cycles per layer kind" in text and "attn_qk" in text
    out = tmp_path / "rows.csv"
    assert _cli(["model", "gpt2-small", "--phase", "decode", "--tokens", "2", "--kv-len", "8",
                 "--dataflow", "all", "--json", "--out", str(out)]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["phase"] == "decode" and doc["stats_source"].startswith("statistics from")
    assert {r["dataflow"] for r in doc["totals"]} >= {"fp16", "w8a8", "osc", "muxq"}
    assert out.read_text().startswith("dataflow,row,op,group,kind")
    with pytest.raises(UserInputError):
        _cli(["model", "gpt2-small", "--tokens", "4", "--out", str(tmp_path / "x.txt")])


def test_out_is_checked_before_any_work(run_cli, tmp_path, monkeypatch):
    import accel_sim.model_run.simulate as simulate_module

    def boom(*args, **kwargs):
        raise AssertionError("simulate_model ran before --out was checked")

    monkeypatch.setattr(simulate_module, "simulate_model", boom)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for out in [blocker / "sub" / "rows.csv", tmp_path / "rows.txt", tmp_path, ""]:
        code, stdout, err = run_cli(["model", "gpt2-small", "--tokens", "4", "--out", out])
        assert code == 2 and stdout == "" and err.count("\n") == 1, (out, err)
        assert err.startswith("accel-sim: error: ")
    assert list(tmp_path.iterdir()) == [blocker]  # nothing written


def test_help_names_real_places_and_every_argument_has_help():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_parser(sub)
    model = sub.choices["model"]
    for action in model._actions:
        assert action.help, action.dest
    text = model.format_help()
    assert "accel_sim/workload/models" not in text and "workloads/models/" in text
    from accel_sim.workload.models import MODELS_DIR

    assert (MODELS_DIR / "qwen3-8b.yaml").is_file()
    assert MODELS_DIR.parts[-2:] == ("workloads", "models")  # the folder the help names
    from accel_sim.tables.cli import add_parser as add_table_parser

    add_table_parser(sub)
    for action in sub.choices["table"]._actions:
        assert action.help, action.dest


def test_list_and_strict_sizes(run_cli):
    code, out, _ = run_cli(["model", "--list"])
    assert code == 0 and out.splitlines()[0].startswith("all-minilm-l6-v2 ")
    assert "huggingface.co/Qwen/Qwen3-8B" in out
    for bad in ["+16", "16.0", "1e3", "\u0661\u0666", "0", "-1"]:
        code, out, err = run_cli(["model", "gpt2-small", "--tokens", bad])
        assert code == 2 and out == "" and "--tokens" in err and err.count("\n") == 1, bad
    code, _, err = run_cli(["model", "gpt2-small"])
    assert code == 2 and "--tokens: required" in err


def test_knob_syntax():
    from accel_sim.knobs import parse_knobs

    assert parse_knobs(["osc.G=64", "osc.mode=fast", "ops.tau=0.5"]) == \
        {"osc": {"G": 64, "mode": "fast"}, "ops": {"tau": 0.5}}  # fmt: skip
    assert parse_knobs(None) == {}
    for bad in ["osc", "osc=1", ".G=1", "osc.=1"]:
        with pytest.raises(UserInputError, match="DATAFLOW.NAME=VALUE"):
            parse_knobs([bad])
    with pytest.raises(UserInputError, match=r"osc.G is given twice \(64 and 16\)"):
        parse_knobs(["osc.G=64", "ops.tau=1", "osc.G=16"])  # never a silent last-wins


def test_importing_model_run_does_not_import_the_cli():
    code = "import sys, accel_sim.model_run; print('accel_sim.cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "False"
