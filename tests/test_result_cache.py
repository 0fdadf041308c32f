"""The on-disk result cache (``accel_sim/result_cache.py``): a warm run gives exactly the cold
run's results without searching or simulating again; it is keyed by the code; it can be turned
off; a directory that cannot be used never stops a run."""

from __future__ import annotations

import pandas as pd
import pytest

from accel_sim import result_cache
from accel_sim.api import simulate
from accel_sim.engine import chip_choice, des_check, mapper, run, schedule
from accel_sim.tables import osc_table2

CASES = [  # (arch, gemm, dataflow, engine): one core and a whole chip, the DES and the model
    ("ascend_like_cube", "96x1000x700", "w8a8", "des"),
    ("ascend_like_cube", "96x1000x700", "osc", "des"),
    ("systolic_32x32_ws", "300x200x150", "fp16", "twin"),
    ("ascend910b_chip", "1500x900x700", "w4a4_static", "des"),
]


def _forget() -> None:
    """Every in-process cache the disk backs, and the results built on them."""
    run._CACHE.clear()
    mapper._CACHE.clear()
    mapper._PROGRAMS.clear()
    mapper._SHORTLISTS.clear()
    des_check.clear()
    chip_choice._PARTITIONS.clear()
    schedule._SCHEDULES.clear()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv(result_cache.ENV, str(where))
    result_cache.reset()
    _forget()
    yield where
    result_cache.reset()
    _forget()


def _rows() -> list[dict]:
    return [simulate(arch, gemm, flow, engine=engine).row() for arch, gemm, flow, engine in CASES]


def test_warm_runs_equal_cold_ones_without_searching_or_simulating(cache_dir, monkeypatch):
    cold = _rows()
    _forget()
    # a warm run must not search or simulate any matmul again: both would raise
    monkeypatch.setattr(mapper, "_best", lambda *a: pytest.fail("mapper searched again"))
    monkeypatch.setattr(des_check, "simulate_program",
                        lambda *a, **k: pytest.fail("DES ran again"))  # fmt: skip
    monkeypatch.setattr(chip_choice, "_modelled", lambda *a: pytest.fail("partitioned again"))
    monkeypatch.setattr(schedule, "_simulate_schedule", lambda *a: pytest.fail("scheduled again"))
    assert _rows() == cold


def test_results_with_and_without_the_cache_are_identical(cache_dir, monkeypatch):
    with_cache = _rows()
    monkeypatch.setenv(result_cache.ENV, "off")
    result_cache.reset()
    _forget()
    assert _rows() == with_cache


def test_another_code_version_reaches_none_of_the_entries(cache_dir, monkeypatch):
    _rows()
    key = next(iter(mapper._CACHE))
    assert result_cache.get("mapper", key) == mapper._CACHE[key]
    monkeypatch.setitem(result_cache._state, "version", "an edited engine")
    assert result_cache.get("mapper", key) is None


def test_a_tuning_constant_set_at_run_time_has_entries_of_its_own(cache_dir, monkeypatch):
    _rows()
    key = next(iter(mapper._CACHE))
    assert result_cache.get("mapper", key) is not None
    monkeypatch.setattr(mapper, "RESCORE", 1)  # as a notebook experiment would
    assert result_cache.get("mapper", key) is None
    monkeypatch.undo()
    assert result_cache.get("mapper", key) == mapper._CACHE[key]


def _explode():
    raise ValueError("a damaged entry")


class _Damaged:
    """Stored like any value; reading it back fails (as a damaged pickle would)."""

    def __reduce__(self):
        return (_explode, ())


def test_a_damaged_entry_is_dropped_and_computed_again(cache_dir):
    cold = _rows()
    key = next(iter(des_check._CHOSEN))
    result_cache.put("des", key, _Damaged())
    _forget()
    assert result_cache.get("des", key) is None  # dropped, the cache still on
    assert _rows() == cold
    assert result_cache.get("des", key) is not None  # computed and stored again


def test_off_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(result_cache.ENV, "off")
    result_cache.reset()
    assert result_cache.directory() is None
    result_cache.put("mapper", ("x",), 1)
    assert result_cache.get("mapper", ("x",)) is None
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("where", ["file", "~nosuchuser-accel-sim/cache"])
def test_an_unusable_directory_is_one_line_and_the_run_goes_on(where, tmp_path, monkeypatch,
                                                               capsys):  # fmt: skip
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(result_cache.ENV, str(blocker / "cache") if where == "file" else where)
    result_cache.reset()
    _forget()
    try:
        row = simulate(*CASES[0][:3]).row()
    finally:
        result_cache.reset()
        _forget()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "result cache" in err[0] and "running without it" in err[0]
    assert row["cycles"] > 0


def test_forked_workers_share_it(cache_dir):
    kw = dict(sizes=(512, 2048), ms=(16, 128), groups=(32,))
    cold = osc_table2.sweep(workers=2, **kw)  # each worker writes its points
    _forget()
    warm = osc_table2.sweep(workers=1, **kw)
    pd.testing.assert_frame_equal(cold, warm)
    kinds = {str(k).split(":")[0] for k in result_cache._store().iterkeys()}
    assert kinds == {"des", "mapper", "schedule"}


def test_cli_info_clear_and_no_cache(cache_dir, run_cli, monkeypatch):
    code, out, _ = run_cli(["--no-cache", "run", "--gemm", "64x256x256", "--dataflow", "w8a8"])
    assert code == 0 and not cache_dir.exists()
    # (a command is one process: --no-cache holds for the rest of it, the in-process caches too)
    monkeypatch.setenv(result_cache.ENV, str(cache_dir))
    result_cache.reset()
    _forget()
    code, out, _ = run_cli(["run", "--gemm", "64x256x256", "--dataflow", "w8a8"])
    assert code == 0
    code, out, _ = run_cli(["cache"])
    assert code == 0 and str(cache_dir) in out and "1 des, 1 mapper, 1 schedule" in out
    code, out, _ = run_cli(["cache", "clear"])
    assert code == 0 and "removed 3 entries" in out
    code, out, _ = run_cli(["cache"])
    assert "empty" in out


def test_cli_names_an_unusable_directory(tmp_path, monkeypatch, run_cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(result_cache.ENV, str(blocker))
    code, out, err = run_cli(["cache"])
    assert code == 2 and not out
    assert err.startswith("accel-sim: error: ACCEL_SIM_CACHE") and len(err.splitlines()) == 1
