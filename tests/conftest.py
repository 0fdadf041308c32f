"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

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
