"""The one place that reaches into simpy's internals: for the exact steady-state collapse, and to
skip events whose processing would do nothing.

The collapse must read every pending event (to fingerprint the simulation state) and move the
clock and the pending events forward by whole periods. simpy's public API offers neither, so this
module touches ``Environment._queue``, ``Environment._now``, the value of granted store gets and
a container's ``_level`` — and nothing else does. The
layout of those attributes is stable across simpy 4.0–4.1; ``setup.cfg`` pins ``simpy>=4.1,<4.2``
and ``tests/test_engine.py`` checks the collapse against full simulation, so a simpy release that
changes them fails loudly, not silently.
"""

from __future__ import annotations

import simpy
from simpy.resources.store import StoreGet


def release(resource: simpy.Resource, request) -> None:
    """``resource.release(request)`` without an event when no request is waiting.

    simpy frees the user at once and schedules a ``Release`` event whose only callback grants
    waiting requests; with none waiting when it is created there can be none when it is
    processed either (a request made meanwhile finds the resource free and is granted on the
    spot), so the event is a no-op and is not scheduled. Same-time events keep their order (the
    event ids of the others only stay increasing), so results are identical."""
    if resource.queue:
        resource.release(request)
    else:
        resource.users.remove(request)


def put_slot(container: simpy.Container) -> None:
    """``container.put(1)`` for a slot being freed, without an event when nothing waits.

    The ``ContainerPut`` event's only callback grants waiting gets; with none waiting (and room
    for the slot) the level rises at once and the event would be a no-op (a get made meanwhile
    is granted on the spot), as for :func:`release`."""
    if container.get_queue or container.put_queue or container.level >= container.capacity:
        container.put(1)
    else:
        container._level += 1


def pending(env: simpy.Environment) -> list[tuple[float, int, object]]:
    """Pending events as (time, priority, event), in the order simpy will process them."""
    return [(t, prio, ev) for t, prio, _, ev in sorted(env._queue)]


def advance(env: simpy.Environment, cycles: int) -> None:
    """Move the clock and every pending event ``cycles`` into the future (order unchanged)."""
    env._now += cycles
    env._queue = [(t + cycles, p, eid, ev) for t, p, eid, ev in env._queue]


def granted_gets(env: simpy.Environment) -> list[StoreGet]:
    """Store gets already granted but not yet resumed: their item has left ``store.items`` and
    lives only in the event's value until its process runs (so the fingerprint must include it
    and a jump must shift it)."""
    return [ev for _, _, _, ev in env._queue if isinstance(ev, StoreGet)]


def event_value(ev: StoreGet) -> object:
    return ev._value


def set_event_value(ev: StoreGet, value: object) -> None:
    ev._value = value
