"""A run's activity as a Chrome/Perfetto trace (``accel-sim run ... --timeline run.json``).

The file is in the Trace Event Format (a JSON object with ``traceEvents``) and opens in
https://ui.perfetto.dev or ``chrome://tracing``. One *process* per simulated (GEMM, dataflow);
in it one *track* (thread) per unit and per memory hop:

* ``plan``: the plan's operations, one span each, in the order they run (one after another);
  with overlap on (``accel_sim.api.simulate(overlap=True)``, the default) the stretches of the
  critical path instead, each named by the operation it runs through;
* ``matrix unit``: compute spans (runs of consecutive steps, one span per output tile at most),
  stalls named by their cause (``load:HBM->L2``, ``store:L0C->L2``, ``drain``, and while a
  vector/comparator/transfer op runs, ``vector:absmax`` ...), and a collapsed steady state as one
  span. Its spans tile the run exactly: their ``args.cycles`` add up to the run's cycles, and
  ``busy_cycles`` plus ``stall_cycles`` of every span are its cycles;
* ``steady state (collapsed)``: each stretch the engine skipped by its exact steady-state
  collapse, labelled ``steady state ×N periods of P steps, C cycles each``;
* ``vector unit``: the dequantize epilogue on each output tile, and the plan's vector passes;
* ``early-bird comparator`` and ``DMA (plan transfers)``: those plan ops;
* one track per hop and operand (``HBM->L2 B``, ``L0C->L2 C`` ...): each tile's transfer while
  it holds the hop's ports, and the waits before it (``wait: free L1 buffer`` — the destination's
  buffers are all full; ``wait: port HBM:rw`` — another transfer holds a port).

``ts``/``dur`` are microseconds at the architecture's clock, rounded to whole nanoseconds (what
Perfetto resolves); every span's ``args`` has its exact ``start_cycle`` and ``cycles``.

With overlap on, every unit (matrix, vector, comparator, DMA) is its own track of the plan's row
blocks as scheduled (``engine/schedule.py``), so concurrent units show side by side; the matrix
unit's idle cycles are stalls named by the operation it waited on (``vector:absmax_quantize``).
A matmul that ran in one piece (no wait or DRAM slowdown between its row blocks) is drawn by its
DES recording, hops and all, from its start; its dequantize epilogue then goes on the track
``vector unit (matmul epilogue)``. A matmul cut up by waits is drawn as row blocks, without
hop detail (run with ``--no-overlap`` to see it).

Files stay small: at most ``max_events`` spans (default :data:`MAX_EVENTS`). Beyond that, each
track's consecutive spans are merged in pairs (repeatedly, as needed) into spans named
``merged``/their common name with ``args.merged_spans`` and summed counters; ``otherData`` says
so. Collapsed spans are never merged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp

#: Most spans a timeline file holds before consecutive spans of a track are merged.
MAX_EVENTS = 200_000

UNIT = "matrix unit"
STEADY = "steady state (collapsed)"
PLAN = "plan"
#: Tracks that come first in every process, in this order (movers follow as the DES declares them).
FIXED_TRACKS = (PLAN, UNIT, STEADY, "vector unit", "early-bird comparator", "DMA (plan transfers)")
OP_TRACK = {"vector": "vector unit", "comparator": "early-bird comparator",
            "transfer": "DMA (plan transfers)"}  # fmt: skip


class _Span:
    __slots__ = ("start", "end", "name", "cat", "info", "sums", "k", "joinable", "barrier")

    def __init__(self, start, end, name, cat, info, sums, joinable=False, barrier=False):
        self.start, self.end, self.name, self.cat = start, end, name, cat
        self.info, self.sums = info, dict(sums) if sums else {}
        self.k, self.joinable, self.barrier = 1, joinable, barrier

    def add(self, other: _Span) -> None:
        """Absorb ``other`` (which comes after this span on the same track)."""
        self.end = max(self.end, other.end)
        for key, value in other.sums.items():
            self.sums[key] = self.sums.get(key, 0) + value
        self.joinable = other.joinable


class Recorder:
    """Receives the DES's activity (``simulate_program(..., recorder=)``) and the plan's other
    ops, and renders them as trace events. Times given to it are cycles relative to
    :attr:`offset` (the start of the current op within its run)."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        if max_events < 16:
            raise ValueError("max_events must be at least 16")
        self.max_events = max_events
        self.processes: list[tuple[str, dict]] = []
        self.tracks: dict[tuple[int, str], list[_Span]] = {}
        self.order: dict[int, list[str]] = {}
        self.pid = 0
        self.offset = 0
        self.count = 0  # spans held
        self.factor = 1  # raw spans a span may stand for (doubles each time the cap is hit)
        self.rename: dict[str, str] = {}  # track name -> track the span goes to instead

    # ------------------------------------------------------------ structure
    def begin_process(self, name: str, info: dict) -> int:
        self.processes.append((name, info))
        self.pid = len(self.processes)
        self.order[self.pid] = []
        self.declare(FIXED_TRACKS)
        self.offset = 0
        return self.pid

    def declare(self, tracks: Iterable[str]) -> None:
        """Make sure ``tracks`` exist in the current process (first declared, first shown)."""
        order = self.order[self.pid]
        for track in tracks:
            track = self.rename.get(track, track)
            if (self.pid, track) not in self.tracks:
                self.tracks[(self.pid, track)] = []
                order.append(track)

    # --------------------------------------------------------------- spans
    def span(self, track: str, name: str, start: int, end: int, cat: str = "",
             info: dict | None = None, sums: dict | None = None) -> None:  # fmt: skip
        self._add(track, _Span(start + self.offset, end + self.offset, name, cat, info or {},
                               sums))  # fmt: skip

    def unit_busy(self, start: int, end: int, step: int, closes_tile: bool) -> None:
        """The matrix unit computed step ``step`` over [start, end); consecutive steps join into
        one span up to the end of an output tile."""
        self._add(UNIT, _Span(start + self.offset, end + self.offset, "compute", "compute",
                              {"first_step": step}, {"steps": 1, "busy_cycles": end - start},
                              joinable=not closes_tile))  # fmt: skip

    def unit_stall(self, start: int, end: int, cause: str) -> None:
        self._add(UNIT, _Span(start + self.offset, end + self.offset, cause, "stall", {},
                              {f"stall:{cause}": end - start}, joinable=True))  # fmt: skip

    def collapsed(self, start: int, end: int, repeats: int, period: int, period_cycles: int,
                  stalls: dict) -> None:  # fmt: skip
        """The engine jumped ``repeats`` periods of ``period`` steps (``period_cycles`` each)
        from ``start`` to ``end``; ``stalls`` are the stall cycles by cause inside the jump."""
        label = (f"steady state ×{repeats:,} periods of {period:,} steps, "
                 f"{period_cycles:,} cycles each")  # fmt: skip
        info = {"repeats": repeats, "period_steps": period, "period_cycles": period_cycles,
                "steps": repeats * period}  # fmt: skip
        sums = {f"stall:{k}": v for k, v in stalls.items()}
        sums["busy_cycles"] = end - start - sum(stalls.values())
        a, b = start + self.offset, end + self.offset
        self._add(UNIT, _Span(a, b, label, "collapse", info, sums, barrier=True))
        self._add(STEADY, _Span(a, b, label, "collapse", info, sums, barrier=True))

    def _add(self, track: str, span: _Span) -> None:
        track = self.rename.get(track, track)
        spans = self.tracks.get((self.pid, track))
        if spans is None:
            self.declare((track,))
            spans = self.tracks[(self.pid, track)]
        if spans and not span.barrier and not spans[-1].barrier:
            last = spans[-1]
            if last.joinable and last.name == span.name and last.end == span.start:
                last.add(span)  # a run of steps of one tile, or one stall cause
                return
            if last.k + span.k <= self.factor:  # over the cap: fold into the previous span
                last.add(span)
                last.k += span.k
                if last.name != span.name:
                    last.name, last.cat = "merged", "merged"
                return
        spans.append(span)
        self.count += 1
        if self.count > self.max_events:
            self._coarsen()

    def _coarsen(self) -> None:
        """Merge consecutive spans of every track in pairs until at most half the cap is held;
        from now on a span stands for up to ``factor`` raw ones."""
        while self.count > self.max_events // 2:
            self.factor *= 2
            count = 0
            for key, spans in self.tracks.items():
                merged: list[_Span] = []
                for span in spans:
                    last = merged[-1] if merged else None
                    if (last is not None and not last.barrier and not span.barrier
                            and last.k + span.k <= self.factor):  # fmt: skip
                        last.add(span)
                        last.k += span.k
                        if last.name != span.name:
                            last.name, last.cat = "merged", "merged"
                        last.joinable = False
                    else:
                        merged.append(span)
                self.tracks[key] = merged
                count += len(merged)
            if count == self.count:  # nothing left to merge (all barriers)
                break
            self.count = count

    # -------------------------------------------------------------- output
    def unit_spans(self, pid: int = 1) -> list[_Span]:
        return self.tracks.get((pid, UNIT), [])

    def document(self, clock_hz: float, meta: dict | None = None) -> dict:
        """The trace as a Trace Event Format object (``traceEvents`` + ``otherData``)."""

        def ns(cycle: int) -> int:
            return round(cycle * 1e9 / clock_hz)

        events: list[dict] = []
        for pid, (name, info) in enumerate(self.processes, start=1):
            events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": name}})  # fmt: skip
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})  # fmt: skip
            labels = ", ".join(f"{k}={v}" for k, v in info.items())
            events.append({"name": "process_labels", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"labels": labels}})  # fmt: skip
            for tid, track in enumerate(self.order[pid], start=1):
                if not self.tracks.get((pid, track)):
                    continue  # a unit this run never used
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": track}})  # fmt: skip
                events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"sort_index": tid}})  # fmt: skip
                for span in self.tracks[(pid, track)]:
                    events.append(_event(span, pid, tid, ns))
        other = {"generator": "accel-sim", "clock_hz": clock_hz,
                 "time": "ts/dur in microseconds at clock_hz (whole ns); exact cycles in args",
                 "spans": self.count, "max_events": self.max_events,
                 "merged": self.factor > 1}  # fmt: skip
        if self.factor > 1:
            other["merge_note"] = (
                f"more than {self.max_events:,} spans: consecutive spans of each track were "
                f"merged, each standing for up to {self.factor} (args.merged_spans); their "
                "counters (busy_cycles, stall_cycles, bytes...) are summed")  # fmt: skip
        other.update(meta or {})
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def _event(span: _Span, pid: int, tid: int, ns) -> dict:
    args = {"start_cycle": span.start, "cycles": span.end - span.start}
    args.update(span.info)
    stalls = {}
    for key, value in span.sums.items():
        if key.startswith("stall:"):
            stalls[key[6:]] = value
        else:
            args[key] = value
    if stalls:
        args["stall_cycles"] = stalls
    if span.k > 1:
        args["merged_spans"] = span.k
    t0, t1 = ns(span.start), ns(span.end)
    return {"name": span.name, "cat": span.cat or "activity", "ph": "X", "ts": t0 / 1000,
            "dur": (t1 - t0) / 1000, "pid": pid, "tid": tid, "args": args}  # fmt: skip


def matmul_program(arch: Arch, op: MatmulOp):
    """The step program the engine simulates for ``op``: on one core the op itself, on a chip
    the largest part of its partition on that core's view (``engine/chip.py``), whose cycles
    are the chip's (a K split's reduction follows as its ``reduce:K-split`` stall)."""
    from accel_sim.engine.chip import slowest_core
    from accel_sim.engine.des_check import des_program

    return des_program(*slowest_core(arch, op))


def write_timeline(doc: dict, path: str | Path) -> Path:
    """Write a trace document atomically, one event per line (compact, still greppable)."""
    from accel_sim.report.io import atomic_write_text, check_finite

    path = Path(path)
    check_finite(doc, str(path))
    lines = [json.dumps(ev, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
             for ev in doc["traceEvents"]]  # fmt: skip
    rest = {k: v for k, v in doc.items() if k != "traceEvents"}
    head = json.dumps(rest, ensure_ascii=False, indent=1, allow_nan=False)[:-1].rstrip()
    text = head + ',\n"traceEvents":[\n' + ",\n".join(lines) + "\n]}\n"
    return atomic_write_text(path, text)
