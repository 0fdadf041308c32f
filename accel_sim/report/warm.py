"""Load the plotting stack in a background thread while a long job computes.

Importing matplotlib and building its font list take about 0.5 s of the serial tail of a
sweep or a paper table; a process that only waits on worker processes (or a dask cluster) can
pay that while it waits, so the figures written at the end cost only their drawing.
"""

from __future__ import annotations

import threading


def _load(modules: tuple[str, ...]) -> None:
    try:
        import importlib

        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import font_manager

        for name in modules:
            importlib.import_module(name)
        font_manager.findfont("DejaVu Sans")
    except Exception:  # noqa: BLE001 - the import is tried again where the figures are drawn
        pass


def warm_plots(*modules: str) -> threading.Thread:
    """Start (and return) a daemon thread importing matplotlib, its font list and ``modules``.

    Start it only after any worker processes are forked (a fork copies no running thread but
    may copy a lock it holds); ``join`` it before drawing."""
    thread = threading.Thread(target=_load, args=(modules,), daemon=True)
    thread.start()
    return thread
