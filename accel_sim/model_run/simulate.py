"""Whole-model runs: a model lowered to GEMMs and vector work, every row simulated per dataflow.

``simulate_model(arch, "qwen3-8b", "prefill", 2048, dataflows=("fp16", "w8a8"))`` lowers the
model (``workload/models.py``), runs every linear GEMM under each dataflow and costs the rest the
same way for all of them. Modelling assumptions (also in every result's ``notes``):

* **Attention matmuls** (QKᵀ, PV) run in FP16 under every dataflow: the schemes here quantize the
  linear layers; Q, K, V and the KV cache stay FP16. This includes ``w4a4_static`` (PrefixQuant
  also quantizes the KV cache to 4 bits, KV4; that is out of scope here). On an architecture
  without an FP16 rate they run as ``w8a8_static``. In decode with grouped-query attention the
  query heads sharing a key/value head are one matmul (rows stacked, ``M`` = group), so a step
  reads each K/V head once (``workload/models.py``).
* **Non-GEMM work** (norms, softmax, activation, rotary, residual adds, routing) runs on the
  vector unit as :class:`~accel_sim.dataflow.plan.VectorOp` s costed by the engine
  (``engine/run.py``, including the architecture's ``vector`` efficiency) at the stated flops per
  element; each op reads its FP16 inputs (two streams for residual adds and the gated
  activation, one otherwise) and writes one FP16 output. One op (one start-up) covers a whole
  layer of one forward pass: every token, sequence and head (the softmax of all heads is one
  kernel, not one per head). On a chip (``cores`` > 1) each op is split evenly over every
  core's vector unit (``engine/chip.py: stream_view``); matmuls are partitioned by the engine.
* **Statistics**: data-dependent dataflows (OSC, MUXQ, LLM.int8(), OPS) take a real trace's
  statistics *by layer kind* (:class:`~accel_sim.model_run.stats.KindStats`: medians per kind,
  channel counts scaled by K_model / K_trace); numerical errors are the trace model's.
* **Kernel launches**: on an architecture with ``efficiency.launch_us`` (GPU proxies), every
  GPU kernel of a step — each matmul and vector op of a row's plan, per instance — costs that
  fixed time on top of its body (``engine/run.py``), in the ``launch_cycles`` column (and in
  ``cycles``). Attention's heads × batch instances (decode: key/value heads × batch) are one
  batched kernel per layer and step, so their rows are charged once per batch of heads.
* **Units**: ``cycles`` of the architecture's clock, ``time_s`` in seconds, ``energy_pj`` in
  picojoules, ``tokens_per_s`` in tokens per second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel_sim.api import simulate
from accel_sim.api_checks import check_jobs, check_knob_map, unique
from accel_sim.arch.load import load_arch
from accel_sim.arch.schema import Arch
from accel_sim.dataflow.common import FP16_BYTES
from accel_sim.dataflow.plan import Plan, VectorOp
from accel_sim.dataflow.registry import dataflow_names, get_dataflow
from accel_sim.energy.model import price
from accel_sim.engine.chip import scope, stream_view
from accel_sim.engine.counts import ActionCounts
from accel_sim.engine.run import launch_cycles, run_plan
from accel_sim.errors import UserInputError
from accel_sim.model_run.defaults import DEFAULT_ARCH, DEFAULT_STATS  # noqa: F401 - re-exported
from accel_sim.model_run.stats import KindStats
from accel_sim.report.warm import warm_imports
from accel_sim.workers import map_groups
from accel_sim.workload.gemm import Gemm
from accel_sim.workload.models import (
    ATTENTION_KINDS,
    ModelSpec,
    VectorWork,
    attention_matmuls,
    load_model,
    lower,
)
from accel_sim.workload.trace import Trace, load_trace

if TYPE_CHECKING:  # pandas loads on first use (worker processes fork without it)
    import pandas as pd

ROW_COLUMNS = ["dataflow", "row", "op", "group", "kind", "run_as", "M", "K", "N", "elements",
               "count", "cycles", "compute_cycles", "stall_cycles", "launch_cycles", "time_s",
               "macs", "vector_flops", "energy_pj", "utilization"]  # fmt: skip
EXTRA_COLUMNS = ["rel_error", "table_channels", "outlier_channels", "ops_set_skip_fraction",
                 "ops_tile_skip_fraction"]  # fmt: skip


@dataclass(frozen=True, eq=False)
class ModelResult:
    """One model phase on one architecture under several dataflows.

    ``table``: one row per (GEMM or vector row, dataflow), cycles covering the row's ``count``.
    ``totals``: one row per dataflow (cycles, time_s, energy_pj, linear/attention/vector
    cycles, ``speedup_vs_w8a8`` when w8a8 ran, ``tokens_per_s``: generated tokens per second for
    decode, prompt tokens per second for prefill). ``by_kind``: cycles per (dataflow, group, kind).
    """

    arch: str
    arch_path: str
    model: str
    phase: str
    tokens: int
    batch: int
    kv_len: int
    extra_prefix_tokens: int
    clock_hz: float
    stats_source: str
    arch_scope: str
    table: pd.DataFrame
    totals: pd.DataFrame
    by_kind: pd.DataFrame
    notes: tuple[str, ...] = field(default_factory=tuple)

    def header(self) -> str:
        shape = f"T={self.tokens} B={self.batch} kv_len={self.kv_len}" + (
            f" prefix={self.extra_prefix_tokens}" if self.extra_prefix_tokens else "")  # fmt: skip
        return (f"accel-sim model · arch {self.arch} ({self.arch_scope}; {self.arch_path}) · "
                f"model {self.model} · "
                f"{self.phase} {shape} · {self.stats_source}")  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        from accel_sim.report.io import json_records as records

        meta = {k: getattr(self, k) for k in ("arch", "arch_path", "arch_scope", "model",
                                               "phase", "tokens", "batch", "kv_len",
                                               "extra_prefix_tokens", "clock_hz",
                                               "stats_source")}  # fmt: skip
        return {**meta, "notes": list(self.notes), "totals": records(self.totals),
                "by_kind": records(self.by_kind), "rows": records(self.table)}  # fmt: skip


def attention_dataflow(arch: Arch) -> str:
    """FP16 when the matrix unit has an FP16 rate, else per-tensor static INT8."""
    return "fp16" if "fp16" in arch.compute.rates else "w8a8_static"


def _vector_row(arch: Arch, spec: ModelSpec, work: VectorWork, batch: int,
                engine: str) -> dict[str, Any]:  # fmt: skip
    gated = work.kind == "activation" and spec.ffn_type == "gated_silu"
    streams = 2 if work.kind == "residual" or gated else 1
    # one op per layer (and decode step): a softmax row counts heads x batch instances
    per_op = spec.heads * batch if work.kind == "softmax" else 1
    if work.count % per_op:  # pragma: no cover - lower() always counts whole layers
        per_op = 1
    elements, ops = work.elements * per_op, work.count // per_op
    op = VectorOp(work.name, elements, work.flops_per_element, streams * elements * FP16_BYTES,
                  elements * FP16_BYTES, ops)  # fmt: skip
    plan = Plan("vector", Gemm(1, 1, 1, name=work.name), (op,))  # fmt: skip
    # split evenly over a chip's cores: every vector unit and per-core level at once
    result = run_plan(stream_view(arch), plan, engine=engine).ops[0]
    energy = price(arch, result.counts, result.cycles)
    row = {"row": work.name, "op": "vector", "group": "vector", "kind": work.kind,
           "run_as": "vector", "elements": elements, "count": ops,
           "cycles": result.cycles, "compute_cycles": 0, "stall_cycles": result.cycles,
           "time_s": result.cycles / arch.clock_hz, "macs": 0, "vector_flops": work.flops,
           "energy_pj": energy.total_pj, "utilization": 0.0}  # fmt: skip
    row["launch_cycles"] = int(result.stalls.get("launch", 0))
    return row


def _batched_launches(arch: Arch, row: dict[str, Any], result, gemm: Gemm, spec: ModelSpec,
                      batch: int, phase: str) -> dict[str, Any]:  # fmt: skip
    """``row`` with ``launch_cycles`` set; for an attention matmul, whose heads × batch
    instances are one batched kernel, the engine's per-instance launches are cut to one per
    batch of heads (cycles, stall cycles, time, leakage energy and utilization follow)."""
    charged = int(result.stalls.get("launch", 0))
    # (the attention matmuls of one layer and step: per query head, or in decode per key/value
    # head with the group's rows stacked; workload/models.py)
    batched = attention_matmuls(spec, phase) * batch if gemm.kind in ATTENTION_KINDS else 1
    over = charged - charged // batched if charged and gemm.count % batched == 0 else 0
    row["launch_cycles"] = charged - over
    if over:
        cycles = row["cycles"] - over
        row["utilization"] = row["utilization"] * row["cycles"] / cycles
        row["energy_pj"] -= price(arch, ActionCounts(), over).total_pj
        row["cycles"], row["stall_cycles"] = cycles, row["stall_cycles"] - over
        row["time_s"] = cycles / arch.clock_hz
    return row


def _gemm_row(result, gemm: Gemm, run_as: str) -> dict[str, Any]:
    row = result.row()
    out = {"row": gemm.label, "op": "gemm", "kind": gemm.kind, "run_as": run_as,
           "group": "attention" if gemm.kind in ATTENTION_KINDS else "linear",
           "elements": 0, "vector_flops": 0.0}  # fmt: skip
    for key in ROW_COLUMNS + EXTRA_COLUMNS:
        if key in row and key not in out and key != "dataflow":
            out[key] = row[key]
    return out


def simulate_model(
    arch: Arch | str | Path, model: ModelSpec | str | Path, phase: str = "prefill",
    tokens: int = 2048, batch: int = 1, kv_len: int = 0, dataflows=("w8a8",),
    knobs: dict[str, dict[str, Any]] | None = None,
    stats_from: str | Path | Trace | None = DEFAULT_STATS, extra_prefix_tokens: int = 0,
    engine: str = "des", progress: bool = False, logits: str = "all", jobs: int = 1,
) -> ModelResult:  # fmt: skip
    """Simulate one phase of a model under each dataflow (module docstring: assumptions).

    Args:
        dataflows: names, or ``("all",)`` for every registered dataflow.
        knobs: dataflow name → its knobs (for the linear GEMMs).
        stats_from: a trace (name, path or :class:`Trace`) whose statistics are used by layer
            kind, or ``None``.
        extra_prefix_tokens: PrefixQuant's prefixed tokens already in the KV cache.
        logits: LM head over ``"all"`` prompt tokens or only the ``"last"`` (``lower``).
        jobs: processes simulating the distinct GEMM rows (forked; 1 = in this process). The
            result is the same for any value.
    """
    arch = load_arch(arch)
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    if isinstance(dataflows, Mapping) or not isinstance(dataflows, str | Iterable):
        raise UserInputError("dataflows", f"must be a name or a list of names, got {dataflows!r}")
    check_knob_map(knobs, "simulate_model()")
    check_jobs(jobs, "simulate_model()")
    flows = unique([dataflows] if isinstance(dataflows, str) else dataflows)
    expanded = "all" in flows
    if expanded:
        flows = dataflow_names()
    if not flows:
        raise UserInputError("dataflows", "give at least one dataflow")
    knobs = dict(knobs or {})
    for flow in {*flows, *knobs}:
        get_dataflow(flow, "dataflows").resolve_knobs(knobs.get(flow), "knobs")
    unused = sorted(set(knobs) - set(flows))
    if unused:
        raise UserInputError("knobs", f"given for {', '.join(unused)}, which this run does not "
                             "include (add it to the dataflows)")  # fmt: skip
    work = lower(spec, phase, tokens, batch, kv_len, extra_prefix_tokens, logits=logits)
    kind_stats, source = None, "no trace statistics (data-dependent dataflows need knobs)"
    if stats_from is not None:
        trace = stats_from if isinstance(stats_from, Trace) else load_trace(stats_from)
        kind_stats = KindStats(trace)
        source = kind_stats.description
    attn_flow = attention_dataflow(arch)

    vector_rows = [_vector_row(arch, spec, v, batch, engine) for v in work.vector_ops]
    bar = _bar(len(flows) * len(work.gemms), f"{spec.name} {phase}") if progress else None
    tasks: dict[tuple, tuple] = {}
    for flow in flows if jobs > 1 else ():
        for gemm in work.gemms:
            run_as = attn_flow if gemm.kind in ATTENTION_KINDS else flow
            flow_knobs = None if run_as != flow else knobs.get(flow)
            key = (replace(gemm, name=""), run_as, json.dumps(flow_knobs, sort_keys=True))
            try:
                stats = kind_stats.stats_for(gemm) if kind_stats else None
            except UserInputError:
                continue  # raised (or the flow skipped) by the loop below
            tasks.setdefault(key, (arch, gemm, run_as, flow_knobs, stats, engine))
    # the rows of one shape go to one worker (the dataflows share matmuls: W8A8's INT8 matmul
    # is MUXQ's, attention's FP16 ones are every dataflow's), the most work first (the longest
    # start first, so the workers finish together)
    groups: dict[tuple, list[tuple]] = {}
    for key in tasks:
        groups.setdefault((key[0].M, key[0].K, key[0].N, key[0].count), []).append(key)
    order = sorted(groups.values(), key=lambda g: -len(g) * g[0][0].macs * g[0][0].count)
    cache: dict[tuple, Any] = {}
    # pandas, for the tables, loads while the workers run
    calls = [{k: tasks[k] for k in g} for g in order]
    for part in map_groups(simulate, calls, jobs, lambda: warm_imports("pandas")):
        cache.update(part)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for flow in flows:
        try:
            flow_rows = []
            for gemm in work.gemms:
                run_as = attn_flow if gemm.kind in ATTENTION_KINDS else flow
                flow_knobs = None if run_as != flow else knobs.get(flow)
                key = (replace(gemm, name=""), run_as, json.dumps(flow_knobs, sort_keys=True))
                if key not in cache:
                    stats = kind_stats.stats_for(gemm) if kind_stats else None
                    cache[key] = simulate(arch, gemm, run_as, flow_knobs, stats, engine)
                row = _gemm_row(cache[key], gemm, run_as)
                row = _batched_launches(arch, row, cache[key], gemm, spec, batch, phase)
                flow_rows.append({"dataflow": flow, **row})
                if bar is not None:
                    bar.update()
        except UserInputError as err:
            if not expanded or flow in knobs:  # the user's own knob must not drop the flow
                raise
            skipped[flow] = str(err)
            continue
        rows += flow_rows + [{"dataflow": flow, **row} for row in vector_rows]
    if bar is not None:
        bar.close()
    flows = [f for f in flows if f not in skipped]
    if not flows:
        raise UserInputError(arch.origin, f"no dataflow runs on this architecture: {skipped}")
    import pandas as pd

    table = pd.DataFrame(rows)
    cols = ROW_COLUMNS + [c for c in EXTRA_COLUMNS if c in table.columns]
    table = table.reindex(columns=cols)  # rows are grouped by dataflow, in the given order
    totals = _totals(table, flows, arch.clock_hz, work.tokens * work.batch)
    by_kind = _by_kind(table)
    notes = _notes(arch, spec, work, source, attn_flow, kind_stats, logits)
    notes += [f"{flow} skipped (does not run here): {why}" for flow, why in skipped.items()]
    return ModelResult(arch.name, arch.origin, spec.name, phase, tokens, batch, kv_len,
                       extra_prefix_tokens, arch.clock_hz, source, scope(arch), table, totals,
                       by_kind, tuple(notes))  # fmt: skip


def _bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="gemm", leave=False)


def _totals(table: pd.DataFrame, flows: list[str], clock_hz: float, tokens: int) -> pd.DataFrame:
    out = []
    for flow in flows:
        part = table[table["dataflow"] == flow]
        cycles = int(part["cycles"].sum())
        group = part.groupby("group")["cycles"].sum()
        out.append({"dataflow": flow, "cycles": cycles, "time_s": cycles / clock_hz,
                    "energy_pj": float(part["energy_pj"].sum()), "macs": int(part["macs"].sum()),
                    "linear_cycles": int(group.get("linear", 0)),
                    "attention_cycles": int(group.get("attention", 0)),
                    "vector_cycles": int(group.get("vector", 0)),
                    "launch_cycles": int(part["launch_cycles"].sum()),
                    "tokens_per_s": tokens / (cycles / clock_hz)})  # fmt: skip
    import pandas as pd

    df = pd.DataFrame(out)
    if "w8a8" in flows:
        df["speedup_vs_w8a8"] = df.loc[df["dataflow"] == "w8a8", "cycles"].iloc[0] / df["cycles"]
    return df


def _by_kind(table: pd.DataFrame) -> pd.DataFrame:
    df = table.groupby(["dataflow", "group", "kind"], sort=False, as_index=False)[
        ["cycles", "energy_pj"]].sum()  # fmt: skip
    df["share"] = df["cycles"] / df.groupby("dataflow")["cycles"].transform("sum")
    return df


def _notes(arch, spec, work, source, attn_flow, kind_stats, logits) -> list[str]:
    notes = [] if kind_stats else [source]
    notes += [
        f"attention matmuls (QKᵀ, PV) run as {attn_flow} under every dataflow, w4a4_static "
        "included (the schemes quantize linear layers; PrefixQuant's KV4 is out of scope)",
        "non-GEMM work on the vector unit at its stated flops per element (workload/models.py), "
        "FP16 in and out, one op per layer and pass (all heads at once), costed by the "
        "engine's vector-op model",
        "causal attention counted as full (dense kernel), as workload/models.py lowers it",
    ]
    if spec.kv_heads < spec.heads and work.phase == "decode":
        notes.append(f"grouped-query attention: in decode the {spec.heads // spec.kv_heads} "
                     "query heads of each key/value head are one QKᵀ and one PV matmul (rows "
                     "stacked), so a step reads each K/V head once")  # fmt: skip
    if spec.family == "decoder" and work.phase == "prefill":
        notes.append(f"LM head over {logits} prompt tokens")
    if kind_stats is not None:
        notes.append(f"{source} ({kind_stats.trace.path}): medians of fractions and errors "
                     "per kind; counts (OSC table channels, outlier channels) scaled by "
                     "K_model/K_trace and rounded; errors are the trace model's")  # fmt: skip
        if kind_stats.missing:
            notes.append(f"kinds absent from the trace ({', '.join(sorted(kind_stats.missing))})"
                         " use the median over all its GEMMs")  # fmt: skip
    if arch.cores > 1:
        notes.append(f"{scope(arch)}: each matmul split across the cores (engine/chip.py: "
                     "each core on its share of the shared levels, in lockstep, common tiles "
                     "fetched once per grid row or column; cycles of the slowest core); "
                     "non-GEMM rows and the plans' vector passes (absmax, quantize, gather) "
                     "split over every core's vector unit")  # fmt: skip
    if arch.efficiency:
        notes.append(f"efficiency factors of {arch.origin}: {dict(arch.efficiency)}")
    if launch_cycles(arch):
        notes.append(f"{arch.efficiency['launch_us']:g} µs ({launch_cycles(arch):,} cycles) per "
                     "GPU kernel launch: each matmul and vector op of a step, attention's "
                     "heads batched into one kernel (launch_cycles in the --out and --json "
                     "rows)")  # fmt: skip
    return notes
