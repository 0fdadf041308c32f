"""Bad input never crashes: one clear stderr line, exit code 2, no traceback, no partial output.

Every case runs ``accel_sim.cli.main`` in-process; argparse errors raise ``SystemExit(2)``,
user errors make ``main`` return 2 (see ``run_cli``).
"""

from __future__ import annotations

import pytest
from bad_input_checks import ARCH_YAML, GEMM, arch_variant, assert_user_error, run_args

from accel_sim.dataflow.plan import MatmulOp
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_gemm

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


@pytest.mark.parametrize("content, where", [(b"\x00\x00", "line 1, column 1"),
                                             (b"name: x\x1b\n", "line 1, column 8"),
                                             (b"name: x\n\x07y: 1\n", "line 2, column 1")])
def test_control_character_in_yaml(tmp_path, run_cli, content, where):
    # (YAML's reader refuses these as the loader is built, before any parsing)
    bad = tmp_path / "ctrl.yaml"
    bad.write_bytes(content)
    args, out = run_args(tmp_path, "--arch", str(bad))
    line = assert_user_error(run_cli(args), str(bad), "control character", out=out)
    assert where in line


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
    "impossible-date": ("=name: x\nclock_hz: 2020-13-45\n", ("line 2", "2020-13-45")),
    "tagged-non-date": ("=name: x\nclock_hz: !!timestamp soon\n", ("line 2", "soon")),
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
    ids=[
        "unknown-flag",
        "missing-subcommand",
        "unknown-subcommand",
        "bad-choice",
        "no-value",
        "unknown-top-level-flag",
    ],  # fmt: skip
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
