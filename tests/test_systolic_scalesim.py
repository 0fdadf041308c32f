"""``fold_plan`` must reproduce SCALE-Sim v3's CALC-mode "Total Cycles" exactly.

The reference runs need the SCALE-Sim venv (``.ci/setup_scalesim.sh``); one SCALE-Sim run
per (array, dataflow) config covers all GEMMs. The pure tests at the bottom need nothing.
"""

from __future__ import annotations

import pytest
from scalesim_ref import ensure_scalesim, run_scalesim

from accel_sim.engine.systolic_timing import fold_plan

# (M, K, N): C[M×N] = A[M×K]·B[K×N]. Non-multiples of both arrays, M = 1, K = 1, N = 1.
GEMMS: list[tuple[int, int, int]] = [
    (17, 65, 33),
    (100, 50, 300),
    (1, 64, 64),
    (1, 17, 9),
    (64, 1, 64),
    (33, 33, 1),
    (8, 8, 8),
    (32, 16, 32),
    (5, 200, 7),
    (40, 3, 90),
]
ARRAYS = [(8, 8), (32, 16)]
DATAFLOWS = ["ws", "os", "is"]


@pytest.fixture(scope="module")
def scalesim_ok() -> None:
    if not ensure_scalesim():
        pytest.skip(
            "SCALE-Sim 3.0.0 could not be installed in its venv (no PyPI access?); "
            "run .ci/setup_scalesim.sh"
        )


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize(("rows", "cols"), ARRAYS)
def test_total_cycles_match_scalesim(
    scalesim_ok: None, rows: int, cols: int, dataflow: str
) -> None:
    ref = run_scalesim(rows, cols, dataflow, GEMMS)
    mismatches = []
    for (m, k, n), rec in zip(GEMMS, ref, strict=True):
        plan = fold_plan(dataflow, rows, cols, m, k, n)
        assert rec["stall_cycles"] == 0, f"CALC mode should be stall-free: {rec}"
        if plan.total_cycles != rec["total_cycles"]:
            mismatches.append(((m, k, n), plan.total_cycles, rec["total_cycles"]))
    assert not mismatches, f"{rows}x{cols} {dataflow}: (gemm, ours, scalesim) {mismatches}"


def test_scalesim_issue_125_off_by_one(scalesim_ok: None) -> None:
    """4×4×4 OS on 4×4: the array is busy 10 cycles, SCALE-Sim reports 9."""
    (rec,) = run_scalesim(4, 4, "os", [(4, 4, 4)])
    plan = fold_plan("os", 4, 4, 4, 4, 4)
    assert plan.busy_cycles == 10
    assert plan.total_cycles == rec["total_cycles"] == 9


# ---- pure closed-form checks (no SCALE-Sim needed) ----


def test_fold_grid_per_dataflow() -> None:
    ws = fold_plan("ws", 8, 4, M=10, K=20, N=9)
    assert (ws.row_dim, ws.col_dim, ws.stream_dim) == ("K", "N", "M")
    assert (ws.row_folds, ws.col_folds, ws.stream_len) == (3, 3, 10)
    assert (ws.tm, ws.tk, ws.tn) == (10, 8, 4)
    assert ws.cycles_per_fold == 2 * 8 + 4 + 10 - 2
    assert ws.total_cycles == 9 * ws.cycles_per_fold - 1

    os_ = fold_plan("os", 8, 4, M=10, K=20, N=9)
    assert (os_.row_dim, os_.col_dim, os_.stream_dim) == ("M", "N", "K")
    assert (os_.row_folds, os_.col_folds, os_.stream_len) == (2, 3, 20)
    assert (os_.tm, os_.tk, os_.tn) == (8, 20, 4)
    assert os_.cycles_per_fold == 20 + 8 + 4 - 2

    is_ = fold_plan("is", 8, 4, M=10, K=20, N=9)
    assert (is_.row_dim, is_.col_dim, is_.stream_dim) == ("K", "M", "N")
    assert (is_.row_folds, is_.col_folds, is_.stream_len) == (3, 3, 9)
    assert (is_.tm, is_.tk, is_.tn) == (4, 8, 9)
    assert is_.cycles_per_fold == 2 * 8 + 4 + 9 - 2


def test_rate_packs_k() -> None:
    base = fold_plan("ws", 16, 16, 64, 100, 64)
    fp8 = fold_plan("ws", 16, 16, 64, 100, 64, rate=2)
    assert (base.row_folds, fp8.row_folds) == (7, 4)
    assert fp8.tk == 32 and fp8.cycles_per_fold == base.cycles_per_fold
    assert fold_plan("is", 16, 16, 64, 100, 64, rate=4).row_folds == 2
    os4 = fold_plan("os", 16, 16, 64, 100, 64, rate=4)
    assert os4.stream_len == 25 and os4.cycles_per_fold == 25 + 30
    assert fold_plan("os", 16, 16, 64, 101, 64, rate=4).stream_len == 26
    assert 0 < os4.utilization <= 1


def test_drain_overlap_false() -> None:
    on = fold_plan("os", 8, 8, 20, 30, 20)
    off = fold_plan("os", 8, 8, 20, 30, 20, drain_overlap=False)
    assert off.drain_cycles == 8 and on.drain_cycles == 0
    assert off.total_cycles == on.total_cycles + on.folds * 8
    for df in ("ws", "is"):
        a = fold_plan(df, 8, 8, 20, 30, 20)
        b = fold_plan(df, 8, 8, 20, 30, 20, drain_overlap=False)
        assert a.total_cycles == b.total_cycles


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dataflow": "xs"},
        {"M": 0},
        {"rows": 0},
        {"rate": 0},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"dataflow": "ws", "rows": 4, "cols": 4, "M": 4, "K": 4, "N": 4}
    args.update(kwargs)
    with pytest.raises(ValueError):
        fold_plan(**args)  # type: ignore[arg-type]


# ---------------------------------------------------------------- end to end, through the CLI
E2E_GEMMS = [(17, 65, 33), (100, 50, 300), (1, 64, 64), (64, 1, 64), (40, 3, 90), (8, 8, 8),
             (33, 33, 1), (5, 200, 7)]  # fmt: skip

CFG = """[general]
run_name = e2e_{df}_{r}x{c}

[architecture_presets]
ArrayHeight : {r}
ArrayWidth : {c}
IfmapSramSzkB : 512
FilterSramSzkB : 512
OfmapSramSzkB : 256
IfmapOffset : 0
FilterOffset : 10000000
OfmapOffset : 20000000
Bandwidth : 10
Dataflow : {df}
MemoryBanks : 1

[run_presets]
InterfaceBandwidth : CALC
"""


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize(("rows", "cols"), ARRAYS)
def test_cli_compute_cycles_equal_scalesim(scalesim_ok, tmp_path, capsys, rows, cols, dataflow):
    """``accel-sim arch from-scalesim`` + ``accel-sim run --json``: compute_cycles is exactly
    SCALE-Sim's Total Cycles (stall-free CALC mode), for the same cfg."""
    import json

    from accel_sim.cli import main

    cfg = tmp_path / "scale.cfg"
    cfg.write_text(CFG.format(df=dataflow, r=rows, c=cols))
    arch = tmp_path / "arch.yaml"
    assert main(["arch", "from-scalesim", str(cfg), "-o", str(arch)]) == 0
    capsys.readouterr()
    ref = run_scalesim(rows, cols, dataflow, E2E_GEMMS)
    for (m, k, n), rec in zip(E2E_GEMMS, ref, strict=True):
        assert main(["run", "--arch", str(arch), "--gemm", f"{m}x{k}x{n}", "--dataflow", "fp16",
                     "--json"]) == 0  # fmt: skip
        ours = json.loads(capsys.readouterr().out)
        assert ours["compute_cycles"] == rec["total_cycles"], (m, k, n)
