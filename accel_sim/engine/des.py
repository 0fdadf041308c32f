"""The discrete-event engine: one matmul's step program run tile by tile on simpy.

Processes (``des_procs.py``; one per pipeline stage, all holding their state in attributes):

* a **mover** per hop of A and B (DRAM→…→L0): walks the steps in order; when a step opens a
  footprint window of its destination level (``program.py``) it takes one of that level's
  ``buffers`` slots; when the step's tile crosses, it holds the hop's ports
  (:meth:`~accel_sim.engine.memory.MemorySystem.hop_ports`) for the transfer time; when the step
  closes the source level's window it frees that slot; and it hands a token on to the next hop,
  whose data is usable ``latency_cycles`` of the source after the transfer ends;
* the **compute** process: waits for the step's A and B tokens and, when a new accumulator window
  starts (one output tile, or a block of them when K is above the block loop), a free accumulator
  slot, which the first C mover frees once the window's last tile has left; is busy for the
  step's time (``Program.class_of``); frees the innermost A/B slots when their windows close;
* an optional **epilogue** on the vector unit (dequantize) and a **mover** per hop of C back out.

Token queues between stages hold at most ``Arch.dma_queue_steps`` steps (a DMA engine's command
queue; 32 unless the architecture says otherwise): a mover runs at most that far ahead of its
consumer.
Ports, buffer slots and token queues are ``engine/des_resources.py``'s: shared and first come,
first served (A, B and C traffic contend for each port's bandwidth; a hop's ports are granted
together, so no transfer holds one port while it waits for another), granted in the caller's own
turn when free, so the events processed are the waits that really happen and the timeouts (about
14 per simulated step). Compute time not spent busy is a stall, attributed when it starts to the
outermost hop the awaited data has not crossed yet (``load:HBM->L2``), to output back-pressure
(``store:...``), or to the final ``drain``.

**Exact steady-state collapse** (``collapse.py``): every ``STRIDE`` steps (or every sweep of a short
innermost loop) the engine fingerprints its whole state relative to the current step and time;
when the state repeats and the program's step classes repeat with it, it advances every
process, event and counter by whole periods at once. This is exact; ``collapse=False`` checks it.

**Timeline recording** (``recorder=``, off by default): the engine reports each transfer, port and
buffer wait, compute step, stall and collapsed stretch to a recorder
(:class:`accel_sim.report.timeline.Recorder`); when it is off every hook is one ``None`` check and
nothing the simulation depends on changes (the recorder's open spans live outside the state the
collapse fingerprints).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from accel_sim.engine.collapse import Collapse
from accel_sim.engine.des_procs import _Compute, _Epilogue, _Mover, _Proc
from accel_sim.engine.des_resources import Port, Ports, Slots, Tokens
from accel_sim.engine.program import Program

#: Steps between fingerprints inside a long innermost loop (a speed knob; results do not depend
#: on it: ``tests/test_collapse_fuzz.py``).
STRIDE = 8


@dataclass(frozen=True)
class MatmulTiming:
    """Cycle outcome of one matmul."""

    cycles: int
    compute_cycles: int
    stalls: dict[str, int] = field(default_factory=dict)
    simulated_steps: int = 0
    collapsed_steps: int = 0


class _Engine(Collapse):
    def __init__(self, program: Program, collapse: bool, recorder=None) -> None:
        self.program, self.collapse, self.rec = program, collapse, recorder
        self.env = simpy.Environment()
        self.stalls: dict[str, int] = {}
        self.procs: list[_Proc] = []
        self.stores: list[Tokens] = []
        self.containers: list[Slots] = []
        self.ports: dict[tuple[int, str], Port] = {}
        self.seen: dict[tuple, list[tuple[int, int, dict]]] = {}
        self.simulated = self.collapsed = 0
        # every fingerprint taken, in step order, and the self-maps learnt from jumps
        self.trail_steps: list[int] = []
        self.trail_sigs: list[tuple] = []
        self.maps: dict[tuple, list[tuple[int, int, int, dict]]] = {}
        self.end_of_compute = 0
        # fingerprints are taken at the start of each sweep of the innermost iterating loop
        # when that loop is short (periods are whole sweeps there); inside a long loop the
        # steady state repeats step by step, so a fingerprint is taken every STRIDE steps (the
        # largest divisor of the loop's length up to STRIDE, so that whole sweeps stay
        # multiples of it). When fingerprints are taken changes only where a jump starts, never
        # its result (every jump is exact), so the stride trades a few simulated steps for
        # fewer fingerprints.
        group = next((n for n in reversed(program.count) if n > 1), 1)
        stride = max(d for d in range(1, STRIDE + 1) if group % d == 0)
        self.group = group if group <= 64 else stride
        self._build()

    def _store(self) -> Tokens:
        self.stores.append(Tokens(self.env, self.program.arch.dma_queue_steps))
        return self.stores[-1]

    def _slots(self, level_index: int, operand: str = "C") -> Slots:
        n = self.program.buffers(operand, level_index)
        self.containers.append(Slots(self.env, n))
        return self.containers[-1]

    def _build(self) -> None:
        prog, last = self.program, self.program.n_steps - 1
        self.arbiter = Ports(self.env)
        for port in prog.memory.all_ports:
            self.ports[port] = Port()
        self.port_names = {id(r): f"{prog.arch.memory[level].name}:{kind}"
                           for (level, kind), r in self.ports.items()}  # fmt: skip
        inputs, input_slots, self.chains = [], [], {}
        for operand in "AB":
            links = [j for j, ln in enumerate(prog.links) if ln.operand == operand]
            upstream = up_slots = None
            chain = []
            for j in links:
                down_slots, out = self._slots(prog.links[j].dst, operand), self._store()
                chain.append(_Mover(self, j, upstream, up_slots, down_slots, out, last))
                upstream, up_slots = out, down_slots
            self.chains[operand] = chain
            inputs.append(upstream)
            input_slots.append(up_slots)
        c_links = [j for j, ln in enumerate(prog.links) if ln.operand == "C"]
        acc_slots = self._slots(prog.links[c_links[0]].src)
        upstream = self._store()
        self.compute = _Compute(self, inputs, input_slots, acc_slots, upstream)
        self.procs += [p for chain in self.chains.values() for p in chain] + [self.compute]
        if prog.op.epilogue_ops_per_output > 0:
            out = self._store()
            self.procs.append(_Epilogue(self, upstream, out, prog.op.epilogue_ops_per_output, last))
            upstream = out
        up_slots = acc_slots
        self.store_cause = f"store:{prog.links[c_links[0]].label(prog.arch)}"
        for j in c_links:
            dst = prog.links[j].dst
            down_slots = None if dst == 0 else self._slots(dst)
            out = None if dst == 0 else self._store()
            self.procs.append(_Mover(self, j, upstream, up_slots, down_slots, out, last))
            upstream, up_slots = out, down_slots
        self.proc_names = {id(p.process): p.name for p in self.procs}
        if self.rec is not None:
            self.rec.declare([p.track for p in self.procs])

    # ----------------------------------------------------------- attribution
    def load_cause(self, i: int) -> str:
        """The outermost hop that step ``i``'s inputs have not crossed yet."""
        pending = []
        for chain in self.chains.values():
            for k, mover in enumerate(chain):
                if mover.idx <= i:
                    # waiting out the previous hop's latency: that hop is still in progress
                    late = mover.phase == "latency" and k > 0
                    pending.append(chain[k - 1] if late else mover)
                    break
        if not pending:
            return "load:latency"
        outermost = min(pending, key=lambda p: self.program.links[p.j].src)
        return "load:" + outermost.name.split(":", 1)[1]

    def finish(self, proc: _Proc) -> None:
        if proc is self.compute:
            self.end_of_compute = self.env.now

    def run(self) -> MatmulTiming:
        self.env.run()
        total = int(self.env.now)
        if total > self.end_of_compute:
            self.stalls["drain"] = self.stalls.get("drain", 0) + total - self.end_of_compute
            if self.rec is not None:
                self.rec.unit_stall(self.end_of_compute, total, "drain")
        stalls = {k: int(v) for k, v in sorted(self.stalls.items()) if v}
        return MatmulTiming(
            cycles=total,
            compute_cycles=self.program.compute_cycles,
            stalls=stalls,
            simulated_steps=self.simulated,
            collapsed_steps=self.collapsed,
        )


def simulate_program(program: Program, collapse: bool = True, recorder=None) -> MatmulTiming:
    """Run ``program`` through the DES and return its cycles and stall attribution.

    ``recorder``: an object receiving the run's activity for a timeline
    (:class:`accel_sim.report.timeline.Recorder`); ``None`` (the default) records nothing and
    costs one ``None`` check per hook. The result is the same either way."""
    engine = _Engine(program, collapse, recorder)
    try:
        return engine.run()
    finally:
        # the engine and its processes reference each other: drop what they hold (the
        # collapse's fingerprints above all) so reference counting frees it, not a GC pass
        engine.__dict__.clear()
