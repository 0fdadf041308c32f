"""Running a sweep: check ``--out`` and the scheduler, compute missing points (on forked local
workers by default, on Dask where a scheduler is given), write the table and plots.

Order of a run (every user mistake is one :class:`UserInputError` before anything is written):
the sweep file and its grid size, the output directory, the expansion (dry builds), the point
files already there (trusted only with a matching checksum), the scheduler (a short TCP connect
first), then ``OUT/points`` is created and the missing points are computed. Each finished point
is written at once, so a killed and restarted sweep ends with the same table.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from accel_sim.api import simulate
from accel_sim.arch.load import arch_from_dict
from accel_sim.errors import UserInputError
from accel_sim.report.warm import warm_plots
from accel_sim.sweep import store
from accel_sim.sweep.points import Point, canonical_json, expand, sha256, workload_gemms
from accel_sim.sweep.results import build_table, is_metric, model_point_row, point_row
from accel_sim.sweep.spec import load_spec
from accel_sim.workers import can_fork, default_workers, fork_map

CONNECT_TIMEOUT_S = 3.0  # TCP connect to a --scheduler address
CLIENT_TIMEOUT_S = 10.0  # Dask handshake once the port answers

_ARCHS: dict[str, Any] = {}  # never evicted: the engine's matmul cache keys on id(arch)
#: The default scheduler on a machine that can fork: local worker processes (``fork_map``).
#: A Dask LocalCluster spawns its workers, which import accel-sim again: ~3.3 s before the
#: first point (a 2-point sweep took 6.8 s on it, 3.5 s in-process), more than some sweeps'
#: whole work (notebook 08's 36 points).
FORKED = "forked"


def _run_batch(args: tuple[str, str | None]) -> list[dict[str, Any]]:
    return run_points(*args)


def run_points(batch: str, points_dir: str | None) -> list[dict[str, Any]]:
    """Simulate a batch of points (one Dask task, as JSON: Dask does not walk a string). A row
    sums its workload's GEMMs; with ``points_dir`` (our disk) its file is written here at once
    (the row is returned either way: the table is built from it, not read back)."""
    rows = []
    for item in json.loads(batch):
        task, key = item["task"], item["task"]["arch_key"]
        try:
            arch = _ARCHS.get(key) or _ARCHS.setdefault(key, arch_from_dict(task["arch"], "arch"))
            if task["workload"]["kind"] == "model":  # as accel-sim model costs it
                row = model_point_row(arch, task["workload"], task["dataflow"], task["knobs"],
                                      task["engine"])  # fmt: skip
            else:
                gemms, stats = workload_gemms(canonical_json(task["workload"]))
                runs = [simulate(arch, g, task["dataflow"], task["knobs"], s, task["engine"])
                        for g, s in zip(gemms, stats)]  # fmt: skip
                row = point_row(runs)
        except UserInputError as err:  # its constructor does not survive pickling: send text
            row = {"__error__": str(err)}
        if points_dir and "__error__" not in row:
            store.write_point(Path(points_dir) / f"{item['hash']}.parquet", item["columns"] | row)
        rows.append(row)
    return rows


def _check_reachable(address: str) -> None:
    """One :class:`UserInputError` unless ``address`` (``tcp://host:port``) accepts a TCP
    connection within :data:`CONNECT_TIMEOUT_S` seconds."""
    scheme, _, rest = address.rpartition("://")
    if scheme in ("inproc", "ucx"):
        return  # not TCP: Dask's own timeout applies
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise UserInputError("--scheduler", f"{address!r}: expected tcp://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S).close()
    except (OSError, OverflowError) as err:
        why = f"no answer within {CONNECT_TIMEOUT_S:g} s" if isinstance(err, TimeoutError) else (
            getattr(err, "strerror", None) or str(err))  # fmt: skip
        raise UserInputError("--scheduler", f"{address!r} is unreachable ({why})") from None


def _ignore_ctrl_c() -> Any:
    """Ignore SIGINT until the returned function (idempotent) is called: processes started
    meanwhile keep ignoring it (Python installs its handler only where the signal is not
    ignored). A Ctrl-C in the terminal reaches the whole process group, and the local workers
    each printed a KeyboardInterrupt traceback while this process shut them down. Main thread
    only (elsewhere nothing is changed)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = [signal.signal(signal.SIGINT, signal.SIG_IGN)]

    def restore() -> None:
        if previous:
            signal.signal(signal.SIGINT, previous.pop())

    return restore


@contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Start processes that ignore SIGINT inside the block (:func:`_ignore_ctrl_c`)."""
    restore = _ignore_ctrl_c()
    try:
        yield
    finally:
        restore()


@contextmanager
def _client(scheduler: Any) -> Iterator[tuple[Any, bool]]:
    """(Dask client, :data:`FORKED` or None for in-process, whether its workers share our
    disk); a client passed in stays open. An unreachable address is one
    :class:`UserInputError`. The default: forked local workers, in this process where only
    one CPU is usable, a Dask LocalCluster where this process cannot fork."""
    if scheduler == "synchronous" or (scheduler is None and default_workers() <= 1):
        yield None, True  # in this process, no Dask
        return
    if scheduler is None and can_fork():
        yield FORKED, True
        return
    from dask.distributed import Client, LocalCluster

    if scheduler is None:
        with warnings.catch_warnings(), _workers_ignore_ctrl_c():
            warnings.simplefilter("ignore", UserWarning)  # "port 8787 in use": the dashboard's
            cluster = LocalCluster(n_workers=default_workers(), threads_per_worker=1,
                                   dashboard_address=None, processes=True,
                                   silence_logs=logging.CRITICAL)  # fmt: skip
        with cluster, Client(cluster) as client:
            yield client, True
    elif isinstance(scheduler, str):
        _check_reachable(scheduler)
        try:
            client = Client(scheduler, timeout=f"{CLIENT_TIMEOUT_S:g}s")
        except Exception as err:  # a port that is not a Dask scheduler, a bad address
            raise UserInputError("--scheduler", f"{scheduler!r}: not a Dask scheduler "
                                 f"({type(err).__name__})") from None  # fmt: skip
        with client:
            yield client, False
    else:
        yield scheduler, False


def _execute(todo: list[Point], points_dir: Path, client: Any, local: bool, bar: Any,
             src: str, rows: dict[str, dict], started: Any) -> None:  # fmt: skip
    """Compute ``todo`` into ``rows`` (by point hash); each finished point is written at once
    (by the worker when local). ``started()`` is called once any worker processes exist (this
    process may start threads from then on)."""

    def finish(point: Point, row: dict, written: bool) -> None:
        if "__error__" in row:
            raise UserInputError(src, f"point {point.index} ({point.variant} on "
                                 f"{point.workload}): {row['__error__']}")  # fmt: skip
        if not written:
            store.write_point(points_dir / f"{point.hash}.parquet", point.columns() | row)
        rows[point.hash] = row
        bar.update()

    def batch(chunk: list[Point], local: bool) -> tuple[str, str | None]:
        items = [{"task": p.task, "hash": p.hash, "columns": p.columns()} for p in chunk]
        return canonical_json(items), str(points_dir) if local else None

    if client is None:  # in-process, no Dask (tests, debugging)
        started()
        for point in todo:
            finish(point, run_points(*batch([point], True))[0], True)
        return
    workers = default_workers() if client is FORKED else len(client.nthreads())
    # ~16 batches per worker: the per-task cost stays small and points land within ~1 s
    size = max(1, min(25, len(todo) // (16 * max(1, workers))))
    if client is FORKED:
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
        restore = _ignore_ctrl_c()  # the workers ignore Ctrl-C; this process stops them

        def forked() -> None:
            restore()
            started()

        try:
            tasks = [batch(chunk, True) for chunk in chunks]
            for chunk, done in zip(chunks, fork_map(_run_batch, tasks, workers, forked)):
                for point, row in zip(chunk, done):
                    finish(point, row, True)
        finally:
            restore()
        return
    started()
    from dask.distributed import as_completed

    batches = {}
    for chunk in (todo[i : i + size] for i in range(0, len(todo), size)):
        key = "sweep-" + sha256("".join(p.hash for p in chunk))
        batches[key] = (chunk, client.submit(run_points, *batch(chunk, local), key=key))
    for future, done in as_completed([f for _, f in batches.values()], with_results=True):
        for point, row in zip(batches[future.key][0], done):
            finish(point, row, local)
        future.release()


def _table(points: list[Point], rows: dict[str, dict], sweep: Any) -> Any:
    """The results table: identifying columns from the expansion, metrics from each point's row."""
    table_rows = []
    for point in points:
        stored = rows[point.hash]  # read from its file, or computed in this run
        table_rows.append(point.columns() | {k: v for k, v in stored.items() if is_metric(k)})
    swept = [*points[0].params]
    return build_table(table_rows, sweep.spec.baseline, [*swept, "workload"])


def write_outputs(df: pd.DataFrame, out: Path, heatmap_axes: list[str], title: str,
                  base_arch: dict | None = None) -> None:  # fmt: skip
    """``results.parquet``, ``results.csv``, ``pareto.png`` and ``heatmap.png`` in ``out``."""
    from accel_sim.report.io import write_table
    from accel_sim.sweep import plot  # matplotlib: only when a sweep writes its plots

    write_table(df, out / "results.parquet")
    write_table(df, out / "results.csv")
    plot.save_figure(plot.pareto_figure(df, title), out / "pareto.png")
    heatmap = plot.heatmap_figure(df, heatmap_axes, df.attrs["baseline"], title, base_arch)
    plot.save_figure(heatmap, out / "heatmap.png")


def write_manifest(sweep, out: Path) -> Path:
    """``manifest.json``: what produced the directory — the sweep file as validated (its base
    architecture, engine, grid, dataflows, workloads), the base architecture file's sha256, the
    code (a hash of the package's sources, the versions) and each output file's sha256. No time
    stamp: a rerun that computes nothing rewrites it unchanged."""
    from accel_sim.report.io import provenance, sha256_file, write_json

    files = ("results.parquet", "results.csv", "pareto.png", "heatmap.png")
    doc = {
        "command": f"accel-sim sweep {sweep.path.name} --out {out.name}",
        "spec": sweep.spec.model_dump(mode="json"),
        "base_arch_sha256": sweep.base_sha256,
        "points": len(list((out / "points").glob("*.parquet"))),
        **provenance(("simpy", "numpy", "pandas", "dask")),
        "files": {name: sha256_file(out / name) for name in files if (out / name).is_file()},
    }
    return write_json(doc, out / "manifest.json")


def run_sweep(spec_path: str | Path, out_dir: str | Path, scheduler: Any = None,
              progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run or resume a sweep; the table is returned and written to ``out_dir`` (``points/``,
    ``results.parquet``, ``results.csv``, ``pareto.png``, ``heatmap.png``, ``manifest.json``).
    ``scheduler``: ``None``
    = forked local workers (``workers.default_workers()`` processes; a Dask LocalCluster with
    as many where this process cannot fork, none where one CPU is usable); an
    address (``tcp://h:8786``: its workers need accel-sim with the named traces and models) or
    a ``distributed.Client``; ``"synchronous"`` = in this process, without Dask. The scheduler
    is contacted only when some point remains to compute. ``progress``: a tqdm bar on stderr
    when stderr is a terminal."""
    from tqdm import tqdm

    started, sweep = time.perf_counter(), load_spec(spec_path)
    out = store.check_out_dir(out_dir)
    points, points_dir = expand(sweep), out / "points"
    rows, todo = store.scan_points(points, points_dir)
    done = len(points) - len(todo)
    with _client(scheduler if todo else "synchronous") as (client, near):
        print(f"sweep {sweep.name}: {len(points)} points, {done} already done, computing "
              f"{len(todo)}", file=sys.stderr, flush=True)  # fmt: skip
        store.prepare_points_dir(points_dir)
        bar = tqdm(total=len(points), initial=done, desc=f"sweep {sweep.name}", unit="pt",
                   disable=not (progress and sys.stderr.isatty()), file=sys.stderr,
                   dynamic_ncols=True)  # fmt: skip
        with bar:
            if todo:
                # the plots' imports (matplotlib, its fonts) load while this process waits
                warm = []
                _execute(todo, points_dir, client, near, bar, str(sweep.path), rows,
                         lambda: warm.append(warm_plots("accel_sim.sweep.plot")))  # fmt: skip
                for thread in warm:
                    thread.join()
    df = _table(points, rows, sweep)
    swept = [*points[0].params]
    write_outputs(df, out, sweep.spec.heatmap or [*swept, "workload", "variant"][:2], sweep.name,
                  sweep.base)  # fmt: skip
    write_manifest(sweep, out)
    print(f"sweep {sweep.name}: {len(df)} points in {time.perf_counter() - started:.1f} s -> {out}",
          file=sys.stderr, flush=True)  # fmt: skip
    return df
