"""``accel-sim table NAME [--out DIR] [--json]``: build a paper table, print it, write CSV + PNG.

The command prints the header (every assumption: architecture file, statistics source,
calibration), the table and the notes; it writes ``DIR/NAME.csv`` (and ``DIR/NAME-detail.csv``
when the table keeps its per-point rows in ``extra["detail"]``) and ``DIR/NAME.png``, each
atomically (temp file + rename). ``--json`` prints ``{"name", "title", "header", "rows",
"notes"}`` instead of the text report; the files are written either way.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from accel_sim.errors import UserInputError

DEFAULT_OUT = "results"


def add_parser(subparsers) -> None:
    """Register ``table`` on the main CLI's subparsers (called by ``accel_sim/cli.py``)."""
    table = subparsers.add_parser(
        "table",
        help="reproduce a paper table: print it, write NAME.csv and NAME.png",
        description="Reproduce a paper table (ours beside the paper's). Known tables are listed "
        "by `accel-sim table --list`.",
    )
    # NAME is checked against the registry when the command runs (not via argparse choices, so
    # that building the parser does not import every table module).
    table.add_argument("name", nargs="?", metavar="NAME", help="table name (see --list)")
    table.add_argument("--list", action="store_true", help="list the tables and exit")
    table.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                       help=f"directory for NAME.csv, NAME.png and NAME.manifest.json "
                            f"(osc-table2 also writes its detail CSV; default: {DEFAULT_OUT}/; "
                            "created if missing)")  # fmt: skip
    table.add_argument("--json", action="store_true", help="print the rows as JSON")
    table.set_defaults(func=run)


def _check_out_dir(out: str | Path, name: str) -> Path:
    """The ``--out`` directory, created if missing, checked writable before any work is done.

    ``name``: the table, whose ``NAME.csv`` path is checked like any ``--out`` file.
    """
    from accel_sim.report.io import check_output_path

    if not str(out).strip():
        raise UserInputError("--out", "give a directory (an empty string is not one)")
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise UserInputError(str(path), "--out must be a directory (it is a file)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserInputError(
            str(path), f"cannot create the --out directory: {err.strerror}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserInputError(str(path), "the --out directory is not writable")
    check_output_path(path / f"{name}.csv")
    return path


def _write_png(result, path: Path) -> None:
    """Draw the figure into a temp file next to ``path`` and rename it (atomic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from accel_sim.report.io import _atomic_write

    try:
        _atomic_write(path, result.plot)  # the temp name has no suffix: figures save as PNG
    finally:
        plt.close("all")


def _fmt(value: float) -> str:
    """Floats for the terminal: no scientific notation, 3-4 significant decimals."""
    if not math.isfinite(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.2f}"
    if abs(value) >= 1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def format_report(result) -> str:
    """Header lines, the table, then the notes (what the command prints)."""
    lines = [f"accel-sim table {result.name} · {result.title}", ""]
    lines += [f"  {line}" for line in result.header]
    lines += ["", result.table.to_string(index=False, float_format=_fmt), ""]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _write_manifest(result, out: Path, files: list[Path]) -> Path:
    """``NAME.manifest.json``: what produced the files beside it — the command, the table's
    header (its architectures and engine), the code (a hash of the package's sources and the
    versions that key the result cache) and each file's sha256. No time stamp: identical inputs
    give identical files."""
    from accel_sim.report.io import provenance, sha256_file, write_json

    doc = {
        "command": f"accel-sim table {result.name}",
        "title": result.title,
        # (without the wall time a header line may give: not an input)
        "header": [re.sub(r";? ?built in [0-9.]+ s", "", line) for line in result.header],
        "engine": "des (the cycle-level engine; every table runs it)",
        **provenance(("simpy", "numpy", "pandas", "numba")),
        "files": {p.name: sha256_file(p) for p in files},
        "notes": list(result.notes),
    }
    return write_json(doc, out / f"{result.name}.manifest.json")


def build_table(name: str, **options):
    """Build a registered table by name (an unknown name is a :class:`UserInputError`)."""
    from accel_sim.tables.registry import get_table

    return get_table(name).build(**options)


def run(args) -> int:
    import pandas as pd

    from accel_sim.report.io import json_records as rows_of  # the rows as JSON (NaN → null)
    from accel_sim.report.io import write_table
    from accel_sim.tables.registry import TABLES, get_table, table_names

    if args.list or not args.name:
        names = table_names()
        if not args.list:
            raise UserInputError("table", f"give a table NAME; known: {names}")
        for name in names:
            print(f"{name:<20} {TABLES[name].description}")
        return 0
    get_table(args.name)  # an unknown name is one clear line, before any work
    out = _check_out_dir(args.out, args.name)  # before any work: a bad --out costs nothing
    result = build_table(args.name)
    csv_path = write_table(result.table, out / f"{result.name}.csv")
    written = [csv_path]
    detail = result.extra.get("detail")
    if isinstance(detail, pd.DataFrame):
        written.append(write_table(detail, out / f"{result.name}-detail.csv"))
    if result.plot is not None:
        png = out / f"{result.name}.png"
        _write_png(result, png)
        written.append(png)
    written.append(_write_manifest(result, out, written))
    if args.json:
        doc = {"name": result.name, "title": result.title, "header": result.header,
               "rows": rows_of(result.table), "notes": result.notes}  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        print(format_report(result))
        print("\nwrote " + ", ".join(str(p) for p in written))
    return 0
