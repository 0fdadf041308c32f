"""Fixtures shared by the test modules."""

from __future__ import annotations

import os

import pytest

# Tests compute what they check: the on-disk result cache (accel_sim/result_cache.py) stays off
# for them, their CLI subprocesses and the notebooks they execute; tests/test_result_cache.py
# turns it on in a directory of its own.
os.environ["ACCEL_SIM_CACHE"] = "off"

from accel_sim.cli import main


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process: ``run_cli(args) -> (exit code, stdout, stderr)``."""

    def run(args: list) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def pytest_configure(config):
    """The suite runs one test file per worker (``--dist loadfile`` in pyproject.toml: a module
    fixture that builds a whole paper table is then built once, not once per worker); the
    notebook and README groups are each one file of independent slow cases, so they are spread
    test by test instead."""
    spread = config.option.markexpr in ("notebooks", "readme")
    if spread and config.getoption("dist", None) == "loadfile":
        config.option.dist = "load"
