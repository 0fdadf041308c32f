"""The DES's exact steady-state collapse (mixed into ``des._Engine``).

**Exact steady-state collapse**: every few steps (every sweep of a short innermost loop) the
engine takes a signature of the whole state relative to the current step and time (process
positions, pending events with their relative times and order, queue contents, slot levels, port
holders). When a signature repeats P steps later and the program's step classes repeat with period
P far enough ahead, the future is the past shifted in time, so the engine advances the clock, every
pending event, every position and every stall counter by whole periods at once. Such a jump also
proves that every state fingerprinted during that period comes back to itself after P steps: those
*self-maps* are kept and reused wherever the state recurs later (another block or instance) if
the classes there match, without simulating a period again. This is exact; ``collapse=False``
checks it.
"""

from __future__ import annotations

import bisect

import simpy

from accel_sim.engine import simpy_adapter
from accel_sim.engine.des_resources import relative, shifted

#: Earlier occurrences of each state kept as candidate periods for the collapse.
HISTORY = 8
#: Known self-maps (period, cycles, stall growth) kept per state.
MAPS = 8


class Collapse:
    """Fingerprints, periods and jumps. Uses the engine's ``env``, ``program``, ``procs``,
    ``stores``, ``containers``, ``ports``, ``stalls``, ``rec`` and the bookkeeping set up in its
    ``__init__`` (``seen``, ``maps``, ``trail_steps``, ``trail_sigs``, ``group``)."""

    def _owner(self, event) -> tuple:
        names = []
        for cb in event.callbacks or ():
            owner = getattr(cb, "__self__", None)
            if isinstance(owner, simpy.Process):
                names.append(self.proc_names.get(id(owner), "?"))
        return tuple(names)

    def _signature(self, j: int) -> tuple:
        env, now = self.env, self.env.now

        def token(ev):  # a handed-over token rides its event until its consumer runs
            return relative(simpy_adapter.event_value(ev), j, now) if ev in granted else None

        granted = set(simpy_adapter.handoffs(env))
        queue = tuple((t - now, prio, self._owner(ev), token(ev))
                      for t, prio, ev in simpy_adapter.pending(env))  # fmt: skip
        stores = tuple(s.state(j, now) for s in self.stores)
        slots = tuple(c.state() for c in self.containers)
        ports = (tuple([r.holder for r in self.ports.values()]), self.arbiter.state())
        return (tuple(p.state(j, now) for p in self.procs), queue, stores, slots, ports)

    def _bounds(self) -> tuple[int, int, list]:
        """(lo, hi, granted gets): the lowest and highest step index any process, queued token
        or granted get still refers to. Every step the future looks up lies at or after lo, and
        a stretch of evolution that ends with the same state shifted by P steps looks up steps
        up to hi + P at most (positions only grow)."""
        active = [p.idx for p in self.procs if p.phase != "get"]
        in_flight = simpy_adapter.handoffs(self.env)
        queued = [i for store in self.stores for i in store.bounds()]
        queued += [simpy_adapter.event_value(ev)[0] for ev in in_flight]
        return min(active + queued), max(active + queued), in_flight

    def _longest_jump(self, j: int, now: int, sig: tuple, history: list) -> tuple | None:
        """The jump over the most steps that the current state allows, as (repeats, period,
        cycles per period, stall growth per period, earlier step of this state or None).

        Two kinds of candidates:

        * an earlier occurrence ``j0`` of this state (``history``): the evolution from ``j0``
          to ``j`` came back to the same state P = j − j0 steps and ``dt`` cycles later; it
          repeats as long as the steps it looks up, [lo, hi + r·P], have the raw classes of
          the steps P earlier (a short period stops at the next loop boundary; a whole-sweep
          period can jump across many sweeps);
        * a known *self-map* of this state (``self.maps``): some state-equal step ``j1``
          (anywhere earlier, e.g. in an earlier block or instance) is known to come back to
          itself after P steps and ``dt`` cycles. From here that evolution replays exactly if
          the steps it looks up, [lo, hi + P], have the raw classes of the steps D = j − j1
          before them, and it repeats while [lo + P, hi + r·P] is P-periodic. This reuses a
          period found once wherever the state recurs, without simulating a period again.
        """
        prog, n = self.program, self.program.n_steps
        lo, hi, in_flight = self._bounds()
        table = prog.canonical_list
        raw = prog.code

        def code(i: int) -> int:
            return table[raw(i)]

        best = None
        for j0, t0, stalls0 in history:
            period = j - j0
            if lo - period < 0 or hi + period >= n:
                continue
            if code(lo) != code(lo - period) or code(hi + period) != code(hi):
                continue  # cheap necessary conditions before the vectorised search
            repeats = (prog.match_end(lo, period) - hi - 1) // period
            if repeats >= 1 and (best is None or repeats * period > best[0] * best[1]):
                delta = {k: v - stalls0.get(k, 0) for k, v in self.stalls.items()}
                best = (repeats, period, now - t0, delta, j0)
        for j1, period, dt, delta in self.maps.get(sig, ()):
            shift, top = j - j1, hi + period
            if top >= n or (best is not None and (n - hi) // period * period <= best[0] * best[1]):
                continue
            if code(lo) != code(lo - shift) or code(top) != code(top - shift):
                continue
            if prog.match_end(lo, shift, top + 1) <= top:
                continue
            repeats = max(1, (prog.match_end(lo + period, period) - hi - 1) // period)
            if best is None or repeats * period > best[0] * best[1]:
                best = (repeats, period, dt, delta, None)
        return best if best is None else best + (in_flight,)

    def _learn(self, j: int, j0: int, period: int, dt: int, delta: dict) -> None:
        """The state at ``j`` equals the one at ``j0`` = j − P and the classes allow at least
        one more period: then every fingerprinted state between them, at j1, comes back to
        itself at j1 + P (the evolution from j to j1 + P mirrors the one from j0 to j1), P steps
        and ``dt`` cycles later with the same stall growth. Record those self-maps."""
        k = bisect.bisect_left(self.trail_steps, j0)
        for j1, sig in zip(self.trail_steps[k:], self.trail_sigs[k:]):
            maps = self.maps.setdefault(sig, [])
            if not any(m[1] == period and m[2] == dt and m[3] == delta for m in maps):
                maps.append((j1, period, dt, delta))
                del maps[:-MAPS]

    def after_step(self, j: int) -> None:
        self.simulated += 1
        if not self.collapse or j % self.group:
            return  # fingerprints are taken where a sweep of the innermost loop begins
        sig = self._signature(j)
        now = self.env.now
        history = self.seen.setdefault(sig, [])
        best = self._longest_jump(j, now, sig, history) if history or sig in self.maps else None
        history.append((j, now, dict(self.stalls)))
        del history[:-HISTORY]
        self.trail_steps.append(j)
        self.trail_sigs.append(sig)
        if best is None:
            return
        repeats, period, dt, delta, j0, in_flight = best
        if j0 is not None:
            self._learn(j, j0, period, dt, delta)
        steps, cycles = repeats * period, repeats * dt
        if self.rec is not None:
            self._record_jump(now, repeats, period, dt, delta)
        simpy_adapter.advance(self.env, cycles)
        for proc in self.procs:
            proc.shift(steps, cycles)
        for store in self.stores:
            store.shift(steps, cycles)
        for ev in in_flight:
            simpy_adapter.set_event_value(ev, shifted(simpy_adapter.event_value(ev), steps, cycles))
        for key, value in delta.items():
            self.stalls[key] = self.stalls.get(key, 0) + repeats * value
        self.collapsed += steps

    def _record_jump(self, now: int, repeats: int, period: int, dt: int, delta: dict) -> None:
        """Tell the recorder about a jump of ``repeats`` periods from ``now``: one collapsed span,
        and every span open at ``now`` cut there and reopened where the jump lands."""
        cycles = repeats * dt
        stalls = {k: repeats * v for k, v in delta.items() if v}
        self.rec.collapsed(now, now + cycles, repeats, period, dt, stalls)
        for proc in self.procs:
            if proc.rec_open is not None:
                start, name, cat, info, sums = proc.rec_open
                info = dict(info, cut="by the collapsed steady state")
                if now > start:
                    self.rec.span(proc.track, name, start, now, cat, info, None)
                proc.rec_open = (now + cycles, name, cat, info, sums)
