"""The DES's shared resources — buffer slots, memory ports and token queues — on simpy events.

Each grants *at once* when it can: a free slot or port is taken, a queued token is handed out
and a token finds room, in the caller's own turn, with no event; the caller waits on a
``simpy.Event`` only when it must (no slot free, port held, queue empty or full), and whoever
frees the resource hands it to the oldest waiter (first come, first served) by succeeding that
event. A hop's ports are granted together by the one :class:`Ports` arbiter (all or none; the
oldest waiting transfer whose ports are all free goes first). simpy's ``Container``,
``Resource`` and ``Store`` would schedule and process an event for every request, granted or
not (a matmul step cost ~34 events; with these, the waits that really happen and the timeouts
remain). Slots and token queues are FIFO per resource; who goes first among processes acting
at the *same* cycle follows the order they run in rather than simpy's event ids.

Every resource exposes its state for the steady-state collapse's fingerprint (``state``) and
moves its queued tokens by whole periods on a jump (``shift``).
"""

from __future__ import annotations

from collections import deque

import simpy


class Handoff(simpy.Event):
    """A token handed to a waiting consumer: its value is the token ``(step, ready cycle)``,
    held by the event until the consumer runs (the collapse fingerprints and shifts it)."""


def shifted(token: tuple[int, int], steps: int, cycles: int) -> tuple[int, int]:
    """A ``(step, ready cycle)`` token moved by whole periods (a ready time of 0: no wait)."""
    i, ready = token
    return (i + steps, ready + cycles if ready else 0)


def relative(token: tuple[int, int], j: int, now: int) -> tuple[int, int]:
    """A token relative to step ``j`` and cycle ``now`` (a ready time already past is 0)."""
    i, ready = token
    return (i - j, max(ready - now, 0))


class Slots:
    """``capacity`` buffer slots of one level for one operand (or the accumulator)."""

    __slots__ = ("env", "level", "waiters")

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self.env, self.level = env, capacity  # free slots
        self.waiters: deque[simpy.Event] = deque()

    def take(self) -> simpy.Event | None:
        """Take a slot: ``None`` if one was free (taken now), else an event to wait on."""
        if self.level:
            self.level -= 1
            return None
        ev = self.env.event()
        self.waiters.append(ev)
        return ev

    def free(self) -> None:
        """Free a slot: it goes to the oldest waiter, if any."""
        if self.waiters:
            self.waiters.popleft().succeed()
        else:
            self.level += 1

    def state(self) -> tuple:
        return (self.level, len(self.waiters))


class Port:
    """One memory port (read, write or shared), held by one transfer at a time; granted by its
    :class:`Ports` arbiter together with the hop's other ports."""

    __slots__ = ("holder",)

    def __init__(self) -> None:
        self.holder: str | None = None


class Ports:
    """The arbiter of every memory port: a hop's transfer holds all of its ports at once or
    none (no transfer holds one port while it waits for another). Requests that cannot be
    granted wait in arrival order; whenever a port is let go, the waiting requests are granted
    oldest first, each one whose ports are all free (a younger request may pass an older one
    whose ports are not all free yet)."""

    __slots__ = ("env", "waiters")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.waiters: list[tuple[str, tuple[Port, ...], simpy.Event]] = []

    def acquire(self, ports: tuple[Port, ...], owner: str) -> simpy.Event | None:
        """Hold ``ports`` for ``owner``: ``None`` if they were all free (held now), else an
        event that succeeds once they are held."""
        for port in ports:
            if port.holder is not None:
                ev = self.env.event()
                self.waiters.append((owner, ports, ev))
                return ev
        for port in ports:
            port.holder = owner
        return None

    def release(self, port: Port) -> None:
        """Let go of ``port``: waiting requests whose ports are now all free are granted."""
        port.holder = None
        if self.waiters:
            kept = []
            for owner, ports, ev in self.waiters:
                if all(p.holder is None for p in ports):
                    for p in ports:
                        p.holder = owner
                    ev.succeed()
                else:
                    kept.append((owner, ports, ev))
            self.waiters = kept

    def state(self) -> tuple:
        return tuple([owner for owner, _, _ in self.waiters])


class Tokens:
    """A bounded queue of step tokens ``(step, ready cycle)`` from one stage to the next (a DMA
    engine's command queue, ``capacity`` deep); one consumer."""

    __slots__ = ("env", "items", "capacity", "getter", "putters")

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self.env, self.capacity = env, capacity
        self.items: deque[tuple[int, int]] = deque()
        self.getter: Handoff | None = None
        self.putters: deque[tuple[tuple[int, int], simpy.Event]] = deque()

    def put(self, token: tuple[int, int]) -> simpy.Event | None:
        """Queue ``token``: ``None`` if it was handed over or found room, else an event to wait
        on until there is room."""
        if self.getter is not None:
            getter, self.getter = self.getter, None
            getter.succeed(token)
            return None
        if len(self.items) < self.capacity:
            self.items.append(token)
            return None
        ev = self.env.event()
        self.putters.append((token, ev))
        return ev

    def get(self) -> tuple[int, int] | None:
        """The next token if one is queued (taken now; the oldest waiting put gets its room),
        else ``None``: then wait on :meth:`wait`."""
        if not self.items:
            return None
        token = self.items.popleft()
        if self.putters:
            waiting, ev = self.putters.popleft()
            self.items.append(waiting)
            ev.succeed()
        return token

    def wait(self) -> Handoff:
        """The event the consumer waits on when the queue is empty; its value is the token."""
        self.getter = Handoff(self.env)
        return self.getter

    def state(self, j: int, now: int) -> tuple:
        """The queue relative to step ``j`` and cycle ``now`` (:func:`relative`, inlined: a
        fingerprint's hot path)."""
        items = tuple([(i - j, ready - now if ready > now else 0) for i, ready in self.items])
        if not self.putters:
            return (items, self.getter is not None, ())
        waiting = tuple([(i - j, ready - now if ready > now else 0)
                         for (i, ready), _ in self.putters])  # fmt: skip
        return (items, self.getter is not None, waiting)

    def bounds(self) -> list[int]:
        """Step indices of the tokens held (queued or waiting to be queued)."""
        return [t[0] for t in self.items] + [t[0] for t, _ in self.putters]

    def shift(self, steps: int, cycles: int) -> None:
        self.items = deque(shifted(t, steps, cycles) for t in self.items)
        self.putters = deque((shifted(t, steps, cycles), ev) for t, ev in self.putters)
