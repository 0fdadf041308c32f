"""Bad input never crashes: one clear stderr line, exit code 2, no traceback, no partial output.

Every case runs ``accel_sim.cli.main`` in-process; argparse errors raise ``SystemExit(2)``,
user errors make ``main`` return 2 (see ``run_cli``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from accel_sim.dataflow.plan import MatmulOp
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_gemm

ARCH_YAML = Path(__file__).resolve().parents[1] / "arch_configs" / "ascend_like_cube.yaml"
GEMM = "64x64x64"


def assert_user_error(result: tuple[int, str, str], *needles: str, out: Path | None = None) -> str:
    """Exit 2, exactly one non-empty stderr line without a traceback, naming every needle."""
    code, _, err = result
    line = err.rstrip("\n")
    assert code == 2, f"exit code {code!r}, stderr:\n{err}"
    assert line, "stderr is empty"
    assert "\n" not in line, f"stderr is not one line:\n{err}"
    assert "Traceback" not in line
    for needle in needles:
        assert needle in line, f"{needle!r} not in stderr line: {line}"
    if out is not None:
        assert not out.exists(), f"partial output {out} left behind"
    return line


def arch_variant(tmp_path: Path, mutate) -> Path:
    """``ascend_like_cube.yaml`` loaded, mutated in place by ``mutate(data)``, dumped to tmp."""
    data = yaml.safe_load(ARCH_YAML.read_text(encoding="utf-8"))
    mutate(data)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run_args(tmp_path: Path, *extra: str) -> tuple[list[str], Path]:
    out = tmp_path / "out.csv"
    return ["run", "--gemm", GEMM, *extra, "--out", str(out)], out


# --- positive control ---------------------------------------------------------------------------


def test_valid_run_writes_out(tmp_path, run_cli):
    args, out = run_args(tmp_path)
    code, stdout, err = run_cli(args)
    assert code == 0, err
    assert out.is_file() and out.stat().st_size > 0
    assert "wrote" in stdout


# --- architecture files -------------------------------------------------------------------------


def test_missing_arch_file(tmp_path, run_cli):
    missing = tmp_path / "nope.yaml"
    args, out = run_args(tmp_path, "--arch", str(missing))
    assert_user_error(run_cli(args), str(missing), "not found", out=out)


def test_malformed_yaml(tmp_path, run_cli):
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: x\nclock_hz: 1e9\ncompute: {kind: cube, rates: [1, 2\nvector: {}\n")
    args, out = run_args(tmp_path, "--arch", str(bad))
    line = assert_user_error(run_cli(args), str(bad), "malformed YAML", out=out)
    assert "line " in line


def test_truncated_yaml(tmp_path, run_cli):
    bad = tmp_path / "truncated.yaml"
    bad.write_text(ARCH_YAML.read_text(encoding="utf-8")[:1500])
    args, out = run_args(tmp_path, "--arch", str(bad))
    assert_user_error(run_cli(args), str(bad), out=out)


@pytest.mark.parametrize(
    "content", [b"\x89PNG\r\n\x1a\n\x00\xff\xfe\x80garbage", b"", b"- 1\n- 2\n"]
)
def test_unusable_yaml(tmp_path, run_cli, content):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    args, out = run_args(tmp_path, "--arch", str(bad))
    assert_user_error(run_cli(args), str(bad), out=out)


def _set(path: str, value):
    """A mutator setting ``data[a][b]... = value`` (integer parts index lists)."""

    def mutate(data):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = data
        for part in parents:
            node = node[part]
        node[last] = value

    return mutate


def _systolic_rows_abc(data):
    data["compute"] = {"kind": "systolic", "rows": "abc", "cols": 16, "dataflow": "ws"}


@pytest.mark.parametrize(
    ("mutate", "needles"),
    [
        (_set("bogus_top", 1), ("bogus_top", "unknown key")),
        (_set("memory.0.bogus", 1), ("memory.0.bogus", "unknown key")),
        (_set("memory.1.capacity_bytes", -5), ("memory.1.capacity_bytes", "-5")),
        (_systolic_rows_abc, ("compute.rows", "abc")),
        (lambda d: d.pop("clock_hz"), ("clock_hz",)),
        (
            _set("energy.compute.mac_fp16.unit", "fJ/MAC"),
            ("energy.compute.mac_fp16.unit", "fJ/MAC"),
        ),
        (_set("clock_hz", float("nan")), ("clock_hz",)),
        (_set("clock_hz", float("inf")), ("clock_hz",)),
        (_set("memory.1.read_bytes_per_cycle", float("inf")), ("memory.1.read_bytes_per_cycle",)),
        (lambda d: d.clear(), ()),
        (_set("clock_hz", 1e-300), ("clock_hz", "1e-300")),
        (_set("clock_hz", 1e12), ("clock_hz", "100000000000")),
        (_set("energy.compute.mac_fp16.value", 1e308), ("mac_fp16.value", "1e+308")),
        (_set("memory.0.latency_cycles", 10**23), ("memory.0.latency_cycles", str(10**23))),
        (_set("memory.0.read_bytes_per_cycle", 1e-300), ("memory.0.read_bytes_per_cycle",)),
        (_set("memory.0.write_bytes_per_cycle", 1e300), ("memory.0.write_bytes_per_cycle",)),
        (_set("memory.0.capacity_bytes", 2**60), ("memory.0.capacity_bytes", str(2**60))),
        (_set("memory.0.max_inflight_bytes", 2**60), ("memory.0.max_inflight_bytes",)),
        (_set("efficiency", {"matmul": 1e-300}), ("efficiency.matmul", "1e-300")),
        (_set("vector.bytes_per_cycle", 10**12), ("vector.bytes_per_cycle",)),
        (_set("vector.startup_cycles", 10**9), ("vector.startup_cycles",)),
    ],
    ids=[
        "unknown-top-key",
        "unknown-nested-key",
        "negative-capacity",
        "rows-abc",
        "missing-clock_hz",
        "wrong-energy-unit",
        "nan-clock",
        "inf-clock",
        "inf-bandwidth",
        "empty-mapping",
        "clock-1e-300",
        "clock-1e12",
        "energy-1e308",
        "latency-1e23",
        "bandwidth-tiny",
        "bandwidth-huge",
        "capacity-2^60",
        "inflight-2^60",
        "efficiency-tiny",
        "vector-bandwidth-huge",
        "vector-startup-huge",
    ],
)
def test_bad_arch_value(tmp_path, run_cli, mutate, needles):
    arch = arch_variant(tmp_path, mutate)
    args, out = run_args(tmp_path, "--arch", str(arch))
    assert_user_error(run_cli(args), str(arch), *needles, out=out)


DEEP = "a: " + "[" * 1000 + "]" * 1000 + "\n"
YAML_CASES = {  # id: (text appended to / replacing the arch file, needles)
    "duplicate-top-key": ("+clock_hz: 2.0e9\n", ("clock_hz", "duplicate key", "line")),
    "duplicate-nested-key": (
        "=name: x\nvector:\n  bytes_per_cycle: 8\n  bytes_per_cycle: 16\n",
        ("bytes_per_cycle", "duplicate key at line 4", "first given at line 3"),
    ),
    "duplicate-flow-key": (
        "=name: x\nvector: {startup_cycles: 1, startup_cycles: 2}\n",
        ("startup_cycles", "duplicate key at line 2"),
    ),  # fmt: skip
    "nested-1000-deep": ("=" + DEEP, ("nested deeper than 64 levels", "line 1")),
    "issue-11-nesting": ("=a:" + "[" * 1000 + "]" * 1000 + "\n", ("mapping",)),
    "nested-sequences": ("=" + "- " * 200 + "1\n", ("nested deeper than 64",)),
    "unhashable-key": ("={[1]: 2}\n", ("line 1",)),
}


@pytest.mark.parametrize(("text", "needles"), YAML_CASES.values(), ids=YAML_CASES)
def test_bad_yaml(tmp_path, run_cli, text, needles):
    path = tmp_path / "arch.yaml"
    base = ARCH_YAML.read_text(encoding="utf-8") if text[0] == "+" else ""
    path.write_text(base + text[1:], encoding="utf-8")
    args, out = run_args(tmp_path, "--arch", str(path))
    assert_user_error(run_cli(args), str(path), *needles, out=out)


def test_yaml_reader_keeps_legal_input(tmp_path):
    from accel_sim.yaml_io import MAX_DEPTH, read_yaml

    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\nd: " + "[" * (MAX_DEPTH - 1)
                    + "]" * (MAX_DEPTH - 1) + "\n")  # fmt: skip
    data = read_yaml(path)
    assert data["c"] == {"x": 3, "y": 2}  # a merge key may be overridden: not a duplicate
    depth, node = 0, data["d"]
    while node:
        node, depth = node[0], depth + 1
    assert depth == MAX_DEPTH - 2


def test_precision_the_unit_lacks(tmp_path, run_cli):
    arch = arch_variant(tmp_path, lambda d: d["compute"]["rates"].pop("int8"))
    args, out = run_args(tmp_path, "--arch", str(arch), "--dataflow", "w8a8")
    assert_user_error(run_cli(args), "int8", "compute.rates", out=out)


def test_gemm_cannot_be_tiled(tmp_path, run_cli):
    def tiny_l0a(data):
        next(m for m in data["memory"] if m["name"] == "L0A")["capacity_bytes"] = 512

    arch = arch_variant(tmp_path, tiny_l0a)
    args, out = run_args(tmp_path, "--arch", str(arch))
    line = assert_user_error(run_cli(args), "L0A", out=out)
    assert "cannot" in line or "fit" in line


# --- GEMMs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gemm",
    ["0x64x64", "64x-8x64", "64x64x3.5", "garbage", "64x64x64x64", "nanx64x64", "x",
     "1e3x64x64", "+16x64x64", "\uff116x64x64", "\u0661\u0666x64x64", "16.0x64x64",
     "16777217x64x64", "64x64x" + "9" * 5000],
    ids=["zero", "negative", "fraction", "garbage", "four-dims", "nan", "x", "exponent",
         "plus-sign", "full-width", "arabic-indic", "point-zero", "over-2^24", "5000-digits"],
)  # fmt: skip
def test_bad_gemm(tmp_path, run_cli, gemm):
    out = tmp_path / "out.csv"
    result = run_cli(["run", f"--gemm={gemm}", "--out", str(out)])
    assert_user_error(result, "--gemm", gemm[:30], out=out)


def test_largest_gemm_dimension_is_accepted():
    assert parse_gemm("16777216x1x0064") == Gemm(2**24, 1, 64)
    assert parse_gemm(" 16 × 64 x 64 ") == Gemm(16, 64, 64)


def test_gemms_csv_missing(tmp_path, run_cli):
    missing = tmp_path / "nope.csv"
    out = tmp_path / "out.csv"
    assert_user_error(run_cli(["run", "--gemms", missing, "--out", out]), str(missing), out=out)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("M,K\n64,64\n", ("missing column", "N")),
        ("M,K,N\n64,nan,64\n", ("K=",)),
        ("M,K,N\n64,64,NaN\n", ("N=",)),
        ("M,K,N\n64,-64,64\n", ("K=", "-64")),
        ("M,K,N\n64,3.5,64\n", ("K=", "3.5")),
        ("M,K,N,bogus\n64,64,64,1\n", ("bogus",)),
        ("", ()),
        ("M,K,N\n", ("no GEMM rows",)),
        ("M,K,N\n64,64,64\n128,12", ()),
        ("M,K,N\n64,abc,64\n", ("K=", "abc")),
        ("M,K,N\n64,64,64,99\n", ()),
        ("M,K,N\n16.7,64,64\n", (":2:1", "M=", "16.7")),
        ("M,K,N\n64,1e3,64\n", (":2:2", "K=", "1e3")),
        ("M,K,N\n64,64,+16\n", (":2:3", "N=", "+16")),
        ("M,K,N\n64,\uff164,64\n", (":2:2", "K=")),
        ("M,K,N\n64,64,16777217\n", (":2:3", "exceeds", "16777216")),
        ("name,M,K,N\na,64,64,64\n\nb,64,x,64\n", (":4:3", "K=")),
        ("M,K,N,M\n64,64,64,64\n", ("twice",)),
    ],
    ids=[
        "missing-column",
        "nan",
        "NaN-upper",
        "negative",
        "float",
        "extra-column",
        "empty-file",
        "header-only",
        "truncated-row",
        "garbage-value",
        "row-with-extra-field",
        "decimal-point",
        "exponent",
        "plus-sign",
        "full-width",
        "over-2^24",
        "line-number-after-blank",
        "duplicate-column",
    ],
)
def test_bad_gemms_csv(tmp_path, run_cli, text, needles):
    csv = tmp_path / "gemms.csv"
    csv.write_text(text, encoding="utf-8")
    out = tmp_path / "out.csv"
    result = run_cli(["run", "--gemms", csv, "--out", out])
    assert_user_error(result, str(csv), *needles, out=out)


def test_gemms_csv_binary_garbage(tmp_path, run_cli):
    csv = tmp_path / "gemms.csv"
    csv.write_bytes(b"M,K,N\n64,64,64\n\x00\x9f\xff\xfe\x80\x81PK\x03\x04" * 3)
    out = tmp_path / "out.csv"
    assert_user_error(run_cli(["run", "--gemms", csv, "--out", out]), str(csv), out=out)


# --- dataflows, knobs, output -------------------------------------------------------------------


def test_unknown_dataflow(tmp_path, run_cli):
    args, out = run_args(tmp_path, "--dataflow", "w9a9")
    assert_user_error(run_cli(args), "w9a9", out=out)


KNOB_CASES = {  # id: (dataflow run, --knob, substrings the error line must contain)
    "unknown-knob": ("w8a8", "w8a8.bogus=1", ("bogus", "unknown knob")),
    "wrong-type-int": ("osc", "osc.G=abc", ("G", "abc")),
    "wrong-type-bool": ("osc", "osc.fallback_down=1", ("fallback_down",)),
    "wrong-type-str": ("w8a8", "w8a8.format=1", ("format", "1")),
    "bad-value": ("w8a8", "w8a8.format=int3", ("format", "int3")),
    "no-dot": ("w8a8", "w8a8format=1", ("--knob", "w8a8format=1")),
    "no-value": ("w8a8", "w8a8.format", ("--knob", "w8a8.format")),
    "knob-for-unknown-dataflow": ("w8a8", "nosuchflow.x=1", ("nosuchflow",)),
    "knob-for-dataflow-not-run": ("w8a8", "fp16.bogus=1", ("bogus",)),
}


@pytest.mark.parametrize(("flow", "knob", "needles"), KNOB_CASES.values(), ids=KNOB_CASES)
def test_bad_knob(tmp_path, run_cli, flow, knob, needles):
    args, out = run_args(tmp_path, "--dataflow", flow, "--knob", knob)
    assert_user_error(run_cli(args), *needles, out=out)


def test_bad_out_suffix(tmp_path, run_cli):
    out = tmp_path / "out.txt"
    assert_user_error(run_cli(["run", "--gemm", GEMM, "--out", out]), str(out), ".csv", out=out)


def test_out_in_missing_directory_is_created(tmp_path, run_cli):
    out = tmp_path / "results" / "sub" / "out.csv"
    code, _, err = run_cli(["run", "--gemm", GEMM, "--out", out])
    assert code == 0, err
    assert out.is_file()


def test_out_under_a_file(tmp_path, run_cli):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub" / "out.csv"
    result = run_cli(["run", "--gemm", GEMM, "--out", out])
    assert_user_error(result, str(out), "is not a directory", out=out)


def test_refused_run_creates_no_directory(tmp_path, run_cli):
    out = tmp_path / "results" / "out.csv"
    assert_user_error(run_cli(["run", "--gemm", "0x64x64", "--out", out]), "--gemm")
    assert not (tmp_path / "results").exists()


def test_out_is_a_directory(tmp_path, run_cli):
    out = tmp_path / "dir.csv"
    out.mkdir()
    assert_user_error(run_cli(["run", "--gemm", GEMM, "--out", out]), str(out))
    assert out.is_dir() and not any(out.iterdir()) and not list(tmp_path.glob(".dir.csv.*"))


def test_missing_trace(tmp_path, run_cli):
    out = tmp_path / "out.csv"
    missing = tmp_path / "no_such_trace"
    assert_user_error(run_cli(["run", "--trace", missing, "--out", out]), "no_such_trace", out=out)


# --- CLI flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["run", "--bogus"], ("--bogus",)),
        ([], ("required",)),
        (["frobnicate"], ("frobnicate",)),
        (["run", "--gemm", GEMM, "--engine", "warp"], ("warp",)),
        (["run", "--gemm"], ("--gemm",)),
        (["--bogus", "run"], ("--bogus",)),
    ],
    ids=["unknown-flag", "missing-subcommand", "unknown-subcommand", "bad-choice", "no-value",
         "unknown-top-level-flag"],  # fmt: skip
)
def test_bad_cli(run_cli, args, needles):
    assert_user_error(run_cli(args), *needles)


def test_arch_show_unknown(run_cli):
    assert_user_error(run_cli(["arch", "show", "no_such_arch"]), "no_such_arch")


# --- API level ----------------------------------------------------------------------------------


def test_unknown_precision_api():
    with pytest.raises(UserInputError) as info:
        MatmulOp("matmul", 64, 64, 64, "fp7", a_bits=8, b_bits=8)
    message = str(info.value)
    assert "fp7" in message and "\n" not in message


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
