"""Sweep points: expansion of a validated sweep, each point's content hash and its workload.

A point = (architecture parameters, dataflow, knob values, workload); its row sums the workload's
GEMMs, or for a model workload its rows as ``accel-sim model`` costs them
(``model_run.simulate_model``: linear layers and LM head under the point's dataflow with the
default trace's statistics by layer kind, attention matmuls under the architecture's attention
dataflow with one kernel launch per batch of heads, the vector work; ``attention: false`` drops
the attention rows). The hash that names its file covers accel-sim's version and the source
that computes numbers, the base architecture file, the validated architecture, the dataflow and
resolved knobs, the workload's content (a model workload's statistics trace included) and the
engine.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import accel_sim
from accel_sim.arch.load import arch_from_dict, load_arch
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.errors import UserInputError
from accel_sim.sweep.grid import arch_steps
from accel_sim.sweep.results import check_plots
from accel_sim.sweep.spec import Sweep, WorkloadSpec
from accel_sim.workload.gemm import Gemm, parse_gemm

#: Packages and files that only draw, print or parse flags (they cannot change a point's numbers).
PRESENTATION = ("tables", "report", "__pycache__")
PRESENTATION_FILES = ("cli.py", "command.py", "plot.py", "labels.py", "model_run/report.py")


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
        """The identifying columns of its row (no metrics)."""
        ids = {"point": self.index, "point_hash": self.hash, "workload": self.workload}
        ids |= {"dataflow": self.dataflow, "variant": self.variant, **self.params}
        return ids | {f"knob.{k}": v for k, v in self.knobs.items()}


def sha256(data: bytes | str) -> str:
    """Hex sha256 of bytes or of a string's UTF-8."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys (a hash input; NaN and infinities refused)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


@lru_cache(maxsize=1)
def code_sha256() -> str:
    """The simulator's source files (all of ``accel_sim`` but its presentation layers), read
    once per process: a point computed by other code is not reused."""
    root = Path(__file__).resolve().parents[1]  # accel_sim/
    files = sorted(f for f in root.rglob("*.py") if not _presentation(f.relative_to(root)))
    return sha256(b"".join(str(f.relative_to(root)).encode() + f.read_bytes() for f in files))


def _presentation(relative: Path) -> bool:
    """Code that draws, prints or parses flags: it cannot change a point's numbers."""
    return (relative.parts[0].removesuffix(".py") in PRESENTATION
            or relative.name in PRESENTATION_FILES or relative.as_posix() in PRESENTATION_FILES)


def _workload(w: WorkloadSpec, src: str) -> tuple[str, dict]:
    """(label, canonical description) of a workload; names are checked here, once."""
    if w.gemm is not None or w.gemms is not None:
        gemms = [parse_gemm(t, src) for t in ([w.gemm] if w.gemms is None else w.gemms)]
        dims = [[g.M, g.K, g.N] for g in gemms]
        return w.name or "+".join(g.label for g in gemms), {"kind": "gemms", "gemms": dims}
    if w.trace is not None:
        from accel_sim.workload.trace import load_trace

        path = load_trace(w.trace).path
        sha = sha256(b"".join((path / f).read_bytes() for f in ("gemms.csv", "stats.json")))
        return w.name or path.name, {"kind": "trace", "ref": w.trace, "sha256": sha}
    from accel_sim.model_run.simulate import DEFAULT_STATS
    from accel_sim.workload.models import load_model
    from accel_sim.workload.trace import load_trace

    canon = w.model_dump(exclude={"name", "gemm", "gemms", "trace", "model"})
    sha = sha256(canonical_json(load_model(w.model).model_dump()))
    stats = load_trace(DEFAULT_STATS).path
    stats_sha = sha256(b"".join((stats / f).read_bytes() for f in ("gemms.csv", "stats.json")))
    canon |= {"kind": "model", "ref": w.model, "sha256": sha, "stats_sha256": stats_sha}
    return w.name or f"{w.model}:{w.phase}:T{w.tokens}:kv{w.kv_len}:B{w.batch}", canon


@lru_cache(maxsize=32)
def workload_gemms(canon_json: str) -> tuple[tuple, tuple]:
    """(GEMMs, their statistics or None) of a canonical workload (its JSON, for the cache)."""
    canon = json.loads(canon_json)
    if canon["kind"] == "gemms":
        return tuple(Gemm(*dims) for dims in canon["gemms"]), (None,) * len(canon["gemms"])
    if canon["kind"] == "trace":
        from accel_sim.workload.trace import load_trace

        trace = load_trace(canon["ref"])
        return trace.gemms, tuple(trace.stats_for(g) for g in trace.gemms)
    from accel_sim.model_run.simulate import DEFAULT_STATS
    from accel_sim.model_run.stats import KindStats
    from accel_sim.workload.models import ATTENTION_KINDS, load_model, lower
    from accel_sim.workload.trace import load_trace

    args = [canon[k] for k in ("phase", "tokens", "batch", "kv_len", "extra_prefix_tokens")]
    work = lower(load_model(canon["ref"]), *args, logits=canon["logits"])
    gemms = tuple(g for g in work.gemms if canon["attention"] or g.kind not in ATTENTION_KINDS)
    by_kind = KindStats(load_trace(DEFAULT_STATS))  # as accel-sim model (the dry build's)
    return gemms, tuple(by_kind.stats_for(g) for g in gemms)


def _variants(sweep: Sweep, src: str) -> list[tuple[str, dict, dict, str]]:
    """(dataflow, swept knobs, resolved knobs, label) for every dataflow × knob combination."""
    spec, variants = sweep.spec, []
    for i, name in enumerate(spec.dataflows):
        flow, grid = get_dataflow(name, f"{src}: dataflows.{i}"), spec.knobs.get(name, {})
        for given in (dict(zip(grid, combo)) for combo in itertools.product(*grid.values())):
            knobs = flow.resolve_knobs(given, f"{src}: knobs.{name}")
            tag = ",".join(f"{k}={v}" for k, v in given.items())
            variants.append((name, given, knobs, f"{name}[{tag}]" if tag else name))
    if set(spec.knobs) - set(spec.dataflows):
        raise UserInputError(src, f"knobs for a dataflow not in {spec.dataflows}", "knobs")
    return variants


def _sweep_words(message: str) -> str:
    """A dataflow's hint in a sweep file's terms: its command-line flags name sweep keys."""
    message = message.replace("run it on a trace (--trace)", "use a trace workload (trace: NAME)")
    return re.sub(r"--knob (\w+)\.(\w+)=(\w+)", r"knobs: {\1: {\2: [\3]}}", message)


def expand(sweep: Sweep) -> list[Point]:
    """All points in a deterministic order: workload, architecture axes, dataflow, knobs.
    Bad knobs, workloads and grid values are one :class:`UserInputError` before any work."""
    spec, src = sweep.spec, str(sweep.path)
    variants = _variants(sweep, src)
    workloads = [_workload(w, f"{src}: workloads.{i}") for i, w in enumerate(spec.workloads)]
    if len({label for label, _ in workloads}) != len(workloads):
        raise UserInputError(src, "two workloads have the same label; add name:", "workloads")
    for label, canon in workloads:  # a dry build catches bad knob values, missing statistics...
        gemms, stats = workload_gemms(canonical_json(canon))
        for name, _, knobs, variant in variants:
            try:
                get_dataflow(name).build(gemms[0], load_arch(spec.base_arch), stats[0], knobs)
            except UserInputError as err:
                text = str(err).removeprefix(f"{name} on {gemms[0].label}: ")
                raise UserInputError(src, f"{variant} on {label}: {_sweep_words(text)}"
                                     ) from None  # fmt: skip
    archs = []  # (params, arch dict, key of the validated architecture)
    for params, arch in arch_steps(sweep.base, sweep.axes, spec.tie, src):
        try:
            key = sha256(canonical_json(arch_from_dict(arch, "arch").model_dump(mode="json")))
        except UserInputError as err:
            raise UserInputError(src, f"{err.message} at {params}", f"grid ({err.key})") from None
        archs.append((params, arch, key))
    check_plots(spec.baseline, spec.heatmap, variants, [*archs[0][0]], src)
    version = dict(version=accel_sim.__version__, code=code_sha256(), arch_file=sweep.base_sha256)
    points: list[Point] = []
    for label, canon in workloads:
        hashed = {k: v for k, v in canon.items() if k != "ref"}
        for params, arch, arch_key in archs:
            for name, given, knobs, variant in variants:
                task = {"arch": arch, "arch_key": arch_key, "dataflow": name, "knobs": knobs,
                        "workload": canon, "engine": spec.engine}  # fmt: skip
                digest = sha256(
                    canonical_json(version | task | {"arch": arch_key, "workload": hashed})
                )
                points.append(Point(len(points), digest, label, name, variant, params, given, task))
    if len({p.hash for p in points}) != len(points):
        raise UserInputError(src, "two points have identical inputs (duplicate workloads?)")
    return points
