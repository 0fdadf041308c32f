"""The engine's costly choices, kept on disk between runs: a second run of a table, a model or a
notebook cell reuses the mapper's choice, the DES-checked mapping with its DES timing and a chip's
partition of every matmul it has seen, instead of searching and simulating again.

What is kept, each under the key its in-process cache already uses (the architecture's content
hash and the op without its name: shape, precision, operand widths, metadata streams, count):

* ``mapper``: the mapper's chosen mapping and its runner-up (``engine/mapper.py``);
* ``des``: the mapping the DES checked (``engine/des_check.py``) and its DES timing (cycles,
  compute cycles, stalls by cause, steps simulated and collapsed);
* ``partition``: a whole chip's split of a matmul across its cores (``engine/chip_choice.py``);
* ``schedule``: a plan's operations scheduled on concurrent units (``engine/schedule.py``), under
  its own memo's key (every job's kind, unit, cycles and DRAM bytes, the graph, the row blocks
  and the DRAM rates).

Every key also holds what else decides those choices:

* the code this process runs: a hash of every ``.py`` file of the package, taken when this
  module is imported (with the engine), and accel-sim's, Python's, simpy's and numpy's versions;
  an edited engine or another release reaches none of the old entries (they age out under the
  size limit). An installation without its ``.py`` files runs without the cache;
* the tuning constants as they are at the moment (every upper-case number, string or tuple of
  the modules of ``accel_sim/engine`` and ``accel_sim/arch/units``: the mapper's ``RESCORE``,
  the DES check's ``CHECK``, a chip's ``HEDGE``...), so a notebook or script that sets one reads
  and writes entries of its own.

A hit gives exactly what the search or the simulation would give, so results never depend on
the cache (``tests/test_result_cache.py`` runs the same matmuls cold and warm). What a hit does
not skip: building the step program for the counts and energy, the closed forms of the
vector, comparator and transfer operations.

Where: ``ACCEL_SIM_CACHE`` names the directory (default: the user cache directory,
``~/.cache/accel-sim/results`` on Linux); ``ACCEL_SIM_CACHE=off`` (or ``accel-sim --no-cache``)
turns it off. The store is :mod:`diskcache` (SQLite, safe across processes and forks), at most
:data:`SIZE_LIMIT` bytes, least recently stored out first; entries are pickles, so the directory
must be one only you can write to. A directory that cannot be used is reported once on stderr
and the run goes on without it; a damaged entry is dropped and computed again; a write that
finds the database busy for :data:`LOCK_TIMEOUT_S` is skipped.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

ENV = "ACCEL_SIM_CACHE"
OFF = ("off", "0", "no", "false")
#: Bytes the store may hold before it evicts the least recently stored entries.
SIZE_LIMIT = 512 * 2**20
#: Seconds a read or write waits for another process's write before it gives up (a miss).
LOCK_TIMEOUT_S = 2.0
#: Packages (under ``accel_sim``) whose upper-case constants are part of every key.
TUNED = ("engine", "arch/units")

_ROOT = Path(__file__).resolve().parent
_CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*$")
_state: dict[str, Any] = {}  # "store": the open diskcache.Cache or None; "tuned": [(module, names)]


def _source_hash() -> str | None:
    """A hash of every ``.py`` file of the package as it is now (None without any)."""
    digest = hashlib.sha256()
    found = False
    for path in sorted(_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(_ROOT)).encode())
        digest.update(path.read_bytes())
        found = True
    return digest.hexdigest() if found else None


_SOURCE = _source_hash()  # the code this process imported (a later edit is another version)


def directory() -> Path | None:
    """The cache directory in use, or None when the cache is off (``ACCEL_SIM_CACHE``, or no
    source to key entries by)."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF or _SOURCE is None:
        return None
    if value:
        return Path(value).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("accel-sim")) / "results"


def code_version() -> str:
    """The source hash with accel-sim's, Python's, simpy's and numpy's versions."""
    version = _state.get("version")
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed

        def release(name: str) -> str:
            try:
                return installed(name)
            except PackageNotFoundError:
                return "-"

        parts = [_SOURCE or "-", sys.version, *(release(n) for n in ("accel-sim", "simpy",
                                                                     "numpy"))]  # fmt: skip
        version = _state["version"] = hashlib.sha256(" ".join(parts).encode()).hexdigest()
    return version


def _tuning() -> str:
    """The current values of the tuned packages' constants (read at every key: a script may
    set one at any time)."""
    tuned = _state.get("tuned")
    if tuned is None:
        tuned = []
        for package in TUNED:
            for path in sorted((_ROOT / package).glob("*.py")):
                name = ".".join(("accel_sim", *Path(package).parts, path.stem))
                module = importlib.import_module(name.removesuffix(".__init__"))
                names = sorted(a for a, v in vars(module).items()
                               if _CONSTANT.match(a) and _plain(v))  # fmt: skip
                tuned.append((module, names))
        _state["tuned"] = tuned
    return repr([getattr(module, name) for module, names in tuned for name in names])


def _plain(value: object) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_plain(v) for v in value)
    return isinstance(value, int | float | str)


def _open(where: Path):
    import diskcache

    return diskcache.Cache(str(where), size_limit=SIZE_LIMIT, timeout=LOCK_TIMEOUT_S)


def _store():
    if "store" not in _state:
        _state["store"] = None
        where = None
        try:
            where = directory()
            if where is not None:
                code_version()
                _state["store"] = _open(where)
        except Exception as err:  # noqa: BLE001 - any failure: run without the cache
            _unusable(where or os.environ.get(ENV), err)
    return _state["store"]


def _unusable(where, err: Exception) -> None:
    _state["store"] = None
    print(f"accel-sim: result cache {where} unusable ({type(err).__name__}: {err}); running "
          f"without it (set {ENV}=off to silence this)", file=sys.stderr)  # fmt: skip


def _digest(kind: str, key: tuple) -> str | None:
    text = repr(key)
    if " at 0x" in text:  # an object without a content repr: no stable key, no caching
        return None
    whole = f"{code_version()}|{_tuning()}|{text}"
    return f"{kind}:" + hashlib.sha256(whole.encode()).hexdigest()


def get(kind: str, key: tuple) -> Any | None:
    """The value stored for ``(kind, key)``, or None (a miss, or the cache is off)."""
    store = _store()
    name = _digest(kind, key) if store is not None else None
    if name is None:
        return None
    import diskcache

    try:
        return store.get(name)
    except diskcache.Timeout:  # another process is writing: a miss
        return None
    except Exception as err:  # noqa: BLE001 - a damaged entry: drop it, compute it again
        if _is_database_error(err):
            _unusable(store.directory, err)
            return None
        try:
            store.delete(name)
        except Exception as again:  # noqa: BLE001 - the database itself is damaged
            _unusable(store.directory, again)
        return None


def put(kind: str, key: tuple, value: Any) -> None:
    """Store ``value`` for ``(kind, key)`` (nothing when the cache is off)."""
    store = _store()
    name = _digest(kind, key) if store is not None else None
    if name is None:
        return
    import diskcache

    try:
        store.set(name, value)
    except diskcache.Timeout:  # another process is writing: this entry is not kept
        pass
    except Exception as err:  # noqa: BLE001 - disk full, read-only...: run without it
        _unusable(store.directory, err)


def _is_database_error(err: Exception) -> bool:
    import sqlite3

    return isinstance(err, sqlite3.Error | OSError)


def recall(kind: str, key: tuple, memory: dict, limit: int) -> Any | None:
    """An in-process memo backed by the disk: ``memory``'s value for ``key``, else the one
    stored for ``(kind, key)`` (then kept in ``memory`` too, :func:`remember`), else None."""
    hit = memory.get(key)
    if hit is None:
        hit = get(kind, key)
        if hit is not None:
            remember(memory, key, hit, limit)
    return hit


def store(kind: str, key: tuple, value: Any, memory: dict, limit: int) -> Any:
    """Keep a value just computed in ``memory`` and on disk (the other half of :func:`recall`);
    returns it."""
    put(kind, key, value)
    return remember(memory, key, value, limit)


def remember(memory: dict, key: tuple, value: Any, limit: int) -> Any:
    """``memory[key] = value``, emptying ``memory`` first once it holds ``limit`` entries."""
    if len(memory) >= limit:
        memory.clear()
    memory[key] = value
    return value


def reset() -> None:
    """Forget the open store and the settings read (after changing ``ACCEL_SIM_CACHE``)."""
    store = _state.pop("store", None)
    if store is not None:
        store.close()
