"""Bad input never crashes (continued): compact traces, user arrays, ``--out`` checked before
any work, finite results, the Python API and model sizes. Same rules as ``test_bad_input.py``:
one clear stderr line, exit code 2, no traceback, no partial output.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from bad_input_checks import GEMM, assert_user_error

from accel_sim.errors import UserInputError

# --- compact traces -----------------------------------------------------------------------------

TRACE = Path(__file__).resolve().parents[1] / "traces" / "all-minilm-l6-v2"


def _edit(name: str, edit):
    """A mutator of a trace directory: ``name`` is rewritten as ``edit(old text)``."""

    def mutate(trace: Path) -> None:
        (trace / name).write_text(edit((trace / name).read_text(encoding="utf-8")), "utf-8")

    return mutate


TRACE_CASES = {  # id: (mutator, file named, needles)
    "manifest-list": (_edit("manifest.json", lambda t: "[]"), "manifest.json", ("object",)),
    "manifest-truncated": (_edit("manifest.json", lambda t: t[:40]), "manifest.json", ("JSON",)),
    "manifest-empty": (_edit("manifest.json", lambda t: ""), "manifest.json", ("JSON",)),
    "gemms-header-only": (_edit("gemms.csv", lambda t: t.splitlines()[0] + "\n"), "gemms.csv",
                          ("header only",)),
    "gemms-empty": (_edit("gemms.csv", lambda t: ""), "gemms.csv", ()),
    "gemms-M-16.7": (_edit("gemms.csv", lambda t: t.replace(",256,384,384", ",16.7,384,384", 1)),
                     "gemms.csv", ("M=", "16.7")),
    "gemms-layer-text": (_edit("gemms.csv", lambda t: t.replace("\n0,0,", "\n0,x,", 1)),
                         "gemms.csv", ("layer",)),
    "stats-NaN": (_edit("stats.json", lambda t: t.replace('"absmax": ', '"absmax": NaN, "_": ', 1)),
                  "stats.json", ("gemms[0].absmax", "nan")),
    "stats-Infinity": (_edit("stats.json", lambda t: t.replace('"gemms": [{', '"gemms": [{"x": '
                                                               '[1, -Infinity], ', 1)),
                       "stats.json", ("gemms[0].x[1]", "-inf")),
    "stats-truncated": (_edit("stats.json", lambda t: t[:1000]), "stats.json", ("truncated",)),
    "stats-empty": (_edit("stats.json", lambda t: ""), "stats.json", ("empty",)),
    "stats-list": (_edit("stats.json", lambda t: "[1, 2]"), "stats.json", ("object",)),
    "stats-entry-not-object": (_edit("stats.json", lambda t: json_set(t, "gemms.0", 3)),
                               "stats.json", ("gemms[0]", "object")),
    "stats-one-entry-short": (_edit("stats.json", lambda t: json_set(t, "gemms.-1", None)),
                              "stats.json", ("gemms", "36 entries")),
    "stats-missing": (lambda d: (d / "stats.json").unlink(), "stats.json", ("missing",)),
}  # fmt: skip


def json_set(text: str, path: str, value):
    """``text`` (JSON) with the list item or key at dotted ``path`` set (None deletes it)."""
    import json

    data = json.loads(text)
    *parents, last = [int(p) if p.lstrip("-").isdigit() else p for p in path.split(".")]
    node = data
    for part in parents:
        node = node[part]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return json.dumps(data)


@pytest.mark.parametrize(("mutate", "name", "needles"), TRACE_CASES.values(), ids=TRACE_CASES)
def test_bad_trace(tmp_path, run_cli, mutate, name, needles):
    import shutil

    trace = tmp_path / "trace"
    trace.mkdir()
    for file in ("manifest.json", "gemms.csv", "stats.json"):
        shutil.copy(TRACE / file, trace / file)
    mutate(trace)
    out = tmp_path / "out.csv"
    result = run_cli(["run", "--trace", trace, "--dataflow", "osc", "--out", out])
    assert_user_error(result, str(trace / name), *needles, out=out)


# --- user arrays (.npy / .npz) ------------------------------------------------------------------


def _npy_with_header(path: Path, shape: tuple, data: bytes = b"\0" * 64, descr: str = "<f8"):
    from numpy.lib import format as npformat

    with path.open("wb") as fh:
        npformat.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False,
                                             "shape": shape})  # fmt: skip
        fh.write(data)
    return path


@pytest.fixture(scope="module")
def zip_bomb(tmp_path_factory) -> Path:
    """A ~4.7 MB .npz whose one member inflates to just over 1 GiB (the per-array limit)."""
    import zipfile

    from numpy.lib import format as npformat

    from accel_sim.workload.npio import MAX_ARRAY_BYTES

    path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    n = MAX_ARRAY_BYTES + 2**20
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("X.npy", "w", force_zip64=True) as fh:
            npformat.write_array_header_1_0(fh, {"descr": "|u1", "fortran_order": False,
                                                 "shape": (n,)})  # fmt: skip
            chunk = bytes(2**24)
            for _ in range(n // len(chunk)):
                fh.write(chunk)
            fh.write(bytes(n % len(chunk)))
    assert path.stat().st_size < 8 * 2**20
    return path


def _npz_lying_member(path: Path) -> Path:
    """An .npz whose member's header claims 100000×100000 but holds 64 bytes."""
    import io
    import zipfile

    buffer = io.BytesIO()
    _npy_with_header(Path(path.with_suffix(".tmp")), (100000, 100000))
    buffer.write(path.with_suffix(".tmp").read_bytes())
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", buffer.getvalue())
    return path


ARRAY_CASES = {  # id: (make(tmp_path) -> path, needles)
    "npy-header-100000x100000": (
        lambda d: _npy_with_header(d / "big.npy", (100000, 100000)), ("80000000000", "limit")),
    "npy-header-lies": (lambda d: _npy_with_header(d / "lie.npy", (100, 100)), ("truncated",)),
    "npy-object-dtype": (lambda d: _npy_with_header(d / "obj.npy", (2,), descr="|O"), ("object",)),
    "npy-empty": (lambda d: _write(d / "empty.npy", b""), ()),
    "npy-garbage": (lambda d: _write(d / "g.npy", b"\x93NUMPY\x01\x00garbage"), ()),
    "npz-member-header-lies": (lambda d: _npz_lying_member(d / "lie.npz"), ("X.npy", "limit")),
    "npz-not-a-zip": (lambda d: _write(d / "nz.npz", b"PK\x03\x04 not really"), ("npz",)),
}  # fmt: skip


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("make", "needles"), ARRAY_CASES.values(), ids=ARRAY_CASES)
def test_bad_arrays_refused_before_allocation(tmp_path, run_cli, make, needles):
    path = make(tmp_path)
    assert_user_error(run_cli(["trace", "stats", path]), str(path), *needles)


def test_npz_zip_bomb_refused_before_inflating(run_cli, zip_bomb):
    assert_user_error(run_cli(["trace", "stats", zip_bomb]), f"{zip_bomb}:X.npy", "inflates to")


# --- --out, checked before any work -------------------------------------------------------------

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.parametrize(
    ("out", "needles"),
    [
        ("/proc/accel-sim-out.csv", ("/proc", "cannot create files")),
        ("/sys/accel-sim-out.csv", ("/sys",)),
        ("/proc/self/accel-sim-out.csv", ("/proc/self",)),
    ],
    ids=["proc", "sys", "proc-self"],
)
def test_out_not_writable(run_cli, out, needles):
    assert_user_error(run_cli(["run", "--gemm", GEMM, "--out", out]), out, *needles)


@pytest.mark.skipif(ROOT, reason="root may write into a mode-555 directory")
def test_out_in_read_only_directory(tmp_path, run_cli):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        result = run_cli(["run", "--gemm", GEMM, "--out", ro / "x.csv"])
        assert_user_error(result, str(ro / "x.csv"), "not writable", out=ro / "x.csv")
    finally:
        ro.chmod(0o755)


def test_out_empty_string(run_cli):
    assert_user_error(run_cli(["run", "--gemm", GEMM, "--out", ""]), "--out", "empty")


@pytest.mark.parametrize(
    ("path", "needles"),
    [("", ("--out", "empty")), ("   ", ("--out", "empty")), (None, ("--out",)),
     ("/proc/x.csv", ("/proc",)), ("/sys/x.json", ("/sys",)), ("x.txt", (".csv",))],
    ids=["empty", "blank", "none", "proc", "sys", "suffix"],
)  # fmt: skip
def test_check_output_path(path, needles):
    from accel_sim.report.io import check_output_path

    with pytest.raises(UserInputError) as info:
        check_output_path(path)
    assert all(n in str(info.value) for n in needles) and "\n" not in str(info.value)


def test_check_output_path_accepts_a_writable_place(tmp_path):
    from accel_sim.report.io import check_output_path

    assert check_output_path(tmp_path / "r.parquet") == tmp_path / "r.parquet"
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


# --- results are finite when written ------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "key"),
    [({"a": {"b": [1.0, math.inf]}}, "a.b[1]"), ([{"x": math.nan}], "[0].x"),
     ({"e": np.float32("-inf")}, "e")],
    ids=["inf-nested", "nan-in-list", "numpy-float"],
)  # fmt: skip
def test_write_json_refuses_non_finite(tmp_path, obj, key):
    from accel_sim.report.io import write_json

    out = tmp_path / "r.json"
    with pytest.raises(UserInputError) as info:
        write_json(obj, out)
    assert str(out) in str(info.value) and f": {key}: " in str(info.value)
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_write_table_refuses_non_finite(tmp_path, suffix):
    import pandas as pd

    from accel_sim.report.io import write_table

    out = tmp_path / f"r{suffix}"
    df = pd.DataFrame({"gemm": ["a", "b"], "cycles": [1.0, math.inf], "rel_error": [math.nan, 1]})
    with pytest.raises(UserInputError) as info:
        write_table(df, out)
    assert "cycles" in str(info.value) and "row 1" in str(info.value)
    assert not out.exists()
    write_table(df.iloc[:1], out)  # NaN outside the must-be-finite columns is "not measured"
    assert out.is_file()


# --- the Python API -----------------------------------------------------------------------------

API_CASES = {  # id: (keyword arguments of simulate, needles)
    "negative-size": ({"gemm": (-64, 64, 64)}, ("gemm", "M", "-64")),
    "nan-size": ({"gemm": (math.nan, 64, 64)}, ("gemm", "nan")),
    "float-size": ({"gemm": (64, 64.0, 64)}, ("K", "64.0")),
    "bool-size": ({"gemm": (True, 64, 64)}, ("M", "True")),
    "text-size": ({"gemm": "64x64x-1"}, ("N=", "-1")),
    "scalar-gemm": ({"gemm": 64}, ("gemm", "MxKxN")),
    "dataflow-list": ({"dataflow": ["w8a8"]}, ("dataflow",)),
    "unknown-dataflow": ({"dataflow": "w9a9"}, ("w9a9",)),
    "engine": ({"engine": "warp"}, ("engine", "warp")),
    "knobs-not-mapping": ({"knobs": 5}, ("knobs",)),
    "knob-nan": ({"dataflow": "osc", "knobs": {"G": math.nan}}, ("knobs.G", "nan")),
    "arch-wrong-type": ({"arch": 5}, ("arch",)),
}


@pytest.mark.parametrize(("kwargs", "needles"), API_CASES.values(), ids=API_CASES)
def test_bad_api_call(kwargs, needles):
    from accel_sim import simulate, simulate_many

    call = {"arch": "ascend_like_cube", "gemm": GEMM, "dataflow": "w8a8", **kwargs}
    with pytest.raises(UserInputError) as info:
        simulate(**call)
    message = str(info.value)
    assert "\n" not in message and all(n in message for n in needles), message
    with pytest.raises(UserInputError):  # and the same mistake inside a list, before any work
        simulate_many(
            call.pop("arch"),
            [GEMM, call.pop("gemm")],
            [call.pop("dataflow")],
            **{
                k: ({"osc": v} if k == "knobs" and isinstance(v, dict) else v)
                for k, v in call.items()
            },
        )


def test_simulate_many_needs_work():
    from accel_sim import simulate_many

    with pytest.raises(UserInputError, match="at least one GEMM"):
        simulate_many("ascend_like_cube", [], ["w8a8"])


# --- model sizes beyond 2**24 (workload/models.py, model_run/command.py) ------------------------

MODEL_YAML = Path(__file__).resolve().parents[1] / "workloads" / "models" / "smollm2-135m.yaml"
SIZE_CASES = {  # id: (model YAML edits or None for the shipped model, flags, needles)
    "yaml-layers": ({"layers": 1_000_000_000}, ["--tokens", "16"], ("layers: ", "16777216")),
    "yaml-vocab": ({"vocab": 100_000_000_000}, ["--tokens", "16"], ("vocab: ", "16777216")),
    "yaml-heads-x-head-dim": ({"heads": 4096, "kv_heads": 4096, "head_dim": 8192},
                              ["--tokens", "16"], ("heads: heads × head_dim",)),
    "tokens": (None, ["--tokens", "1000000000000"], ("--tokens", "16777216")),
    "kv-len": (None, ["--tokens", "16", "--kv-len", "1000000000000"], ("--kv-len", "16777216")),
    "batch": (None, ["--tokens", "16", "--batch", "100000000"], ("--batch", "16777216")),
    "prefix-tokens": (None, ["--tokens", "16", "--prefix-tokens", "99999999999"],
                      ("--prefix-tokens", "16777216")),
    "tokens-x-batch": (None, ["--tokens", "8192", "--batch", "4096"],
                       ("error: --tokens × --batch: 33554432 exceeds the limit 16777216",)),
    "attention-count": (None, ["--tokens", "16", "--batch", "100000"],
                        ("error: --batch: heads (9) × --batch × layers (30)",)),
    "kv-length": (None, ["--tokens", "16", "--kv-len", "16777210"],
                  ("error: --kv-len + --tokens + --prefix-tokens: 16777226",)),
    "decode-steps": (None, ["--phase", "decode", "--tokens", "1000000"],
                     ("error: --tokens: layers (30) × --tokens",)),
}  # fmt: skip


@pytest.mark.parametrize(("edits", "flags", "needles"), SIZE_CASES.values(), ids=SIZE_CASES)
def test_model_sizes_beyond_the_limit(tmp_path, run_cli, edits, flags, needles):
    model = "smollm2-135m"
    if edits is not None:
        data = yaml.safe_load(MODEL_YAML.read_text(encoding="utf-8"))
        model = str(tmp_path / "m.yaml")
        Path(model).write_text(yaml.safe_dump({**data, **edits}), encoding="utf-8")
        needles = (f"error: {model}: ", *needles)
    out = tmp_path / "out.csv"
    result = run_cli(["model", model, *flags, "--stats-from", "none", "--out", out])
    assert result[1] == ""
    assert_user_error(result, *needles, out=out)
