"""What a new user meets first: the summary, the help, the version, units, a closed pipe."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from accel_sim.cli import build_parser
from accel_sim.report.text import si

GEMMS = ["--gemm", "64x64x64", "--gemm", "16x128x64", "--gemm", "64x64x64"]


def test_run_prints_totals_first_and_rows_only_on_request(run_cli):
    code, out, err = run_cli(["run", *GEMMS, "--dataflow", "fp16", "--dataflow", "w8a8"])
    assert code == 0, err
    lines = out.splitlines()
    assert "totals per dataflow" in lines[0]
    assert lines[2].split()[:2] == ["dataflow", "cycles"]
    assert [ln.split()[0] for ln in lines[3:5]] == ["fp16", "w8a8"]
    assert "--per-gemm" in out and "64x64x64" not in out  # no per-GEMM rows by default
    code, out, _ = run_cli(["run", *GEMMS, "--dataflow", "fp16", "--dataflow", "w8a8",
                            "--per-gemm"])  # fmt: skip
    rows = [ln for ln in out.splitlines() if ln.lstrip().startswith(("64x64x64", "16x128x64"))]
    assert code == 0 and len(rows) == 6  # 3 GEMMs (one repeated) × 2 dataflows, not 3² × 2


def test_summary_totals_equal_the_sum_of_rows(run_cli, tmp_path):
    out = tmp_path / "rows.csv"
    code, text, err = run_cli(["run", *GEMMS, "--dataflow", "w8a8", "--out", out])
    assert code == 0, err
    import pandas as pd

    rows = pd.read_csv(out)
    total = next(ln for ln in text.splitlines() if ln.split()[:1] == ["w8a8"])
    assert int(total.split()[1].replace(",", "")) == rows["cycles"].sum()


def test_version_matches_the_package_metadata(run_cli):
    code, out, _ = run_cli(["--version"])
    assert code == 0 and out.strip() == f"accel-sim {importlib.metadata.version('accel-sim')}"


def _actions(parser):
    for action in parser._actions:
        yield parser, action
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):  # a sub-command table
            for sub in choices.values():
                yield from _actions(sub)


def test_every_argument_of_every_command_has_help():
    missing = [f"{parser.prog} {action.dest}" for parser, action in _actions(build_parser())
               if not action.help and action.dest not in ("help", "command")
               and not action.dest.endswith("_cmd")]  # fmt: skip
    assert not missing, missing
    assert "accel-sim run" in build_parser().description


@pytest.mark.parametrize(("value", "unit", "text"), [
    (9.56e-3, "s", "9.560 ms"), (4.6e-7, "s", "460.000 ns"), (2.4156e-2, "J", "24.156 mJ"),
    (1.5e-6, "J", "1.500 µJ"), (0, "J", "0 J"), (1.0, "J", "1.000 J"), (3.2e6, "J", "3.200 MJ"),
    # seconds take no prefix above 1 ("Ms" reads like ms)
    (3.2e3, "s", "3200.000 s"), (8.31311e8, "s", "8.313e+08 s"), (1.0, "s", "1.000 s"),
])  # fmt: skip
def test_si_units_read_well(value, unit, text):
    assert si(value, unit) == text


def test_closed_pipe_is_quiet():
    """``accel-sim run ... | head -1``: no traceback, the shell's SIGPIPE status."""
    cmd = [sys.executable, "-c", "import sys; from accel_sim.cli import main; sys.exit(main())",
           "run", *GEMMS, "--dataflow", "fp16", "--dataflow", "w8a8", "--per-gemm"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err
