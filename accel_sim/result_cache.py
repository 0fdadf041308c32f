"""The engine's costly choices, kept on disk between runs: a second run of a table, a model or a
notebook cell reuses the mapper's choice, the DES-checked mapping with its DES timing and a chip's
partition of every matmul it has seen, instead of searching and simulating again.

What is kept, each under the key its in-process cache already uses (the architecture's content
hash and the op without its name: shape, precision, operand widths, metadata streams, count):

* ``mapper``: the mapper's chosen mapping and its runner-up (``engine/mapper.py``);
* ``des``: the mapping the DES checked (``engine/des_check.py``) and its DES timing (cycles,
  compute cycles, stalls by cause, steps simulated and collapsed);
* ``partition``: a whole chip's split of a matmul across its cores (``engine/chip_choice.py``).

Every key also holds a hash of the package's own source (every ``.py`` file of ``accel_sim``)
and the versions of Python, simpy and numpy: an edit to the engine, or another release, makes
every old entry unreachable (they age out under the size limit). A hit gives exactly what the
search or the simulation would give, so results never depend on the cache
(``tests/test_result_cache.py`` runs the same matmuls cold and warm). What a hit does not skip:
building the step program for the counts and energy, the plan's schedule of its operations.

Where: ``ACCEL_SIM_CACHE`` names the directory (default: the user cache directory,
``~/.cache/accel-sim/results`` on Linux); ``ACCEL_SIM_CACHE=off`` (or ``accel-sim --no-cache``)
turns it off. The store is :mod:`diskcache` (SQLite, safe across processes and forks), at most
:data:`SIZE_LIMIT` bytes, least recently stored out first. A directory that cannot be used is
reported once on stderr and the run goes on without it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

ENV = "ACCEL_SIM_CACHE"
OFF = ("off", "0", "no", "false")
#: Bytes the store may hold before it evicts the least recently stored entries.
SIZE_LIMIT = 512 * 2**20

_state: dict[str, Any] = {}  # "store": the open diskcache.Cache or None (off), "version": str


def directory() -> Path | None:
    """The cache directory in use, or None when the cache is off (``ACCEL_SIM_CACHE``)."""
    import os

    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("accel-sim")) / "results"


def code_version() -> str:
    """A hash of every ``.py`` file of the installed package and of the versions of Python,
    simpy and numpy (part of every key)."""
    version = _state.get("version")
    if version is None:
        import numpy
        import simpy

        root = Path(__file__).resolve().parent
        digest = hashlib.sha256(f"{sys.version_info[:3]} {simpy.__version__} "
                                f"{numpy.__version__}".encode())  # fmt: skip
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
        version = _state["version"] = digest.hexdigest()
    return version


def _open(where: Path):
    import diskcache

    return diskcache.Cache(str(where), size_limit=SIZE_LIMIT)


def _store():
    if "store" not in _state:
        _state["store"] = None
        where = directory()
        if where is not None:
            try:
                _state["store"] = _open(where)
            except Exception as err:  # noqa: BLE001 - any failure: run without the cache
                _unusable(where, err)
    return _state["store"]


def _unusable(where, err: Exception) -> None:
    _state["store"] = None
    print(f"accel-sim: result cache {where} unusable ({type(err).__name__}: {err}); running "
          f"without it (set {ENV}=off to silence this)", file=sys.stderr)  # fmt: skip


def _digest(kind: str, key: tuple) -> str | None:
    text = repr(key)
    if " at 0x" in text:  # an object without a content repr: no stable key, no caching
        return None
    return f"{kind}:" + hashlib.sha256(f"{code_version()}|{text}".encode()).hexdigest()


def get(kind: str, key: tuple) -> Any | None:
    """The value stored for ``(kind, key)``, or None (a miss, or the cache is off)."""
    store = _store()
    if store is None:
        return None
    name = _digest(kind, key)
    if name is None:
        return None
    try:
        return store.get(name)
    except Exception as err:  # noqa: BLE001 - a damaged entry or database: run without it
        _unusable(store.directory, err)
        return None


def put(kind: str, key: tuple, value: Any) -> None:
    """Store ``value`` for ``(kind, key)`` (nothing when the cache is off)."""
    store = _store()
    if store is None:
        return
    name = _digest(kind, key)
    if name is None:
        return
    try:
        store.set(name, value)
    except Exception as err:  # noqa: BLE001 - disk full, read-only...: run without it
        _unusable(store.directory, err)


def reset() -> None:
    """Forget the open store and the settings read (after changing ``ACCEL_SIM_CACHE``)."""
    store = _state.pop("store", None)
    if store is not None:
        store.close()


# ----------------------------------------------------------------------------- command line
def add_parser(sub) -> None:
    cache = sub.add_parser("cache", help="the on-disk cache of mappings and DES timings")
    cache.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                       help="info (default): where it is and what it holds; clear: empty "
                            "it")  # fmt: skip
    cache.set_defaults(func=_cmd_cache)


def _cmd_cache(args) -> int:
    where = directory()
    if where is None:
        print(f"result cache: off ({ENV}={_env_value()})")
        return 0
    try:
        store = _open(where)
    except Exception as err:  # noqa: BLE001 - the setting names something unusable
        from accel_sim.errors import UserInputError

        raise UserInputError(ENV, f"{where} cannot hold the result cache "
                             f"({type(err).__name__}: {err})") from None  # fmt: skip
    if args.action == "clear":
        entries = store.clear()
        store.close()
        print(f"result cache {where}: removed {entries} entries")
        return 0
    kinds: dict[str, int] = {}
    for name in store.iterkeys():
        kind = str(name).split(":", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    held = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "empty"
    print(f"result cache {where}: {held}; {store.volume() / 2**20:.1f} MiB of at most "
          f"{SIZE_LIMIT // 2**20} MiB (turn off: {ENV}=off or accel-sim --no-cache)")  # fmt: skip
    store.close()
    return 0


def _env_value() -> str:
    import os

    return os.environ.get(ENV, "")
