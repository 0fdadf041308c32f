"""Execute the teaching notebooks (``notebooks/*.ipynb``) end to end.

Each notebook runs from a temporary copy (so nothing is written next to the committed file),
with the ``python3`` kernel and a per-cell timeout; it must finish without errors and render at
least one figure (an ``image/png`` output). The committed notebooks carry no outputs.

The executions are marked ``notebooks`` (a CI step of their own, ``pytest -m notebooks``, so
that plain ``pytest`` stays within a few minutes); the checks of the committed files are not.
Notebooks with exercises (code cells tagged ``exercise`` with an ``exercise_id``) are run a
second time with the worked answers of ``notebooks/solutions/<notebook>.py`` filled in and
``ACCEL_SIM_STRICT_CHECKS=1``, so every ``accel_sim.teaching.check`` must pass: a solution that
drifts from the simulator fails here.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

_DEV = "needs the [dev] extra (pip install -e '.[dev]'), which CI installs"
nbformat = pytest.importorskip("nbformat", reason=_DEV)
nbclient = pytest.importorskip("nbclient", reason=_DEV)
pytest.importorskip("ipykernel", reason=_DEV)

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = [
    "01_systolic_timing.ipynb",
    "02_precision_throughput.ipynb",
    "03_outliers_and_osc.ipynb",
    "04_muxq_vs_llm_int8.ipynb",
    "05_ops_early_bird.ipynb",
    "06_timeline.ipynb",
    "07_capstone.ipynb",
    "08_energy_and_design_space.ipynb",
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


def _execute(nb, tmp_path):
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    return time.perf_counter() - start


def _exercise_cells(nb):
    return [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]


@pytest.mark.notebooks
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, tmp_path):
    copy = tmp_path / name
    shutil.copy(NOTEBOOK_DIR / name, copy)
    nb = nbformat.read(copy, as_version=4)
    elapsed = _execute(nb, tmp_path)
    print(f"{name}: executed in {elapsed:.1f} s")

    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    assert images, f"{name}: no figure was rendered (no image/png output)"
    assert elapsed < NOTEBOOK_BUDGET_S, f"{name} took {elapsed:.0f} s"


SOLUTIONS_DIR = NOTEBOOK_DIR / "solutions"
WITH_EXERCISES = [n for n in NOTEBOOKS if (SOLUTIONS_DIR / n.replace(".ipynb", ".py")).exists()]


def test_every_exercise_has_a_solution():
    for name in NOTEBOOKS:
        nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
        cells = _exercise_cells(nb)
        if not cells:
            continue
        assert name in WITH_EXERCISES, f"{name} has exercises but no solutions module"
        source = (SOLUTIONS_DIR / name.replace(".ipynb", ".py")).read_text(encoding="utf-8")
        for cell in cells:
            ex = cell.metadata.get("exercise_id")
            assert ex and f"def {ex}(" in source, f"{name}: exercise {ex!r} has no solution"
            assert "= None" in cell.source, f"{name}: exercise {ex!r} should start unanswered"


@pytest.mark.notebooks
@pytest.mark.parametrize("name", WITH_EXERCISES)
def test_notebook_solutions_pass_their_checks(name, tmp_path, monkeypatch):
    """The worked answers, filled into the exercise cells, pass every check strictly."""
    shutil.copy(SOLUTIONS_DIR / name.replace(".ipynb", ".py"), tmp_path / "notebook_solutions.py")
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    cells = _exercise_cells(nb)
    assert cells, f"{name} has a solutions module but no exercise cells"
    for cell in cells:
        cell.source += (
            "\nimport notebook_solutions as _solutions\n"
            f"globals().update(_solutions.{cell.metadata['exercise_id']}())"
        )
    monkeypatch.setenv("ACCEL_SIM_STRICT_CHECKS", "1")
    _execute(nb, tmp_path)


RENDERED = NOTEBOOK_DIR.parent / "docs" / "notebooks"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_rendered_copy_is_current(name):
    """docs/notebooks/ holds each notebook executed, outputs included, for reading on the web;
    a copy rendered from an older source (or none) fails: run `python notebooks/render.py`."""
    from accel_sim.teaching import notebook_source_sha256

    copy = RENDERED / name
    assert copy.exists(), f"{copy} missing: run `python notebooks/render.py {name[:-6]}`"
    rendered = nbformat.read(copy, as_version=4)
    source = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    assert rendered.metadata.get("accel_sim", {}).get("source_sha256") == notebook_source_sha256(
        source.cells
    ), f"{copy} is stale: run `python notebooks/render.py {name[:-6]}`"
    outputs = [o for c in rendered.cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{copy} has no figures"
    assert not any(o.get("output_type") == "error" for o in outputs), f"{copy} has errors"
