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


def test_truncated_gemms_csv_is_named(tmp_path, capsys):
    # cut after a whole row: the CSV still parses, the manifest's count gives it away (the
    # stats.json of the full trace would otherwise be blamed)
    import shutil

    from accel_sim.workload.trace import TRACE_DIR

    copy = tmp_path / "t"
    shutil.copytree(TRACE_DIR / "all-minilm-l6-v2", copy)
    rows = (copy / "gemms.csv").read_text().splitlines(keepends=True)
    (copy / "gemms.csv").write_text("".join(rows[:11]))
    _user_error(_run(capsys, ["run", "--trace", copy]), "gemms.csv",
                "10 GEMM rows but manifest.json says gemm_count 36")


def test_unknown_model(tmp_path, capsys):
    _user_error(_run(capsys, ["trace", "capture", "--model", "gpt-7", "--out", tmp_path / "x"]),
                "gpt-7")  # fmt: skip


def test_run_on_the_minilm_trace(capsys):
    code, out, _ = _run(capsys, ["run", "--trace", "all-minilm-l6-v2", "--dataflow", "w8a8",
                                 "--dataflow", "muxq", "--json"])  # fmt: skip
    assert code == 0
    rows = json.loads(out)["rows"]  # multi-row --json: {"totals": ..., "rows": ...}
    assert len(rows) == 2 * 36
    assert all(r["rel_error"] is not None and 0 <= r["rel_error"] < 1 for r in rows)


# --- the schema of a compact trace (workload/trace_schema.py) -----------------------------------


def _tiny_trace(tmp_path, mutate_stats=None, mutate_manifest=None, mutate_csv=None):
    """The first two GEMMs of the shipped MiniLM trace in ``tmp_path/t``, each file optionally
    edited: ``mutate_stats(stats)`` and ``mutate_manifest(manifest)`` edit the JSON data in place,
    ``mutate_csv(text)`` returns the new gemms.csv."""
    from accel_sim.workload.trace import TRACE_DIR

    src, trace = TRACE_DIR / "all-minilm-l6-v2", tmp_path / "t"
    trace.mkdir()
    stats = json.loads((src / "stats.json").read_text())
    stats["gemms"] = stats["gemms"][:2]
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["gemm_count"] = 2
    csv = "".join((src / "gemms.csv").read_text().splitlines(keepends=True)[:3])
    for data, mutate in ((stats, mutate_stats), (manifest, mutate_manifest)):
        if mutate is not None:
            mutate(data)
    (trace / "stats.json").write_text(json.dumps(stats))
    (trace / "manifest.json").write_text(json.dumps(manifest))
    (trace / "gemms.csv").write_text(mutate_csv(csv) if mutate_csv else csv)
    return trace


def _set(path, value):
    """A mutator setting the item at ``a/b/0/c`` (a list index in digits; None deletes it)."""

    def mutate(data):
        *parents, last = path.split("/")
        for part in parents:
            data = data[int(part)] if isinstance(data, list) else data[part]
        if value is None:
            del data[last]
        else:
            data[last] = value

    return mutate


SCHEMA_CASES = {  # id: (stats mutator, manifest mutator, csv mutator, file, needles)
    "table-negative": (_set("gemms/1/osc_table_channels/32", -40), None, None, "stats.json",
                       ("gemms[1].osc_table_channels.32: Input should be greater than or equal "
                        "to 0 (got -40)",)),
    "table-beyond-groups": (_set("gemms/0/osc_table_channels/32", 13), None, None, "stats.json",
                            ("gemms[0].osc_table_channels.32: 13 exceeds ceil(K/G) = 12",)),
    "table-huge": (_set("gemms/0/osc_table_channels/32", 10**30), None, None, "stats.json",
                   ("gemms[0].osc_table_channels.32",)),
    "table-text": (_set("gemms/0/osc_table_channels/32", "x"), None, None, "stats.json",
                   ("gemms[0].osc_table_channels.32", "integer")),
    "table-G-missing": (_set("gemms/0/osc_table_channels/64", None), None, None, "stats.json",
                        ("gemms[0].osc_table_channels:", "16, 32, 64")),
    "hit-rate-above-1": (_set("gemms/0/osc_table_hit_rate/16", 1.5), None, None, "stats.json",
                         ("gemms[0].osc_table_hit_rate.16", "less than or equal to 1")),
    "error-negative": (_set("gemms/1/errors/w8a8", -5), None, None, "stats.json",
                       ("gemms[1].errors.w8a8: Input should be greater than or equal to 0 "
                        "(got -5)",)),
    "error-text": (_set("gemms/0/errors/w8a8", "low"), None, None, "stats.json",
                   ("gemms[0].errors.w8a8", "number", "'low'")),
    "errors-null": (_set("gemms/0/errors", None), None, None, "stats.json",
                    ("gemms[0].errors", "required")),
    "errors-is-null": (lambda s: s["gemms"][0].update(errors=None), None, None, "stats.json",
                       ("gemms[0].errors", "dictionary", "None")),
    "outliers-text": (_set("gemms/0/outlier_channels", "many"), None, None, "stats.json",
                      ("gemms[0].outlier_channels", "integer", "'many'")),
    "outliers-negative": (_set("gemms/0/outlier_channels", -50), None, None, "stats.json",
                          ("gemms[0].outlier_channels", "greater than or equal to 0")),
    "outliers-beyond-K": (_set("gemms/0/outlier_channels", 385), None, None, "stats.json",
                          ("gemms[0].outlier_channels: 385 exceeds K = 384",)),
    "outliers-bool": (_set("gemms/0/outlier_channels", True), None, None, "stats.json",
                      ("gemms[0].outlier_channels", "integer")),
    "zero-fraction-7": (_set("gemms/1/int16_hi_zero_fraction", 7.0), None, None, "stats.json",
                        ("gemms[1].int16_hi_zero_fraction", "less than or equal to 1",
                         "(got 7.0)")),
    "ops-sets-negative": (_set("gemms/0/ops_skip/16:1/sets", -0.5), None, None, "stats.json",
                          ("gemms[0].ops_skip.16:1.sets", "greater than or equal to 0")),
    "ops-missing": (_set("gemms/0/ops_skip", None), None, None, "stats.json",
                    ("gemms[0].ops_skip: required key is missing",)),
    "ops-pair-missing": (_set("gemms/0/ops_skip/32:4", None), None, None, "stats.json",
                         ("gemms[0].ops_skip:", "chunk:tau")),
    "ops-tile-missing": (_set("gemms/0/ops_skip/32:4/tiles/64", None), None, None, "stats.json",
                         ("gemms[0].ops_skip.32:4.tiles:", "16, 32, 64, 128")),
    "shape-3d": (_set("gemms/0/shape", [1, 2, 3]), None, None, "stats.json",
                 ("gemms[0].shape", "at most 2")),
    "shape-mismatch": (_set("gemms/0/shape", [256, 383]), None, None, "stats.json",
                       ("gemms[0].shape: expected [M, K] = [256, 384]",)),
    "unknown-key": (_set("gemms/0/absmx", 1.0), None, None, "stats.json",
                    ("gemms[0].absmx: unknown key", "absmax")),
    "grid-no-groups": (_set("grid/osc_groups", []), None, None, "stats.json",
                       ("grid.osc_groups",)),
    "manifest-empty": (None, lambda m: m.clear(), None, "manifest.json",
                       ("model: required key is missing",)),
    "manifest-tokens-text": (None, _set("tokens", "256"), None, "manifest.json",
                             ("tokens", "integer")),
    "kind-banana": (None, None, lambda t: t.replace(",attn_in,", ",banana,", 1), "gemms.csv",
                    ("gemms.csv (data row 1): kind: unknown kind 'banana'",)),
}  # fmt: skip


@pytest.mark.parametrize(("stats", "manifest", "csv", "name", "needles"), SCHEMA_CASES.values(),
                         ids=SCHEMA_CASES)  # fmt: skip
def test_bad_trace_values(tmp_path, run_cli, stats, manifest, csv, name, needles):
    trace = _tiny_trace(tmp_path, stats, manifest, csv)
    out = tmp_path / "out.csv"
    code, stdout, err = run_cli(["run", "--trace", trace, "--dataflow", "osc", "--dataflow",
                                 "w8a8", "--out", out])  # fmt: skip
    assert stdout == "" and not out.exists()
    _user_error((code, stdout, err), f"accel-sim: error: {trace / name}", *needles)


def test_tiny_trace_runs(tmp_path, run_cli):
    trace = _tiny_trace(tmp_path)
    code, out, err = run_cli(["run", "--trace", trace, "--dataflow", "osc", "--json"])
    assert code == 0, err
    assert len(json.loads(out)["rows"]) == 2


def test_shipped_traces_pass_the_schema():
    from accel_sim.workload.trace import load_trace

    for name, count in (("smollm2-135m", 211), ("all-minilm-l6-v2", 36)):
        trace = load_trace(name)
        assert len(trace.gemms) == len(trace.stats) == count
