"""``accel-sim cache [info|clear]``: where the on-disk result cache is, what it holds, and
emptying it (``result_cache.py``; imported only when the command runs)."""

from __future__ import annotations

import os

from accel_sim.errors import UserInputError

#: The variable that moves or turns off the cache (``result_cache.ENV``, without importing it).
ENV = "ACCEL_SIM_CACHE"


def add_parser(sub) -> None:
    cache = sub.add_parser("cache", help="the on-disk cache of mappings and DES timings")
    cache.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                       help="info (default): where it is and what it holds; clear: empty "
                            "it")  # fmt: skip
    cache.set_defaults(func=_cmd_cache)


def turn_off() -> None:
    """``accel-sim --no-cache``: off for this process and the workers it starts."""
    import sys

    os.environ[ENV] = "off"
    loaded = sys.modules.get("accel_sim.result_cache")
    if loaded is not None:
        loaded.reset()


def _cmd_cache(args) -> int:
    from accel_sim import result_cache

    try:
        where = result_cache.directory()
        if where is None:
            print(f"result cache: off ({ENV}={os.environ.get(ENV, '')!r})")
            return 0
        store = result_cache._open(where)
    except Exception as err:  # noqa: BLE001 - the setting names something unusable
        named = os.environ.get(ENV) or "the default directory"
        raise UserInputError(ENV, f"{named} cannot hold the result cache "
                             f"({type(err).__name__}: {err})") from None  # fmt: skip
    with store:
        if args.action == "clear":
            print(f"result cache {where}: removed {store.clear()} entries")
            return 0
        kinds: dict[str, int] = {}
        for name in store.iterkeys():
            kind = str(name).split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        held = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "empty"
        print(f"result cache {where}: {held}; {store.volume() / 2**20:.1f} MiB of at most "
              f"{result_cache.SIZE_LIMIT // 2**20} MiB (turn off: {ENV}=off or accel-sim "
              "--no-cache)")  # fmt: skip
    return 0
