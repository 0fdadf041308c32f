"""Terminal reports show time and energy with SI prefixes (ms, µs, ns, mJ, µJ, nJ, pJ) and
cycles with thousands separators, never scientific notation; machine outputs (--json, --out)
keep base units and their unit-suffixed keys (time_s, energy_pj, pj_per_mac)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from accel_sim.report.text import count_text, pj_text, seconds_text, table_report

SI_TIME = re.compile(r"\b\d{1,3}\.\d{3} [munµ]?s\b")
SI_ENERGY = re.compile(r"\b\d{1,3}\.\d{3} [kMmunµp]?J\b")
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")
OLD_HEADERS = ("time_ms", "energy_mJ", "energy_pj", "pj_per_mac", "tokens_per_s",
               "speedup_vs_w8a8", "linear_cycles")  # fmt: skip


def _readable(text: str) -> None:
    assert not SCIENTIFIC.search(text), SCIENTIFIC.search(text)
    for old in OLD_HEADERS:
        assert old not in text, old


def test_helpers():
    assert seconds_text(9.56e-3) == "9.560 ms"
    assert seconds_text(3.8e-7) == "380.000 ns"
    assert seconds_text(9421934.376803) == "9,421,934 s"  # not '9.422 Ms'
    assert pj_text(5.301e9) == "5.301 mJ"
    assert pj_text(31426.523) == "31.427 nJ"
    assert pj_text(1.263e9) == "1.263 mJ"
    assert count_text(16959481878245853) == "16,959,481,878,245,853"  # exact beyond 2**53
    assert count_text(np.int64(4402646)) == "4,402,646"
    assert seconds_text(None) == pj_text(float("nan")) == count_text(pd.NA) == "-"


def test_model_report(run_cli, tmp_path):
    code, text, err = run_cli(["model", "gpt2-small", "--tokens", "16", "--dataflow", "fp16",
                               "w8a8", "--stats-from", "none"])  # fmt: skip
    assert code == 0, err
    lines = text.splitlines()
    header = lines[lines.index("totals per dataflow") + 1].split()
    assert header[:3] == ["dataflow", "cycles", "time"] and "energy" in header
    rows = lines[lines.index("totals per dataflow") + 2 :][:2]
    assert [r.split()[0] for r in rows] == ["fp16", "w8a8"]
    for row in rows:
        assert SI_TIME.search(row) and SI_ENERGY.search(row), row
        assert re.search(r"\d,\d{3}", row), row  # cycles with separators
    assert "1.000×" in rows[1]
    _readable(text)
    # machine output: base units, the keys as before
    out = tmp_path / "rows.csv"
    code, text, _ = run_cli(["model", "gpt2-small", "--tokens", "16", "--dataflow", "w8a8",
                             "--stats-from", "none", "--json", "--out", out])  # fmt: skip
    total = json.loads(text)["totals"][0]
    assert {"cycles", "time_s", "energy_pj", "tokens_per_s"} <= set(total)
    assert {"cycles", "energy_pj"} <= set(pd.read_csv(out).columns)


def test_model_report_at_the_largest_size(run_cli):
    code, text, err = run_cli(["model", "smollm2-135m", "--tokens", "16777216"])
    assert code == 0, err
    _readable(text)
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("w8a8"))
    assert re.search(r"\d{1,3}(,\d{3})+ s ", row) and " MJ" in row, row


def test_run_per_gemm_table(run_cli, tmp_path):
    out = tmp_path / "rows.csv"
    code, text, err = run_cli(["run", "--gemm", "64x64x64", "--gemm", "16x64x64", "--dataflow",
                               "fp16", "--dataflow", "w8a8", "--per-gemm",
                               "--out", out])  # fmt: skip
    assert code == 0, err
    table = text.split("per GEMM\n", 1)[1].splitlines()
    header = table[0].split()
    assert header[:6] == ["gemm", "dataflow", "M", "K", "N", "cycles"]
    assert {"time", "energy", "energy/MAC", "w8a8"} <= set(header)
    rows = [ln for ln in table[1:] if ln.lstrip().startswith(("64x64x64", "16x64x64"))]
    assert len(rows) == 4
    for row in rows:
        assert SI_TIME.search(row) and SI_ENERGY.search(row) and " pJ" in row, row
    _readable(text)
    columns = set(pd.read_csv(out).columns)
    assert {"cycles", "time_s", "energy_pj", "pj_per_mac", "speedup_vs_w8a8"} <= columns
    code, text, _ = run_cli(["run", "--gemm", "64x64x64", "--dataflow", "w8a8",
                             "--dataflow", "fp16", "--json"])  # fmt: skip
    assert {"energy_pj", "pj_per_mac", "time_s"} <= set(json.loads(text)["rows"][0])


def test_table_report_missing_values():
    df = pd.DataFrame({"gemm": ["1x1x1"], "dataflow": ["osc"], "M": [1], "K": [1], "N": [1],
                       "cycles": [684], "time_s": [3.8e-7], "compute_cycles": [1],
                       "stall_cycles": [683], "utilization": [0.0015], "energy_pj": [31426.523],
                       "pj_per_mac": [31426.523], "speedup_vs_w8a8": [np.nan],
                       "rel_error": [None]})  # fmt: skip
    text = table_report(df)
    assert "380.000 ns" in text and "31.427 nJ" in text and "nan" not in text.lower()
    _readable(text)


def test_single_gemm_report(run_cli):
    code, text, err = run_cli(["run", "--gemm", "1x1x1"])
    assert code == 0, err
    line = next(ln for ln in text.splitlines() if "energy / MAC" in ln)
    assert SI_ENERGY.search(line) and "31426" not in line, line
    _readable(text)


def test_sweep_front_report(tmp_path):
    from accel_sim.sweep import run_sweep
    from accel_sim.sweep.results import front_report

    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump({
        "base_arch": "ascend_like_cube", "engine": "twin",
        "grid": {"memory.1.capacity_bytes": [4194304, 8388608]},
        "dataflows": ["w8a8", "w4a4_static"], "workloads": [{"gemm": "64x512x512"}],
        "heatmap": ["memory.1.capacity_bytes", "workload"]}, sort_keys=False))  # fmt: skip
    df = run_sweep(spec, tmp_path / "out", scheduler="synchronous", progress=False)
    text = front_report(df)
    header = text.splitlines()[1].split()
    assert {"cycles", "time", "energy", "speedup"} <= set(header)
    rows = text.splitlines()[2:]
    assert rows and all(SI_TIME.search(r) and SI_ENERGY.search(r) for r in rows), rows
    _readable(text)
    saved = pd.read_csv(tmp_path / "out" / "results.csv")
    assert {"cycles", "time_s", "energy_pj", "pj_per_mac", "speedup"} <= set(saved.columns)


def test_heatmap_panels_share_one_colour_scale():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from accel_sim.sweep.plot import heatmap_figure

    rows = [
        {"variant": v, "workload": "w", "compute.block_m": m, "speedup": s * (1 + m / 100)}
        for v, s in (("base", 1.0), ("a", 1.3), ("b", 0.7), ("c", 2.2))
        for m in (8, 16)
    ]
    fig = heatmap_figure(pd.DataFrame(rows), ["compute.block_m", "workload"], "base", "demo")
    FigureCanvasAgg(fig).draw()
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 3
    assert len({(im.norm.vmin, im.norm.vmax) for im in images}) == 1
    assert images[0].norm.vmin == pytest.approx(0.7 * 1.08) and images[0].norm.vmax == \
        pytest.approx(2.2 * 1.16)  # fmt: skip
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1
    ticks = bars[0].get_yticks()
    assert ticks.min() < 1.0 < ticks.max() and 1.0 in ticks
