"""Whole chips (``engine/chip.py``, docs/engine.md "Whole chips"): a matmul partitioned across
cores that share L2 and DRAM, checked against hand-derived cases and as properties."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accel_sim
from accel_sim.arch.load import arch_from_dict, load_arch, resolve_arch_path
from accel_sim.dataflow.plan import MatmulOp, VectorOp
from accel_sim.engine.chip import core_view, partition, simulate_matmul, stream_view
from accel_sim.engine.run import _vector
from accel_sim.errors import UserInputError

CHIP = "ascend910b_chip"
CHIPS = ("ascend910b_chip", "rtx3090_chip", "tpu_like_chip")
#: Allowed relative excess of cycles on more cores (see test_more_cores_never_raise_cycles).
SLACK = 0.10


def _edited(name: str, edit) -> object:
    data = json.loads(load_arch(name).model_dump_json())
    edit(data)
    return arch_from_dict(data, f"{name}+edit")


def _with_cores(cores: int):
    return _edited(CHIP, lambda d: d.update(cores=cores))


# --- the schema ------------------------------------------------------------------------------
@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(cores=0), "cores"),
    (lambda d: d.update(cores=1025), "cores"),
    (lambda d: d.update(cores=2.5), "cores"),
    (lambda d: d["memory"][-1].update(shared=True), "cannot be shared"),
    (lambda d: d["memory"][4].update(shared=True), "cannot be shared"),  # L0B
    (lambda d: d["memory"][0].update(shared=False), "shared levels must be the outermost"),
])  # fmt: skip
def test_bad_chip_fields_are_one_line_errors(edit, message):
    with pytest.raises(UserInputError, match=message):
        _edited(CHIP, edit)


def test_bad_cores_in_a_file_exits_2(run_cli, tmp_path):
    text = resolve_arch_path(CHIP).read_text().replace("cores: 24", "cores: 0")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = run_cli(["run", "--arch", path, "--gemm", "16x64x64"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "cores" in err


def test_shared_flags_change_nothing_on_one_core():
    """On one core the per-core view is the architecture itself."""
    one = _with_cores(1)
    plain = _edited(CHIP, lambda d: (d.update(cores=1),
                                     [m.update(shared=False) for m in d["memory"]]))  # fmt: skip
    op = MatmulOp("t", 64, 512, 256, "int8", 8, 8)
    assert core_view(one, 1) is one
    assert simulate_matmul(one, op).cycles == simulate_matmul(plain, op).cycles


# --- hand-derived cases ----------------------------------------------------------------------
def test_dram_bound_gemv_runs_at_the_chips_hbm_bandwidth():
    """1x16384x16384 INT8 streams 268 MB of weights: on 24 cores it cannot beat 1.6 TB/s
    (888.9 B/cycle for the chip) and, split over enough cores, it comes within 3 % of it (the
    rest is the first tiles' latency)."""
    chip = load_arch(CHIP)
    op = MatmulOp("gemv", 1, 16384, 16384, "int8", 8, 8)
    run = simulate_matmul(chip, op)
    bound = 16384 * 16384 / 888.9
    assert run.partition.active * 128 > 888.9  # enough cores' L2->L1 ports (128 B/cycle each)
    assert bound <= run.cycles <= 1.03 * bound
    assert run.counts.bytes_read["HBM"] >= 16384 * 16384


def test_compute_bound_gemm_is_one_nth_of_a_core_plus_its_fill():
    """6144x2048x4096 FP16 on 24 cores: an even grid (24 equal parts); each core's compute is
    exactly 1/24 of the whole GEMM on one 16x16x16 cube (4096 MACs/cycle), the rest is its fill
    (within 2 %). In lockstep the cores of a grid row fetch their common A tiles once (a column
    its B tiles): HBM reads every byte of A and B exactly once and writes C once. Without that
    merging (the per-core file, ascend_like_cube: a 1/24 share of L2 and HBM) the same part
    takes longer."""
    op = MatmulOp("t", 6144, 2048, 4096, "fp16", 16, 16)
    run = simulate_matmul(load_arch(CHIP), op)
    assert run.partition.active == 24 and len(run.partition.parts(op)) == 1  # 24 equal parts
    assert run.compute_cycles == 6144 * 2048 * 4096 // (24 * 4096)
    assert run.compute_cycles <= run.cycles <= 1.02 * run.compute_cycles
    assert run.counts.bytes_read["HBM"] == (6144 * 2048 + 2048 * 4096) * 2
    assert run.counts.bytes_written["HBM"] == 6144 * 4096 * 2
    one_core = simulate_matmul(load_arch("ascend_like_cube"), run.partition.largest(op)).cycles
    assert run.cycles < one_core


def test_k_split_pays_and_charges_its_reduction():
    """1x65536x16: N is one cube block wide, so only a K split keeps more than one core busy;
    the partial sums (32-bit) cross DRAM and are added, and it still beats one busy core."""
    chip = load_arch(CHIP)
    op = MatmulOp("t", 1, 65536, 16, "fp16", 16, 16)
    run = simulate_matmul(chip, op)
    gk = run.partition.grid[3]
    assert gk > 1 and run.stalls["reduce:K-split"] > 0
    assert run.counts.bytes_read["HBM"] >= 65536 * 16 * 2 + gk * 16 * 4
    assert run.counts.vector_ops >= (gk - 1) * 16
    alone = simulate_matmul(core_view(chip, 1), op).cycles  # the whole op on one busy core
    assert run.cycles < alone


def test_vector_ops_split_over_every_core():
    """A streaming op on the stream view: 24 vector units (128 FP16 lanes each) and the chip's
    L2 (3072 B/cycle each way, reads and writes in parallel) at once, plus one start-up."""
    chip = load_arch(CHIP)
    op = VectorOp("v", 2**24, 2.0, 2**25, 2**25)
    one, wide = _vector(core_view(chip, 1), op), _vector(stream_view(chip), op)
    work, traffic = 2**24 * 2.0 / (24 * 128), 2**25 / 3072
    assert wide.cycles == pytest.approx(32 + max(work, traffic), abs=2)
    assert one.cycles == pytest.approx(32 + 2**24 * 2.0 / 128, abs=2)  # one core's lanes


# --- properties ------------------------------------------------------------------------------
dims = st.integers(1, 2048)
precisions = st.sampled_from([("fp16", 16), ("int8", 8), ("int4", 4)])


@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(M=dims, K=dims, N=dims, precision=precisions, cores=st.integers(1, 23),
       more=st.integers(1, 23))  # fmt: skip
def test_more_cores_never_raise_cycles(M, K, N, precision, cores, more):
    """More cores (the shared levels unchanged) never cost more than ``SLACK``: a grid that
    fits fewer cores is still a candidate, but the DES orders grids a little differently from
    the partition's bound, and with more cores busy each core's first tiles arrive later
    (benchmarks/bench_chip.py --skip-speed --monotone: 6 of 500 random cases moved the wrong
    way, the worst by 7.1 %, while the bound alone chose the grid; 1 of 500, by 0.3 %, since
    the model re-ranks the best grids)."""
    op = MatmulOp("t", M, K, N, precision[0], precision[1], precision[1])
    few = simulate_matmul(_with_cores(cores), op).cycles
    many = simulate_matmul(_with_cores(min(24, cores + more)), op).cycles
    assert many <= few * (1 + SLACK)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(arch=st.sampled_from(CHIPS), M=st.integers(1, 65536), K=st.integers(1, 65536),
       N=st.integers(1, 65536), count=st.integers(1, 40))  # fmt: skip
def test_the_split_conserves_macs(arch, M, K, N, count):
    """Every MAC is one core's: the parts tile the GEMM exactly, and no more cores are busy
    than the chip has."""
    chip = load_arch(arch)
    op = MatmulOp("t", M, K, N, "int8", 8, 8, count=count)
    p = partition(chip, op)
    assert 1 <= p.active <= chip.cores
    assert sum(sub.macs * n for sub, n in p.parts(op)) == op.macs
    assert sum(n for _, n in p.parts(op)) == p.active


@pytest.mark.parametrize("arch", CHIPS)
def test_counts_sum_over_cores(arch):
    chip = load_arch(arch)
    op = MatmulOp("t", 300, 1000, 700, "int8", 8, 8)
    run = simulate_matmul(chip, op)
    assert run.counts.macs["int8"] == op.macs
    assert run.cycles >= run.compute_cycles > 0


# --- front ends ------------------------------------------------------------------------------
def test_run_and_explain_on_the_chip(run_cli):
    code, out, err = run_cli(["run", "--arch", CHIP, "--gemm", "2048x4096x4096"])
    assert code == 0 and "ascend910b_chip" in out
    code, out, err = run_cli(["run", "--arch", CHIP, "--gemm", "2048x4096x4096", "--explain"])
    # (which grid wins is the partitioner's business, tested above; here: that it is shown)
    assert code == 0 and re.search(r"partition: M 2048 in \d+ x \d+.* · N 4096 in \d+ x \d+", out)
    assert "24 of 24 cores busy" in out
    [explained] = accel_sim.explain(CHIP, "2048x4096x4096", "w8a8_static")
    assert explained.cycles == accel_sim.simulate(CHIP, "2048x4096x4096", "w8a8_static").cycles


def test_chip_utilization_is_the_chips():
    r = accel_sim.simulate(CHIP, "6144x2048x4096", "fp16")
    assert 0.85 < r.utilization <= 1.0


def test_model_run_jobs_do_not_change_the_result(run_cli):
    """``--jobs`` only spreads the distinct GEMM rows over forked processes."""
    from accel_sim.model_run.simulate import simulate_model

    runs = [simulate_model(CHIP, "gpt2-small", "prefill", 64, dataflows=("fp16", "w8a8"),
                           stats_from=None, jobs=jobs) for jobs in (1, 2)]  # fmt: skip
    assert runs[0].table.equals(runs[1].table)
    code, out, err = run_cli(["model", "gpt2-small", "--tokens", "4", "--jobs", "0"])
    assert code == 2 and "--jobs" in err
