"""The DES's pipeline processes (``des.py`` wires them): a mover per hop, the compute unit and
the epilogue. Each walks the steps in order and keeps all of its state in attributes, so the
steady-state collapse (``collapse.py``) can fingerprint and shift it. Cycles throughout.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accel_sim.engine.des import _Engine


class _Proc:
    """Base for pipeline processes: every piece of state is an attribute, so it can be shifted."""

    def __init__(self, engine: _Engine, name: str) -> None:
        self.engine, self.env, self.name = engine, engine.env, name
        self.idx = 0  # next step index this process handles
        self.phase = "start"
        self.t_mark = 0  # absolute time of interest (wait start / data-ready time)
        self.track = name  # timeline track (recording only)
        self.rec_open: tuple | None = None  # (start, name, cat, info, sums): an open span

    #: phases in which ``t_mark`` still matters to the future (a wait being measured)
    timed_phases: frozenset[str] = frozenset({"latency"})

    def state(self, j: int, now: int) -> tuple:
        if self.phase == "get":  # idle until a token arrives; idx and t_mark come with it
            return (self.name, "get")
        mark = self.t_mark - now if self.phase in self.timed_phases else None
        return (self.name, self.idx - j, self.phase, mark)

    def shift(self, steps: int, cycles: int) -> None:
        self.idx += steps
        self.t_mark += cycles

    # timeline recording (called only when the engine has a recorder)
    def rec_begin(self, name: str, cat: str, info: dict, sums: dict | None = None) -> None:
        self.rec_open = (self.env.now, name, cat, info, sums)

    def rec_end(self) -> None:
        start, name, cat, info, sums = self.rec_open
        self.rec_open = None
        if self.env.now > start:
            self.engine.rec.span(self.track, name, start, self.env.now, cat, info, sums)


class _Mover(_Proc):
    """Moves one operand's tiles across one hop."""

    def __init__(self, engine, link_index, upstream, up_slots, down_slots, out_store, last_index):
        prog = engine.program
        link = prog.links[link_index]
        super().__init__(engine, f"{link.operand}:{link.label(prog.arch)}")
        self.j = link_index
        self.link = link
        self.ports = prog.memory.hop_ports(link.src, link.dst)
        self.latency = prog.memory.latency(link.src)
        self.upstream, self.up_slots, self.down_slots = upstream, up_slots, down_slots
        self.out_store, self.last_index = out_store, last_index
        self.left = 0  # bursts of the current tile still to be granted (``burst_bytes``)
        self._plans: dict[int, tuple] = {}  # per raw class code: what this hop does (_plan)
        self._by_class: dict[int, tuple] = {}  # the same per step class (by identity)
        self.track = f"{link.label(prog.arch)} {link.operand}"
        self.process = self.env.process(self.run())

    def state(self, j: int, now: int) -> tuple:
        base = super().state(j, now)
        return base + (self.left,) if self.left else base

    def _plan(self, code: int) -> tuple:
        """What this hop does at a step of class ``code``: (opens a destination slot, bytes,
        closes the source's slot, ports held — in one global acquisition order, so no two hops
        wait on each other in a cycle —, per grant of them (one unless the tile is longer than
        a burst, ``MemorySystem.bursts``) the (cycles, port) release order)."""
        plan = self._plans.get(code)
        if plan is None:
            step = self.engine.program.class_of(code)
            plan = self._by_class.get(id(step))  # (equal classes are one object)
            if plan is None:  # raw codes of equal step classes share their plan
                plan = self._by_class[id(step)] = self._build_plan(step)
            self._plans[code] = plan
        return plan

    def _build_plan(self, step) -> tuple:
        eng = self.engine
        nbytes = step.link_bytes[self.j]
        bursts = eng.program.memory.bursts(self.link.src, self.link.dst, nbytes)
        held = tuple(eng.ports[port] for port, _ in bursts[0])
        grants = tuple(tuple(sorted(((cycles, eng.ports[port]) for port, cycles in hops),
                                    key=lambda e: e[0]))
                       for hops in bursts)  # fmt: skip
        opens = self.down_slots is not None and step.opens[self.j]
        closes = self.up_slots is not None and step.closes_src[self.j]
        return (opens, nbytes, closes, held, grants)

    def run(self):
        # (everything the loop reads that never changes is bound once; ``idx`` and ``t_mark``
        # are re-read after every yield: the collapse shifts them while the process waits)
        eng, env = self.engine, self.env
        code_of, plans, plan_of = eng.program.code, self._plans, self._plan
        upstream, down_slots, up_slots = self.upstream, self.down_slots, self.up_slots
        out_store, last_index, latency = self.out_store, self.last_index, self.latency
        acquire, release, timeout = eng.arbiter.acquire, eng.arbiter.release, env.timeout
        rec, name = eng.rec, self.name
        while True:
            if upstream is not None:
                token = upstream.get()
                if token is None:
                    self.phase = "get"
                    token = yield upstream.wait()
                self.idx, self.t_mark = token
                now = env.now
                if self.t_mark > now:
                    self.phase = "latency"
                    yield timeout(self.t_mark - now)
            elif self.idx > last_index:
                return
            code = code_of(self.idx)
            plan = plans.get(code)
            opens, nbytes, closes, held, grants = plan if plan is not None else plan_of(code)
            # (C: every tile opens a slot further out; the accumulator's frees with its window)
            if opens:
                self.phase = "slot"
                wait = down_slots.take()
                if wait is not None:
                    if rec is not None:
                        dst = eng.program.arch.memory[self.link.dst].name
                        self.rec_begin(f"wait: free {dst} buffer", "wait", {"step": self.idx})
                    yield wait
                    if rec is not None:
                        self.rec_end()
            ready = 0
            if nbytes:  # hold every port of the hop, release each after its own bytes passed
                if rec is not None:
                    busy = [r for r in held if r.holder is not None]
                    waited = eng.port_names[id(busy[0])] if busy else "(free)"
                    self.rec_begin(f"wait: port {waited}", "wait", {"step": self.idx})
                wait = acquire(held, name)
                if wait is not None:
                    self.phase = "ports"
                    yield wait
                self.phase = "xfer"
                if rec is not None:
                    self.rec_end()
                    self.rec_begin(f"{self.link.operand} tile", "transfer", {"step": self.idx},
                                   {"bytes": nbytes, "transfers": 1})  # fmt: skip
                self.left = len(grants) - 1
                for k, releases in enumerate(grants):
                    if k:  # the next burst queues for the ports again
                        wait = acquire(held, name)
                        if wait is not None:
                            self.phase = "ports"
                            yield wait
                        self.phase = "xfer"
                        self.left -= 1
                    elapsed = 0
                    for cycles, port in releases:
                        if cycles > elapsed:
                            yield timeout(cycles - elapsed)
                            elapsed = cycles
                        release(port)
                if rec is not None:
                    self.rec_end()
                ready = env.now + latency
            if closes:
                up_slots.free()
            if out_store is not None:
                wait = out_store.put((self.idx, ready))
                if wait is not None:
                    self.phase = "put"
                    yield wait
            done = self.idx >= last_index
            self.idx += 1
            self.t_mark = env.now
            if done:
                eng.finish(self)
                return


class _Compute(_Proc):
    def __init__(self, engine, inputs, input_slots, acc_slots, out_store):
        super().__init__(engine, "compute")
        self.track = "matrix unit"
        self.inputs, self.input_slots = inputs, input_slots
        self.acc_slots, self.out_store = acc_slots, out_store
        self.process = self.env.process(self.run())

    def state(self, j, now):  # compute measures every wait from t_mark (stall accounting)
        return (self.name, self.idx - j, self.phase, self.t_mark - now)

    def run(self):
        eng, env, prog = self.engine, self.env, self.engine.program
        rec = eng.rec
        while self.idx < prog.n_steps:
            step = prog.step_at(self.idx)
            self.t_mark = env.now
            self.phase = "inputs"
            ready, cause = env.now, None  # the cause is named when a wait starts (state as of now)
            for store in self.inputs:
                token = store.get()
                if token is None:
                    cause = cause or eng.load_cause(self.idx)
                    token = yield store.wait()
                ready = max(ready, token[1])
            if ready > env.now:
                cause = cause or eng.load_cause(self.idx)
                self.phase = "latency"
                yield env.timeout(ready - env.now)
            if env.now > self.t_mark:
                eng.stalls[cause] = eng.stalls.get(cause, 0) + env.now - self.t_mark
                if rec is not None:
                    rec.unit_stall(self.t_mark, env.now, cause)
            if step.opens_accumulator:
                self.t_mark, self.phase = env.now, "accumulator"
                wait = self.acc_slots.take()
                if wait is not None:
                    yield wait
                key = eng.store_cause
                eng.stalls[key] = eng.stalls.get(key, 0) + env.now - self.t_mark
                if rec is not None and env.now > self.t_mark:
                    rec.unit_stall(self.t_mark, env.now, key)
            self.phase = "busy"
            yield env.timeout(step.compute_cycles)
            if rec is not None:
                rec.unit_busy(env.now - step.compute_cycles, env.now, self.idx,
                              step.closes_accumulator)  # fmt: skip
            for slots, closes in zip(self.input_slots, step.closes_l0):
                if closes:
                    slots.free()
            if step.closes_accumulator:
                wait = self.out_store.put((self.idx, env.now))
                if wait is not None:
                    self.phase = "put"
                    yield wait
            self.idx += 1
            self.t_mark = env.now
            eng.after_step(self.idx)
        eng.finish(self)


class _Epilogue(_Proc):
    """Vector-unit work on each finished output tile (e.g. dequantize), before it is stored."""

    def __init__(self, engine, upstream, out_store, ops_per_output, last_index):
        super().__init__(engine, "epilogue")
        self.track = "vector unit"
        self.upstream, self.out_store = upstream, out_store
        self.lanes = engine.program.arch.vector.lanes
        self.ops, self.last_index = ops_per_output, last_index
        self.process = self.env.process(self.run())

    def run(self):
        env, prog = self.env, self.engine.program
        while True:
            token = self.upstream.get()
            if token is None:
                self.phase = "get"
                token = yield self.upstream.wait()
            self.idx, self.t_mark = token
            step = prog.step_at(self.idx)
            self.phase = "busy"
            rec = self.engine.rec
            if rec is not None:
                self.rec_begin("epilogue", "vector", {"step": self.idx},
                               {"outputs": step.outputs, "tiles": 1})  # fmt: skip
            yield env.timeout(math.ceil(step.outputs * self.ops / self.lanes))
            if rec is not None:
                self.rec_end()
            wait = self.out_store.put((self.idx, env.now))
            if wait is not None:
                self.phase = "put"
                yield wait
            done = self.idx >= self.last_index
            self.idx += 1
            if done:
                return
