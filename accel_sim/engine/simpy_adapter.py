"""The one place that reaches into simpy's internals, for the exact steady-state collapse.

The collapse must read every pending event (to fingerprint the simulation state) and move the
clock and the pending events forward by whole periods. simpy's public API offers neither, so this
module touches ``Environment._queue``, ``Environment._now`` and the value of an event already
triggered (a token handed to a consumer that has not run yet) — and nothing else does. The
layout of those attributes is stable across simpy 4.0–4.1; ``setup.cfg`` pins ``simpy>=4.1,<4.2``
and ``tests/test_engine.py`` checks the collapse against full simulation, so a simpy release that
changes them fails loudly, not silently.
"""

from __future__ import annotations

import simpy

from accel_sim.engine.des_resources import Handoff


def pending(env: simpy.Environment) -> list[tuple[float, int, object]]:
    """Pending events as (time, priority, event), in the order simpy will process them."""
    return [(t, prio, ev) for t, prio, _, ev in sorted(env._queue)]


def advance(env: simpy.Environment, cycles: int) -> None:
    """Move the clock and every pending event ``cycles`` into the future (order unchanged)."""
    env._now += cycles
    env._queue = [(t + cycles, p, eid, ev) for t, p, eid, ev in env._queue]


def handoffs(env: simpy.Environment) -> list[Handoff]:
    """Tokens handed to a waiting consumer that has not run yet: the token has left its queue
    and lives only in the event's value until then (so the fingerprint must include it and a
    jump must shift it)."""
    return [ev for _, _, _, ev in env._queue if isinstance(ev, Handoff)]


def event_value(ev: simpy.Event) -> object:
    return ev._value


def set_event_value(ev: simpy.Event, value: object) -> None:
    ev._value = value
