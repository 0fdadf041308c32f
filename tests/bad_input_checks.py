"""Shared checks of the bad-input tests (test_bad_input*.py): one stderr line, exit 2, no
partial output; architecture variants; a minimal ``accel-sim run`` command line."""

from __future__ import annotations

from pathlib import Path

import yaml

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
