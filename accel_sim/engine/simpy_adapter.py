"""The one place that reaches into simpy's internals, for the exact steady-state collapse.

The collapse must read every pending event (to fingerprint the simulation state) and move the
clock and the pending events forward by whole periods. simpy's public API offers neither, so this
module touches ``Environment._queue`` and ``Environment._now`` — and nothing else does. The
layout of those attributes is stable across simpy 4.0–4.1; ``setup.cfg`` pins ``simpy>=4.1,<4.2``
and ``tests/test_engine.py`` checks the collapse against full simulation, so a simpy release that
changes them fails loudly, not silently.
"""

from __future__ import annotations

import simpy


def pending(env: simpy.Environment) -> list[tuple[float, int, object]]:
    """Pending events as (time, priority, event), in the order simpy will process them."""
    return [(t, prio, ev) for t, prio, _, ev in sorted(env._queue)]


def advance(env: simpy.Environment, cycles: int) -> None:
    """Move the clock and every pending event ``cycles`` into the future (order unchanged)."""
    env._now += cycles
    env._queue = [(t + cycles, p, eid, ev) for t, p, eid, ev in env._queue]
