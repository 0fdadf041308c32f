"""The ``--knob DATAFLOW.NAME=VALUE`` syntax shared by ``accel-sim run`` and ``accel-sim model``.

It lives in its own module so that every command can import it without importing the CLI
(``accel_sim.cli`` imports the commands, so a command importing ``accel_sim.cli`` is a cycle).
"""

from __future__ import annotations

import json
from typing import Any

from accel_sim.errors import UserInputError


def parse_knobs(pairs: list[str] | None, source: str = "--knob") -> dict[str, dict[str, Any]]:
    """``["osc.G=32"]`` → ``{"osc": {"G": 32}}``; values parsed as JSON when they can be.

    Knob names and values are checked later against the dataflow's declared knobs
    (``Dataflow.resolve_knobs``); this only checks the ``DATAFLOW.NAME=VALUE`` shape.

    Raises:
        UserInputError: a pair without ``=`` or without ``DATAFLOW.`` before the name, or a
            knob given twice.
    """
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        flow, dot, name = key.partition(".")
        if not sep or not dot or not flow or not name:
            raise UserInputError(source, f"expected DATAFLOW.NAME=VALUE, got {pair!r}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        knobs = out.setdefault(flow, {})
        if name in knobs:  # (as a duplicate key in a YAML file: never a silent last-wins)
            raise UserInputError(source, f"{flow}.{name} is given twice ({knobs[name]!r} and "
                                 f"{parsed!r}); give it once")  # fmt: skip
        knobs[name] = parsed
    return out
