"""Design-space sweeps on Dask: a YAML grid of architectures × dataflows × knobs × workloads.

``workloads/sweeps/example.yaml`` is the annotated reference of the sweep file: ``base_arch``,
``grid`` (architecture parameters by dotted path, memory levels by name: ``memory.HBM.…``),
``zip`` (groups varying together), ``tie`` (a parameter copying a swept one), ``dataflows``,
``knobs`` (a grid over knob values per dataflow), ``workloads`` (``gemm``, ``gemms``, ``trace``,
``model``), ``engine``, ``baseline`` and ``heatmap``.

A point = (architecture parameters, dataflow, knob values, workload); its row sums the workload's
GEMMs. Model workloads contribute GEMMs only (linear layers, LM head and, unless ``attention:
false``, the attention matmuls, via ``models.lower``): their vector work is not in the sweep, and
without trace statistics the data-dependent dataflows use their documented no-statistics bounds.

Each finished point is written at once to ``out/points/<sha256>.parquet`` (temp file + rename);
the hash covers the accel-sim version, the base architecture file's bytes, the validated
architecture, the dataflow and its resolved knobs, the workload's content and the engine. A
restarted sweep skips points whose file exists, and ``results.parquet``/``results.csv`` are always
rebuilt from the point files in expansion order: a sweep killed and restarted ends with the same
table as an uninterrupted run.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import itertools
import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
import pydantic as pyd
import yaml

from accel_sim.errors import UserInputError

METRICS = ("gemms", "cycles", "compute_cycles", "stall_cycles", "utilization", "macs", "time_s",
           "energy_pj", "pj_per_mac", "rel_error")  # fmt: skip


def _unique(values: list) -> list:
    if len({json.dumps(v) for v in values}) != len(values):
        raise ValueError(f"values must be unique, got {values}")
    return values


Scalar = pyd.StrictBool | pyd.StrictInt | pyd.StrictFloat | pyd.StrictStr
Values = Annotated[list[Scalar], pyd.BeforeValidator(lambda v: v if isinstance(v, list) else [v]),
                   pyd.Field(min_length=1), pyd.AfterValidator(_unique)]  # fmt: skip
Strict = pyd.ConfigDict(extra="forbid", frozen=True)


class WorkloadSpec(pyd.BaseModel):
    """One workload: exactly one of ``gemm``, ``gemms``, ``trace``, ``model``."""

    model_config = Strict
    name: str | None = None
    gemm: str | None = None
    gemms: list[str] | None = pyd.Field(None, min_length=1)
    trace: str | None = None
    model: str | None = None
    phase: Literal["prefill", "decode"] | None = None
    tokens: pyd.PositiveInt | None = None
    batch: pyd.PositiveInt = 1
    kv_len: pyd.NonNegativeInt = 0
    extra_prefix_tokens: pyd.NonNegativeInt = 0
    logits: Literal["all", "last"] = "all"
    attention: pyd.StrictBool = True  # include the attention matmuls (QKᵀ, PV)

    @pyd.model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        given = [k for k in ("gemm", "gemms", "trace", "model") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of gemm, gemms, trace, model (got {given})")
        model_keys = set(self.model_fields_set) - {"name", *given}
        if self.model is None and model_keys:
            raise ValueError(f"{sorted(model_keys)} only apply to a model workload")
        if self.model is not None and (self.phase is None or self.tokens is None):
            raise ValueError("a model workload needs phase and tokens")
        return self


class SweepSpec(pyd.BaseModel):
    model_config = Strict
    name: str = ""
    description: str = ""
    base_arch: str
    engine: Literal["des", "twin"] = "des"
    grid: dict[str, Values] = {}
    zip: list[dict[str, Values]] = []
    tie: dict[str, str] = {}
    dataflows: Annotated[list[str], pyd.Field(min_length=1), pyd.AfterValidator(_unique)]
    knobs: dict[str, dict[str, Values]] = {}
    workloads: list[WorkloadSpec] = pyd.Field(min_length=1)
    baseline: str | None = None
    heatmap: list[str] | None = pyd.Field(None, min_length=2, max_length=2)


@dataclass(frozen=True)
class Point:
    """One simulation point; ``task`` is what a worker needs, ``hash`` keys its result file."""

    index: int
    hash: str
    workload: str
    dataflow: str
    variant: str
    params: dict[str, Any]
    knobs: dict[str, Any]
    task: dict[str, Any]

    def columns(self) -> dict[str, Any]:
        ids = {"point": self.index, "point_hash": self.hash, "workload": self.workload}
        ids |= {"dataflow": self.dataflow, "variant": self.variant, **self.params}
        return ids | {f"knob.{k}": v for k, v in self.knobs.items()}


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _set_path(arch: dict, path: str, value: Any, source: str) -> None:
    """``compute.rates.fp4`` / ``memory.HBM.read_bytes_per_cycle`` / ``memory.0.…`` := value."""
    *parents, leaf = path.split(".")
    node: Any = arch
    for part in parents:
        if isinstance(node, list):  # memory levels: by name or by index
            names = [m.get("name") for m in node]
            index = int(part) if part.isdigit() else names.index(part) if part in names else None
            if index is None or index >= len(node):
                raise UserInputError(source, f"no level {part!r}; levels: {names}", path)
            node = node[index]
        elif isinstance(node.get(part), dict | list):
            node = node[part]
        else:
            raise UserInputError(source, f"{part!r} is not a section of the architecture", path)
    if not isinstance(node, dict):
        raise UserInputError(source, "does not name an architecture field", path)
    node[leaf] = value


def _error(err: pyd.ValidationError, source: str) -> UserInputError:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    return UserInputError(source, message.removeprefix("Value error, "), key or None)


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepSpec
    base: dict  # the base architecture file, parsed
    base_sha256: str
    axes: tuple[tuple[tuple[str, ...], tuple[tuple, ...]], ...]  # (paths, value tuples) per axis


def load_spec(path: str | Path) -> Sweep:
    """Parse and validate a sweep file; every problem is one :class:`UserInputError`."""
    from accel_sim.arch.load import load_arch, resolve_arch_path

    path, src = Path(path), str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = SweepSpec.model_validate(data)
    except OSError:
        raise UserInputError(src, "sweep file not found or unreadable") from None
    except yaml.YAMLError as err:
        raise UserInputError(src, f"malformed YAML: {getattr(err, 'problem', err)}") from None
    except pyd.ValidationError as err:
        first = err.errors()[0]
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        key = ".".join(str(p) for p in first["loc"]) or None
        raise UserInputError(src, message.removeprefix("Value error, "), key) from None
    arch_path = resolve_arch_path(spec.base_arch)
    load_arch(arch_path)  # a bad base architecture is reported against its own file
    raw = arch_path.read_bytes()
    axes = [((p,), tuple((v,) for v in vs)) for p, vs in spec.grid.items()]
    for i, group in enumerate(spec.zip):
        if len({len(v) for v in group.values()}) != 1:
            raise UserInputError(src, "the lists of a zip group must have equal lengths", f"zip.{i}")
        axes.append((tuple(group), tuple(zip(*group.values()))))
    swept = [p for paths, _ in axes for p in paths]
    if len(set(swept)) != len(swept):
        raise UserInputError(src, "a parameter appears in more than one axis", "grid")
    for target, source in spec.tie.items():
        if source not in swept or target in swept:
            raise UserInputError(src, f"must tie a new parameter to one of {swept}", f"tie.{target}")
    base = yaml.safe_load(raw)
    for name in swept + list(spec.tie):
        _set_path(copy.deepcopy(base), name, 0, src)  # the path exists (values checked later)
    return Sweep(path, spec, base, _sha256(raw), tuple(axes))


def _workload(w: WorkloadSpec, src: str, key: str) -> tuple[str, dict]:
    """(label, canonical description) of a workload; names are checked here, once."""
    from accel_sim.workload.gemm import parse_gemm

    if w.gemm is not None or w.gemms is not None:
        texts = [w.gemm] if w.gemm is not None else list(w.gemms)
        gemms = [parse_gemm(t, f"{src}: {key}") for t in texts]
        dims = [[g.M, g.K, g.N] for g in gemms]
        return w.name or "+".join(g.label for g in gemms), {"kind": "gemms", "gemms": dims}
    if w.trace is not None:
        from accel_sim.workload.trace import load_trace

        trace = load_trace(w.trace)
        sha = _sha256(b"".join((trace.path / f).read_bytes() for f in ("gemms.csv", "stats.json")))
        return w.name or trace.path.name, {"kind": "trace", "ref": w.trace, "sha256": sha}
    from accel_sim.workload.models import load_model

    spec = load_model(w.model)
    lower = {k: getattr(w, k) for k in ("phase", "tokens", "batch", "kv_len",
                                         "extra_prefix_tokens", "logits", "attention")}  # fmt: skip
    label = w.name or f"{w.model}:{w.phase}:T{w.tokens}:kv{w.kv_len}:B{w.batch}"
    return label, {"kind": "model", "ref": w.model, "sha256": _sha256(_canonical(spec.model_dump())),
                   **lower}  # fmt: skip


def expand(sweep: Sweep) -> list[Point]:
    """All points in a deterministic order: workload, architecture axes, dataflow, knobs."""
    import accel_sim
    from accel_sim.arch.load import arch_from_dict
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.workload.gemm import Gemm

    spec, src = sweep.spec, str(sweep.path)
    variants = []  # (dataflow, given knobs, resolved knobs)
    for name in spec.knobs:
        if name not in spec.dataflows:
            raise UserInputError(src, f"{name!r} is not in dataflows {spec.dataflows}", "knobs")
    base_arch = arch_from_dict(copy.deepcopy(sweep.base), src)
    for i, name in enumerate(spec.dataflows):
        flow = get_dataflow(name, f"{src}: dataflows.{i}")
        grid = spec.knobs.get(name, {})
        for combo in itertools.product(*grid.values()):
            given = dict(zip(grid, combo))
            resolved = flow.resolve_knobs(given, f"{src}: knobs.{name}")
            flow.build(Gemm(64, 64, 64), base_arch, None, resolved)  # knob values checked early
            variants.append((name, given, resolved))
    workloads, labels = [], set()
    for i, w in enumerate(spec.workloads):
        label, canon = _workload(w, src, f"workloads.{i}")
        if label in labels:
            raise UserInputError(src, f"two workloads are named {label!r}; add name:", "workloads")
        labels.add(label)
        workloads.append((label, canon))
    archs = []  # (params, arch dict, arch key)
    for combo in itertools.product(*sweep.values):
        params = {p: v for paths, vals in zip(sweep.axes, combo) for p, v in zip(paths, vals)}
        params |= {t: params[s] for t, s in spec.tie.items()}
        arch = copy.deepcopy(sweep.base)
        for p, v in params.items():
            _set_path(arch, p, v, src)
        try:
            validated = arch_from_dict(arch, "arch")
        except UserInputError as err:
            raise UserInputError(src, f"{err.message} at {params}", f"grid ({err.key})") from None
        key = _sha256(_canonical(validated.model_dump(mode="json")))
        archs.append((params, arch, key))
    points: list[Point] = []
    for label, canon in workloads:
        hashed = {k: v for k, v in canon.items() if k != "ref"}
        for params, arch, arch_key in archs:
            for name, given, resolved in variants:
                inputs = {"accel_sim": accel_sim.__version__, "base_arch_sha256": sweep.base_sha256,
                          "arch": arch_key, "dataflow": name, "knobs": resolved,
                          "workload": hashed, "engine": spec.engine}  # fmt: skip
                digest = _sha256(_canonical(inputs))
                tag = ",".join(f"{k}={v}" for k, v in given.items())
                task = {"arch": arch, "arch_key": arch_key, "dataflow": name, "knobs": resolved,
                        "workload": canon, "engine": spec.engine}  # fmt: skip
                variant = f"{name}[{tag}]" if tag else name
                points.append(Point(len(points), digest, label, name, variant, params, given, task))
    if len({p.hash for p in points}) != len(points):
        raise UserInputError(src, "two points have identical inputs (duplicate workloads?)")
    return points


# ---- worker side -------------------------------------------------------------------------------

_ARCHS: dict[str, Any] = {}  # never evicted: the engine's matmul cache keys on id(arch)


@lru_cache(maxsize=32)
def _gemms(canon_json: str) -> tuple[tuple, tuple]:
    """(GEMMs, their statistics or None) of a canonical workload."""
    from accel_sim.workload.gemm import Gemm

    canon = json.loads(canon_json)
    if canon["kind"] == "gemms":
        gemms = tuple(Gemm(*dims) for dims in canon["gemms"])
        return gemms, (None,) * len(gemms)
    if canon["kind"] == "trace":
        from accel_sim.workload.trace import load_trace

        trace = load_trace(canon["ref"])
        return trace.gemms, tuple(trace.stats_for(g) for g in trace.gemms)
    from accel_sim.workload.models import ATTENTION_KINDS, load_model, lower

    args = [canon[k] for k in ("phase", "tokens", "batch", "kv_len", "extra_prefix_tokens")]
    work = lower(load_model(canon["ref"]), *args, logits=canon["logits"])
    gemms = tuple(g for g in work.gemms if canon["attention"] or g.kind not in ATTENTION_KINDS)
    return gemms, (None,) * len(gemms)


def run_point(task: dict) -> dict[str, Any]:
    """Simulate one point (all GEMMs of its workload) and sum; runs on a Dask worker."""
    from accel_sim.api import simulate
    from accel_sim.arch.load import arch_from_dict

    try:
        arch = _ARCHS.get(task["arch_key"])
        if arch is None:
            arch = _ARCHS[task["arch_key"]] = arch_from_dict(task["arch"], "sweep point")
        gemms, stats = _gemms(_canonical(task["workload"]))
        results = [simulate(arch, g, task["dataflow"], task["knobs"], s, task["engine"])
                   for g, s in zip(gemms, stats)]  # fmt: skip
    except UserInputError as err:  # its constructor does not survive pickling: send text
        return {"__error__": str(err)}
    row: dict[str, Any] = {"gemms": len(results)}
    for key in ("cycles", "compute_cycles", "stall_cycles", "macs"):
        row[key] = int(sum(getattr(r, key) for r in results))
    row["time_s"] = math.fsum(r.time_s for r in results)
    row["energy_pj"] = math.fsum(r.energy_pj for r in results)
    busy = math.fsum(r.utilization * r.cycles for r in results)
    row["utilization"] = busy / row["cycles"] if row["cycles"] else 0.0
    row["pj_per_mac"] = row["energy_pj"] / row["macs"]
    errs = [(r.extra["rel_error"], r.macs) for r in results if r.extra.get("rel_error") is not None]
    row["rel_error"] = math.fsum(e * m for e, m in errs) / sum(m for _, m in errs) if errs else None
    for comp in sorted({c for r in results for c in r.energy_breakdown_pj}):
        row[f"energy_{comp}_pj"] = math.fsum(r.energy_breakdown_pj.get(comp, 0.0) for r in results)
    return row


# ---- client side -------------------------------------------------------------------------------


def _write_point(path: Path, row: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    try:
        pq.write_table(pa.Table.from_pylist([row]), tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _execute(todo: list[Point], points_dir: Path, scheduler, bar, src: str) -> None:
    def finish(point: Point, row: dict) -> None:
        if "__error__" in row:
            raise UserInputError(src, f"point {point.index} ({point.variant} on "
                                 f"{point.workload}): {row['__error__']}")  # fmt: skip
        _write_point(points_dir / f"{point.hash}.parquet", point.columns() | row)
        bar.update()

    if scheduler == "synchronous":  # in-process, no Dask (tests, debugging)
        for point in todo:
            finish(point, run_point(point.task))
        return
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = client = None
    try:
        if scheduler is None:
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)  # fmt: skip
            client = Client(cluster)
        elif isinstance(scheduler, str):
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, ValueError, TypeError) as err:
                raise UserInputError("--scheduler", f"cannot reach {scheduler!r}: {err}") from None
        submit = (client or scheduler).submit
        futures = [submit(run_point, p.task, key=f"sweep-{p.hash}") for p in todo]
        by_key = dict(zip((f.key for f in futures), todo))
        for future in as_completed(futures):
            finish(by_key[future.key], future.result())
            future.release()
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _assemble(points: list[Point], points_dir: Path, baseline: str | None) -> pd.DataFrame:
    """The results table, rebuilt from the point files in expansion order."""
    import pyarrow.parquet as pq

    from accel_sim.sweep_plot import add_pareto, add_speedup

    rows = []
    for point in points:
        stored = pq.read_table(points_dir / f"{point.hash}.parquet").to_pylist()[0]
        metrics = {k: v for k, v in stored.items() if k in METRICS or k.startswith("energy_")}
        rows.append(point.columns() | metrics)
    df = pd.DataFrame(rows)
    energy = sorted(c for c in df.columns if c.startswith("energy_") and c != "energy_pj")
    df[energy] = df[energy].fillna(0.0)
    ids = [c for c in df.columns if c not in METRICS and c not in energy]
    df = df[ids + [c for c in METRICS if c in df.columns] + energy]
    df = add_speedup(df, baseline or points[0].variant, [*points[0].params, "workload"])
    return add_pareto(df).sort_values("point", kind="stable").reset_index(drop=True)


def _clean_temp(points_dir: Path) -> None:
    for tmp in points_dir.glob(".*.tmp"):  # left by a killed run (its rename never happened)
        tmp.unlink(missing_ok=True)


def run_sweep(spec_path: str | Path, out_dir: str | Path, scheduler=None,
              progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run (or resume) a sweep; returns the results table, also written to ``out_dir``.

    Args:
        spec_path: the sweep YAML (module docstring).
        out_dir: output folder: ``points/<hash>.parquet`` per point, ``results.parquet``,
            ``results.csv``, ``pareto.png``, ``heatmap.png``.
        scheduler: ``None`` for a LocalCluster (2 worker processes, 1 thread each), a scheduler
            address (``tcp://host:8786``) or a ``distributed.Client``, or ``"synchronous"`` to run
            in this process without Dask.
        progress: show a tqdm bar on stderr.
    """
    from tqdm import tqdm

    from accel_sim.report.io import write_table
    from accel_sim.sweep_plot import plot_heatmap, plot_pareto

    started = time.perf_counter()
    sweep = load_spec(spec_path)
    points = expand(sweep)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserInputError(str(out), "--out must be a directory")
    points_dir = out / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    _clean_temp(points_dir)
    todo = [p for p in points if not (points_dir / f"{p.hash}.parquet").is_file()]
    name = sweep.spec.name or sweep.path.stem
    print(f"sweep {name}: {len(points)} points, {len(points) - len(todo)} already done, "
          f"computing {len(todo)}", file=sys.stderr, flush=True)  # fmt: skip
    bar = tqdm(total=len(points), initial=len(points) - len(todo), disable=not progress,
               desc=f"sweep {name}", unit="pt", file=sys.stderr, dynamic_ncols=True)  # fmt: skip
    try:
        if todo:
            _execute(todo, points_dir, scheduler, bar, str(sweep.path))
    finally:
        bar.close()
    df = _assemble(points, points_dir, sweep.spec.baseline)
    write_table(df, out / "results.parquet")
    write_table(df, out / "results.csv")
    plot_pareto(df, out / "pareto.png")
    axes = sweep.spec.heatmap or ([p for paths in sweep.axes for p in paths] + ["workload"])[:2]
    plot_heatmap(df, out / "heatmap.png", axes, baseline=df.attrs["baseline"])
    print(f"sweep {name}: {len(df)} points in {time.perf_counter() - started:.1f} s -> "
          f"{out}/results.parquet", file=sys.stderr, flush=True)  # fmt: skip
    return df


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``accel-sim sweep SPEC.yaml --out DIR [--scheduler ADDR] [--no-progress]``."""
    parser = subparsers.add_parser("sweep", help="design-space sweep on Dask (YAML grid)")
    parser.add_argument("spec", help="sweep YAML (see workloads/sweeps/example.yaml)")
    parser.add_argument("--out", required=True, help="output directory (resumable)")
    parser.add_argument(
        "--scheduler",
        help="Dask scheduler address, e.g. tcp://host:8786 "
        "(default: a local cluster of 2 processes; 'synchronous': no Dask)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_cmd_sweep)
    return parser


def _cmd_sweep(args) -> int:
    df = run_sweep(args.spec, args.out, scheduler=args.scheduler, progress=not args.no_progress)
    cols = ["workload", "variant", *[c for c in df.columns if "." in c and not c.startswith("knob")],
            "cycles", "energy_pj", "speedup"]  # fmt: skip
    front = df[df["pareto"]][cols]
    print(f"Pareto front (cycles vs energy, per workload; baseline {df.attrs['baseline']}):")
    print(front.to_string(index=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m accel_sim.sweep SPEC --out DIR``: the same command without the full CLI."""
    parser = argparse.ArgumentParser(prog="accel-sim")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sweep", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except UserInputError as err:
        print(f"accel-sim: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
