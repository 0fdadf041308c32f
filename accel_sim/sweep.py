"""Design-space sweeps on Dask: a YAML grid of architectures × dataflows × knobs × workloads.

``workloads/sweeps/example.yaml`` documents the sweep file. A point = (architecture parameters,
dataflow, knob values, workload); its row sums the workload's GEMMs (a model workload's GEMMs via
``models.lower``: linear layers, LM head, attention matmuls unless ``attention: false``; its vector
work is left out). Each finished point is written at once to ``points/<sha256>.parquet``, hashing
accel-sim's version and simulator source, the base architecture file, the validated architecture,
the dataflow and resolved knobs, the workload's content and the engine; a rerun skips done points
and rebuilds the table from the files, so a killed and restarted sweep ends with the same table.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import itertools
import json
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
import pydantic as pyd
import yaml

import accel_sim
from accel_sim import sweep_plot as results
from accel_sim.api import simulate
from accel_sim.arch.load import arch_from_dict, load_arch, resolve_arch_path
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_gemm

METRICS = ("gemms", "cycles", "compute_cycles", "stall_cycles", "utilization", "macs", "time_s",
           "energy_pj", "pj_per_mac", "rel_error")  # fmt: skip


Scalar = pyd.StrictBool | pyd.StrictInt | pyd.StrictFloat | pyd.StrictStr
Values = Annotated[list[Scalar], pyd.BeforeValidator(lambda v: v if isinstance(v, list) else [v]),
                   pyd.Field(min_length=1)]  # a scalar is a one-value list  # fmt: skip
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
    dataflows: list[str] = pyd.Field(min_length=1)
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


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _code_sha256() -> str:
    """The simulator's source files: a point computed by other code is not reused."""
    root, rooms = (
        Path(__file__).parent,
        ("arch", "dataflow", "energy", "engine", "quant", "workload"),
    )
    files = [root / "api.py", *sorted(f for room in rooms for f in (root / room).glob("*.py"))]
    return _sha256(b"".join(f.read_bytes() for f in files))


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


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepSpec
    base: dict  # the base architecture file, parsed
    base_sha256: str
    axes: tuple[tuple[tuple[str, ...], tuple[tuple, ...]], ...]  # (paths, value tuples) per axis


def load_spec(path: str | Path) -> Sweep:
    """Parse and validate a sweep file; every problem is one :class:`UserInputError`."""

    path, src = Path(path), str(path)
    try:
        spec = SweepSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as err:
        raise UserInputError(src, f"cannot read the sweep file ({type(err).__name__})") from None
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
            raise UserInputError(src, "lists of a zip group differ in length", f"zip.{i}")
        axes.append((tuple(group), tuple(zip(*group.values()))))
    swept = [p for paths, _ in axes for p in paths]
    if len(set(swept)) != len(swept):
        raise UserInputError(src, "a parameter appears in more than one axis", "grid")
    for target, source in spec.tie.items():
        if source not in swept or target in swept:
            raise UserInputError(src, f"tie a new parameter to one of {swept}", f"tie.{target}")
    return Sweep(path, spec, yaml.safe_load(raw), _sha256(raw), tuple(axes))


def _workload(w: WorkloadSpec, src: str) -> tuple[str, dict]:
    """(label, canonical description) of a workload; names are checked here, once."""
    if w.gemm is not None or w.gemms is not None:
        gemms = [parse_gemm(t, src) for t in ([w.gemm] if w.gemms is None else w.gemms)]
        dims = [[g.M, g.K, g.N] for g in gemms]
        return w.name or "+".join(g.label for g in gemms), {"kind": "gemms", "gemms": dims}
    if w.trace is not None:
        from accel_sim.workload.trace import load_trace

        path = load_trace(w.trace).path
        sha = _sha256(b"".join((path / f).read_bytes() for f in ("gemms.csv", "stats.json")))
        return w.name or path.name, {"kind": "trace", "ref": w.trace, "sha256": sha}
    from accel_sim.workload.models import load_model

    canon = w.model_dump(exclude={"name", "gemm", "gemms", "trace", "model"})
    sha = _sha256(_json(load_model(w.model).model_dump()))
    canon |= {"kind": "model", "ref": w.model, "sha256": sha}
    return w.name or f"{w.model}:{w.phase}:T{w.tokens}:kv{w.kv_len}:B{w.batch}", canon


def expand(sweep: Sweep) -> list[Point]:
    """All points in a deterministic order: workload, architecture axes, dataflow, knobs."""
    spec, src = sweep.spec, str(sweep.path)
    variants = []  # (dataflow, swept knobs, resolved knobs, label)
    for i, name in enumerate(spec.dataflows):
        flow, grid = get_dataflow(name, f"{src}: dataflows.{i}"), spec.knobs.get(name, {})
        for given in (dict(zip(grid, combo)) for combo in itertools.product(*grid.values())):
            knobs = flow.resolve_knobs(given, f"{src}: knobs.{name}")
            tag = ",".join(f"{k}={v}" for k, v in given.items())
            variants.append((name, given, knobs, f"{name}[{tag}]" if tag else name))
    if set(spec.knobs) - set(spec.dataflows):
        raise UserInputError(src, f"knobs for a dataflow not in {spec.dataflows}", "knobs")
    workloads = [_workload(w, f"{src}: workloads.{i}") for i, w in enumerate(spec.workloads)]
    if len({label for label, _ in workloads}) != len(workloads):
        raise UserInputError(src, "two workloads have the same label; add name:", "workloads")
    for label, canon in workloads:  # a dry build catches bad knob values, missing statistics...
        gemms, stats = _gemms(_json(canon))
        for name, _, knobs, variant in variants:
            try:
                get_dataflow(name).build(gemms[0], load_arch(spec.base_arch), stats[0], knobs)
            except UserInputError as err:
                raise UserInputError(src, f"{variant} on {label}: {err}") from None
    archs = []  # (params, arch dict, arch key)
    for combo in itertools.product(*(values for _, values in sweep.axes)):
        params = {p: v for (paths, _), vals in zip(sweep.axes, combo) for p, v in zip(paths, vals)}
        params |= {target: params[source] for target, source in spec.tie.items()}
        arch = copy.deepcopy(sweep.base)
        for name, value in params.items():
            _set_path(arch, name, value, src)
        try:
            key = _sha256(_json(arch_from_dict(arch, "arch").model_dump(mode="json")))
        except UserInputError as err:
            raise UserInputError(src, f"{err.message} at {params}", f"grid ({err.key})") from None
        archs.append((params, arch, key))
    results.check_plots(spec.baseline, spec.heatmap, variants, [*archs[0][0]], src)
    version = dict(version=accel_sim.__version__, code=_code_sha256(), arch_file=sweep.base_sha256)
    points: list[Point] = []
    for label, canon in workloads:
        hashed = {k: v for k, v in canon.items() if k != "ref"}
        for params, arch, arch_key in archs:
            for name, given, knobs, variant in variants:
                task = {"arch": arch, "arch_key": arch_key, "dataflow": name, "knobs": knobs,
                        "workload": canon, "engine": spec.engine}  # fmt: skip
                digest = _sha256(_json(version | task | {"arch": arch_key, "workload": hashed}))
                points.append(Point(len(points), digest, label, name, variant, params, given, task))
    if len({p.hash for p in points}) != len(points):
        raise UserInputError(src, "two points have identical inputs (duplicate workloads?)")
    return points


_ARCHS: dict[str, Any] = {}  # never evicted: the engine's matmul cache keys on id(arch)


@lru_cache(maxsize=32)
def _gemms(canon_json: str) -> tuple[tuple, tuple]:
    """(GEMMs, their statistics or None) of a canonical workload."""
    canon = json.loads(canon_json)
    if canon["kind"] == "gemms":
        return tuple(Gemm(*dims) for dims in canon["gemms"]), (None,) * len(canon["gemms"])
    if canon["kind"] == "trace":
        from accel_sim.workload.trace import load_trace

        trace = load_trace(canon["ref"])
        return trace.gemms, tuple(trace.stats_for(g) for g in trace.gemms)
    from accel_sim.workload.models import ATTENTION_KINDS, load_model, lower

    args = [canon[k] for k in ("phase", "tokens", "batch", "kv_len", "extra_prefix_tokens")]
    work = lower(load_model(canon["ref"]), *args, logits=canon["logits"])
    gemms = tuple(g for g in work.gemms if canon["attention"] or g.kind not in ATTENTION_KINDS)
    return gemms, (None,) * len(gemms)


def run_points(batch: str, points_dir: str | None) -> list[dict[str, Any]]:
    """Simulate a batch of points (one Dask task, as JSON: Dask does not walk a string). A row
    sums its workload's GEMMs; with ``points_dir`` (our disk) its file is written here at once."""
    rows = []
    for item in json.loads(batch):
        task, key = item["task"], item["task"]["arch_key"]
        try:
            arch = _ARCHS.get(key) or _ARCHS.setdefault(key, arch_from_dict(task["arch"], "arch"))
            gemms, stats = _gemms(_json(task["workload"]))
            runs = [simulate(arch, g, task["dataflow"], task["knobs"], s, task["engine"])
                    for g, s in zip(gemms, stats)]  # fmt: skip
            row = results.point_row(runs)
        except UserInputError as err:  # its constructor does not survive pickling: send text
            row = {"__error__": str(err)}
        if points_dir and "__error__" not in row:
            results.write_point(Path(points_dir) / f"{item['hash']}.parquet", item["columns"] | row)
            row = {}
        rows.append(row)
    return rows


def _execute(todo: list[Point], points_dir: Path, scheduler, bar, src: str) -> None:
    def finish(point: Point, row: dict) -> None:
        if "__error__" in row:
            raise UserInputError(src, f"point {point.index} ({point.variant} on "
                                 f"{point.workload}): {row['__error__']}")  # fmt: skip
        if row:  # else it was written where it was computed
            results.write_point(points_dir / f"{point.hash}.parquet", point.columns() | row)
        bar.update()

    def submit(chunk: list[Point], local: bool):
        items = [{"task": p.task, "hash": p.hash, "columns": p.columns()} for p in chunk]
        return _json(items), local and str(points_dir)

    if scheduler == "synchronous":  # in-process, no Dask (tests, debugging)
        for point in todo:
            finish(point, run_points(*submit([point], True))[0])
        return
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = client = None
    try:
        if scheduler is None:
            with warnings.catch_warnings():  # "port 8787 in use": the disabled dashboard's port
                warnings.simplefilter("ignore", UserWarning)
                cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                                       processes=True, silence_logs=logging.CRITICAL)  # fmt: skip
            client = Client(cluster)
        elif isinstance(scheduler, str):
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, ValueError, TypeError) as err:  # unreachable or malformed address
                raise UserInputError("--scheduler", f"{scheduler!r}: {err}") from None
        client, local = client or scheduler, cluster is not None
        # ~16 batches per worker: Dask's per-task cost stays small and points land within ~1 s
        size = max(1, min(25, len(todo) // (16 * max(1, len(client.nthreads())))))
        batches = {}
        for chunk in (todo[i : i + size] for i in range(0, len(todo), size)):
            key = "sweep-" + _sha256("".join(p.hash for p in chunk))
            batches[key] = (chunk, client.submit(run_points, *submit(chunk, local), key=key))
        for future, rows in as_completed([f for _, f in batches.values()], with_results=True):
            for point, row in zip(batches[future.key][0], rows):
                finish(point, row)
            future.release()
    finally:
        for resource in (client, cluster):  # a Client passed in stays open
            resource is not None and resource is not scheduler and resource.close()


def run_sweep(spec_path: str | Path, out_dir: str | Path, scheduler=None,
              progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run or resume a sweep; the table is returned and written to ``out_dir`` (``points/``,
    ``results.parquet``, ``results.csv``, ``pareto.png``, ``heatmap.png``). ``scheduler``: ``None``
    = a LocalCluster (2 worker processes × 1 thread, no dashboard); an address (``tcp://h:8786``:
    its workers need accel-sim with the named traces and models) or a ``distributed.Client``;
    ``"synchronous"`` = in this process, without Dask."""
    from tqdm import tqdm

    started, sweep, out = time.perf_counter(), load_spec(spec_path), Path(out_dir)
    points, points_dir = expand(sweep), out / "points"
    todo = results.pending(points, points_dir)
    name, done = sweep.spec.name or sweep.path.stem, len(points) - len(todo)
    print(f"sweep {name}: {len(points)} points, {done} already done, computing {len(todo)}",
          file=sys.stderr, flush=True)  # fmt: skip
    bar = tqdm(total=len(points), initial=done, disable=not progress, desc=f"sweep {name}",
               unit="pt", file=sys.stderr, dynamic_ncols=True)  # fmt: skip
    with bar:
        if todo:
            _execute(todo, points_dir, scheduler, bar, str(sweep.path))
    swept = [*points[0].params]
    df = results.read_points(points, points_dir, METRICS, sweep.spec.baseline, [*swept, "workload"])
    results.write_outputs(df, out, sweep.spec.heatmap or [*swept, "workload", "variant"][:2])
    print(f"sweep {name}: {len(df)} points in {time.perf_counter() - started:.1f} s -> {out}",
          file=sys.stderr, flush=True)  # fmt: skip
    return df


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``accel-sim sweep SPEC.yaml --out DIR [--scheduler ADDR] [--no-progress]``."""
    parser = subparsers.add_parser("sweep", help="design-space sweep on Dask (YAML grid)")
    parser.add_argument("spec", help="sweep YAML (see workloads/sweeps/example.yaml)")
    parser.add_argument("--out", required=True, help="output directory (a rerun resumes)")
    parser.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786 "
                        "(default: a local 2-process cluster; 'synchronous': no Dask)")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_cmd_sweep)  # fmt: skip
    return parser


def _cmd_sweep(args) -> int:
    df = run_sweep(args.spec, args.out, scheduler=args.scheduler, progress=not args.no_progress)
    print(results.front_report(df))
    return 0
