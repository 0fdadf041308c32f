"""Execute the teaching notebooks and write executed copies, outputs included, to docs/notebooks/.

A student can read them on the web (GitHub renders ``.ipynb`` files) before installing
anything. Run from the repository root after changing a notebook:

    python notebooks/render.py              # every notebook (about a minute)
    python notebooks/render.py 06_timeline  # some of them

Each copy records the sha256 of its source cells (``accel_sim.teaching.notebook_source_sha256``)
in ``metadata.accel_sim``; ``tests/test_notebooks.py`` fails when a copy is missing or was
rendered from an older source. Notebooks run in a temporary directory (sweeps write files) with
the ``python3`` kernel; execution counts and per-cell timing metadata are dropped so that a
re-render of an unchanged notebook changes only what the simulator prints.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbclient
import nbformat

from accel_sim import __version__
from accel_sim.teaching import notebook_source_sha256

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks"
TARGET = ROOT / "docs" / "notebooks"


def render(path: Path) -> Path:
    nb = nbformat.read(path, as_version=4)
    digest = notebook_source_sha256(nb.cells)
    with tempfile.TemporaryDirectory(prefix="accel-sim-render-") as work:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": work}}).execute()  # fmt: skip
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata["accel_sim"] = {"source_sha256": digest, "accel_sim_version": __version__,
                                "source": f"notebooks/{path.name}"}  # fmt: skip
    TARGET.mkdir(parents=True, exist_ok=True)
    out = TARGET / path.name
    tmp = out.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(out)
    return out


def main(names: list[str]) -> int:
    paths = sorted(SOURCE.glob("*.ipynb"))
    if names:
        paths = [p for p in paths if p.stem in names or p.name in names]
        missing = set(names) - {p.stem for p in paths} - {p.name for p in paths}
        if missing:
            print(f"render.py: no such notebook: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    for path in paths:
        out = render(path)
        print(f"wrote {out.relative_to(ROOT)} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
