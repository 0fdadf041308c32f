"""Design-space sweeps: grid expansion, hashing, determinism, SIGKILL + restart, bad specs,
point-file checksums, the grid-size limit, --out and --scheduler checks, plot labels.

Most runs use ``scheduler="synchronous"`` (in-process, no Dask) to stay fast; one test runs the
default (forked local workers), one a real Dask LocalCluster, and the SIGKILL test runs the
command in its own process group, workers included.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import accel_sim
from accel_sim.errors import UserInputError
from accel_sim.sweep import MAX_POINTS, expand, load_spec, run_sweep

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "base_arch": "ascend_like_cube",
    "grid": {"compute.block_m": [8, 16], "memory.HBM.read_bytes_per_cycle": [18.5, 37]},
    "tie": {"compute.block_n": "compute.block_m"},
    "dataflows": ["w8a8", "osc", "w4a4_static"],
    "knobs": {"osc": {"G": [16, 64]}},
    "workloads": [{"gemm": "16x512x512"}, {"gemm": "128x512x768"}],
}
# run in a fresh interpreter, as `accel-sim sweep` would be (add_parser is what the CLI wires)
COMMAND = """import argparse, sys
from accel_sim.sweep import add_parser
parser = argparse.ArgumentParser(prog="accel-sim")
add_parser(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def write_spec(tmp_path: Path, spec: dict, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_expansion_count_tie_zip_and_labels(tmp_path):
    spec = dict(SMALL, zip=[{"memory.L1.capacity_bytes": [524288, 1048576],
                             "memory.L2.capacity_bytes": [4194304, 8388608]}])  # fmt: skip
    points = expand(load_spec(write_spec(tmp_path, spec)))
    # 2 workloads × (2 × 2 × 2 zip) architectures × (w8a8, osc G=16, osc G=64, w4a4_static)
    assert len(points) == 2 * 8 * 4
    assert [p.index for p in points] == list(range(len(points)))
    assert {p.variant for p in points} == {"w8a8", "osc[G=16]", "osc[G=64]", "w4a4_static"}
    for p in points:
        assert p.params["compute.block_n"] == p.params["compute.block_m"]
        zipped = (p.params["memory.L1.capacity_bytes"], p.params["memory.L2.capacity_bytes"])
        assert zipped in {(524288, 4194304), (1048576, 8388608)}
        level = {m["name"]: m for m in p.task["arch"]["memory"]}["HBM"]
        assert level["read_bytes_per_cycle"] == p.params["memory.HBM.read_bytes_per_cycle"]
    assert len({p.hash for p in points}) == len(points)


def test_hashes_are_stable_and_keyed_on_inputs(tmp_path):
    hashes = [p.hash for p in expand(load_spec(write_spec(tmp_path, SMALL)))]
    assert hashes == [p.hash for p in expand(load_spec(write_spec(tmp_path, SMALL, "b.yaml")))]
    # more grid values, renamed workloads, `gemms: [one]` for `gemm`: old points keep their hash
    bigger = dict(SMALL, grid={**SMALL["grid"], "compute.block_m": [8, 16, 32]})
    bigger["workloads"] = [{"gemms": ["16x512x512"], "name": "a"}, {"gemm": "128x512x768"}]
    new = {p.hash for p in expand(load_spec(write_spec(tmp_path, bigger, "c.yaml")))}
    assert set(hashes) < new
    # another engine, or another base architecture file content: every hash changes
    twin = {p.hash for p in expand(load_spec(write_spec(tmp_path, dict(SMALL, engine="twin"))))}
    assert not twin & set(hashes)
    arch = tmp_path / "arch.yaml"
    arch.write_text((ROOT / "arch_configs/ascend_like_cube.yaml").read_text() + "# edited\n")
    moved = expand(load_spec(write_spec(tmp_path, dict(SMALL, base_arch=str(arch)), "d.yaml")))
    assert not {p.hash for p in moved} & set(hashes)


def test_memory_level_by_name_or_index_is_the_same_point(tmp_path):
    by_name = dict(SMALL, grid={"memory.HBM.read_bytes_per_cycle": [20]}, tie={})
    by_index = dict(SMALL, grid={"memory.0.read_bytes_per_cycle": [20]}, tie={})
    a = expand(load_spec(write_spec(tmp_path, by_name, "a.yaml")))
    b = expand(load_spec(write_spec(tmp_path, by_index, "b.yaml")))
    assert [p.hash for p in a] == [p.hash for p in b]


def test_small_sweep_is_deterministic_and_resumes(tmp_path, capfd):
    spec = write_spec(tmp_path, SMALL)
    first = run_sweep(spec, tmp_path / "a", scheduler="synchronous", progress=False)
    second = run_sweep(spec, tmp_path / "b", scheduler="synchronous", progress=False)
    pd.testing.assert_frame_equal(first, second)
    for name in ("results.csv", "results.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "pareto.png").stat().st_size > 0
    assert (tmp_path / "a" / "heatmap.png").stat().st_size > 0
    assert len(first) == 2 * 4 * 4 and first["point"].tolist() == list(range(len(first)))
    assert (first.loc[first["variant"] == "w8a8", "speedup"] == 1.0).all()
    assert first.groupby("workload")["pareto"].any().all()
    # a point's row is the public API's answer for that architecture
    row = first[(first["compute.block_m"] == 16) & (first["memory.HBM.read_bytes_per_cycle"] == 37)
                & (first["variant"] == "w8a8") & (first["workload"] == "128x512x768")]  # fmt: skip
    assert row["cycles"].item() == accel_sim.simulate("ascend_like_cube", "128x512x768").cycles
    # a rerun computes nothing and leaves the point files alone
    points = sorted((tmp_path / "a" / "points").glob("*.parquet"))
    mtimes = [p.stat().st_mtime_ns for p in points]
    capfd.readouterr()
    again = run_sweep(spec, tmp_path / "a", scheduler="synchronous", progress=False)
    assert "32 already done, computing 0" in capfd.readouterr().err
    assert [p.stat().st_mtime_ns for p in points] == mtimes
    pd.testing.assert_frame_equal(first, again)


def test_trace_and_model_workloads(tmp_path):
    spec = dict(SMALL, engine="twin", grid={}, tie={}, dataflows=["w8a8", "osc"], knobs={})
    spec["workloads"] = [
        {"trace": "all-minilm-l6-v2"},
        {"model": "qwen3-8b", "phase": "decode", "tokens": 1, "kv_len": 512},
        {"model": "qwen3-8b", "phase": "decode", "tokens": 1, "kv_len": 512,
         "attention": False, "name": "linear only"},
    ]  # fmt: skip
    df = run_sweep(write_spec(tmp_path, spec), tmp_path / "out", "synchronous", progress=False)
    by = df.set_index(["workload", "dataflow"])
    assert by.loc[("all-minilm-l6-v2", "osc"), "gemms"] == 36
    assert by.loc[("all-minilm-l6-v2", "osc"), "rel_error"] > 0  # the trace's own statistics
    full = by.loc[("qwen3-8b:decode:T1:kv512:B1", "w8a8")]
    linear = by.loc[("linear only", "w8a8")]
    assert full["gemms"] == linear["gemms"] + 2  # QKᵀ and PV
    assert full["cycles"] > linear["cycles"]


def test_a_model_workload_costs_what_accel_sim_model_does(tmp_path):
    """A sweep point on a model workload is the ``accel-sim model`` total for that dataflow
    (attention under the arch's attention dataflow, one launch per batch of heads, the vector
    work, the default trace's statistics); ``attention: false`` drops the attention rows. On
    rtx3090_like a sweep once charged the attention 4,739,530 cycles against the model's
    671,530 (one launch per head, attention under the point's dataflow)."""
    from accel_sim.model_run.simulate import simulate_model

    spec = dict(SMALL, base_arch="rtx3090_like", engine="twin", grid={}, tie={},
                dataflows=["fp16", "w8a8"], knobs={}, baseline="fp16")  # fmt: skip
    spec["workloads"] = [
        {"model": "smollm2-135m", "phase": "decode", "tokens": 1},
        {"model": "smollm2-135m", "phase": "decode", "tokens": 1, "attention": False,
         "name": "linear only"},
    ]  # fmt: skip
    df = run_sweep(write_spec(tmp_path, spec), tmp_path / "out", "synchronous", progress=False)
    by = df.set_index(["workload", "dataflow"])
    ran = simulate_model("rtx3090_like", "smollm2-135m", "decode", 1,
                         dataflows=["fp16", "w8a8"], engine="twin")  # fmt: skip
    totals = ran.totals.set_index("dataflow")
    for flow in ("fp16", "w8a8"):
        assert by.loc[("smollm2-135m:decode:T1:kv0:B1", flow), "cycles"] == totals.loc[
            flow, "cycles"]  # fmt: skip
        assert by.loc[("smollm2-135m:decode:T1:kv0:B1", flow), "energy_pj"] == pytest.approx(
            totals.loc[flow, "energy_pj"])  # fmt: skip
        rows = ran.table[(ran.table["dataflow"] == flow) & (ran.table["group"] != "attention")]
        assert by.loc[("linear only", flow), "cycles"] == int(rows["cycles"].sum())
        assert by.loc[("linear only", flow), "cycles"] < totals.loc[flow, "cycles"]


def test_local_workers_and_a_dask_cluster_give_the_in_process_table(tmp_path):
    """The default (forked local workers, ``sweep/run.FORKED``) and a Dask cluster (what
    ``--scheduler ADDR`` reaches; here a LocalCluster's client) compute the same table as this
    process alone."""
    from dask.distributed import Client, LocalCluster

    spec = write_spec(tmp_path, SMALL)
    inproc = run_sweep(spec, tmp_path / "inproc", scheduler="synchronous", progress=False)
    local = run_sweep(spec, tmp_path / "local", scheduler=None, progress=False)
    pd.testing.assert_frame_equal(local, inproc)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:  # fmt: skip
        dask = run_sweep(spec, tmp_path / "dask", scheduler=client, progress=False)
    pd.testing.assert_frame_equal(dask, inproc)


def _start(spec: Path, out: Path) -> subprocess.Popen:
    args = [sys.executable, "-c", COMMAND, "sweep", str(spec), "--out", str(out), "--no-progress"]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip


def test_sigkill_then_restart_recomputes_nothing_finished(tmp_path):
    spec = dict(SMALL, grid={"compute.block_m": [8, 16, 32],
                             "memory.HBM.read_bytes_per_cycle": [9.25, 18.5, 37, 74]})  # fmt: skip
    # ~0.05 s a point on the DES: the kill lands mid-run, the whole test stays well under 60 s
    spec["workloads"] = [{"gemm": g} for g in ("16x512x512", "64x512x1024", "128x1024x512")]
    path = write_spec(tmp_path, spec)
    total = 3 * 12 * 4
    out, points_dir = tmp_path / "killed", tmp_path / "killed" / "points"
    proc = _start(path, out)
    deadline = time.monotonic() + 60
    while len(list(points_dir.glob("*.parquet"))) < 8:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no point finished in 60 s"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the command, its scheduler and its worker processes
    proc.wait()
    done = {p: p.stat().st_mtime_ns for p in points_dir.glob("*.parquet")}
    assert 8 <= len(done) < total, "the sweep finished before the kill: make it longer"

    restart = _start(path, out)
    _, err = restart.communicate(timeout=120)
    assert restart.returncode == 0, err
    match = re.search(r"(\d+) points, (\d+) already done, computing (\d+)", err)
    assert match and [int(g) for g in match.groups()] == [total, len(done), total - len(done)]
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in done.items())  # none recomputed
    assert not list(points_dir.glob(".*.tmp"))
    assert len(list(points_dir.glob("*.parquet"))) == total

    reference = tmp_path / "reference"
    run_sweep(path, reference, scheduler="synchronous", progress=False)
    for name in ("results.csv", "results.parquet"):
        assert (out / name).read_bytes() == (reference / name).read_bytes()


def test_ctrl_c_is_one_line_not_worker_tracebacks(tmp_path):
    """A Ctrl-C reaches the whole process group: the local cluster's workers ignore it (they
    each printed a KeyboardInterrupt traceback) and the command says it was interrupted."""
    spec = dict(SMALL, grid={"compute.block_m": [8, 16, 32],
                             "memory.HBM.read_bytes_per_cycle": [9.25, 18.5, 37, 74]})  # fmt: skip
    spec["workloads"] = [{"gemm": g} for g in ("16x512x512", "64x512x1024", "128x1024x512")]
    out = tmp_path / "out"
    args = [sys.executable, "-m", "accel_sim.cli", "sweep", str(write_spec(tmp_path, spec)),
            "--out", str(out), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not list((out / "points").glob("*.parquet")):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no point finished in 60 s"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "accel-sim: interrupted"


def test_a_point_error_on_a_worker_is_one_user_error(tmp_path):
    # the dry build on the base architecture passes; the FP4 rate 0 point fails where it runs
    spec = dict(SMALL, grid={"compute.rates.fp4": [4, 0]}, tie={}, dataflows=["osc"], knobs={})
    spec["workloads"] = [{"gemm": "16x512x512"}]
    with pytest.raises(UserInputError, match=r"sweep\.yaml: point 1 \(osc on 16x512x512\): .*FP4"):
        run_sweep(write_spec(tmp_path, spec), tmp_path / "out", "synchronous", progress=False)
    assert len(list((tmp_path / "out" / "points").glob("*.parquet"))) == 1  # point 0 is kept


def test_dry_build_checks_each_dataflow_against_each_workload(tmp_path):
    spec = dict(SMALL, grid={}, tie={}, dataflows=["llm_int8", "muxq"], knobs={})
    spec["workloads"] = [{"trace": "all-minilm-l6-v2"}]  # outlier counts from the trace: fine
    assert len(expand(load_spec(write_spec(tmp_path, spec)))) == 2
    spec["workloads"].append({"gemm": "16x512x512"})  # no statistics, no outlier_channels knob
    with pytest.raises(UserInputError, match="llm_int8 on 16x512x512: needs .*outlier channels"
                       ) as caught:  # fmt: skip
        expand(load_spec(write_spec(tmp_path, spec)))
    # in the sweep file's own terms, not the command line's
    assert "knobs: {llm_int8: {outlier_channels: [N]}}" in str(caught.value)
    assert "--" not in str(caught.value)
    with pytest.raises(UserInputError, match=r"osc\[G=128\] on all-minilm-l6-v2: .*G in"):
        spec = dict(spec, dataflows=["osc"], knobs={"osc": {"G": [128]}})
        expand(load_spec(write_spec(tmp_path, spec)))


BAD = [
    ({"unknown": 1}, "unknown: unknown key"),
    ({"engine": "fast"}, "engine: Input should be 'des' or 'twin'"),
    ({"grid": {"memory.HBX.read_bytes_per_cycle": [1]}, "tie": {}}, "memory.HBX.read_bytes_per_cy"),
    ({"grid": {"compute.no.rows": [1]}, "tie": {}}, "compute.no.rows: 'no' is not a section"),
    ({"grid": {"compute.block_m": [0]}}, "grid (compute.block_m)"),
    ({"grid": {"compute.block_m": []}}, "grid.compute.block_m: Value should have at least 1"),
    ({"grid": {"compute.blok_m": [8]}, "tie": {}}, "grid (compute.blok_m): unknown key"),
    ({"tie": {"compute.block_n": "compute.block_k"}}, "tie.compute.block_n"),
    # a misspelt grid key with a tie to the right name: the message shows what is swept
    ({"grid": {"compute.blok_m": [8]}}, "'compute.block_m' is not a swept parameter (grid or "
                                        "zip: ['compute.blok_m'])"),
    ({"tie": {"compute.block_m": "compute.block_m"}}, "compute.block_m is swept already"),
    ({"zip": [{"compute.block_k": [8, 16], "memory.L1.capacity_bytes": [1]}]}, "zip.0: lists"),
    ({"dataflows": ["w8a8", "w9a9"]}, "dataflows.1: unknown dataflow 'w9a9'"),
    ({"knobs": {"fp16": {"x": [1]}}}, "knobs: knobs for a dataflow not in"),
    ({"knobs": {"osc": {"H": [1]}}}, "knobs.osc: H: unknown knob"),
    ({"knobs": {"osc": {"base": ["mxfp3"]}}}, "mxfp3] on 16x512x512: knobs: osc.base: base"),
    ({"workloads": [{"gemm": "16x512"}]}, "workloads.0: expected MxKxN"),
    ({"workloads": [{"gemm": "16x8x8", "trace": "x"}]}, "workloads.0: give exactly one of"),
    ({"workloads": [{"gemm": "16x8x8", "phase": "decode"}]}, "only apply to a model workload"),
    ({"workloads": [{"model": "qwen3-8b"}]}, "a model workload needs phase and tokens"),
    ({"workloads": [{"trace": "no-such-trace"}]}, "no such trace directory"),
    ({"workloads": [{"gemm": "8x8x8"}, {"gemms": ["8x8x8"]}]}, "two workloads have the same"),
    ({"baseline": "fp16"}, "baseline: 'fp16' is not a dataflow or variant"),
    ({"heatmap": ["compute.block_m", "colour"]}, "heatmap: 'colour' is not a grid parameter"),
    ({"base_arch": "no_such_arch"}, "no such architecture file"),
]


@pytest.mark.parametrize(("change", "needle"), BAD, ids=[n for _, n in BAD])
def test_bad_spec_is_one_user_error(tmp_path, change, needle):
    path = write_spec(tmp_path, {**SMALL, **change})
    with pytest.raises(UserInputError) as err:
        expand(load_spec(path))
    message = str(err.value)
    assert needle in message and "\n" not in message
    assert str(path) in message or change.get("base_arch") or "workloads" in change


def test_unreadable_or_malformed_spec(tmp_path):
    with pytest.raises(UserInputError, match="not found"):
        load_spec(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: [1, 2\n")
    with pytest.raises(UserInputError, match="malformed YAML"):
        load_spec(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(UserInputError, match="bad.yaml: a sweep file is a mapping .*, got list"):
        load_spec(bad)
    out = tmp_path / "file"
    out.write_text("")
    with pytest.raises(UserInputError, match="must be a directory"):
        run_sweep(write_spec(tmp_path, SMALL), out, "synchronous", progress=False)


def test_shipped_sweeps_expand(tmp_path):
    assert len(expand(load_spec(ROOT / "workloads/sweeps/bench_1000.yaml"))) == 1000
    example = expand(load_spec(ROOT / "workloads/sweeps/example.yaml"))
    assert len(example) == 144
    shutil.rmtree(tmp_path)


# ------------------------------------------------------------------ issue 11: bad points, limits
TINY = {  # 4 points on the closed-form engine: 2 L2 capacities × 2 dataflows × 1 GEMM
    "base_arch": "ascend_like_cube",
    "engine": "twin",
    "grid": {"memory.1.capacity_bytes": [4194304, 8388608]},
    "dataflows": ["w8a8", "w4a4_static"],
    "workloads": [{"gemm": "64x512x512"}],
    "heatmap": ["memory.1.capacity_bytes", "workload"],
}


def _cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    """``accel-sim ARGV`` in this process: (exit code, stderr lines)."""
    from accel_sim.cli import main

    code = main(argv)
    return code, capsys.readouterr().err.splitlines()


def test_bad_point_files_are_named_once_and_recomputed(tmp_path, capfd):
    import pyarrow.parquet as pq

    spec, out = write_spec(tmp_path, TINY), tmp_path / "out"
    first = run_sweep(spec, out, scheduler="synchronous", progress=False)
    files = [out / "points" / f"{h}.parquet" for h in first["point_hash"]]
    assert all(pq.read_schema(f).metadata[b"accel_sim.point_sha256"] for f in files)
    files[0].write_bytes(files[0].read_bytes()[:100])  # truncated
    files[1].write_bytes(b"")  # empty
    table = pq.read_table(files[2])  # edited, metadata (the old checksum) kept
    pq.write_table(table.set_column(table.schema.get_field_index("cycles"), "cycles",
                                    [[1]]), files[2])  # fmt: skip
    pq.write_table(table.replace_schema_metadata({}), files[3])  # no checksum at all
    capfd.readouterr()
    again = run_sweep(spec, out, scheduler="synchronous", progress=False)
    err = capfd.readouterr().err
    for path, why in zip(files, ("unreadable", "empty file", "does not match", "no checksum")):
        lines = [line for line in err.splitlines() if str(path) in line]
        assert len(lines) == 1 and why in lines[0] and "recomputing" in lines[0], err
    assert "Traceback" not in err and "4 points, 0 already done, computing 4" in err
    pd.testing.assert_frame_equal(first, again)  # cycles=1 is not on any front any more
    capfd.readouterr()
    run_sweep(spec, out, scheduler="synchronous", progress=False)  # all trusted again
    err = capfd.readouterr().err
    assert "warning" not in err and "4 already done, computing 0" in err


def test_a_point_file_copied_under_another_name_is_not_trusted(tmp_path, capfd):
    spec, out = write_spec(tmp_path, TINY), tmp_path / "out"
    first = run_sweep(spec, out, scheduler="synchronous", progress=False)
    a, b = (out / "points" / f"{h}.parquet" for h in first["point_hash"][:2])
    shutil.copyfile(a, b)  # a valid file, checksum and all, of another point
    capfd.readouterr()
    again = run_sweep(spec, out, scheduler="synchronous", progress=False)
    assert f"warning: {b}: holds another point's result" in capfd.readouterr().err
    pd.testing.assert_frame_equal(first, again)


def test_grid_size_is_counted_not_expanded_and_capped(tmp_path, capsys):
    assert MAX_POINTS == 100_000
    at_limit = dict(TINY, dataflows=["w8a8"], grid={"compute.block_m": list(range(1, 1001)),
                                                    "compute.block_k": list(range(1, 101))})
    assert load_spec(write_spec(tmp_path, at_limit)) is not None  # exactly 100,000: accepted
    over = dict(at_limit, workloads=[{"gemm": "64x512x512"}, {"gemm": "64x512x1024"}])
    with pytest.raises(UserInputError, match=r"grid: the grid has 200,000 points .* limit of "
                                              r"100,000"):  # fmt: skip
        load_spec(write_spec(tmp_path, over))
    huge = dict(TINY, grid={"compute.block_m": list(range(1, 10001)),
                            "compute.block_k": list(range(1, 10001))})  # 10^8 × 2 points
    started = time.monotonic()
    code, err = _cli(["sweep", str(write_spec(tmp_path, huge)), "--out", str(tmp_path / "o")],
                     capsys)  # fmt: skip
    assert code == 2 and len(err) == 1 and "200,000,000 points" in err[0], err
    assert time.monotonic() - started < 10 and not (tmp_path / "o").exists()


def test_unreachable_scheduler_fails_before_creating_points(tmp_path, capsys):
    spec, out = str(write_spec(tmp_path, TINY)), tmp_path / "out"
    for address, needle in (("tcp://127.0.0.1:1", "is unreachable"),
                            ("no-port-here", "expected tcp://HOST:PORT")):  # fmt: skip
        code, err = _cli(["sweep", spec, "--out", str(out), "--scheduler", address], capsys)
        assert code == 2 and len(err) == 1 and f"--scheduler: '{address}'" in err[0], err
        assert needle in err[0] and not out.exists()


BAD_OUT = [
    ("", "--out: is empty"),
    ("file", "is a file; --out must be a directory"),
    ("file/below", "is a file; --out must be a directory"),
    ("dir_with_points_file", "points is not a directory"),
    ("/proc/accel-sim-sweep", "cannot create files in /proc"),
]


@pytest.mark.parametrize(("out", "needle"), BAD_OUT, ids=[o or "empty" for o, _ in BAD_OUT])
def test_bad_out_is_one_line_before_any_work(tmp_path, capsys, out, needle):
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "dir_with_points_file").mkdir()
    (tmp_path / "dir_with_points_file" / "points").write_text("")
    spec = str(write_spec(tmp_path, TINY))
    before = set(tmp_path.rglob("*"))
    target = out if not out or out.startswith("/") else str(tmp_path / out)
    code, err = _cli(["sweep", spec, "--out", target], capsys)
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert set(tmp_path.rglob("*")) == before  # nothing written


def _inspect(fig):
    """Draw ``fig`` (Agg) and return its visible axes, colorbars excluded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def test_plots_have_titles_units_and_one_scale(tmp_path):
    from accel_sim.sweep import plot

    df = run_sweep(write_spec(tmp_path, TINY), tmp_path / "out", "synchronous", progress=False)
    heat = plot.heatmap_figure(df, TINY["heatmap"], "w8a8", "tiny", load_spec(
        write_spec(tmp_path, TINY)).base)  # fmt: skip
    panels = _inspect(heat)
    assert "tiny: speedup over w8a8" in heat.get_suptitle()
    assert [ax.get_xlabel() for ax in panels] == ["L2 capacity (MiB)"]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["4", "8"]
    bars = [ax for ax in heat.axes if ax.get_label() == "<colorbar>"]
    assert [ax.get_ylabel() for ax in bars] == ["speedup over w8a8 (×)"]
    # two workloads: one spans 100× in time, the other 1.2×: both panels log, no offsets
    synthetic = pd.DataFrame({
        "workload": ["a"] * 3 + ["b"] * 3, "variant": ["x", "y", "z"] * 2,
        "time_s": [1e-3, 1e-2, 1e-1, 2.0, 2.2, 2.4],
        "energy_pj": [3e9, 2e9, 1e9, 1.000e9, 1.001e9, 1.002e9],
        "pareto": [True, True, True, True, False, False]})  # fmt: skip
    only_b = synthetic[synthetic["workload"] == "b"]
    for frame, scale, unit in ((synthetic, "log", "ms"), (only_b, "linear", "s")):
        fig = plot.pareto_figure(frame, "demo")
        axes = _inspect(fig)
        assert fig.get_suptitle().startswith("demo: time vs energy")
        assert {ax.get_xscale() for ax in axes} == {ax.get_yscale() for ax in axes} == {scale}
        assert {ax.get_xlabel() for ax in axes} == {f"time ({unit})"}
        assert {ax.get_ylabel() for ax in axes} == {"energy (mJ)"}
        for ax in axes:
            assert ax.get_title() in ("a", "b")
            assert ax.xaxis.get_offset_text().get_text() == ""
            assert ax.yaxis.get_offset_text().get_text() == ""
            labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            assert labels and not any("e" in t or "10^" in t for t in labels), labels


def test_importing_the_sweep_does_not_import_the_cli():
    code = "import sys, accel_sim.sweep; assert 'accel_sim.cli' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_pareto_front_keeps_ties_and_drops_the_dominated():
    """Equal designs share the front (two SRAM sizes that cost the same time and energy); a
    point with equal time and more energy, or equal energy and more time, is off it."""
    import numpy as np

    from accel_sim.sweep.results import pareto_mask

    time = np.array([100, 100, 120, 120, 150, 90.0])
    energy = np.array([5.0, 5.0, 4.0, 6.0, 4.0, 9.0])
    assert pareto_mask(time, energy).tolist() == [True, True, True, False, False, True]


def test_pareto_front_compares_time_across_clocks():
    """Two designs with equal cycles and energy at 1.0 and 1.8 GHz: the faster clock alone is
    on the front (by cycles they would tie)."""
    from accel_sim.sweep.results import add_pareto

    df = pd.DataFrame({"workload": ["g", "g"], "cycles": [1000, 1000],
                       "time_s": [1000 / 1.0e9, 1000 / 1.8e9], "energy_pj": [5.0, 5.0]})
    assert add_pareto(df)["pareto"].tolist() == [False, True]
