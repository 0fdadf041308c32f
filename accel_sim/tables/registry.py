"""Registry of paper-table commands (``accel-sim table NAME``): one module per table.

A table module registers a function ``build(options) -> TableResult`` with ``@register_table``.
``TableResult`` carries the rows (ours beside the paper's), a header stating every assumption
(architecture file, statistics source, calibration), and a ``plot(path)`` callable that draws
the matplotlib figure. The CLI prints the header and the table, writes ``NAME.csv`` and
``NAME.png`` into ``--out`` (atomically), and with ``--json`` prints the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from accel_sim.errors import UserInputError


@dataclass
class TableResult:
    name: str
    title: str
    header: list[str]  # assumptions: arch file, statistics source, calibration, deviations
    table: pd.DataFrame  # what is printed and written to CSV
    plot: Callable[[str], None] | None = None  # draws the figure into the given .png path
    notes: list[str] = field(default_factory=list)  # after the table: why ours differs, etc.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSpec:
    name: str
    build: Callable[..., TableResult]
    description: str


TABLES: dict[str, TableSpec] = {}


def register_table(name: str, description: str):
    def wrap(build):
        TABLES[name] = TableSpec(name, build, description)
        return build

    return wrap


def get_table(name: str) -> TableSpec:
    _load(name)
    if name not in TABLES:
        raise UserInputError("table", f"unknown table {name!r}; known: {sorted(TABLES)}")
    return TABLES[name]


def table_names() -> list[str]:
    _load_all()
    return sorted(TABLES)


def _load(name: str) -> None:
    """Import the module of table ``name`` (``osc-table2`` → ``osc_table2.py``) alone when it
    registers that name, else every table module (startup: one table's imports, not all)."""
    import importlib.util
    import re

    module = f"accel_sim.tables.{name.replace('-', '_')}"
    if (
        name not in TABLES
        and re.fullmatch(r"[a-z][a-z0-9-]*", name)
        and importlib.util.find_spec(module)
    ):
        importlib.import_module(module)
    if name not in TABLES:
        _load_all()


def _load_all() -> None:
    import importlib
    import pkgutil

    import accel_sim.tables as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in ("registry", "cli"):
            importlib.import_module(f"accel_sim.tables.{module.name}")
