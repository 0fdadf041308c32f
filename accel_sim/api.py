"""The public Python API. The CLI, notebooks, tables and sweeps all come through here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel_sim.api_checks import (
    _as_gemm,
    _as_lists,
    _check_batch,
    _check_call,
    _check_collapse,
    _check_overlap,
    _clip,
    _loaded,
)
from accel_sim.arch.load import load_arch
from accel_sim.arch.schema import Arch
from accel_sim.dataflow.registry import dataflow_names, get_dataflow
from accel_sim.energy.model import price
from accel_sim.engine.counts import ActionCounts
from accel_sim.engine.run import run_plan
from accel_sim.errors import UserInputError
from accel_sim.report.warm import warm_imports
from accel_sim.workers import map_groups
from accel_sim.workload.gemm import Gemm

if TYPE_CHECKING:  # pandas loads on first use (worker processes fork without it)
    import pandas as pd


@dataclass(frozen=True)
class SimResult:
    """Outcome of one GEMM under one dataflow on one architecture.

    Cycles are matrix-unit clock cycles; energies in pJ; ``time_s`` in seconds at ``clock_hz``.
    ``stall_cycles = cycles − compute_cycles``: every cycle the matrix unit is not busy, broken
    down by cause in ``stalls`` (``load:<hop>``, ``store:<hop>``, ``drain``, ``vector:<op>``...).
    """

    arch: str
    dataflow: str
    gemm: str
    M: int
    K: int
    N: int
    count: int
    cycles: int
    compute_cycles: int
    stall_cycles: int
    utilization: float
    macs: int
    time_s: float
    energy_pj: float
    pj_per_mac: float
    energy_breakdown_pj: dict[str, float]
    energy_sources: dict[str, str]
    stalls: dict[str, int]
    bytes_read: dict[str, int] = field(default_factory=dict)  # per memory level
    bytes_written: dict[str, int] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)
    knobs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the plan's graph on concurrent units (False: one op after another; docs/engine.md,
    #: "Overlap and fusion"); cycles each unit is busy; cycles with at least two units busy;
    #: the ops the run's cycles pass through; the same ops one after another
    overlap: bool = False
    units_busy: dict[str, int] = field(default_factory=dict)
    overlap_cycles: int = 0
    critical_path: list[str] = field(default_factory=list)
    sequential_cycles: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def row(self) -> dict[str, Any]:
        """A flat row for a DataFrame (breakdowns become ``energy_<component>_pj`` columns)."""
        # (the scalar fields as they are: no deep copy of the nested ones it leaves out)
        flat = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NESTED}
        for key, value in self.energy_breakdown_pj.items():
            flat[f"energy_{key}_pj"] = value
        for unit in ("matrix", "vector", "comparator", "dma"):
            flat[f"busy_{unit}_cycles"] = self.units_busy.get(unit, 0)
        flat["critical_path"] = " > ".join(self.critical_path)
        for key, value in self.extra.items():
            flat[key] = value
        return flat


#: :class:`SimResult` fields that :meth:`SimResult.row` flattens or leaves out
_NESTED = frozenset({"energy_breakdown_pj", "energy_sources", "stalls", "ops", "notes", "knobs",
                     "extra", "bytes_read", "bytes_written", "units_busy", "critical_path"})


def _check_result(result: SimResult, source: str) -> None:
    """Every number of a result is finite (schema bounds should guarantee it; this is the
    backstop, raised before anything is printed or written)."""
    from accel_sim.report.io import check_finite

    fields_ = {f.name: getattr(result, f.name) for f in fields(result)}  # no deep copy: plain
    check_finite(fields_, f"{source} (result of {result.dataflow} on {result.gemm})")


def simulate(
    arch: Arch | str | Path,
    gemm: Gemm | str | tuple,
    dataflow: str = "w8a8",
    knobs: Mapping[str, Any] | None = None,
    stats: Mapping[str, Any] | None = None,
    engine: str = "des",
    collapse: bool = True,
    overlap: bool = True,
) -> SimResult:
    """Simulate one GEMM: ``simulate("ascend_like_cube", "2048x4096x4096", "w8a8")``.

    Args:
        arch: an :class:`Arch`, a shipped architecture name or a YAML path.
        gemm: a :class:`Gemm`, ``"MxKxN"`` or ``(M, K, N)``.
        dataflow: a registered dataflow name (``accel_sim.dataflows()``).
        knobs: dataflow parameters overriding its defaults.
        stats: statistics of the GEMM's real tensors, for data-dependent dataflows.
        engine: ``"des"`` (cycle-level) or ``"twin"`` (closed form).
        collapse: exact steady-state collapse in the DES (turn off only to check it).
        overlap: run the plan's operations as a graph on concurrent units, row block by row
            block (default); ``False``: one after another, with the ``fusion`` knob's ``auto``
            meaning ``none`` (the plans as they were before overlap). GPU proxies run their
            kernels one after another either way.
    """
    _check_call(dataflow, knobs, stats, engine, "simulate()")
    _check_overlap(overlap, "simulate()")
    _check_collapse(collapse, "simulate()")
    return _simulate(load_arch(arch), _as_gemm(gemm), dataflow, knobs, stats, engine,
                     collapse, overlap)[0]  # fmt: skip


def _knobs_for(flow, knobs, overlap: bool) -> dict:
    """``knobs`` resolved; without overlap the ``fusion`` knob's ``auto`` is ``none``."""
    resolved = flow.resolve_knobs(knobs)
    if not overlap and resolved.get("fusion") == "auto":
        resolved["fusion"] = "none"
    return resolved


def _simulate(arch: Arch, gemm: Gemm, dataflow: str, knobs, stats, engine: str,
              collapse: bool, overlap: bool = True) -> tuple[SimResult, Any, Any]:  # fmt: skip
    """:func:`simulate` on checked arguments: (result, plan, its PlanResult)."""
    flow = get_dataflow(dataflow, "dataflow")
    resolved = _knobs_for(flow, knobs, overlap)
    plan = flow.build(gemm, arch, stats, resolved)
    result = run_plan(arch, plan, engine=engine, collapse=collapse, overlap=overlap)
    counts = ActionCounts()
    stalls: Counter = Counter()
    compute = 0
    unit_cycles = 0.0
    for op in result.ops:
        counts.add(op.counts)
        stalls.update(op.stalls)
        compute += op.compute_cycles
        unit_cycles += op.unit_cycles
    cycles = result.cycles
    energy = price(arch, counts, cycles)
    macs = gemm.macs * gemm.count
    peak = arch.compute.fp16_macs_per_cycle
    out = SimResult(
        arch=arch.name,
        dataflow=dataflow,
        gemm=gemm.label,
        M=gemm.M,
        K=gemm.K,
        N=gemm.N,
        count=gemm.count,
        cycles=cycles,
        compute_cycles=compute,
        stall_cycles=cycles - compute,
        utilization=min(1.0, unit_cycles / peak / cycles) if cycles else 0.0,
        macs=macs,
        time_s=cycles / arch.clock_hz,
        energy_pj=energy.total_pj,
        pj_per_mac=energy.total_pj / macs,
        energy_breakdown_pj=energy.breakdown_pj,
        energy_sources=energy.sources,
        stalls={k: int(v) for k, v in sorted(stalls.items()) if v},
        bytes_read={k: int(v) for k, v in counts.bytes_read.items() if v},
        bytes_written={k: int(v) for k, v in counts.bytes_written.items() if v},
        ops=[
            {
                "name": op.name,
                "kind": op.kind,
                "unit": op.unit,
                "cycles": op.cycles,
                "compute_cycles": op.compute_cycles,
                "alone_cycles": op.alone_cycles,
                "busy_cycles": op.busy_cycles,
                "start_cycle": op.start,
                "end_cycle": op.end,
            }
            for op in result.ops
        ],  # fmt: skip
        knobs=dict(plan.knobs),
        notes=list(plan.notes) + ([
            f"on {arch.cores} cores: compute and stall cycles are the slowest core's; "
            f"utilization is the MACs over all {arch.cores} cores' peak FP16-equivalent rate "
            "for the cycles"] if arch.cores > 1 else []),  # fmt: skip
        extra=_extra(flow, stats, resolved, gemm, plan),
        overlap=result.overlap,
        units_busy=result.units_busy(),
        overlap_cycles=result.overlap_cycles,
        critical_path=list(result.critical),
        sequential_cycles=result.sequential_cycles,
    )
    _check_result(out, arch.origin)
    return out, plan, result


def simulate_timeline(
    arch: Arch | str | Path,
    gemms: Iterable[Gemm | str | tuple] | Gemm | str,
    dataflows: Iterable[str] | str = ("w8a8",),
    knobs: Mapping[str, Mapping[str, Any]] | None = None,
    stats_for=None,
    collapse: bool = True,
    max_events: int | None = None,
    overlap: bool = True,
) -> tuple[list[SimResult], dict]:
    """Simulate each (GEMM, dataflow) with the DES and record its activity as a timeline:
    ``(results, trace)``, the results exactly as :func:`simulate` gives them (GEMM-major) and
    ``trace`` a Chrome/Perfetto trace-event document with one process per run
    (``accel_sim.report.timeline``; write it with ``write_timeline``). ``knobs`` maps dataflow
    name → its knobs; ``stats_for(gemm)`` returns a GEMM's statistics (or None); ``max_events``
    caps the spans held (default ``timeline.MAX_EVENTS``; beyond it spans are merged);
    ``overlap`` as in :func:`simulate` (on: one track per unit, the plan's schedule)."""
    from accel_sim.report.timeline import MAX_EVENTS, Recorder
    from accel_sim.report.timeline_plan import record_plan

    where = "simulate_timeline()"
    _check_overlap(overlap, where)
    gemms, dataflows = _as_lists(gemms, dataflows, knobs, where)
    limit = MAX_EVENTS if max_events is None else max_events
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 16:
        raise UserInputError(where, f"max_events must be an integer ≥ 16, got {_clip(limit)}")
    arch, gemms, flows = _loaded(arch, gemms, dataflows, where)
    for flow in flows:
        _check_call(flow, (knobs or {}).get(flow), None, "des", where)
    _check_batch(knobs, flows, 1, stats_for, where)
    _check_collapse(collapse, where)
    recorder = Recorder(limit)
    results = []
    for gemm in gemms:
        stats = stats_for(gemm) if stats_for else None
        for flow in flows:
            out, plan, result = _simulate(arch, gemm, flow, (knobs or {}).get(flow), stats,
                                          "des", collapse, overlap)  # fmt: skip
            record_plan(recorder, arch, plan, result, f"{flow} · {gemm.label} · {arch.name}",
                        collapse)  # fmt: skip
            results.append(out)
    runs = [{"pid": i + 1, "dataflow": r.dataflow, "gemm": r.gemm, "cycles": r.cycles}
            for i, r in enumerate(results)]  # fmt: skip
    return results, recorder.document(arch.clock_hz, {"arch": arch.name, "runs": runs})


def _extra(flow, stats, knobs, gemm, plan) -> dict[str, Any]:
    """Per-run columns beyond cycles and energy: numerical error and scheme statistics."""
    extra: dict[str, Any] = {"kind": gemm.kind, "layer": gemm.layer}
    if stats is not None:
        extra["rel_error"] = flow.numerical_error(stats, knobs, gemm)
    for key in ("ops_set_skip_fraction", "ops_row_skip_fraction", "ops_tile_skip_fraction",
                "table_channels", "outlier_channels"):  # fmt: skip
        if key in plan.knobs:
            extra[key] = plan.knobs[key]
    if "ops_tau_met" in plan.knobs:  # tau=auto: the τ and preset chosen for this GEMM
        extra["ops_tau"], extra["ops_preset"] = plan.knobs["tau"], plan.knobs["preset"]
    return extra


def simulate_many(
    arch: Arch | str | Path,
    gemms: Iterable[Gemm | str | tuple],
    dataflows: Iterable[str] = ("w8a8",),
    knobs: Mapping[str, Mapping[str, Any]] | None = None,
    stats_for=None,
    engine: str = "des",
    progress: bool = False,
    overlap: bool = True,
    jobs: int = 1,
) -> pd.DataFrame:
    """One row per (GEMM, dataflow), GEMM-major in the order given (a GEMM listed twice gives
    its rows twice, a dataflow listed twice runs once); ``knobs`` maps dataflow name → its
    knobs; ``stats_for(gemm)`` returns the statistics of a GEMM (or None). A single GEMM or
    dataflow name is taken as a list of one. Every GEMM, dataflow and knob is checked before the
    first simulation; ``overlap`` as in :func:`simulate`. ``jobs`` > 1 simulates on that many
    forked processes, the rows of one GEMM in one of them (``workers.map_groups``); the table
    is the same."""
    where = "simulate_many()"
    _check_overlap(overlap, where)
    gemms, dataflows = _as_lists(gemms, dataflows, knobs, where)
    arch, gemms, flows = _loaded(arch, gemms, dataflows, where)
    for flow in flows:
        _check_call(flow, None, None, engine, where)  # flow is a str from here on
        _check_call(flow, (knobs or {}).get(flow), None, engine, where)
        get_dataflow(flow, "dataflow").resolve_knobs((knobs or {}).get(flow), "knobs")
    _check_batch(knobs, flows, jobs, stats_for, where)
    runs = [(g, f) for g in gemms for f in flows]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(runs), desc="simulating", unit="run", leave=False)
    args = [(arch, g, f, (knobs or {}).get(f), stats_for(g) if stats_for else None, engine,
             True, overlap) for g, f in runs]  # fmt: skip
    # a GEMM's dataflows per task (a pool's worker keeps its caches from task to task, so a
    # matmul is simulated at most once per worker), the most MACs first
    order = [{i: args[i] for i in range(g * len(flows), (g + 1) * len(flows))}
             for g in sorted(range(len(gemms)), key=lambda g: -gemms[g].macs * gemms[g].count)]
    done: dict[int, SimResult] = {}
    # (nothing unless jobs > 1; pandas, for the table, loads while the workers run)
    for part in map_groups(simulate, order, jobs, lambda: warm_imports("pandas")):
        done.update(part)
        if bar is not None:
            bar.update(len(part))
    rows = []
    for i in range(len(runs)):
        if i not in done:  # in this process (also a run whose error is raised here, in order)
            done[i] = simulate(*args[i])
            if bar is not None:
                bar.update()
        rows.append(done[i].row())
    if bar is not None:
        bar.close()
    import pandas as pd

    return pd.DataFrame(rows)


def unsupported_reason(arch, dataflow: str, gemm: Gemm | None = None, stats=None,
                       knobs: Mapping[str, Any] | None = None) -> str | None:  # fmt: skip
    """Why ``dataflow`` cannot run on ``arch`` (a missing rate or unit, missing statistics),
    or None when it can. ``gemm``/``stats`` are a representative GEMM and its statistics."""
    arch = load_arch(arch)
    flow = get_dataflow(dataflow)
    gemm = gemm or Gemm(16, 64, 64)
    try:
        plan = flow.build(gemm, arch, stats, flow.resolve_knobs(knobs))
        run_plan(arch, plan, engine="twin")
    except UserInputError as err:
        return err.message
    return None


def dataflows() -> list[str]:
    """Names of the registered dataflows."""
    return dataflow_names()


def explain(
    arch: Arch | str | Path,
    gemm: Gemm | str | tuple,
    dataflow: str = "w8a8",
    knobs: Mapping[str, Any] | None = None,
    stats: Mapping[str, Any] | None = None,
) -> list:
    """The mapping of every matmul of ``dataflow``'s plan for ``gemm``: loop nest, what each
    level keeps, bytes per link and the binding bound (:class:`~accel_sim.report.explain.
    Explanation`; its ``text`` is what ``accel-sim run --explain`` prints)."""
    from accel_sim.report.explain import explain_matmul

    _check_call(dataflow, knobs, stats, "des", "explain()")
    arch = load_arch(arch)
    flow = get_dataflow(dataflow, "dataflow")
    plan = flow.build(_as_gemm(gemm), arch, stats, flow.resolve_knobs(knobs))
    return [explain_matmul(arch, op) for op in plan.matmuls]
