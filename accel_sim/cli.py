"""The command line: parse, call the public API, print. Nothing else lives here.

Every user mistake ends as one line on stderr and exit code 2, with no partial output file.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path

from accel_sim.errors import UserInputError
from accel_sim.knobs import parse_knobs
from accel_sim.workers import MAX_JOBS, default_workers, parse_jobs

DESCRIPTION = """\
Cycle-level simulator of accelerators (systolic arrays, cube units, memory hierarchy) running
GEMMs from quantized LLMs under the FP16, INT16, W8A8 (dynamic and static), OSC, MUXQ, OPS,
LLM.int8(), W4A4-static, OliVe and ANT dataflows (`accel-sim dataflows` lists them).
Prints cycles, time, energy and numerical error. Start with `accel-sim run` (the shipped
Ascend-like cube on a real SmolLM2-135M trace, every dataflow); `accel-sim COMMAND --help` for
each command."""

DEFAULT_ARCH = "ascend_like_cube"
DEFAULT_TRACE = "smollm2-135m"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage + message)
        if "expected one argument" in message:  # e.g. --gemm -5x5x5: taken for an option
            message += " (a value starting with '-' is written --flag=VALUE)"
        elif "unrecognized arguments" in message and "--no-cache" in message.split():
            message += " (--no-cache goes before the command: accel-sim --no-cache run ...)"
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _cmd_run(args) -> int:
    from accel_sim.api import dataflows, explain, simulate, simulate_many, unsupported_reason
    from accel_sim.arch.load import load_arch
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.report.io import check_output_path, read_gemm_csv, write_table
    from accel_sim.report.text import add_speedup, single_report, summary_report, table_report
    from accel_sim.workload.gemm import parse_gemm
    from accel_sim.workload.trace import load_trace

    if args.out is not None:
        check_output_path(args.out)
    if args.timeline is not None:
        timeline = check_output_path(args.timeline, (".json",), "--timeline")
        if args.out is not None and Path(args.out).expanduser().resolve() == timeline.resolve():
            raise UserInputError("--timeline", "names the same file as --out; give it its own")
        if args.engine != "des":
            raise UserInputError("--timeline", "records the discrete-event simulation; it "
                                 "cannot be combined with --engine twin")  # fmt: skip
    arch = load_arch(args.arch)
    args.notes_after = _unused_energy(arch)  # printed once the run succeeded (main)
    gemms = [parse_gemm(g) for g in args.gemm or []]
    if args.gemms:
        gemms += read_gemm_csv(args.gemms)
    if args.trace and gemms:
        raise UserInputError("--trace", "brings its own GEMMs and their statistics; give it "
                             "without --gemm/--gemms (or those without --trace)")  # fmt: skip
    knobs = parse_knobs(args.knob)
    for flow in knobs:  # a bad knob is an error before anything runs or is skipped
        get_dataflow(flow, "--knob").resolve_knobs(knobs[flow], "--knob")
    for flow in args.dataflow or []:
        if flow != "all":
            get_dataflow(flow)
    trace = None
    if args.trace or not gemms:
        trace = load_trace(args.trace or DEFAULT_TRACE)
        gemms += list(trace.gemms)
    # (a dataflow named twice runs once: its rows would count twice in the totals)
    flows = list(dict.fromkeys(args.dataflow or (["all"] if trace else ["w8a8"])))
    run_flows = set(dataflows()) if "all" in flows else set(flows)
    unused = sorted(set(knobs) - run_flows)
    if unused:
        raise UserInputError("--knob", f"knobs for {', '.join(unused)}, which this run does not "
                             "include (add it with --dataflow)")  # fmt: skip
    if "all" in flows:
        flows = []
        sample = trace.gemms[0] if trace else None
        for flow in dataflows():
            reason = unsupported_reason(arch, flow, sample, trace.stats_for(sample) if trace
                                        else None, knobs.get(flow))  # fmt: skip
            if reason and flow in knobs:  # the user's own knob must not silently drop the flow
                raise UserInputError("--knob", f"{flow} cannot run with {knobs[flow]}: {reason}")
            if reason:
                print(f"skipping {flow}: {reason}", file=sys.stderr)
            else:
                flows.append(flow)
    if args.explain:
        if args.json or args.out is not None or trace is not None or args.timeline is not None:
            raise UserInputError("--explain", "prints a text view of --gemm runs; it cannot be "
                                 "combined with --json, --out, --timeline or --trace")  # fmt: skip
        for gemm in gemms:
            for flow in flows:
                print(f"== {flow}, {gemm.label} ==")
                for item in explain(arch, gemm, flow, knobs.get(flow)):
                    print(item.text)
        return 0
    if len(gemms) == 1 and len(flows) == 1 and args.out is None and trace is None:
        if args.timeline is not None:  # the printed result is the recorded run's
            result = _write_timeline(args, arch, gemms, flows, knobs, None)[0]
        else:
            result = simulate(arch, gemms[0], flows[0], knobs.get(flows[0]), engine=args.engine,
                              overlap=not args.no_overlap)  # fmt: skip
        print(json.dumps(result.to_dict(), indent=2) if args.json else single_report(result))
        if args.timeline is not None:
            print(args.timeline_note, file=sys.stderr if args.json else sys.stdout)
        return 0
    df = simulate_many(arch, gemms, flows, knobs, engine=args.engine,
                       stats_for=trace.stats_for if trace else None,
                       progress=sys.stderr.isatty(), overlap=not args.no_overlap,
                       jobs=default_workers() if args.jobs is None else args.jobs)  # fmt: skip
    df = add_speedup(df)
    if args.out is not None:
        write_table(df, args.out)
    if args.timeline is not None:
        _write_timeline(args, arch, gemms, flows, knobs, trace.stats_for if trace else None)
        if args.json:
            print(args.timeline_note, file=sys.stderr)
    if args.json:
        from accel_sim.report.io import json_records
        from accel_sim.report.text import totals

        doc = {"arch": arch.name, "trace": trace.name if trace else None,
               "totals": json_records(totals(df)), "rows": json_records(df)}  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        source = (f" · trace {trace.name}" if trace else "") + (
            " · ops one after another (--no-overlap)" if args.no_overlap else ""
        )
        print(f"accel-sim · {arch.name}{source} · {len(gemms)} GEMM(s) × {len(flows)} "
              "dataflow(s) · totals per dataflow\n")  # fmt: skip
        print(summary_report(df, arch.clock_hz))
        print("\n" + _legend(arch, flows, trace is not None))
        if args.per_gemm:
            print("\nper GEMM\n" + table_report(df))
        elif args.out is None:
            print("\n(one row per GEMM and dataflow: add --per-gemm, or --out results/run.csv)")
        if args.out is not None:
            print(f"\nwrote {args.out}")
        if args.timeline is not None:
            print(("" if args.out is not None else "\n") + args.timeline_note)
    return 0


def _write_timeline(args, arch, gemms, flows, knobs, stats_for) -> list:
    """Simulate every (GEMM, dataflow) with recording on, write the trace to ``--timeline``
    (one process per run) and leave the line to print in ``args.timeline_note``."""
    from accel_sim.api import simulate_timeline
    from accel_sim.report.timeline import write_timeline

    results, doc = simulate_timeline(arch, gemms, flows, knobs, stats_for=stats_for,
                                     overlap=not args.no_overlap)  # fmt: skip
    write_timeline(doc, args.timeline)
    merged = " (spans merged to fit; see otherData)" if doc["otherData"]["merged"] else ""
    args.timeline_note = (f"wrote timeline {args.timeline}: {len(results)} run(s), "
                          f"{doc['otherData']['spans']:,} spans{merged}; open it in "
                          "https://ui.perfetto.dev or chrome://tracing")  # fmt: skip
    return results


def _cmd_trace(args) -> int:
    if args.trace_cmd == "capture":
        from accel_sim.workload.capture import capture
        from accel_sim.workload.compact import compact_trace

        out = Path(args.out).expanduser()
        capture(args.model, out, max_tokens=args.max_tokens)
        compact = compact_trace(out, out / "compact", progress=sys.stderr.isatty())
        print(f"wrote the full trace to {out} and its compact trace to {compact}")
    elif args.trace_cmd == "compact":
        from accel_sim.workload.compact import compact_trace

        out = compact_trace(args.full, args.out, progress=sys.stderr.isatty())
        print(f"wrote {out}")
    elif args.trace_cmd == "stats":
        from accel_sim.workload.trace_stats import trace_stats

        rows = trace_stats(args.path)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            import pandas as pd

            df = pd.json_normalize(rows)
            keep = [c for c in df.columns if c in ("name", "kind", "M", "K", "N", "absmax",
                    "osc_threshold", "outlier_channels", "int16_hi_zero_fraction")
                    or c.startswith("clustering_density.")]  # fmt: skip
            print(df[keep].to_string(index=False))
    return 0


def _legend(arch, flows: list[str], traced: bool) -> str:
    """The totals' footnote: what each column shown means (only those shown)."""
    parts = [f"time = cycles / {arch.clock_hz / 1e9:g} GHz"]
    if "w8a8" in flows:
        parts.append("vs w8a8 = W8A8 cycles ÷ cycles")
    if traced:
        missing = [f for f in ("olive", "ant") if f in flows]
        parts.append("rel. error = ‖Y − Y_fp32‖/‖Y_fp32‖ on the trace's held-out tokens, "
                     "MAC-weighted mean" + (
                         f" (- = the trace stores none for that dataflow: "
                         f"{' and '.join(_NAMES.get(f, f) for f in missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} measured on its sample "
                         "tensors only, accel-sim table ops-fig3)" if missing else ""))  # fmt: skip
    return "; ".join(parts)


_NAMES = {"olive": "OliVe", "ant": "ANT"}


def _unused_energy(arch) -> list[str]:
    """A note (for stderr; not an error) on energy entries that nothing in ``arch`` uses."""
    if not arch.unused_energy_entries:
        return []
    return [f"note: {arch.origin}: energy entries nothing uses: "
            f"{', '.join(arch.unused_energy_entries)}"]  # fmt: skip


def _cmd_arch(args) -> int:
    from accel_sim.arch.load import list_archs, load_arch

    if args.arch_cmd == "list":
        for name in list_archs():
            print(name)
    elif args.arch_cmd == "show":
        arch = load_arch(args.name)
        print(json.dumps(arch.model_dump(), indent=2))
        for note in _unused_energy(arch):  # (on stderr: stdout stays pure JSON)
            print(note, file=sys.stderr)
    elif args.arch_cmd == "from-scalesim":
        from accel_sim.arch.scalesim_import import write_arch_from_scalesim

        out = write_arch_from_scalesim(args.config, args.output)
        print(f"wrote {out}")
    return 0


def _cmd_dataflows(args) -> int:
    from accel_sim.dataflow.registry import DATAFLOWS, dataflow_names

    for name in dataflow_names():
        flow = DATAFLOWS[name]
        print(f"{name:<14} {flow.description}  knobs: {flow.knobs or '-'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="accel-sim", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--version", action="version", version=f"accel-sim {_version()}")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the on-disk cache of mappings and DES "
                             "timings (accel-sim cache; same as ACCEL_SIM_CACHE=off)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="COMMAND")  # fmt: skip

    run = sub.add_parser("run", help="simulate GEMMs under one or more dataflows")
    run.add_argument("--arch", default=DEFAULT_ARCH,
                     help=f"shipped architecture name (see `accel-sim arch list`) or a YAML "
                          f"file (default: {DEFAULT_ARCH})")  # fmt: skip
    run.add_argument("--gemm", action="append", metavar="MxKxN",
                     help="one GEMM: M tokens x K inputs x N outputs, plain integers, e.g. "
                          "2048x4096x4096; repeatable")  # fmt: skip
    run.add_argument(
        "--gemms", metavar="FILE.csv", help="CSV of GEMMs with columns M,K,N and an optional name"
    )
    run.add_argument("--trace", help="compact trace directory or shipped name (default when no "
                     f"GEMM is given: {DEFAULT_TRACE})")  # fmt: skip
    run.add_argument("--dataflow", action="append",
                     help="dataflow name (see `accel-sim dataflows`) or 'all'; repeatable "
                          "(default: all for a trace, else w8a8)")  # fmt: skip
    run.add_argument(
        "--knob",
        action="append",
        metavar="DATAFLOW.NAME=VALUE",
        help="set a dataflow knob, e.g. osc.G=64; repeatable",
    )
    run.add_argument("--engine", choices=("des", "twin"), default="des",
                     help="des: the discrete-event simulation (default); twin: its closed-form "
                          "model, faster; about 1 %% off at p90 on random GEMMs, more on some "
                          "(docs/engine.md, 'The closed-form model')")  # fmt: skip
    run.add_argument("--jobs", type=parse_jobs, default=None, metavar="N",
                     help=f"forked processes simulating the rows, 1..{MAX_JOBS}; the result is "
                          "the same for any N (default: $ACCEL_SIM_WORKERS, else the usable "
                          "CPUs, at most 8)")  # fmt: skip
    run.add_argument("--no-overlap", action="store_true",
                     help="run each plan's operations one after another, unfused (the behaviour "
                          "before overlap), to see what overlap buys (docs/engine.md, 'Overlap "
                          "and fusion')")  # fmt: skip
    run.add_argument("--json", action="store_true", help="print JSON instead of a report")
    run.add_argument(
        "--per-gemm",
        action="store_true",
        help="also print one row per GEMM and dataflow after the totals",
    )
    run.add_argument("--explain", action="store_true",
                     help="print each matmul's mapping: loop nest, what every level keeps, bytes "
                          "per link, the binding bound")  # fmt: skip
    run.add_argument("--out", metavar="FILE",
                     help="write one row per GEMM and dataflow to FILE.csv|.parquet|.json "
                          "(e.g. results/run.csv)")  # fmt: skip
    run.add_argument("--timeline", metavar="FILE.json",
                     help="write the DES's activity as a Chrome/Perfetto trace (one process per "
                          "GEMM and dataflow; docs/engine.md, 'Timeline')")  # fmt: skip
    run.set_defaults(func=_cmd_run)

    arch = sub.add_parser("arch", help="architecture files")
    arch_sub = arch.add_subparsers(dest="arch_cmd", required=True, parser_class=_Parser)
    arch_sub.add_parser("list", help="shipped architectures")
    show = arch_sub.add_parser("show", help="print a validated architecture as JSON")
    show.add_argument("name", help="shipped architecture name or YAML file")
    conv = arch_sub.add_parser("from-scalesim", help="convert a SCALE-Sim v3 .cfg")
    conv.add_argument("config", help="SCALE-Sim v3 configuration file (.cfg)")
    conv.add_argument("-o", "--output", required=True, metavar="FILE.yaml",
                      help="architecture file to write")  # fmt: skip
    arch.set_defaults(func=_cmd_arch)

    trace = sub.add_parser("trace", help="capture real GEMM traces and their statistics")
    trace_sub = trace.add_subparsers(dest="trace_cmd", required=True, parser_class=_Parser)
    cap = trace_sub.add_parser("capture", help="run a real model offline and record its GEMMs")
    cap.add_argument("--model", required=True, help="smollm2-135m or all-minilm-l6-v2")
    cap.add_argument("--out", required=True, help="directory for the full trace (outside git)")
    cap.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="tokens of the shipped prompt to run (default: 256)",
    )
    comp = trace_sub.add_parser("compact", help="full trace → compact trace")
    comp.add_argument("full", help="directory written by `accel-sim trace capture`")
    comp.add_argument("--out", required=True, help="directory for the compact trace")
    stats = trace_sub.add_parser("stats", help="outlier statistics per GEMM or 2-D array")
    stats.add_argument("path", help="trace directory, shipped trace name, .npz or .npy")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    trace.set_defaults(func=_cmd_trace)

    flows = sub.add_parser("dataflows", help="list dataflows and their knobs")
    flows.set_defaults(func=_cmd_dataflows)

    # commands that live beside their subject: model workloads, paper tables, sweeps, the cache
    from accel_sim import cache_command, model_run, sweep
    from accel_sim.tables import cli as tables_cli

    model_run.add_parser(sub)
    tables_cli.add_parser(sub)
    sweep.add_parser(sub)
    cache_command.add_parser(sub)
    return parser


def _version() -> str:
    import accel_sim

    return getattr(accel_sim, "__version__", "unknown")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``accel-sim``; returns the exit code (0 ok, 2 user error)."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version",
                                                            "--no-cache"):  # fmt: skip
        parser.error(f"unrecognized argument {argv[0]} before the command")  # not "COMMAND missing"
    args = parser.parse_args(argv)
    if args.no_cache:
        from accel_sim.cache_command import turn_off

        turn_off()
    try:
        code = args.func(args)
        sys.stdout.flush()
        for note in getattr(args, "notes_after", ()):  # (an error's stderr stays one line)
            print(note, file=sys.stderr)
        return code
    except UserInputError as err:
        print(f"accel-sim: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`accel-sim run | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the closed pipe
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise
        # stdout or an output file could not be written (disk full, quota, I/O): one line
        print(f"accel-sim: error: cannot write: {err.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accel-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
