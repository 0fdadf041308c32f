"""Reading user tables and writing results atomically (temp file + rename; no partial output)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm, parse_dim

if TYPE_CHECKING:  # pandas loads on first use: a model run's workers fork without it
    import pandas as pd

OUTPUT_SUFFIXES = (".csv", ".parquet", ".json")


def check_output_path(
    path: str | Path | None,
    suffixes: tuple[str, ...] | None = OUTPUT_SUFFIXES,
    flag: str = "--out",
) -> Path:
    """Validate an output file path before any work is done; returns it as a :class:`Path`.

    Refused, each as one :class:`UserInputError`: an empty path, a suffix not in ``suffixes``
    (``None`` accepts any), an existing directory, a parent that is a file, and a directory
    this process cannot create files in (read-only, ``/proc``, ``/sys``): a temporary file is
    created there and removed again, so the error comes before the computation. Missing parent
    directories (``results/`` on first use) are allowed when their nearest existing ancestor is
    writable; the writer creates them, so a refused run leaves nothing behind.
    """
    text = "" if path is None else str(path)
    if not text.strip():
        raise UserInputError(flag, "empty path; give a file name such as results/run.csv")
    path = Path(text).expanduser()
    if suffixes is not None and path.suffix not in suffixes:
        raise UserInputError(str(path), f"{flag} must end in one of {suffixes}")
    if path.is_dir():
        raise UserInputError(str(path), "is a directory; give a file name")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # created by the writer
    if not parent.is_dir():
        raise UserInputError(str(path), f"{parent} is not a directory")
    check_writable_dir(parent, str(path))
    return path


def check_writable_dir(directory: str | Path, source: str | None = None) -> Path:
    """Raise :class:`UserInputError` (naming ``source``, default the directory) unless a file
    can be created in the existing ``directory``: ``os.access`` first, then a real probe file
    (root passes ``os.access`` on read-only mounts and pseudo file systems)."""
    directory = Path(directory)
    source = source or str(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserInputError(source, f"directory {directory} is not writable")
    try:
        fd, probe = tempfile.mkstemp(prefix=".accel-sim-probe.", dir=directory)
    except OSError as err:
        reason = err.strerror or err.__class__.__name__
        raise UserInputError(source, f"cannot create files in {directory}: {reason}") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
    return directory


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)  # checked by check_output_path
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_value(value: Any, na: Any) -> Any:
    """A cell as plain JSON: numpy scalars as Python ones, NaN, infinities and ``na`` (pandas'
    NA) as null."""
    if value is na or value is None:
        return None
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The table's rows as JSON-able dicts, floats at full precision (``DataFrame.to_json``
    rounds to 10 decimal places: a time of 3.6667e-07 s kept 4 digits)."""
    import pandas as pd

    return [{str(k): _json_value(v, pd.NA) for k, v in row.items()}
            for row in df.to_dict("records")]  # fmt: skip


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV, Parquet or JSON (by suffix), atomically and deterministically."""
    path = check_output_path(path)
    check_finite_table(df, str(path))
    if path.suffix == ".csv":
        _atomic_write(path, lambda tmp: df.to_csv(tmp, index=False, lineterminator="\n"))
    elif path.suffix == ".parquet":
        table = _wide_ints_as_decimals(df)
        _atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))
    else:
        write_json(json_records(df), path)
    return path


def _wide_ints_as_decimals(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every column of Python integers too wide for 64 bits (the MACs, even the
    cycles, of a GEMM near the 2**24-per-dimension limit; pandas keeps them as objects, which
    Parquet cannot store) as exact 38-digit decimals."""
    import decimal

    wide = [c for c in df.columns if df[c].dtype == object and len(df) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in df[c])]  # fmt: skip
    if not wide:
        return df
    import pandas as pd
    import pyarrow as pa

    out = df.copy()
    for column in wide:
        out[column] = pd.array([decimal.Decimal(v) for v in df[column]],
                               dtype=pd.ArrowDtype(pa.decimal128(38, 0)))  # fmt: skip
    return out


def provenance(packages: tuple[str, ...]) -> dict[str, Any]:
    """The code that produced an output, for its manifest: accel-sim's version, a hash of the
    package's sources (``result_cache``'s key), Python's and ``packages``' versions."""
    import platform
    from importlib.metadata import version

    from accel_sim import __version__, result_cache

    return {"accel_sim": __version__, "source_sha256": result_cache._SOURCE,
            "python": platform.python_version(),
            "packages": {name: version(name) for name in packages}}  # fmt: skip


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (manifests record it for every input and output)."""
    import hashlib

    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    _atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


def _non_finite(obj: Any, key: str = "") -> tuple[str, float] | None:
    """(key path, value) of the first NaN or infinity in nested dicts/lists, or None."""
    if isinstance(obj, float | np.floating):
        return None if math.isfinite(obj) else (key or "<root>", float(obj))
    if isinstance(obj, dict):
        items = ((f"{key}.{k}" if key else str(k), v) for k, v in obj.items())
    elif isinstance(obj, list | tuple):
        items = ((f"{key}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for sub, value in items:
        found = _non_finite(value, sub)
        if found:
            return found
    return None


def check_finite(obj: Any, source: str) -> None:
    """Raise :class:`UserInputError` naming the key of the first NaN or infinity in ``obj``."""
    found = _non_finite(obj)
    if found:
        key, value = found
        raise UserInputError(source, f"is {value}, not a finite number; refusing to write it "
                             "(an architecture parameter out of range?)", key)  # fmt: skip


#: Table columns that must be finite (other numeric columns may hold NaN for "not measured").
FINITE_COLUMNS = ("cycles", "compute_cycles", "stall_cycles", "utilization", "macs", "time_s",
                  "energy_pj", "pj_per_mac")  # fmt: skip


def check_finite_table(df: pd.DataFrame, source: str) -> None:
    """No infinity in any numeric column and no NaN in :data:`FINITE_COLUMNS` (elsewhere NaN
    means "not applicable", e.g. the energy of a component a dataflow does not use); the error
    names the column and the first offending row."""
    import pandas as pd

    for column in df.columns:
        values = df[column]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        array = values.to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(array) if column in FINITE_COLUMNS else np.isinf(array)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise UserInputError(source, f"row {row} is {array[row]}, not a finite number; "
                                 "refusing to write it", str(column))  # fmt: skip


def write_json(obj: Any, path: str | Path) -> Path:
    """Write ``obj`` as JSON atomically; NaN or infinity anywhere is refused, naming its key."""
    check_finite(obj, str(path))
    return atomic_write_text(
        path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"
    )


#: Largest JSON file read, bytes (256 MiB; a compact trace's stats.json is under 1 MiB).
MAX_JSON_BYTES = 256 * 2**20


def read_json_file(path: str | Path, what: str = "file") -> Any:
    """Parse the JSON file at ``path``. Missing, unreadable, truncated, too large or too deeply
    nested files and ``NaN``/``Infinity`` literals (which JSON does not allow) are each one
    :class:`UserInputError` naming the file (and the key of a non-finite value)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(str(path), f"missing {what}")
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise UserInputError(str(path), f"larger than the {MAX_JSON_BYTES}-byte limit")
        text = path.read_bytes().decode("utf-8")
        # NaN/Infinity literals and numbers too large for a double parse to floats, refused
        # below; only then is the parsed value walked for the key (stats.json: 50,000 values)
        non_finite: list[float] = []

        def number(literal: str) -> float:
            value = float(literal)
            if not math.isfinite(value):
                non_finite.append(value)
            return value

        data = json.loads(text, parse_float=number, parse_constant=number)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        reason = err.__class__.__name__
        if isinstance(err, json.JSONDecodeError):
            reason = f"{err.msg} at line {err.lineno}, column {err.colno}"
        raise UserInputError(str(path), f"malformed, empty or truncated JSON ({reason})") from None
    except RecursionError:
        raise UserInputError(str(path), "JSON nested too deeply") from None
    found = _non_finite(data) if non_finite else None
    if found:
        key, value = found
        raise UserInputError(str(path), f"value {value} (NaN/Infinity) is not allowed", key)
    return data


def read_csv_rows(path: str | Path, required: list[str]) -> list[dict[str, str]]:
    """The data rows of a CSV as ``{column: cell}``, every cell as written but for its leading
    spaces (stdlib ``csv``: no pandas needed to read a trace's GEMM list). Checked, each problem
    one :class:`UserInputError`: the file exists and is UTF-8 CSV, every row has as many fields
    as the header (pandas would silently shift or drop them), the ``required`` columns exist,
    there is at least one data row and no required cell is empty. Blank lines are skipped."""
    import csv

    path = Path(path)
    if not path.is_file():
        raise UserInputError(str(path), "file not found")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            lines = csv.reader(fh, skipinitialspace=True)
            header = next(lines, None) or []
            rows = []
            for line, row in enumerate(lines, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise UserInputError(f"{path}:{line}", f"{len(row)} fields, but the header "
                                         f"has {len(header)}")  # fmt: skip
                rows.append(dict(zip(header, row)))
    except (UnicodeDecodeError, csv.Error) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise UserInputError(str(path), f"missing column(s) {missing}")
    if not rows:
        raise UserInputError(str(path), "no data rows (header only)")
    for number, row in enumerate(rows, start=1):
        column = next((c for c in required if not row[c].strip()), None)
        if column is not None:
            raise UserInputError(str(path), f"empty cell in data row {number}", column)
    return rows


def read_csv_checked(path: str | Path, required: list[str], dtype: Any = None) -> pd.DataFrame:
    """:func:`read_csv_rows`'s checks, then the CSV as a DataFrame (pandas' types; ``dtype=str``
    keeps every cell as written), with no NaN literal (``nan``, ``NA``) in a required column."""
    import pandas as pd

    read_csv_rows(path, required)
    try:
        df = pd.read_csv(path, skipinitialspace=True, index_col=False, dtype=dtype)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None
    if df[required].isna().any().any():
        column = next(c for c in required if df[c].isna().any())
        row = int(np.flatnonzero(df[column].isna().to_numpy())[0]) + 1
        raise UserInputError(str(path), f"empty or NaN cell in data row {row}", column)
    return df


#: Largest ``--gemms`` CSV accepted, in bytes (64 MiB, about two million rows).
MAX_GEMM_CSV_BYTES = 64 * 2**20


def read_gemm_csv(path: str | Path) -> list[Gemm]:
    """GEMMs from a CSV with columns ``M,K,N`` and optionally ``name`` (one row per GEMM).

    M, K and N are strict ASCII decimal integers in ``1..MAX_DIM`` (2**24); a bad cell is one
    :class:`UserInputError` naming ``file:line:column``, a name given twice one naming both
    lines. Blank lines are skipped."""
    import csv

    path = Path(path)
    if not path.is_file():
        what = "exists but is not a regular file" if path.exists() else "GEMM file not found"
        raise UserInputError(str(path), what)
    if path.stat().st_size > MAX_GEMM_CSV_BYTES:
        raise UserInputError(str(path), f"larger than the {MAX_GEMM_CSV_BYTES}-byte limit")
    try:
        text = path.read_bytes().decode("utf-8-sig")
        rows = list(_numbered_rows(csv.reader(text.splitlines(keepends=True))))
    except (UnicodeDecodeError, csv.Error) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None
    if not rows:
        raise UserInputError(str(path), "empty file; expected a header M,K,N[,name]")
    header = [c.strip() for c in rows[0][1]]
    missing = [c for c in ("M", "K", "N") if c not in header]
    if missing:
        raise UserInputError(str(path), f"missing column(s) {missing}; need M,K,N[,name]")
    extra = sorted(set(header) - {"M", "K", "N", "name"})
    if extra:
        raise UserInputError(str(path), f"unknown column(s) {extra}; allowed: M,K,N,name")
    if len(set(header)) != len(header):
        raise UserInputError(str(path), f"a column appears twice in the header {header}")
    where = {c: header.index(c) for c in header}
    gemms, named = [], {}  # name -> the line that gave it
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise UserInputError(f"{path}:{line}", f"{len(row)} fields, but the header has "
                                 f"{len(header)}")  # fmt: skip
        dims = [parse_dim(row[where[d]], d, f"{path}:{line}:{where[d] + 1}") for d in "MKN"]
        name = row[where["name"]].strip() if "name" in where else ""
        if name in named:  # (the results' rows are told apart by it)
            raise UserInputError(f"{path}:{line}", f"the name {name!r} is already line "
                                 f"{named[name]}'s; names must be unique (or empty)")  # fmt: skip
        if name:
            named[name] = line
        gemms.append(Gemm(*dims, name=name))
    if not gemms:
        raise UserInputError(str(path), "no GEMM rows")
    return gemms


def _numbered_rows(reader) -> Iterator[tuple[int, list[str]]]:
    """(line number where the record starts, fields) of every non-blank CSV record."""
    start = 1
    for row in reader:
        if any(cell.strip() for cell in row):
            yield start, row
        start = reader.line_num + 1
