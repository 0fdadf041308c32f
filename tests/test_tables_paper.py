"""Paper tables: osc-table2, tweo-static, muxq-overhead and the ``accel-sim table`` command."""

from __future__ import annotations

import functools
import hashlib
import json

import matplotlib
import pandas as pd
import pytest

import accel_sim
from accel_sim.arch.load import load_arch
from accel_sim.engine.run import _CACHE
from accel_sim.tables import osc_table2
from accel_sim.tables.registry import TABLES, get_table, table_names

matplotlib.use("Agg")

#: a reduced osc-table2 sweep (the full one is a benchmark, not a unit test); K, N multiples of
#: 16·G so the branch fills the cube's K block
SMALL_OSC = dict(sizes=(2048, 4096), m_memory=(16,), m_compute=(128, 512), workers=1)


@pytest.fixture
def main(monkeypatch):
    """``accel_sim.cli.main`` with the ``table`` command wired in (if the CLI does not have it
    yet, ``accel_sim.tables.cli.add_parser`` is added to its parser, as the lead wires it)."""
    import accel_sim.cli as cli
    from accel_sim.tables import cli as table_cli

    original = cli.build_parser

    def build_parser():
        parser = original()
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        if "table" not in sub.choices:
            table_cli.add_parser(sub)
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    return cli.main


@pytest.fixture(scope="module")
def osc():
    return osc_table2.build(**SMALL_OSC)


@pytest.fixture(scope="module")
def tweo():
    return get_table("tweo-static").build(qwen_ms=(16,))


@pytest.fixture(scope="module")
def muxq():
    return get_table("muxq-overhead").build()


@pytest.fixture
def small_osc_registered(monkeypatch):
    spec = TABLES["osc-table2"]
    small = functools.partial(osc_table2.build, **SMALL_OSC)
    monkeypatch.setitem(TABLES, "osc-table2", type(spec)(spec.name, small, spec.description))


def test_registered():
    assert {"osc-table2", "tweo-static", "muxq-overhead"} <= set(table_names())


@pytest.mark.parametrize("G, paper", [(16, 1.60), (32, 1.78), (64, 1.88)])
def test_osc_compute_only_speedup_matches_hand_formula(osc, G, paper):
    hand = 0.5 / (0.25 + 1 / G)
    assert osc_table2.compute_formula(G) == pytest.approx(hand)
    assert hand == pytest.approx(paper, rel=0.01)
    detail = osc.extra["detail"]
    rows = detail[(detail["G"] == G) & (detail["M"] >= 128)]
    assert len(rows) == 2 * 2 * 2 and rows["k_branch_aligned"].all()
    assert rows["matrix_speedup"].to_numpy() == pytest.approx(hand, rel=0.01)
    summary = osc.table[(osc.table["G"] == G) & osc.table["regime"].str.startswith("M>=128")]
    assert summary["matrix_max"].iloc[0] == pytest.approx(paper, rel=0.01)
    assert summary["paper_min"].iloc[0] == paper


def test_osc_rows_and_deviation(osc):
    t = osc.table
    assert len(t) == 6  # 3 G × 2 regimes
    for _, r in t.iterrows():
        assert r["ours_min"] <= r["ours_max"]
        assert r["dev_min_%"] == pytest.approx(100 * (r["ours_min"] / r["paper_min"] - 1), abs=0.1)
    # the memory-bound regime is bounded by moving weights: OSC wins there too
    assert (t[t["regime"].str.startswith("M=16")]["ours_min"] > 1).all()


def test_osc_matmul_column_counts_the_matmuls_time_on_the_matrix_unit():
    """Where OSC's vector pass is the critical unit (2048x12288x768, G=64: the gather + MXFP4
    quantize of X outlasts the matmul beside it), the matmul column is still the matmuls' own
    time: each at least its compute cycles (their critical-path share is a few per cent)."""
    arch = load_arch(osc_table2.ARCH)
    (row,) = osc_table2._point(arch, 2048, 12288, 768, (64,), "des", 16)
    assert row["osc_vector_share"] > 0.9  # the case: the vector pass sets OSC's cycles
    runs = {flow: accel_sim.simulate(arch, (2048, 12288, 768), flow, knobs)
            for flow, knobs in (("w8a8", None), ("osc", {"G": 64}))}  # fmt: skip
    busy = {f: sum(op["busy_cycles"] for op in r.ops if op["kind"] == "matmul")
            for f, r in runs.items()}  # fmt: skip
    assert busy["osc"] >= runs["osc"].compute_cycles
    assert row["matmul_speedup"] == pytest.approx(busy["w8a8"] / busy["osc"])
    assert row["matmul_speedup"] <= busy["w8a8"] / runs["osc"].compute_cycles


def test_osc_parallel_sweep_equals_serial():
    kw = dict(sizes=(512, 2048), ms=(16, 128), groups=(32,))
    serial = osc_table2.sweep(workers=1, **kw)
    _CACHE.clear()  # the forked workers must simulate, not inherit the parent's results
    parallel = osc_table2.sweep(workers=2, **kw)
    pd.testing.assert_frame_equal(serial, parallel)


def test_headers_name_arch_file_and_statistics(osc, tweo, muxq):
    for result, archs in ((osc, ["arch_configs/ascend_like_cube.yaml"]),
                          (tweo, ["arch_configs/ascend_like_cube.yaml"]),
                          (muxq, ["arch_configs/edge_npu_int8.yaml",
                                  "arch_configs/ascend_like_cube.yaml"])):  # fmt: skip
        text = "\n".join(result.header)
        for arch in archs:
            assert arch in text, result.name
        assert any(line.startswith("statistics:") for line in result.header), result.name
        assert result.notes
    assert "K' = ceil(K/G)" in "\n".join(osc.header)
    assert "traces/smollm2-135m" in "\n".join(tweo.header)
    assert "traces/smollm2-135m" in "\n".join(muxq.header)


def test_tweo_static_never_slower(tweo):
    t = tweo.table
    assert (t["static_cycles"] <= t["dynamic_cycles"]).all()
    assert (t["speedup_static"] >= 1).all()
    assert (t["static_uJ"] <= t["dynamic_uJ"]).all()
    # the extra work is what dynamic costs over static; with overlap (the default) its absmax
    # and quantize are one pass on the vector unit, busy for no longer than the dynamic run
    diff = t["dynamic_cycles"] - t["static_cycles"]
    assert (t["exposed_cycles"] == diff).all()
    assert ((t["extra_%"] - 100 * diff / t["dynamic_cycles"]).abs() < 1e-3).all()
    assert (t["pass_busy_cycles"] > 0).all()
    assert (t["pass_busy_cycles"] <= t["dynamic_cycles"]).all()
    trace = t[t["workload"].str.startswith("smollm2")]
    assert set(trace["kind"]) >= {"attn_in", "o_in", "up_gate_in", "down_in", "all"}
    assert trace["err_dynamic"].notna().all() and trace["err_static"].notna().all()
    # per-tensor static quantization of a model trained without TWEO is less accurate
    assert (trace["err_static"] >= trace["err_dynamic"]).all()


def test_muxq_llm_int8_fp16_fallback_costs_more_on_int_npu(muxq):
    t = muxq.table.set_index(["arch", "kind", "scheme"])
    edge = t.loc[("edge_npu_int8", "all", "llm_int8"), "overhead_%"]
    cube = t.loc[("ascend_like_cube", "all", "llm_int8"), "overhead_%"]
    assert edge > cube > 0
    # MUXQ's Aux product stays on the INT8 matrix unit: far cheaper than LLM.int8()'s on the NPU
    for scheme in ("muxq exp=1", "muxq exp=2", "muxq exp=2 fused"):
        assert t.loc[("edge_npu_int8", "all", scheme), "overhead_%"] < edge
    # exp = 2 costs an extra epilogue op per output in the separate form, none when fused
    assert (t.loc[("edge_npu_int8", "all", "muxq exp=2"), "cycles"]
            >= t.loc[("edge_npu_int8", "all", "muxq exp=1"), "cycles"])  # fmt: skip
    assert (t.loc[("edge_npu_int8", "all", "muxq exp=2 fused"), "cycles"]
            == t.loc[("edge_npu_int8", "all", "muxq exp=1 fused"), "cycles"])  # fmt: skip
    assert t.xs("w8a8", level="scheme")["overhead_%"].abs().max() == 0
    assert t["rel_error"].notna().all()


def test_cli_writes_csv_and_png(main, tmp_path, capsys, small_osc_registered):
    for name in ("osc-table2", "tweo-static"):
        out = tmp_path / "new" / "dir"
        assert main(["table", name, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        csv = out / f"{name}.csv"
        png = out / f"{name}.png"
        assert csv.is_file() and png.is_file()
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        df = pd.read_csv(csv)
        assert len(df) > 0
        assert "architecture:" in printed and "note:" in printed
        assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
        manifest = json.loads((out / f"{name}.manifest.json").read_text())
        assert manifest["command"] == f"accel-sim table {name}"
        assert any(line.startswith("architecture:") for line in manifest["header"])
        assert set(manifest["files"]) >= {f"{name}.csv", f"{name}.png"}
        assert manifest["files"][f"{name}.csv"] == hashlib.sha256(csv.read_bytes()).hexdigest()
        assert not any("built in" in line for line in manifest["header"])  # (deterministic)
    assert (out.parent / "dir" / "osc-table2-detail.csv").is_file()


def test_cli_json_rows_parse(main, tmp_path, capsys):
    assert main(["table", "muxq-overhead", "--out", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "muxq-overhead"
    assert set(doc) == {"name", "title", "header", "rows", "notes"}
    csv = pd.read_csv(tmp_path / "muxq-overhead.csv")
    assert len(doc["rows"]) == len(csv)
    assert set(doc["rows"][0]) == set(csv.columns)
    assert all(isinstance(r["cycles"], int) for r in doc["rows"])


def test_cli_bad_input(main, tmp_path, capsys):
    assert main(["table", "no-such-table", "--out", str(tmp_path)]) == 2
    assert "unknown table" in capsys.readouterr().err
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    assert main(["table", "tweo-static", "--out", str(not_a_dir)]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["table", "--list"]) == 0
    assert "osc-table2" in capsys.readouterr().out
