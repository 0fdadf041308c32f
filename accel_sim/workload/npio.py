"""Reading user ``.npy``/``.npz`` arrays with their size checked before anything is allocated.

``np.load`` trusts a file: a 1 KB ``.npy`` whose header claims 100000×100000 float64 asks for
80 GB, and a few-MB ``.npz`` can inflate to gigabytes. Here the ``.npy`` header (shape × item
size) and every ``.npz`` member's uncompressed size (from the zip directory, which also bounds
what ``zipfile`` will inflate) are checked against :data:`MAX_ARRAY_BYTES` first. Pickles are
never loaded (``allow_pickle=False``; object dtypes are refused).
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npformat

from accel_sim.errors import UserInputError

#: Largest array accepted, bytes (1 GiB per array).
MAX_ARRAY_BYTES = 2**30
#: Largest total of the uncompressed members of one ``.npz``, bytes (4 GiB).
MAX_NPZ_BYTES = 4 * 2**30
#: Most members one ``.npz`` may have.
MAX_NPZ_MEMBERS = 100_000
_HEADER_SLACK = 2**16  # an .npy header is at most a few KiB


def _header(fh: IO[bytes], source: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) from an open ``.npy`` stream positioned at its start."""
    try:
        version = npformat.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fh)
        else:
            raise UserInputError(source, f".npy format version {version} is not supported")
    except (ValueError, OSError, EOFError, SyntaxError) as err:
        message = f"not a readable .npy header (truncated?): {err.__class__.__name__}"
        raise UserInputError(source, message) from None
    if dtype.hasobject:
        raise UserInputError(source, f"dtype {dtype} holds Python objects; only numbers load")
    return shape, fortran, dtype


def _check_size(shape: tuple[int, ...], dtype: np.dtype, source: str, limit: int) -> int:
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limit:
        raise UserInputError(
            source,
            f"array of shape {shape} and dtype {dtype} needs {nbytes} bytes, over the "
            f"{limit}-byte limit ({limit / 2**30:g} GiB)",
        )
    return nbytes


def _read(fh: IO[bytes], source: str, limit: int, available: int | None) -> np.ndarray:
    """The array at the start of ``fh`` after its header and size are checked; ``available`` is
    the number of bytes the stream holds (when known), so a truncated file is caught first."""
    shape, fortran, dtype = _header(fh, source)
    nbytes = _check_size(shape, dtype, source, limit)
    if available is not None and available - fh.tell() < nbytes:
        raise UserInputError(source, f"truncated: the header promises {nbytes} bytes of data, "
                             f"the file holds {max(0, available - fh.tell())}")  # fmt: skip
    data = bytearray(nbytes)  # filled in place: one allocation of the checked size
    view, got = memoryview(data), 0
    try:
        while got < nbytes:
            n = fh.readinto(view[got:])
            if not n:
                break
            got += n
    except (OSError, EOFError, zipfile.BadZipFile) as err:
        raise UserInputError(source, f"cannot read the data ({err.__class__.__name__})") from None
    if got != nbytes:
        raise UserInputError(source, f"truncated: {got} of {nbytes} data bytes")
    array = np.frombuffer(data, dtype=dtype)
    return array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)


def load_npy(path: str | Path, limit: int = MAX_ARRAY_BYTES) -> np.ndarray:
    """One ``.npy`` array, refused (one :class:`UserInputError`) if over ``limit`` bytes."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return _read(fh, str(path), limit, path.stat().st_size)
    except FileNotFoundError:
        raise UserInputError(str(path), "file not found") from None
    except OSError as err:
        raise UserInputError(str(path), f"cannot read: {err.__class__.__name__}") from None


def load_npz(
    path: str | Path, limit: int = MAX_ARRAY_BYTES, total_limit: int = MAX_NPZ_BYTES
) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` by name (``X_0`` for member ``X_0.npy``), each member's
    uncompressed size checked against ``limit`` and their sum against ``total_limit`` before
    anything is inflated."""
    path = Path(path)
    source = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = [i for i in archive.infolist() if not i.is_dir()]
            if len(members) > MAX_NPZ_MEMBERS:
                raise UserInputError(source, f"{len(members)} members; the limit is "
                                     f"{MAX_NPZ_MEMBERS}")  # fmt: skip
            total = 0
            for info in members:
                where = f"{source}:{info.filename}"
                if info.file_size > limit + _HEADER_SLACK:
                    raise UserInputError(where, f"inflates to {info.file_size} bytes, over the "
                                         f"{limit}-byte limit per array")  # fmt: skip
                total += info.file_size
            if total > total_limit:
                raise UserInputError(source, f"members inflate to {total} bytes in all, over "
                                     f"the {total_limit}-byte limit")  # fmt: skip
            arrays = {}
            for info in members:
                name = info.filename.removesuffix(".npy")
                with archive.open(info) as fh:
                    arrays[name] = _read(fh, f"{source}:{info.filename}", limit, info.file_size)
            return arrays
    except FileNotFoundError:
        raise UserInputError(source, "file not found") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        message = f"not a readable .npz file (truncated or corrupt?): {err.__class__.__name__}"
        raise UserInputError(source, message) from None


def load_arrays(path: str | Path, limit: int = MAX_ARRAY_BYTES) -> dict[str, np.ndarray]:
    """``{stem: array}`` of a ``.npy`` or every array of an ``.npz`` (by suffix)."""
    path = Path(path)
    if path.suffix == ".npy":
        return {path.stem: load_npy(path, limit)}
    return load_npz(path, limit)
