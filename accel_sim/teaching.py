"""Exercise checks for the teaching notebooks (``notebooks/``).

A notebook asks the student to predict a number (``my_folds = None  # your answer``), then
computes the truth with the simulator and calls :func:`check`. With no answer yet the check says
so; with one it says whether it matches and, if not, what the simulator got. Worked solutions
live in ``notebooks/solutions/`` (one module per notebook, a function per exercise) so that a
teacher can reveal them; ``tests/test_notebooks.py`` runs every notebook once as a student meets
it and once with the solutions filled in and ``ACCEL_SIM_STRICT_CHECKS=1``, where a missing or
wrong answer raises, so a solution and the simulator cannot drift apart.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

STRICT_ENV = "ACCEL_SIM_STRICT_CHECKS"


def _strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def check(name: str, answer: float | None, truth: float, rel: float = 0.0) -> None:
    """Compare a student's ``answer`` with the simulator's ``truth`` (relative tolerance ``rel``;
    0 means exact) and print the verdict.

    Raises:
        AssertionError: in strict mode (``ACCEL_SIM_STRICT_CHECKS=1``, used by the tests that
            run the worked solutions) when the answer is missing or wrong.
    """
    if answer is None:
        print(f"✎ {name}: no answer yet — write your prediction, re-run the cell, then compare.")
        if _strict():
            raise AssertionError(f"{name}: no answer")
        return
    ok = math.isclose(float(answer), float(truth), rel_tol=rel, abs_tol=0.0 if rel else 1e-12)
    if ok:
        print(f"✓ {name}: {answer:,} — the simulator agrees.")
    else:
        within = f" (within {rel:.0%})" if rel else ""
        print(
            f"✗ {name}: you said {answer:,}, the simulator says {truth:,}{within}. "
            "Find the step where your reasoning and the model part ways."
        )
        if _strict():
            raise AssertionError(f"{name}: answer {answer!r} != {truth!r}")


def notebook_source_sha256(cells) -> str:
    """sha256 of a notebook's cell types and sources (not outputs, ids or metadata): the key by
    which an executed copy in ``docs/notebooks/`` (``notebooks/render.py``) is matched to the
    notebook it was rendered from."""
    text = json.dumps([[c["cell_type"], c["source"]] for c in cells], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
