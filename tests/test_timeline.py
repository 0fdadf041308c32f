"""The timeline (``accel-sim run ... --timeline run.json``, ``report/timeline.py``).

* the file is valid Trace Event Format: required keys, ``ph`` X or M, non-negative ``dur``,
  ``ts`` sorted on every track, every track named;
* the matrix unit's spans never overlap and tile the run: their cycles add up to the run's
  cycles, busy cycles to its compute cycles and stall cycles, cause by cause, to its stalls
  (also after spans were merged to respect the size cap);
* a collapsed run shows each jump as one labelled span whose repeat counts add up to the steps
  the DES skipped;
* recording changes nothing: the same ``MatmulTiming`` with the recorder on and off, the same
  results as :func:`accel_sim.api.simulate`;
* the CLI writes the file atomically, one process per (GEMM, dataflow), and refuses bad paths and
  ``--engine twin`` before any work.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from accel_sim.api import simulate, simulate_timeline
from accel_sim.arch.load import load_arch
from accel_sim.cli import main
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapper import mapped_program
from accel_sim.report.timeline import STEADY, UNIT, Recorder, write_timeline

CUBE = "ascend_like_cube"
CASES = [
    (CUBE, "1x4096x4096", "w8a8", True),  # decode: memory-bound, collapses
    (CUBE, "1x4096x4096", "w8a8", False),
    (CUBE, "512x2048x2048", "w8a8", True),  # prefill-like: compute-bound
    (CUBE, "256x2048x1024", "osc", True),  # a transfer op, vector passes, two matmuls
    (CUBE, "64x1024x512", "ops", True),
    ("systolic_32x32_ws", "128x512x256", "w8a8_static", True),
]


def _tracks(doc: dict) -> tuple[dict, dict]:
    """({(pid, tid): track name}, {(pid, tid): [X events in file order]})."""
    names, spans = {}, {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M" and ev["name"] == "thread_name":
            names[(ev["pid"], ev["tid"])] = ev["args"]["name"]
        elif ev["ph"] == "X":
            spans.setdefault((ev["pid"], ev["tid"]), []).append(ev)
    return names, spans


def _unit_spans(doc: dict, pid: int = 1) -> list[dict]:
    names, spans = _tracks(doc)
    (key,) = [k for k, v in names.items() if v == UNIT and k[0] == pid]
    return spans[key]


def _check_format(doc: dict) -> None:
    assert set(doc) >= {"traceEvents", "otherData"}
    names, spans = _tracks(doc)
    processes = {ev["pid"] for ev in doc["traceEvents"]
                 if ev["ph"] == "M" and ev["name"] == "process_name"}  # fmt: skip
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M")
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "X":
            assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(ev)
            assert isinstance(ev["name"], str) and ev["name"]
            assert ev["ts"] >= 0 and ev["dur"] >= 0
            assert ev["args"]["cycles"] >= 0 and ev["args"]["start_cycle"] >= 0
            assert ev["pid"] in processes
        else:
            assert "name" in ev["args"] or "sort_index" in ev["args"] or "labels" in ev["args"]
    for key, evs in spans.items():
        assert key in names, f"track {key} has no thread_name"
        ts = [ev["ts"] for ev in evs]
        assert ts == sorted(ts), names[key]
        cycles = [ev["args"]["start_cycle"] for ev in evs]
        assert cycles == sorted(cycles), names[key]


def _ns(ev: dict) -> tuple[int, int]:
    start = round(ev["ts"] * 1000)
    return start, start + round(ev["dur"] * 1000)


def _check_unit_accounting(doc: dict, result, pid: int = 1) -> None:
    spans = _unit_spans(doc, pid)
    t = 0
    busy, stalls = 0, Counter()
    for ev in spans:
        args = ev["args"]
        assert args["start_cycle"] == t, "matrix-unit spans leave a gap or overlap"
        t += args["cycles"]
        own = Counter(args.get("stall_cycles", {}))
        assert args.get("busy_cycles", 0) + sum(own.values()) == args["cycles"]
        busy += args.get("busy_cycles", 0)
        stalls += own
    assert t == result.cycles
    assert busy == result.compute_cycles
    assert dict(stalls) == result.stalls
    for a, b in zip(spans, spans[1:]):  # in the file's own time base too (whole ns)
        assert _ns(a)[1] <= _ns(b)[0]


@pytest.mark.parametrize("arch,gemm,flow,collapse", CASES)
def test_trace_format_and_matrix_unit_accounting(arch, gemm, flow, collapse, tmp_path):
    results, doc = simulate_timeline(arch, gemm, flow, collapse=collapse)
    path = write_timeline(doc, tmp_path / "t.json")
    loaded = json.loads(path.read_text())
    assert loaded == json.loads(json.dumps(doc))
    _check_format(loaded)
    _check_unit_accounting(loaded, results[0])
    assert results[0].to_dict() == simulate(arch, gemm, flow, collapse=collapse).to_dict()
    names, spans = _tracks(loaded)
    for key, evs in spans.items():  # every track is one sequential process: no overlaps
        for a, b in zip(evs, evs[1:]):
            end = a["args"]["start_cycle"] + a["args"]["cycles"]
            if names[key] != STEADY:
                assert end <= b["args"]["start_cycle"], names[key]


def test_decode_shows_hbm_wait_and_pipelined_transfers():
    results, doc = simulate_timeline(CUBE, "1x4096x4096", "w8a8")
    names, spans = _tracks(doc)
    by_name = {v: spans.get(k, []) for k, v in names.items()}
    assert {"plan", UNIT, STEADY, "vector unit", "HBM->L2 B", "L2->L1 B", "L1->L0B B",
            "L0C->L2 C", "L2->HBM C"} <= set(by_name)  # fmt: skip
    unit = Counter()
    for ev in by_name[UNIT]:
        for cause, n in ev["args"].get("stall_cycles", {}).items():
            unit[cause] += n
    assert unit.most_common(1)[0][0] == "load:HBM->L2"
    # the HBM->L2 transfer of one B tile overlaps the inner hops of earlier tiles
    hbm = [e for e in by_name["HBM->L2 B"] if e["name"] == "B tile"]
    inner = [e for e in by_name["L2->L1 B"] if e["name"] == "B tile"]

    def overlaps(a, b):
        a0, b0 = a["args"]["start_cycle"], b["args"]["start_cycle"]
        return a0 < b0 + b["args"]["cycles"] and b0 < a0 + a["args"]["cycles"]

    assert any(overlaps(a, b) for a in hbm[:8] for b in inner[:8])
    plan = [e["name"] for e in by_name["plan"]]
    assert plan == ["absmax_quantize", "matmul"]  # the critical path: one row block (M = 1)


def test_collapsed_run_has_labelled_steady_state_spans():
    arch = load_arch(CUBE)
    op = MatmulOp("m", 1, 4096, 4096, "int8", 8, 8)
    program = mapped_program(arch, op)
    plain = simulate_program(program)
    assert plain.collapsed_steps > 0
    rec = Recorder()
    rec.begin_process("x", {})
    timing = simulate_program(program, recorder=rec)
    doc = rec.document(arch.clock_hz)
    names, spans = _tracks(doc)
    (steady,) = [spans[k] for k, v in names.items() if v == STEADY]
    assert sum(e["args"]["repeats"] * e["args"]["period_steps"] for e in steady) == (
        timing.collapsed_steps)  # fmt: skip
    for e in steady:
        a = e["args"]
        assert e["name"] == (f"steady state ×{a['repeats']:,} periods of {a['period_steps']:,} "
                             f"steps, {a['period_cycles']:,} cycles each")  # fmt: skip
        assert a["cycles"] == a["repeats"] * a["period_cycles"]
    # the same span sits on the matrix unit's track, which still tiles the matmul
    unit = _unit_spans(doc)
    assert [e["name"] for e in unit if e["cat"] == "collapse"] == [e["name"] for e in steady]
    assert sum(e["args"]["cycles"] for e in unit) == timing.cycles
    assert sum(e["args"].get("busy_cycles", 0) for e in unit) == timing.compute_cycles
    # nothing but the steady-state span is drawn inside a collapsed stretch
    for e in steady:
        lo, hi = e["args"]["start_cycle"], e["args"]["start_cycle"] + e["args"]["cycles"]
        for key, evs in spans.items():
            if names[key] in (STEADY, UNIT):
                continue
            for ev in evs:
                s0 = ev["args"]["start_cycle"]
                assert s0 + ev["args"]["cycles"] <= lo or s0 >= hi, names[key]


@pytest.mark.parametrize("seed", range(6))
def test_recording_does_not_change_timing(seed):
    rng = random.Random(seed)
    arch = load_arch(rng.choice([CUBE, "systolic_32x32_ws", "rtx3090_like"]))
    op = MatmulOp("m", rng.choice([1, 16, 100, 256, 1024]), rng.choice([256, 1000, 4096]),
                  rng.choice([128, 777, 2048]), "int8", 8, 8, count=rng.choice([1, 1, 3]),
                  epilogue_ops_per_output=rng.choice([0.0, 1.0]))  # fmt: skip
    program = mapped_program(arch, op)
    for collapse in (True, False):
        rec = Recorder()
        rec.begin_process("x", {})
        assert simulate_program(program, collapse, recorder=rec) == simulate_program(
            program, collapse)  # fmt: skip
        assert rec.count > 0


def test_cap_merges_spans_and_says_so():
    full = simulate_timeline(CUBE, "1x4096x4096", "w8a8", collapse=False)[1]
    results, doc = simulate_timeline(CUBE, "1x4096x4096", "w8a8", collapse=False,
                                     max_events=200)  # fmt: skip
    spans = [ev for ev in doc["traceEvents"] if ev["ph"] == "X"]
    assert len(spans) <= 200 < sum(ev["ph"] == "X" for ev in full["traceEvents"])
    assert doc["otherData"]["merged"] is True and "merge_note" in doc["otherData"]
    assert any(ev["args"].get("merged_spans", 1) > 1 for ev in spans)
    _check_format(doc)
    _check_unit_accounting(doc, results[0])
    # bytes survive merging
    moved = sum(ev["args"].get("bytes", 0) for ev in spans)
    assert moved == sum(ev["args"].get("bytes", 0) for ev in full["traceEvents"]
                        if ev["ph"] == "X")  # fmt: skip


def test_cli_writes_one_process_per_run(tmp_path, capsys):
    out = tmp_path / "results" / "run.json"
    code = main(["run", "--gemm", "16x512x512", "--gemm", "1x512x512", "--dataflow", "w8a8",
                 "--dataflow", "fp16", "--timeline", str(out)])  # fmt: skip
    assert code == 0
    assert "wrote timeline" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    _check_format(doc)
    procs = [ev["args"]["name"] for ev in doc["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "process_name"]  # fmt: skip
    assert len(procs) == 4 and procs[0].startswith("w8a8 · 16x512x512")
    assert [r["dataflow"] for r in doc["otherData"]["runs"]] == ["w8a8", "fp16"] * 2


def test_cli_single_run_json_stays_pure(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["run", "--gemm", "1x1024x1024", "--timeline", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["cycles"] == _unit_cycles(json.loads(out.read_text()))
    assert "wrote timeline" in captured.err


def _unit_cycles(doc):
    return sum(ev["args"]["cycles"] for ev in _unit_spans(doc))


@pytest.mark.parametrize("extra,message", [
    (["--timeline", "t.csv"], "must end in one of ('.json',)"),
    (["--timeline", "t.json", "--engine", "twin"], "cannot be combined with --engine twin"),
    (["--timeline", "t.json", "--explain"], "--timeline"),
    (["--timeline", "t.json", "--out", "./t.json"], "names the same file as --out"),
])  # fmt: skip
def test_cli_refuses_before_work(extra, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--gemm", "1x512x512", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
