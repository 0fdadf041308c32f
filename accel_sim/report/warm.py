"""Load heavy modules in a background thread while a long job computes.

Importing pandas (about 0.5 s) or matplotlib and building its font list (about 0.5 s) would
otherwise sit in the serial part of a model run, a sweep or a paper table: before its worker
processes fork (which then copy modules they never use) or after they finish. A process that
only waits on its workers (or a dask cluster) can pay that while it waits, so the tables and
figures written at the end cost only their own work.
"""

from __future__ import annotations

import threading


def _load(modules: tuple[str, ...], plots: bool) -> None:
    try:
        import importlib

        if plots:
            import matplotlib

            matplotlib.use("Agg")
            from matplotlib import font_manager

            font_manager.findfont("DejaVu Sans")
        for name in modules:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the import is tried again where the module is used
        pass


def _start(modules: tuple[str, ...], plots: bool) -> threading.Thread:
    thread = threading.Thread(target=_load, args=(modules, plots), daemon=True)
    thread.start()
    return thread


def warm_imports(*modules: str) -> threading.Thread:
    """Start (and return) a daemon thread importing ``modules``.

    Start it only after any worker processes are forked (a fork copies no running thread but
    may copy a lock it holds); ``join`` it before using them."""
    return _start(modules, plots=False)


def warm_plots(*modules: str) -> threading.Thread:
    """:func:`warm_imports` of matplotlib (Agg), its font list and ``modules``."""
    return _start(modules, plots=True)
