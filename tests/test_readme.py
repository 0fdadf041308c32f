"""Every ``accel-sim`` command the README shows runs verbatim and succeeds.

The commands run in-process (``accel_sim.cli.main``) from a scratch directory that mirrors the
repo root's inputs (``examples/``, ``arch_configs/``, ``traces/``, ``workloads/`` as symlinks), so
the files they write (``results/...``) land in the scratch directory, not in the checkout.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUT_DIRS = ("examples", "arch_configs", "traces", "workloads")


def readme_commands(text: str) -> list[str]:
    """The ``accel-sim ...`` command lines of the README's shell code blocks (comments cut,
    ``pip install ... &&`` prefixes dropped)."""
    commands = []
    for lang, block in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S):
        if lang not in ("", "sh", "bash", "console"):
            continue
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            line = line.rsplit("&& ", 1)[-1] if line.startswith("pip ") else line
            if line.startswith("accel-sim"):
                commands.append(line)
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))


def test_readme_shows_commands():
    assert COMMANDS[0] == "accel-sim run", "the README's first command is the bare run"
    assert len(COMMANDS) >= 15
    for command in COMMANDS:
        assert "|" not in command, f"a pipe is not one command: {command}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme")
    for name in INPUT_DIRS:
        (root / name).symlink_to(ROOT / name, target_is_directory=True)
    return root


@pytest.mark.readme
@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(command, scratch, run_cli, monkeypatch):
    args = shlex.split(command)[1:]
    if args[:2] == ["trace", "capture"] and importlib.util.find_spec("torch") is None:
        pytest.skip("needs the [capture] extra (torch)")
    monkeypatch.chdir(scratch)
    code, out, err = run_cli(args)
    assert code == 0, f"{command!r} exited {code}:\n{err}"
    assert out.strip(), f"{command!r} printed nothing"
    for target in re.findall(r"(?:--out|-o)\s+(\S+)", command):
        assert (scratch / target).exists(), f"{command!r} did not write {target}"
