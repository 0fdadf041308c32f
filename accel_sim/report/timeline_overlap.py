"""An overlapped run on the timeline (``report/timeline.py``; docs/engine.md, "Timeline").

With overlap on every unit is its own track of the plan's row blocks as scheduled
(``engine/schedule.py``); the matrix unit's idle cycles are stalls named by the operation it
waited on; a matmul that ran in one piece is drawn by its DES recording from its start (its
epilogue on ``vector unit (matmul epilogue)``), one cut up by waits as row blocks. Times are
cycles from the start of the run.
"""

from __future__ import annotations

from dataclasses import replace

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp, Plan
from accel_sim.report.timeline import OP_TRACK, PLAN, UNIT, Recorder, matmul_program


def _record_des(recorder: Recorder, arch: Arch, op: MatmulOp, res, offset: int,
                collapse: bool) -> None:  # fmt: skip
    """Re-simulate ``op`` with recording on, from cycle ``offset``; its stalls beyond the DES
    (a GPU's ``launch``) follow as spans. Checked against ``res`` (its standalone result)."""
    from accel_sim.engine.des import simulate_program

    recorder.offset = offset
    program = matmul_program(arch, op)
    timing = simulate_program(program, collapse=collapse, recorder=recorder)
    extra = dict(res.stalls)
    for key, value in timing.stalls.items():
        extra[key] = extra.get(key, 0) - value
    if res.compute_cycles != timing.compute_cycles or any(v < 0 for v in extra.values()):
        raise RuntimeError(f"timeline of {op.name}: the recorded run ({timing.cycles} cycles) "
                           f"differs from the result")  # fmt: skip
    done = timing.cycles
    for cause, cycles in extra.items():
        if cycles:
            recorder.unit_stall(done, done + cycles, cause)
            done += cycles


def record_overlap(recorder: Recorder, arch: Arch, plan: Plan, result,
                    collapse: bool) -> None:  # fmt: skip
    """An overlapped run: the critical path on ``plan``, each unit's row blocks on its track,
    the matrix unit's idle cycles as stalls named by what it waited on."""
    from accel_sim.engine.schedule import contention_labels, split

    sched = result.schedule
    labels = contention_labels(arch)
    recorder.offset = 0
    t = 0
    for seg in sched.critical:  # the critical chain, one span per stretch of one op
        op = plan.ops[seg.job]
        recorder.span(PLAN, op.name, t, seg.end, result.ops[seg.job].kind,
                      {"kind": result.ops[seg.job].kind, "critical": True})  # fmt: skip
        t = seg.end
    matrix: list[tuple[int, object]] = []  # (start, draw) in time order on the matrix unit
    others: list[tuple] = []  # spans of the other units' tracks
    for a, b, job in sched.idle_pieces("matrix"):
        matrix.append(
            (a, lambda a=a, b=b, job=job: recorder.unit_stall(a, b, sched.idle_cause(job)))
        )
    for k, (op, res) in enumerate(zip(plan.ops, result.ops)):
        row = sched.segments[k]
        if isinstance(op, MatmulOp):
            whole = all(s.end - s.start == s.work for s in row) and all(
                a.end == b.start for a, b in zip(row, row[1:]))  # fmt: skip
            if whole:
                matrix.append(
                    (
                        row[0].start,
                        lambda op=op, k=k, t0=row[0].start: _whole(
                            recorder, arch, op, result, k, t0, collapse
                        ),
                    )
                )
                continue
            matrix += [
                (
                    s.start,
                    lambda s=s, op=op, res=res, row=row: _block(recorder, op, res, row, s, split,
                                                                labels),
                )
                for s in row
                if s.end > s.start
            ]
            continue
        others += [
            (
                s.start,
                OP_TRACK[res.kind],
                op.name,
                s.end,
                res.kind,
                {"block": s.block, "alone_cycles": s.work},
            )
            for s in row
            if s.end > s.start
        ]
    for start, track, name, end, kind, info in sorted(others, key=lambda item: item[0]):
        recorder.span(track, name, start, end, kind, info)
    for _, draw in sorted(matrix, key=lambda item: item[0]):
        recorder.offset = 0
        draw()
    recorder.offset = 0


#: Stall causes the schedule adds to a matmul's own (waits on other ops; contention on a
#: shared port, ``dram:contention`` or ``<level>:contention``: :func:`_from_plan`).
_PLAN_CAUSES = ("vector:", "comparator:", "transfer:", "wait:")


def _from_plan(cause: str) -> bool:
    return cause.startswith(_PLAN_CAUSES) or cause.endswith(":contention")


def _whole(recorder: Recorder, arch: Arch, op: MatmulOp, result, k: int, start: int,
           collapse: bool) -> None:  # fmt: skip
    """A matmul that ran in one piece: its DES recording from ``start``."""
    res = result.ops[k]
    own = {c: v for c, v in res.stalls.items() if not _from_plan(c)}
    alone = replace(res, cycles=res.alone_cycles, stalls=own)
    recorder.rename = {"vector unit": "vector unit (matmul epilogue)"}
    try:
        _record_des(recorder, arch, op, alone, start, collapse)
    finally:
        recorder.rename = {}


def _block(recorder: Recorder, op: MatmulOp, res, row, seg, split,
           labels: tuple[str, ...]) -> None:  # fmt: skip
    """Row block ``seg`` of a matmul cut up by waits: its share of the compute cycles and
    (filled in order) of its own stalls, plus its stretch by the shared ports (``labels``:
    ``schedule.contention_labels``)."""
    alone, compute = res.alone_cycles, res.compute_cycles
    before = sum(s.work for s in row[: seg.block])
    busy = (before + seg.work) * compute // alone - before * compute // alone if alone else 0
    own = {c: v for c, v in res.stalls.items() if not _from_plan(c)}
    room_before = before - before * compute // alone if alone else 0
    room = seg.work - busy
    sums: dict[str, int] = {"busy_cycles": busy}
    for cause, total in own.items():  # skip what earlier blocks took, then fill this one
        take = min(total, room_before)
        room_before -= take
        give = min(total - take, room)
        room -= give
        if give:
            sums[f"stall:{cause}"] = give
    for cause, cycles in seg.contention(labels).items():
        sums[f"stall:{cause}"] = cycles
    recorder.span(UNIT, f"{op.name} rows {seg.block}", seg.start, seg.end, "compute",
                  {"block": seg.block, "alone_cycles": seg.work}, sums)  # fmt: skip
