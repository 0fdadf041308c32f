"""Results for a list of GEMMs are the concatenation of the results for each GEMM (issue 11).

Before the fix, the same GEMM listed n times gave n² rows (the speedup merge joined on shape) and
totals n× too big. Here, for lists drawn with repeats, ``simulate_many`` over the list equals the
per-GEMM results concatenated row for row, adding the speedup column keeps every row, and each
dataflow's total is the sum of its per-GEMM cycles and energies. The closed-form engine (twin)
keeps it fast; the property is about bookkeeping, not timing.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_sim import simulate_many
from accel_sim.report.text import add_speedup, totals

ARCH = "ascend_like_cube"
FLOWS = ["w8a8", "fp16", "int16"]

dims = st.integers(min_value=1, max_value=64)
gemm = st.tuples(dims, dims, dims).map(lambda t: f"{t[0]}x{t[1]}x{t[2]}")
# few distinct shapes, so repeats are common
gemm_lists = st.lists(gemm, min_size=1, max_size=3).flatmap(
    lambda pool: st.lists(st.sampled_from(pool), min_size=1, max_size=5)
)
flow_lists = st.lists(st.sampled_from(FLOWS), min_size=1, max_size=3, unique=True)


def _one_by_one(gemms: list[str], flows: list[str]) -> pd.DataFrame:
    parts = [simulate_many(ARCH, [g], flows, engine="twin") for g in gemms]
    return pd.concat(parts, ignore_index=True)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(gemms=gemm_lists, flows=flow_lists)
def test_list_equals_concatenation(gemms, flows):
    together = simulate_many(ARCH, gemms, flows, engine="twin")
    alone = _one_by_one(gemms, flows)
    assert len(together) == len(gemms) * len(flows)
    pd.testing.assert_frame_equal(together, alone)
    assert list(together["gemm"]) == [g for g in gemms for _ in flows]
    assert list(together["dataflow"]) == flows * len(gemms)

    with_speedup = add_speedup(together)
    assert len(with_speedup) == len(together)  # no row multiplied by a repeated shape
    pd.testing.assert_frame_equal(with_speedup[together.columns], together)
    if "w8a8" in flows:
        base = together[together["dataflow"] == "w8a8"]["cycles"].repeat(len(flows))
        expected = base.to_numpy() / together["cycles"].to_numpy()
        assert with_speedup["speedup_vs_w8a8"].to_numpy() == pytest.approx(expected)

    summed = totals(together).set_index("dataflow")
    for flow in flows:
        rows = alone[alone["dataflow"] == flow]
        assert summed.loc[flow, "total_cycles"] == rows["cycles"].sum()
        assert summed.loc[flow, "total_energy_pj"] == pytest.approx(rows["energy_pj"].sum())


def test_three_identical_rows_give_three_rows_per_dataflow(tmp_path, run_cli):
    """The issue's case through the CLI: 3 identical rows × 2 dataflows → 6 rows, totals 3×."""
    csv = tmp_path / "gemms.csv"
    csv.write_text("M,K,N\n16,64,64\n16,64,64\n16,64,64\n", encoding="utf-8")
    out = tmp_path / "r.csv"
    code, _, err = run_cli(["run", "--gemms", csv, "--dataflow", "w8a8", "--dataflow", "fp16",
                            "--engine", "twin", "--out", out])  # fmt: skip
    assert code == 0, err
    df = pd.read_csv(out)
    assert len(df) == 6
    one = simulate_many(ARCH, ["16x64x64"], ["w8a8"], engine="twin")["cycles"].iloc[0]
    assert df[df["dataflow"] == "w8a8"]["cycles"].sum() == 3 * one
    assert (df["speedup_vs_w8a8"][df["dataflow"] == "w8a8"] == 1).all()


def test_json_results_keep_full_float_precision(tmp_path):
    """JSON rows keep every digit (pandas' to_json rounds to 10 decimal places, which left a
    time of 3.6667e-07 s with 4 significant digits); NaN and NA become null."""
    import json

    import numpy as np
    import pandas as pd

    from accel_sim.report.io import write_table

    df = pd.DataFrame({"time_s": [3.6666666666666667e-07, 1.0], "x": [np.nan, 2.0],
                       "n": pd.array([None, 3], dtype="Int64")})  # fmt: skip
    rows = json.loads(write_table(df, tmp_path / "r.json").read_text())
    assert rows[0]["time_s"] == 3.6666666666666667e-07
    assert rows[0]["x"] is None and rows[0]["n"] is None and rows[1]["n"] == 3
