"""Lay out one simulated plan as a process of a timeline :class:`~.timeline.Recorder`: one op
after another (``overlap`` off), or the overlapped schedule (``timeline_overlap.py``)."""

from __future__ import annotations

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp, Plan
from accel_sim.engine.des import simulate_program
from accel_sim.report.timeline import OP_TRACK, PLAN, Recorder, matmul_program
from accel_sim.report.timeline_overlap import record_overlap


def record_plan(recorder: Recorder, arch: Arch, plan: Plan, result, label: str,
                collapse: bool = True) -> None:  # fmt: skip
    """Lay out one run (``result``: the :class:`~accel_sim.engine.run.PlanResult` of ``plan``)
    as a process of ``recorder``: each matmul re-simulated by the DES with recording on (its
    cycles must equal the unrecorded run's), every other op a span on its unit's track, one
    after another as they run; while they run the matrix unit stalls on them."""
    recorder.begin_process(label, {"arch": arch.name, "dataflow": plan.dataflow,
                                   "gemm": plan.gemm.label, "cycles": result.cycles})  # fmt: skip
    if result.schedule is not None:
        record_overlap(recorder, arch, plan, result, collapse)
        return
    t = 0
    for op, res in zip(plan.ops, result.ops):
        recorder.offset = t
        recorder.span(PLAN, op.name, 0, res.cycles, res.kind,
                      {"kind": res.kind, "count": op.count})  # fmt: skip
        extra = dict(res.stalls)
        done = 0
        if isinstance(op, MatmulOp):
            program = matmul_program(arch, op)
            timing = simulate_program(program, collapse=collapse, recorder=recorder)
            for key, value in timing.stalls.items():
                extra[key] = extra.get(key, 0) - value
            done = timing.cycles
            if res.compute_cycles != timing.compute_cycles or any(v < 0 for v in extra.values()):
                raise RuntimeError(f"timeline of {op.name}: the recorded run "
                                   f"({timing.cycles} cycles) differs from the result "
                                   f"({res.cycles})")  # fmt: skip
        else:
            recorder.span(OP_TRACK[res.kind], op.name, 0, res.cycles, res.kind,
                          {"count": op.count})  # fmt: skip
        for cause, cycles in extra.items():  # cycles of the op beyond the DES (or all of them)
            if cycles:
                recorder.unit_stall(done, done + cycles, cause)
                done += cycles
        if done != res.cycles:
            raise RuntimeError(f"timeline of {op.name}: {done} cycles laid out, result says "
                               f"{res.cycles}")  # fmt: skip
        t += res.cycles
