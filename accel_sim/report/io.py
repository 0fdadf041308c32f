"""Reading user tables and writing results atomically (temp file + rename; no partial output)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm

OUTPUT_SUFFIXES = (".csv", ".parquet", ".json")


def check_output_path(path: str | Path) -> Path:
    """Validate ``--out`` before any work is done."""
    path = Path(path)
    if path.suffix not in OUTPUT_SUFFIXES:
        raise UserInputError(str(path), f"--out must end in one of {OUTPUT_SUFFIXES}")
    if path.parent and not path.parent.exists():
        raise UserInputError(str(path), f"directory {path.parent} does not exist")
    if path.is_dir():
        raise UserInputError(str(path), "is a directory; give a file name")
    return path


def _atomic_write(path: Path, write) -> None:
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


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV, Parquet or JSON (by suffix), atomically and deterministically."""
    path = check_output_path(path)
    if path.suffix == ".csv":
        _atomic_write(path, lambda tmp: df.to_csv(tmp, index=False, lineterminator="\n"))
    elif path.suffix == ".parquet":
        _atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))
    else:
        records = json.loads(df.to_json(orient="records"))
        write_json(records, path)
    return path


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


def write_json(obj: Any, path: str | Path) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _check_field_counts(path: Path) -> None:
    """Every row has as many fields as the header (pandas would silently shift or drop them)."""
    import csv

    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = csv.reader(fh)
            header = next(rows, None)
            for line, row in enumerate(rows, start=2):
                if row and len(row) != len(header):
                    raise UserInputError(f"{path}:{line}", f"{len(row)} fields, but the header "
                                         f"has {len(header)}")  # fmt: skip
    except (UnicodeDecodeError, csv.Error) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None


def read_csv_checked(path: str | Path, required: list[str]) -> pd.DataFrame:
    """A CSV with at least the ``required`` columns; any problem is one :class:`UserInputError`."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(str(path), "file not found")
    _check_field_counts(path)
    try:
        df = pd.read_csv(path, skipinitialspace=True, index_col=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise UserInputError(str(path), f"missing column(s) {missing}")
    if df[required].isna().any().any():
        raise UserInputError(str(path), "empty or NaN cells in required columns")
    return df


def read_gemm_csv(path: str | Path) -> list[Gemm]:
    """GEMMs from a CSV with columns ``M,K,N`` and optionally ``name`` (one row per GEMM)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(str(path), "GEMM file not found")
    _check_field_counts(path)
    try:
        df = pd.read_csv(path, skipinitialspace=True, index_col=False, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise UserInputError(str(path), f"not a readable CSV ({err.__class__.__name__})") from None
    missing = [c for c in ("M", "K", "N") if c not in df.columns]
    if missing:
        raise UserInputError(str(path), f"missing column(s) {missing}; need M,K,N[,name]")
    extra = sorted(set(df.columns) - {"M", "K", "N", "name"})
    if extra:
        raise UserInputError(str(path), f"unknown column(s) {extra}; allowed: M,K,N,name")
    if df.empty:
        raise UserInputError(str(path), "no GEMM rows")
    gemms = []
    for row_number, row in enumerate(df.itertuples(index=False), start=2):
        dims = []
        for dim in ("M", "K", "N"):
            value = getattr(row, dim)
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number) or number != int(number) or number <= 0:
                raise UserInputError(
                    f"{path}:{row_number}", f"{dim}={value!r} must be a positive integer", dim
                )
            dims.append(int(number))
        name = getattr(row, "name", "") if "name" in df.columns else ""
        name = "" if not isinstance(name, str) else name
        gemms.append(Gemm(*dims, name=name))
    return gemms
