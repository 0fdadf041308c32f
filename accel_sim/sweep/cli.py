"""``accel-sim sweep SWEEP.yaml [--out DIR] [--scheduler ADDR] [--no-progress]``."""

from __future__ import annotations

import argparse
from typing import Any

from accel_sim.sweep.grid import MAX_POINTS


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``sweep`` command on an argparse sub-parsers object."""
    parser = subparsers.add_parser(
        "sweep", help="design-space sweep (YAML grid), local or on Dask",
        description="Run or resume a design-space sweep: every point of the grid is written to "
        f"OUT/points as it finishes (at most {MAX_POINTS:,} points per sweep file), then the "
        "table (results.csv/.parquet) and plots (pareto.png, heatmap.png) go to OUT.",
    )  # fmt: skip
    parser.add_argument("spec", help="sweep YAML or shipped sweep name (see "
                        "workloads/sweeps/example.yaml)")  # fmt: skip
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default: results/sweep-<spec name>; a rerun resumes)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDR",
        help="Dask scheduler address, e.g. tcp://host:8786 (default: local worker "
        "processes, one per usable CPU, at most 8, or ACCEL_SIM_WORKERS; "
        "'synchronous': in this process)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (it is only drawn when stderr is a terminal)",
    )
    parser.set_defaults(func=_cmd_sweep)
    return parser


def _cmd_sweep(args: argparse.Namespace) -> int:
    from accel_sim.sweep.results import front_report
    from accel_sim.sweep.run import run_sweep

    out = args.out
    if out is None:
        from pathlib import Path

        out = Path("results") / f"sweep-{Path(str(args.spec)).stem}"
    df = run_sweep(args.spec, out, scheduler=args.scheduler, progress=not args.no_progress)
    print(front_report(df))
    return 0
