"""Plans as graphs on concurrent units (``engine/schedule.py``; docs/engine.md, "Overlap and
fusion").

* hand-derived schedules: a vector pass V and a matmul T over B row blocks with no DRAM
  contention take the max-plus flow-shop time ``v + t + (B − 1)·max(v, t)``; a whole-op wait
  adds the producer in full; two DRAM streams share the bandwidth max-min fairly;
* the closed form (longest path, unit loads, DRAM bytes) is a lower bound of every schedule and
  equals it on the contention-free chains above;
* ``overlap=False`` is the old behaviour exactly: the unfused plans, ops one after another, each
  op's cycles those of the op alone; GPU proxies keep their kernels sequential;
* overlap is never slower than one after another (hypothesis over shapes × dataflows × every
  shipped architecture), its stalls add up to the stall cycles, its ops' cycles to the run's;
* the report, the JSON, ``--no-overlap`` and the timeline (one track per unit) show it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_sim.api import _as_gemm, _knobs_for, simulate, simulate_timeline
from accel_sim.arch.load import list_archs, load_arch
from accel_sim.cli import main
from accel_sim.dataflow.plan import Plan
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine import schedule as S
from accel_sim.engine.run import run_plan
from accel_sim.errors import UserInputError

CUBE = "ascend_like_cube"


def _jobs(*spec):
    """Jobs from (unit, cycles, dram bytes) triples."""
    return tuple(S.Job(f"j{i}", "x", unit, cycles, (float(dram),))
                 for i, (unit, cycles, dram) in enumerate(spec))  # fmt: skip


@pytest.mark.parametrize("V,T,B", [(400, 1200, 4), (1200, 400, 4), (640, 640, 8), (96, 5000, 1),
                                   (3000, 7000, 10)])  # fmt: skip
def test_two_stage_pipeline_is_the_max_plus_formula(V, T, B):
    jobs = _jobs(("vector", V, 0), ("matrix", T, 0))
    deps = ((), ((0, True),))
    sched = S.simulate_schedule(jobs, deps, B, (37.0,))
    v, t = V // B, T // B
    assert sched.cycles == v + t + (B - 1) * max(v, t)
    assert S.closed_form_cycles(jobs, deps, B, (37.0,)) == sched.cycles
    assert sum(sched.exposed()) == sched.cycles
    assert sched.busy() == {"vector": V, "matrix": T}
    # block i + 1 of the faster unit runs beside block i of the slower one
    assert sched.overlap_cycles() == (B - 1) * min(v, t)


def test_whole_op_wait_then_pipeline():
    """absmax (all of X) → quantize → matmul: the per-tensor absmax runs in full first."""
    A, Q, T, B = 500, 800, 1600, 4
    jobs = _jobs(("vector", A, 0), ("vector", Q, 0), ("matrix", T, 0))
    deps = ((), ((0, False),), ((1, True),))
    sched = S.simulate_schedule(jobs, deps, B, (37.0,))
    q, t = Q // B, T // B
    assert sched.cycles == A + q + t + (B - 1) * max(q, t)
    assert S.closed_form_cycles(jobs, deps, B, (37.0,)) == sched.cycles


def test_dram_shared_max_min_fairly():
    """A DRAM-bound stream (demand = bandwidth) beside one asking a quarter of it: the small
    one gets all it asks (it finishes in its own time), the big one the other 3/4 meanwhile."""
    R = 40.0
    jobs = _jobs(("vector", 1000, 1000 * R), ("dma", 400, 400 * R / 4))
    sched = S.simulate_schedule(jobs, ((), ()), 1, (R,))
    big, small = sched.segments[0][0], sched.segments[1][0]
    assert small.end == 400
    assert big.end == 400 + (1000 - 300)  # 0.75 × 400 done while sharing
    # two DRAM-bound streams: each at half speed, no faster than one after the other
    jobs = _jobs(("vector", 1000, 1000 * R), ("dma", 1000, 1000 * R))
    sched = S.simulate_schedule(jobs, ((), ()), 1, (R,))
    assert sched.cycles == 2000 == S.closed_form_cycles(jobs, ((), ()), 1, (R,))


def test_bounded_buffer_holds_the_producer_back():
    """A fast producer runs at most BUFFER_BLOCKS blocks ahead of a slow consumer."""
    jobs = _jobs(("vector", 100, 0), ("matrix", 1000, 0))
    sched = S.simulate_schedule(jobs, ((), ((0, True),)), 10, (37.0,))
    prod, cons = sched.segments
    for i in range(S.BUFFER_BLOCKS, 10):
        assert prod[i].start >= cons[i - S.BUFFER_BLOCKS].end


def _old_plan_cycles(arch, gemm, flow, knobs=None):
    """The pre-overlap answer: the unfused plan, each op costed alone, summed."""
    arch = load_arch(arch)
    dataflow = get_dataflow(flow)
    plan = dataflow.build(_as_gemm(gemm), arch, None, _knobs_for(dataflow, knobs, False))
    ops = [run_plan(arch, Plan(plan.dataflow, plan.gemm, (op,))).ops[0] for op in plan.ops]
    return [op.name for op in ops], sum(op.cycles for op in ops)


@pytest.mark.parametrize(
    "arch,gemm,flow",
    [
        (CUBE, "2048x4096x4096", "w8a8"),
        (CUBE, "2048x4096x4096", "osc"),
        ("systolic_32x32_ws", "256x768x768", "int16"),
        ("rtx3090_like", "512x4096x4096", "w4a4_static"),
    ],
)
def test_no_overlap_is_the_old_sum_exactly(arch, gemm, flow):  # fmt: skip
    names, total = _old_plan_cycles(arch, gemm, flow)
    old = simulate(arch, gemm, flow, overlap=False)
    assert [op["name"] for op in old.ops] == names
    assert old.cycles == total == old.sequential_cycles
    assert not old.overlap and old.overlap_cycles == 0
    assert old.critical_path == names
    new = simulate(arch, gemm, flow)
    assert new.cycles <= old.cycles


def test_w8a8_names_the_old_passes_without_overlap():
    assert [op["name"] for op in simulate(CUBE, "64x512x512", "w8a8", overlap=False).ops] == [
        "absmax", "quantize", "matmul"]  # fmt: skip
    assert [op["name"] for op in simulate(CUBE, "64x512x512", "w8a8").ops] == [
        "absmax_quantize", "matmul"]  # fmt: skip


def test_gpu_proxy_kernels_stay_sequential():
    for gemm, flow in (("2048x4096x4096", "w8a8"), ("1x4096x11008", "w4a4_static")):
        on = simulate("rtx3090_like", gemm, flow)
        off = simulate("rtx3090_like", gemm, flow, overlap=False)
        assert not on.overlap and on.cycles == on.sequential_cycles
        assert on.knobs.get("fusion", "none") == "none"
        assert on.to_dict() == off.to_dict()


def test_prefill_overlap_hides_the_passes_on_the_cube():
    for flow, first in (("w8a8", "absmax_quantize"), ("osc", "gather_quantize_mxfp4")):
        r = simulate(CUBE, "2048x4096x4096", flow)
        assert r.overlap and r.critical_path[-1] != first
        old = simulate(CUBE, "2048x4096x4096", flow, overlap=False)
        assert r.cycles < r.sequential_cycles and r.cycles < old.cycles
        assert r.overlap_cycles > 0 and r.units_busy["vector"] > 0
        assert r.units_busy["matrix"] <= r.cycles
        assert sum(op["cycles"] for op in r.ops) == r.cycles


def test_producer_fusion_removes_the_pass_traffic():
    hbm = {}
    for how in ("none", "tile", "producer"):
        r = simulate(CUBE, "2048x4096x4096", "w8a8", {"fusion": how})  # X beyond L2
        hbm[how] = r.bytes_read["HBM"] + r.bytes_written.get("HBM", 0)
        assert r.knobs["fusion"] == how
    assert hbm["producer"] < hbm["tile"] < hbm["none"]
    with pytest.raises(UserInputError, match="fusion"):
        simulate(CUBE, "64x512x512", "osc", {"fusion": "maybe"})
    with pytest.raises(UserInputError, match="overlap"):
        simulate(CUBE, "64x512x512", "w8a8", overlap="yes")


FLOWS = [("w8a8", {}), ("w8a8", {"fusion": "producer"}), ("w8a8_static", {}), ("osc", {}),
         ("osc", {"branch": "separate", "fusion": "none"}), ("muxq", {"outlier_channels": 9}),
         ("llm_int8", {"outlier_channels": 9}), ("int16", {}), ("ops", {}),
         ("w4a4_static", {}), ("fp16", {})]  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(arch=st.sampled_from(list_archs()), flow=st.sampled_from(FLOWS),
       M=st.sampled_from([1, 7, 64, 300, 2048]), K=st.sampled_from([64, 768, 4096]),
       N=st.sampled_from([64, 1000, 4096]), count=st.sampled_from([1, 1, 4]))  # fmt: skip
def test_overlap_never_slower(arch, flow, M, K, N, count):
    name, knobs = flow
    arch = load_arch(arch)
    dataflow = get_dataflow(name)
    gemm = _as_gemm((M, K, N))
    gemm = dataclasses.replace(gemm, count=count)
    try:
        plan = dataflow.build(gemm, arch, None, _knobs_for(dataflow, knobs, True))
        on = run_plan(arch, plan, engine="twin")
    except UserInputError:
        return  # the dataflow cannot run there (a missing rate or unit)
    assert on.cycles <= on.sequential_cycles  # the same plan, one op after another
    # the old plans (unfused): overlapped never slower than in series. A fused pass (the
    # default) can cost a little more than the separate ones it replaces (OSC's branch then goes
    # to DRAM with the MX blocks: docs/dataflows.md), so that comparison is made unfused
    unfused = {**knobs, "fusion": "none"} if "fusion" in dataflow.knobs else knobs
    old_plan = dataflow.build(gemm, arch, None, _knobs_for(dataflow, unfused, False))
    old = run_plan(arch, old_plan, engine="twin", overlap=False)
    assert run_plan(arch, old_plan, engine="twin").cycles <= old.cycles
    if on.schedule is not None:
        alone = [dataclasses.replace(op, cycles=op.alone_cycles) for op in on.ops]
        jobs, rates = S.plan_jobs(arch, plan, alone)
        assert S.closed_form_cycles(jobs, plan.graph(), S.blocks_for(arch, plan),
                                    rates) <= on.cycles  # fmt: skip
    compute = sum(op.compute_cycles for op in on.ops)
    stalls = sum(sum(op.stalls.values()) for op in on.ops)
    assert stalls == on.cycles - compute
    assert all(busy <= on.cycles for busy in on.units_busy().values())


def test_closed_form_tracks_the_schedule():
    """Over a seeded grid the schedule is at or above its closed form, and at it in the median
    (they part where DRAM sharing slows a stream the average bandwidth would not)."""
    import random

    rng = random.Random(3)
    gaps = []
    archs = [a for a in list_archs() if not load_arch(a).efficiency.get("launch_us")]
    for _ in range(60):
        arch = load_arch(rng.choice(archs))
        name, knobs = rng.choice(FLOWS)
        dataflow = get_dataflow(name)
        gemm = _as_gemm((rng.choice([16, 100, 512, 2048]), rng.choice([256, 4096]),
                         rng.choice([64, 1000, 4096])))  # fmt: skip
        try:
            plan = dataflow.build(gemm, arch, None, _knobs_for(dataflow, knobs, True))
            run = run_plan(arch, plan, engine="twin")
        except UserInputError:
            continue
        if run.schedule is None:
            continue
        alone = [dataclasses.replace(op, cycles=op.alone_cycles) for op in run.ops]
        jobs, rates = S.plan_jobs(arch, plan, alone)
        bound = S.closed_form_cycles(jobs, plan.graph(), S.blocks_for(arch, plan), rates)
        assert run.cycles >= bound
        gaps.append(run.cycles / bound - 1)
    gaps.sort()
    assert len(gaps) >= 20
    assert gaps[len(gaps) // 2] <= 0.01


def test_report_json_and_cli(tmp_path, capsys):
    assert main(["run", "--gemm", "256x1024x1024", "--dataflow", "w8a8"]) == 0
    out = capsys.readouterr().out
    assert "units busy" in out and "critical path   absmax_quantize > matmul" in out
    assert main(["run", "--gemm", "256x1024x1024", "--dataflow", "w8a8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overlap"] is True and set(doc["units_busy"]) == {"matrix", "vector"}
    assert doc == simulate(CUBE, "256x1024x1024", "w8a8").to_dict()
    assert main(["run", "--gemm", "256x1024x1024", "--dataflow", "w8a8", "--json",
                 "--no-overlap"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc == simulate(CUBE, "256x1024x1024", "w8a8", overlap=False).to_dict()
    csv = tmp_path / "r.csv"
    assert main(["run", "--gemm", "256x1024x1024", "--gemm", "1x1024x1024", "--dataflow",
                 "w8a8", "--per-gemm", "--out", str(csv)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "matrix busy" in out and "critical path" in out
    import pandas as pd

    rows = pd.read_csv(csv)
    assert {"busy_matrix_cycles", "busy_vector_cycles", "overlap_cycles", "critical_path",
            "sequential_cycles", "overlap"} <= set(rows.columns)  # fmt: skip
    assert main(["run", "--gemm", "64x512x512", "--knob", "w8a8.fusion=later"]) == 2
    err = capsys.readouterr().err
    assert "fusion" in err and err.count("\n") == 1


def test_timeline_has_one_track_per_unit_and_they_overlap():
    results, doc = simulate_timeline(CUBE, "512x2048x2048", "w8a8")
    names, spans = {}, {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M" and ev["name"] == "thread_name":
            names[ev["tid"]] = ev["args"]["name"]
        elif ev["ph"] == "X":
            spans.setdefault(names.get(ev["tid"], ev["tid"]), []).append(ev["args"])
    vector = [a for a in spans["vector unit"]]
    matrix = [a for a in spans["matrix unit"] if a.get("busy_cycles")]
    assert len(vector) > 1 and matrix

    def meet(a, b):
        return (a["start_cycle"] < b["start_cycle"] + b["cycles"]
                and b["start_cycle"] < a["start_cycle"] + a["cycles"])  # fmt: skip

    assert any(meet(v, m) for v in vector for m in matrix)
    assert [a["cycles"] for a in spans["plan"]] and sum(
        a["cycles"] for a in spans["plan"]) == results[0].cycles  # fmt: skip


@pytest.mark.parametrize("overlap", [True, False])
def test_timeline_of_a_whole_chip(overlap):
    """On a chip the matmul is recorded on its largest part's core view; the matrix unit's
    spans still tile the run and its busy cycles are the compute cycles."""
    results, doc = simulate_timeline("ascend910b_chip", "256x1024x1024", "w8a8", overlap=overlap)
    tid = {
        ev["tid"]
        for ev in doc["traceEvents"]
        if ev["ph"] == "M" and ev["name"] == "thread_name" and ev["args"]["name"] == "matrix unit"
    }
    unit = [ev["args"] for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["tid"] in tid]
    assert sum(a["cycles"] for a in unit) == results[0].cycles
    assert sum(a.get("busy_cycles", 0) for a in unit) == results[0].compute_cycles


def _port_bound(result, arch) -> float:
    """Cycles the first on-chip level's and DRAM's ports need for the run's bytes (a port
    shared by reads and writes carries both), the most of them."""
    worst = 0.0
    for level in arch.memory[:2]:
        if arch.cores > 1 and level is arch.memory[1] and not level.shared:
            continue
        read = result.bytes_read.get(level.name, 0)
        written = result.bytes_written.get(level.name, 0)
        if level.shared_port:
            worst = max(worst, (read + written) / level.read_bytes_per_cycle)
        else:
            worst = max(worst, read / level.read_bytes_per_cycle,
                        written / level.write_bytes_per_cycle)  # fmt: skip
    return worst


@pytest.mark.parametrize("arch, gemm, flow, knobs", [
    ("systolic_128x128_os", (1433, 564, 13), "w8a8", None),
    ("ascend_like_cube", (961, 2460, 7), "llm_int8", {"outlier_channels": 51}),
])  # fmt: skip
def test_overlapped_units_share_the_first_levels_ports(arch, gemm, flow, knobs):
    """The vector pass reads and writes the first on-chip level while the matmul beside it
    loads from it: both share its ports (``schedule.shared_ports``). With only DRAM shared, the
    first case took 7,255 cycles where IFMAP_SRAM's reads alone need 9,472, the second 112,850
    where L2's need 131,167."""
    result = simulate(arch, gemm, flow, knobs)
    assert result.cycles >= _port_bound(result, load_arch(arch))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(list_archs()), flow=st.sampled_from(["w8a8", "llm_int8", "muxq",
       "osc", "ops", "w4a4_static"]), M=st.integers(1, 2048), K=st.integers(1, 4096),
       N=st.integers(1, 32))  # fmt: skip
def test_a_run_takes_at_least_its_shared_ports_bytes(arch, flow, M, K, N):
    """Overlap never lets a run beat the bandwidth of a port its units share: cycles are at
    least DRAM's and the first on-chip level's bytes over their bandwidths (N ≤ 32: the
    vector passes weigh most beside a short matmul)."""
    knobs = {"outlier_channels": min(K, 16)} if flow in ("llm_int8", "muxq") else None
    try:
        result = simulate(arch, (M, K, N), flow, knobs)
    except UserInputError:  # (this dataflow does not run on this architecture)
        return
    assert result.cycles >= _port_bound(result, load_arch(arch)) * (1 - 1e-9)


def test_a_blocks_stretch_is_split_over_the_ports_that_held_it():
    """``Segment.contention``: the whole stretch, in proportion to how long each port bound
    the block (ports sharing a label add up), whole cycles by the largest remainders (1.75 and
    5.25 cycles: 2 and 5); a stretch with no
    port behind it (rounding up to whole cycles) is DRAM's."""
    labels = ("dram:contention", "L2:contention", "L2:contention")
    seg = S.Segment(job=0, block=0, work=100, start=0, end=107, slowed={0: 1.5, 1: 3.0, 2: 1.5})
    assert seg.contention(labels) == {"L2:contention": 5, "dram:contention": 2}
    assert sum(seg.contention(labels).values()) == 7
    assert S.Segment(0, 0, 100, 0, 101).contention(labels) == {"dram:contention": 1}
    assert S.Segment(0, 0, 100, 0, 100, slowed={1: 2.0}).contention(labels) == {}


def test_contention_is_named_after_the_shared_ports():
    """DRAM's ports are ``dram:contention``; the first on-chip level's take its name; a chip's
    per-core first level is not shared (its cores each have their own ports)."""
    cube = load_arch("ascend_like_cube")
    assert S.shared_ports(cube)[0] == (("HBM", "rw"), ("L2", "r"), ("L2", "w"))
    assert S.contention_labels(cube) == ("dram:contention", "L2:contention", "L2:contention")
    data = json.loads(load_arch("ascend910b_chip").model_dump_json())
    data["memory"][1]["shared"] = False
    from accel_sim.arch.load import arch_from_dict

    per_core = arch_from_dict(data, "per-core L2")
    assert S.contention_labels(per_core) == ("dram:contention",)
