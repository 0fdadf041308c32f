"""Traces and trace statistics from the command line, good and bad (issue 4)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accel_sim.cli import main


def _run(capsys, args):
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _user_error(result, *needles):
    code, _, err = result
    assert code == 2
    line = err.strip()
    assert line and "\n" not in line and "Traceback" not in line
    for needle in needles:
        assert needle in line, line


def test_stats_of_an_npz(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 128)).astype(np.float32)
    X[:, 7] *= 40  # one outlier channel
    np.savez(tmp_path / "acts.npz", layer0=X, layer1=X[:, :64].copy())
    code, out, _ = _run(capsys, ["trace", "stats", tmp_path / "acts.npz", "--json"])
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["layer0", "layer1"]
    first = rows[0]
    for key in ("absmax", "osc_threshold", "clustering_density", "outlier_channels",
                "int16_hi_zero_fraction"):  # fmt: skip
        assert key in first
    assert set(first["clustering_density"]) == {"16", "32", "64"}
    assert first["outlier_channels"] >= 1 and rows[1]["outlier_channels"] >= 1
    assert first["absmax"] == pytest.approx(float(np.abs(X).max()))
    assert first["osc_threshold"] == pytest.approx(5 * float(np.abs(X).mean()), rel=1e-5)
    assert 0 <= first["int16_hi_zero_fraction"] <= 1


def test_stats_of_the_shipped_trace(capsys):
    code, out, _ = _run(capsys, ["trace", "stats", "smollm2-135m", "--json"])
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 211 and {r["kind"] for r in rows} >= {"attn_in", "down_in"}


@pytest.mark.parametrize("case", ["nan", "inf", "three_d", "ints", "truncated", "empty"])
def test_bad_arrays(tmp_path, capsys, case):
    path = tmp_path / "bad.npz"
    X = np.ones((8, 8), dtype=np.float32)
    if case == "nan":
        X[3, 3] = np.nan
        np.savez(path, x=X)
    elif case == "inf":
        X[0, 0] = np.inf
        np.savez(path, x=X)
    elif case == "three_d":
        np.savez(path, x=np.ones((2, 3, 4), dtype=np.float32))
    elif case == "ints":
        np.savez(path, x=np.ones((4, 4), dtype=np.int32))
    elif case == "truncated":
        np.savez(path, x=X)
        path.write_bytes(path.read_bytes()[:60])
    else:
        np.savez(path)
    _user_error(_run(capsys, ["trace", "stats", path, "--json"]), str(path))


def test_knob_outside_the_compact_grid(tmp_path, capsys):
    out = tmp_path / "r.csv"
    result = _run(capsys, ["run", "--trace", "smollm2-135m", "--dataflow", "osc",
                           "--knob", "osc.G=128", "--out", out])  # fmt: skip
    _user_error(result, "full trace")
    assert not out.exists()


def test_truncated_trace(tmp_path, capsys):
    import shutil

    from accel_sim.workload.trace import TRACE_DIR

    copy = tmp_path / "t"
    shutil.copytree(TRACE_DIR / "all-minilm-l6-v2", copy)
    text = (copy / "stats.json").read_text()
    (copy / "stats.json").write_text(text[: len(text) // 2])
    _user_error(_run(capsys, ["run", "--trace", copy]), "stats.json")


def test_unknown_model(tmp_path, capsys):
    _user_error(_run(capsys, ["trace", "capture", "--model", "gpt-7", "--out", tmp_path / "x"]),
                "gpt-7")  # fmt: skip


def test_run_on_the_minilm_trace(capsys):
    code, out, _ = _run(capsys, ["run", "--trace", "all-minilm-l6-v2", "--dataflow", "w8a8",
                                 "--dataflow", "muxq", "--json"])  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 2 * 36
    assert all(r["rel_error"] is not None and 0 <= r["rel_error"] < 1 for r in rows)
