"""Execute the teaching notebooks (``notebooks/*.ipynb``) end to end.

Each notebook runs from a temporary copy (so nothing is written next to the committed file),
with the ``python3`` kernel and a per-cell timeout; it must finish without errors and render at
least one figure (an ``image/png`` output). The committed notebooks carry no outputs.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = [
    "01_systolic_timing.ipynb",
    "02_precision_throughput.ipynb",
    "03_outliers_and_osc.ipynb",
    "04_muxq_vs_llm_int8.ipynb",
    "05_ops_early_bird.ipynb",
]
CELL_TIMEOUT_S = 120
#: generous guard against a notebook growing far past its ~1 minute design budget
NOTEBOOK_BUDGET_S = 300


def test_notebook_list_is_complete():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_has_no_outputs(name):
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{name}: clear the outputs before committing (CI executes the notebook)"
            )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, tmp_path):
    copy = tmp_path / name
    shutil.copy(NOTEBOOK_DIR / name, copy)
    nb = nbformat.read(copy, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    elapsed = time.perf_counter() - start
    print(f"{name}: executed in {elapsed:.1f} s")

    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    assert images, f"{name}: no figure was rendered (no image/png output)"
    assert elapsed < NOTEBOOK_BUDGET_S, f"{name} took {elapsed:.0f} s"
