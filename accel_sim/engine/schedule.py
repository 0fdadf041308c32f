"""A plan's operations as a graph on concurrent units (docs/engine.md, "Overlap and fusion").

Each operation (a *job*) runs on its unit — ``matrix``, ``vector``, ``comparator`` (early bird),
``dma`` (plan transfers) — each a simpy resource of capacity one, so different units run at the
same time. A job is cut into ``B`` row blocks (segments) of its standalone cycles (the DES's for
a matmul, the closed-form cost of ``engine/run.py`` for the others), split evenly in whole
cycles. A plan edge ``src → dst`` either streams (segment i of ``dst`` waits for segment i of
``src``, and ``src`` may run at most :data:`BUFFER_BLOCKS` blocks ahead of ``dst``: a bounded
buffer) or waits for all of ``src``. Segments of one unit are granted in order of (block, plan
position) among those ready.

**Port contention.** Every job has a demand on each shared port (:func:`shared_ports`: DRAM's
and the first on-chip level's, where vector passes read and write beside the matmul's loads):
its bytes there over its standalone cycles (bytes/cycle). Running alone a job progresses at
speed 1 (its standalone time). While several jobs run, each port's bandwidth is shared max-min
fairly (a job asking less than an equal share gets all it asks, the rest is split among the
others) and a job progresses at the smallest ``granted / demanded`` over its ports: a fluid
model, re-solved every time a job starts or ends, with event times rounded up to whole cycles;
each block records which port held it back for how long (:meth:`Segment.contention`). Nothing
else is shared (the matmul's dequantize epilogue runs in its output path, as the DES times it).

**Closed form** (:func:`closed_form_cycles`): the largest of the longest path through the
segment graph (max-plus, no resource limits), each unit's total work and each shared port's
total bytes over its bandwidth. Every schedule takes at least that; without DRAM contention and with
one job per unit along a chain it is the schedule's makespan exactly (tests/test_overlap.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import simpy

from accel_sim import result_cache

#: Most row blocks a job is cut into (the schedule's cost grows with it).
MAX_BLOCKS = 64
#: Row blocks a streamed edge holds between producer and consumer (double buffering).
BUFFER_BLOCKS = 2


@dataclass(frozen=True)
class Job:
    """One operation: ``cycles`` alone (whole cycles), ``ports`` its bytes on each shared port
    (:func:`shared_ports`)."""

    name: str
    kind: str
    unit: str
    cycles: int
    ports: tuple[float, ...] = ()


@dataclass
class Segment:
    """Row block ``block`` of job ``job``: ``work`` standalone cycles, run over [start, end)."""

    job: int
    block: int
    work: int
    start: int = -1
    end: int = -1
    waited: list[Segment] = field(default_factory=list)  # what it may have waited for
    #: per shared port (index into the rates), the fluid cycles it slowed the block by
    slowed: dict[int, float] = field(default_factory=dict)

    def contention(self, labels: tuple[str, ...]) -> dict[str, int]:
        """The block's stretch (``end − start − work``, whole cycles) split over the ports that
        slowed it, in proportion to how long each bound it, keyed by ``labels`` (per port;
        ports with one label add up), whole cycles by the largest-remainder rule."""
        stretch = self.end - self.start - self.work
        total = sum(self.slowed.values())
        if stretch <= 0:
            return {}
        if total <= 0:  # (only the rounding of event times up to whole cycles)
            return {labels[0]: stretch}
        shares: dict[str, float] = {}
        for port, cycles in self.slowed.items():
            shares[labels[port]] = shares.get(labels[port], 0.0) + cycles / total
        exact = {label: stretch * share for label, share in shares.items()}
        out = {label: int(v) for label, v in exact.items()}
        # whole cycles left by the floors go to the largest remainders (largest-remainder rule)
        left = stretch - sum(out.values())
        for label in sorted(exact, key=lambda x: (out[x] - exact[x], x))[:left]:
            out[label] += 1
        return {label: v for label, v in out.items() if v}


@dataclass
class Schedule:
    """The outcome: makespan ``cycles`` and every segment's times (cycles)."""

    jobs: tuple[Job, ...]
    blocks: int
    segments: list[list[Segment]]  # per job, per block
    cycles: int
    critical: list[Segment]  # the chain that sets ``cycles``, in time order

    def busy(self) -> dict[str, int]:
        """Cycles each unit holds a segment (stretched by contention included)."""
        out: dict[str, int] = {}
        for job, segs in zip(self.jobs, self.segments):
            out[job.unit] = out.get(job.unit, 0) + sum(s.end - s.start for s in segs)
        return out

    def exposed(self) -> list[int]:
        """Per job, the cycles the critical chain spends in it (they add up to ``cycles``)."""
        out = [0] * len(self.jobs)
        t = 0
        for seg in self.critical:
            out[seg.job] += seg.end - t  # a wait before the segment counts to it
            t = seg.end
        return out

    def overlap_cycles(self) -> int:
        """Cycles during which at least two units are busy."""
        edges = []
        for segs in self.segments:
            edges += [(s.start, 1) for s in segs if s.end > s.start]
            edges += [(s.end, -1) for s in segs if s.end > s.start]
        edges.sort()
        busy, last, total = 0, 0, 0
        for t, step in edges:
            if busy >= 2:
                total += t - last
            busy += step
            last = t
        return total

    def idle_pieces(self, unit: str) -> list[tuple[int, int, int]]:
        """The cycles ``unit`` is idle, as (start, end, job on the critical chain then: the
        cause of the wait), in time order; they add up to ``cycles`` minus its busy cycles."""
        spans = sorted((s.start, s.end) for job, segs in zip(self.jobs, self.segments)
                       if job.unit == unit for s in segs if s.end > s.start)  # fmt: skip
        idle, t = [], 0
        for a, b in spans:
            if a > t:
                idle.append((t, a))
            t = max(t, b)
        if t < self.cycles:
            idle.append((t, self.cycles))
        out = []
        chain, t0, k = self.critical, 0, 0
        for a, b in idle:
            while k < len(chain) and chain[k].end <= a:
                t0 = chain[k].end
                k += 1
            j, lo = k, t0
            while j < len(chain) and lo < b:
                hi = chain[j].end
                if min(b, hi) > max(a, lo):
                    out.append((max(a, lo), min(b, hi), chain[j].job))
                lo = hi
                j += 1
        return out

    def idle_by_job(self, unit: str) -> list[int]:
        """Per job, the idle cycles of ``unit`` while that job is critical (:meth:`idle_pieces`)."""
        out = [0] * len(self.jobs)
        for a, b, job in self.idle_pieces(unit):
            out[job] += b - a
        return out

    def idle_cause(self, job: int) -> str:
        """The stall name of the matrix unit waiting on ``job``: ``<kind>:<name>`` (as the
        sequential plans name them, e.g. ``vector:absmax``) or ``wait:<name>`` for a matmul."""
        j = self.jobs[job]
        return f"wait:{j.name}" if j.unit == "matrix" else f"{j.kind}:{j.name}"


def split(cycles: int, blocks: int) -> list[int]:
    """``cycles`` in ``blocks`` whole parts as even as possible (they add up exactly)."""
    return [(i + 1) * cycles // blocks - i * cycles // blocks for i in range(blocks)]


class _SharedPorts:
    """The shared ports as a fluid resource, each shared max-min fairly (module docstring)."""

    def __init__(self, env: simpy.Environment, rates: tuple[float, ...]) -> None:
        self.env, self.rates = env, rates
        self.active: dict[int, list] = {}  # key -> [remaining work, demands, done event, slowed]
        self.speed: dict[int, float] = {}
        self.binding: dict[int, int] = {}  # key -> the port that sets its speed (if below 1)
        self.last = 0
        self.key = 0
        self.wake = env.event()
        env.process(self._loop())

    def run(self, work: int, demand: tuple[float, ...], slowed: dict[int, float]):
        """An event that fires when ``work`` standalone cycles of a job are done; ``slowed``
        gets, per port, the cycles that port held the job below full speed."""
        if work <= 0 or not any(demand):
            return self.env.timeout(max(work, 0))
        self._advance()
        done = self.env.event()
        self.key += 1
        self.active[self.key] = [float(work), demand, done, slowed]
        self.speed[self.key] = 0.0  # until the loop re-solves the shares, now
        if not self.wake.triggered:
            self.wake.succeed()
        return done

    def _advance(self) -> None:
        elapsed = self.env.now - self.last
        self.last = self.env.now
        for key in list(self.active):
            entry = self.active[key]
            entry[0] -= self.speed[key] * elapsed
            if self.speed[key] < 1.0 and key in self.binding and elapsed:
                port = self.binding[key]
                entry[3][port] = entry[3].get(port, 0.0) + (1.0 - self.speed[key]) * elapsed
            if entry[0] <= 1e-6:
                entry[2].succeed()
                del self.active[key], self.speed[key]
                self.binding.pop(key, None)

    def _solve(self) -> None:
        speed = {key: 1.0 for key in self.active}
        binding: dict[int, int] = {}
        for port, rate in enumerate(self.rates):
            users = sorted((entry[1][port], key) for key, entry in self.active.items()
                           if entry[1][port] > 0)  # fmt: skip
            left = rate
            for i, (demand, key) in enumerate(users):
                give = min(demand, left / (len(users) - i))
                left -= give
                if give / demand < speed[key]:
                    speed[key], binding[key] = give / demand, port
        self.speed, self.binding = speed, binding

    def _loop(self):
        while True:
            self._advance()
            if not self.active:
                self.wake = self.env.event()
                yield self.wake
                continue
            self._solve()
            step = min(math.ceil(entry[0] / self.speed[key] - 1e-9)
                       for key, entry in self.active.items())  # fmt: skip
            self.wake = self.env.event()
            yield self.env.any_of([self.env.timeout(max(1, step)), self.wake])


def bounded_edges(deps: tuple[tuple[tuple[int, bool], ...], ...]) -> list[list[int]]:
    """Per job, the consumers it may run at most :data:`BUFFER_BLOCKS` ahead of: streamed
    edges into a job whose every ancestor edge streams (a whole-op wait upstream could
    otherwise wait on the producer itself)."""
    pure = []
    for inputs in deps:
        pure.append(all(s and pure[src] for src, s in inputs))
    out: list[list[int]] = [[] for _ in deps]
    for dst, inputs in enumerate(deps):
        for src, s in inputs:
            if s and pure[dst]:
                out[src].append(dst)
    return out


_SCHEDULES: dict[tuple, Schedule] = {}
_SCHEDULES_LIMIT = 4096


def simulate_schedule(jobs: tuple[Job, ...], deps, blocks: int,
                      rates: tuple[float, ...]) -> Schedule:  # fmt: skip
    """Run ``jobs`` (``deps``: per job, (producer index, streamed) pairs; producers come
    first) in ``blocks`` row blocks on their units, the shared ports at ``rates`` bytes/cycle.

    Memoised on everything but the jobs' names (a trace's layers of one shape schedule alike:
    the bare ``accel-sim run`` asks 1,907 schedules of 312 distinct ones), in this process and
    on disk (``result_cache.py``); the schedule handed out carries the caller's jobs and shares
    its segments, which nothing changes afterwards."""
    graph = tuple(tuple((int(p), bool(streamed)) for p, streamed in d) for d in deps)
    key = (tuple((j.kind, j.unit, j.cycles, tuple(j.ports)) for j in jobs), graph, blocks,
           tuple(rates))  # fmt: skip
    hit = result_cache.recall("schedule", key, _SCHEDULES, _SCHEDULES_LIMIT)
    if hit is None:
        hit = _simulate_schedule(tuple(jobs), deps, blocks, rates)
        result_cache.store("schedule", key, hit, _SCHEDULES, _SCHEDULES_LIMIT)
    return hit if hit.jobs == tuple(jobs) else replace(hit, jobs=tuple(jobs))


def _simulate_schedule(jobs: tuple[Job, ...], deps, blocks: int,
                       rates: tuple[float, ...]) -> Schedule:  # fmt: skip
    env = simpy.Environment()
    ports = _SharedPorts(env, rates)
    units = {job.unit: simpy.PriorityResource(env) for job in jobs}
    last_on = {unit: None for unit in units}
    segs = [[Segment(k, i, w) for i, w in enumerate(split(job.cycles, blocks))]
            for k, job in enumerate(jobs)]  # fmt: skip
    done = [[env.event() for _ in range(blocks)] for _ in jobs]
    ahead = bounded_edges(deps)
    demands = [tuple(b / job.cycles if job.cycles else 0.0 for b in job.ports) or
               (0.0,) * len(rates) for job in jobs]  # fmt: skip

    def run(k: int):
        job, n = jobs[k], len(jobs)
        for i, seg in enumerate(segs[k]):
            waits = [segs[src][i if s else blocks - 1] for src, s in deps[k]]
            waits += [segs[dst][i - BUFFER_BLOCKS] for dst in ahead[k] if i >= BUFFER_BLOCKS]
            if i:
                waits.append(segs[k][i - 1])
            pending = [done[w.job][w.block] for w in waits]
            if pending:
                yield env.all_of(pending)
            req = units[job.unit].request(priority=i * n + k)
            yield req
            seg.start = env.now
            seg.waited = waits + ([last_on[job.unit]] if last_on[job.unit] else [])
            yield ports.run(seg.work, demands[k], seg.slowed)
            seg.end = env.now
            last_on[job.unit] = seg
            units[job.unit].release(req)
            done[k][i].succeed()

    for k in range(len(jobs)):
        env.process(run(k))
    env.run()
    if any(s.end < 0 for row in segs for s in row):  # pragma: no cover - a plan-graph bug
        raise RuntimeError(f"schedule deadlocked: {[j.name for j in jobs]} with {deps}")
    cycles = max((s.end for row in segs for s in row), default=0)
    return Schedule(tuple(jobs), blocks, segs, cycles, _critical(segs, cycles))


def _critical(segs: list[list[Segment]], cycles: int) -> list[Segment]:
    """Back from the last segment to end, through what each one waited for last."""
    flat = [s for row in segs for s in row]
    if not flat:
        return []
    seg = max(flat, key=lambda s: (s.end, s.job))  # latest end; ties: the later op
    chain = [seg]
    while seg.start > 0:
        before = [w for w in seg.waited if w.end <= seg.start]
        if not before:
            break
        seg = max(before, key=lambda s: (s.end, s.job))
        chain.append(seg)
    return chain[::-1]


def closed_form_cycles(jobs: tuple[Job, ...], deps, blocks: int,
                       rates: tuple[float, ...]) -> int:  # fmt: skip
    """The closed-form twin of :func:`simulate_schedule`: max(longest path through the
    segment graph, each unit's total cycles, each shared port's bytes / bandwidth)."""
    finish: list[list[int]] = []
    for k, job in enumerate(jobs):
        row, t = [], 0
        for i, work in enumerate(split(job.cycles, blocks)):
            ready = max([t] + [finish[src][i if s else blocks - 1] for src, s in deps[k]])
            t = ready + work
            row.append(t)
        finish.append(row)
    path = max((row[-1] for row in finish), default=0)
    units: dict[str, int] = {}
    for job in jobs:
        units[job.unit] = units.get(job.unit, 0) + job.cycles
    bytes_bound = max((math.ceil(sum(job.ports[p] for job in jobs if job.ports) / rate)
                       for p, rate in enumerate(rates)), default=0)  # fmt: skip
    return max(path, max(units.values(), default=0), bytes_bound)


@dataclass(frozen=True)
class Placed:
    """An operation as scheduled: ``exposed`` cycles (its share of the run: the critical chain's
    time in it), ``stalls`` charged to it (the matrix unit's idle cycles while it was critical,
    a matmul's own stalls and its stretch by shared ports, ``dram:contention`` and
    ``<level>:contention``), its unit's ``busy`` cycles and
    [``start``, ``end``) of its first and last row block."""

    exposed: int
    stalls: dict[str, int]
    busy: int
    start: int
    end: int


def blocks_for(arch, plan) -> int:
    """Row blocks of a plan: its tokens (M × instances) in blocks of the unit's output-tile
    side (a cube's 16 rows, an array's side), at most :data:`MAX_BLOCKS`."""
    rows = plan.gemm.M * plan.gemm.count
    return max(1, min(MAX_BLOCKS, math.ceil(rows / arch.compute.output_tile_side())))


def shared_ports(arch) -> tuple[tuple[tuple[str, str], ...], tuple[float, ...]]:
    """The ports concurrent units share, as ((level name, "rw" | "r" | "w"), ...) and their
    bandwidths in bytes/cycle: DRAM's and the first on-chip level's, the two a vector pass
    reads and writes (``engine/run.py``), where the matmul beside it moves its operands too (on
    a chip only if that level is shared: a per-core level's traffic is spread over the cores,
    each with its own ports). A level whose reads and writes share one port
    (``shared_port``) has one ``"rw"`` port."""
    from accel_sim.engine.memory import MemorySystem

    mem, index = MemorySystem(arch), {level.name: i for i, level in enumerate(arch.memory)}
    names = _shared_port_names(arch)
    return names, tuple(mem._level_rate(index[name], "r" if kind == "rw" else kind)
                        for name, kind in names)  # fmt: skip


def _shared_port_names(arch) -> tuple[tuple[str, str], ...]:
    """:func:`shared_ports`' ports without their rates."""
    return tuple((level.name, kind) for i, level in enumerate(arch.memory[:2])
                 if not (i and arch.cores > 1 and not level.shared)
                 for kind in (("rw",) if level.shared_port else ("r", "w")))  # fmt: skip


def contention_labels(arch) -> tuple[str, ...]:
    """Per shared port (:func:`shared_ports`), the stall that names it when it slows a matmul:
    ``dram:contention`` for DRAM's, ``<level>:contention`` for the first on-chip level's."""
    first = arch.memory[0].name
    return tuple("dram:contention" if name == first else f"{name}:contention"
                 for name, _ in _shared_port_names(arch))  # fmt: skip


def plan_jobs(arch, plan, results) -> tuple[tuple[Job, ...], tuple[float, ...]]:
    """The jobs of ``plan`` from its operations' standalone ``results`` (``engine/run.py``),
    each with its bytes on every shared port (:func:`shared_ports`), and those ports' rates."""
    from accel_sim.dataflow.plan import unit_of

    ports, rates = shared_ports(arch)
    jobs = []
    for op, res in zip(plan.ops, results):
        read, written = res.counts.bytes_read, res.counts.bytes_written
        demand = tuple(float((read.get(name, 0) if kind != "w" else 0)
                             + (written.get(name, 0) if kind != "r" else 0))
                       for name, kind in ports)  # fmt: skip
        jobs.append(Job(op.name, res.kind, unit_of(op), res.cycles, demand))
    return tuple(jobs), rates


def schedule_plan(arch, plan, results) -> tuple[Schedule, list[Placed]]:
    """Schedule ``plan``'s operations (standalone ``results``) on concurrent units."""
    jobs, rates = plan_jobs(arch, plan, results)
    sched = simulate_schedule(jobs, plan.graph(), blocks_for(arch, plan), rates)
    labels = contention_labels(arch)
    exposed = sched.exposed()
    idle = sched.idle_by_job("matrix")
    placed = []
    for k, (job, res, row) in enumerate(zip(jobs, results, sched.segments)):
        stalls: dict[str, int] = {}
        if job.unit == "matrix":
            stalls = {key: int(v) for key, v in res.stalls.items() if v}
            for seg in row:
                for cause, cycles in seg.contention(labels).items():
                    stalls[cause] = stalls.get(cause, 0) + cycles
        if idle[k]:
            cause = sched.idle_cause(k)
            stalls[cause] = stalls.get(cause, 0) + idle[k]
        placed.append(Placed(exposed[k], stalls, sum(s.end - s.start for s in row),
                             row[0].start, row[-1].end))  # fmt: skip
    return sched, placed
