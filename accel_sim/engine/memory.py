"""The memory system: every level's ports, transfer times and latencies, defined once.

The DES (``des.py``), the closed-form model (``twin.py``), the step program (``program.py``) and
the costs of vector and transfer operations (``run.py``) all time data movement through
:class:`MemorySystem`; nothing else divides bytes by a bandwidth.

* A **hop** moves a tile from level ``src`` to level ``dst`` through the read port of ``src``
  and the write port of ``dst`` (a ``shared_port`` level has one port for both). It takes
  ``ceil(bytes / bandwidth)`` cycles at the slower port's bandwidth, and occupies each port only
  for the bytes at that port's own rate (``ceil(bytes / rate)``): a 37 B/cycle HBM store leaves a
  128 B/cycle L2 read port free for 71 % of its duration, as a time-multiplexed port would. The
  data is usable ``src.latency_cycles`` after the transfer ends, so consecutive transfers overlap
  their latency (a port is free again as soon as its bytes have passed).
* **DRAM** (the level of ``kind: dram``) keeps at most ``max_inflight_bytes`` of requests in
  flight. By Little's law a stream then runs at ``min(bandwidth, in_flight / latency)``; with
  ``in_flight ≥ latency × bandwidth`` the latency is fully hidden. The architecture's
  ``efficiency["dram"]`` (GPU proxies' calibration) scales DRAM bandwidth.
* **Bursts**: a level with ``burst_bytes`` grants a hop's ports a burst at a time; a longer tile
  queues again (first come, first served) for each further burst, so a small load waits behind
  one burst of a large store, not the whole tile (:meth:`MemorySystem.bursts`). Without it a
  tile holds its ports from its first byte to its last.
* **Streams** (vector and transfer operations) read and write one level through its ports.
"""

from __future__ import annotations

import math
from functools import cached_property

from accel_sim.arch.schema import Arch, MemoryLevel

#: A port: (level index, "r" | "w" | "rw"); a shared-port level has the single port "rw".
PortKey = tuple[int, str]
#: A port and the cycles a transfer holds it.
PortCycles = tuple[PortKey, int]


#: Per memory configuration (the timing fields of every level and the DRAM efficiency): the
#: port rates and the hop table of :class:`MemorySystem` (read-only once built).
_TABLES: dict[tuple, tuple[dict, dict]] = {}


class MemorySystem:
    """Timing of the levels of ``arch.memory`` (indices are positions in that list)."""

    def __init__(self, arch: Arch) -> None:
        self.arch = arch
        self.levels: tuple[MemoryLevel, ...] = tuple(arch.memory)
        self.index = {level.name: i for i, level in enumerate(self.levels)}
        # rates and port sets are looked up millions of times by the mapper and the twin:
        # computed once per memory configuration (every Program builds a MemorySystem)
        key = (arch.efficiency.get("dram", 1.0),
               tuple((lv.read_bytes_per_cycle, lv.write_bytes_per_cycle, lv.shared_port,
                      lv.latency_cycles, lv.max_inflight_bytes, lv.burst_bytes)
                     for lv in self.levels))  # fmt: skip
        tables = _TABLES.get(key)
        if tables is None:
            n = len(self.levels)
            rates = {(i, k): self._compute_rate(i, k) for i in range(n) for k in "rw"}
            hops = {(s, d): self._compute_hop(s, d) for s in range(n) for d in range(n) if s != d}
            if len(_TABLES) >= 256:
                _TABLES.clear()
            tables = _TABLES[key] = (rates, hops, {})
        self._rates, self._hops, self._port_memo = tables

    # ----------------------------------------------------------------- ports
    def port(self, level: int, kind: str) -> PortKey:
        """The port of ``level`` used for ``kind`` ("r" or "w")."""
        return (level, "rw") if self.levels[level].shared_port else (level, kind)

    def hop_ports(self, src: int, dst: int) -> tuple[PortKey, ...]:
        """Ports a hop holds, in the one global order every holder acquires them (no deadlock)."""
        return self._hops[(src, dst)][0]

    def _compute_hop(self, src: int, dst: int) -> tuple[tuple[PortKey, ...], tuple, float]:
        """(ports in acquisition order, ((port, rate), ...) in that order, hop bandwidth)."""
        rate = {self.port(src, "r"): self._compute_rate(src, "r"),
                self.port(dst, "w"): self._compute_rate(dst, "w")}  # fmt: skip
        ports = tuple(sorted(rate))
        bandwidth = min(self._compute_rate(src, "r"), self._compute_rate(dst, "w"))
        return ports, tuple((port, rate[port]) for port in ports), bandwidth

    @cached_property
    def all_ports(self) -> tuple[PortKey, ...]:
        return tuple(sorted({self.port(i, k) for i in range(len(self.levels)) for k in "rw"}))

    # ------------------------------------------------------------- bandwidth
    def _level_rate(self, level: int, kind: str) -> float:
        """Bytes per cycle of ``level``'s ``kind`` ("r"/"w") port (DRAM: derated, Little's law)."""
        return self._rates[(level, kind)]

    def _compute_rate(self, level: int, kind: str) -> float:
        mem = self.levels[level]
        rate = mem.read_bytes_per_cycle if kind == "r" or mem.shared_port else (
            mem.write_bytes_per_cycle)  # fmt: skip
        if level == 0:  # the DRAM (schema: only the outermost level may be dram)
            rate *= self.arch.efficiency.get("dram", 1.0)
            if mem.max_inflight_bytes is not None and mem.latency_cycles > 0:
                rate = min(rate, mem.max_inflight_bytes / mem.latency_cycles)  # Little's law
        return rate

    def hop_bandwidth(self, src: int, dst: int) -> float:
        """Bytes per cycle of a hop: the slower of the source's read and destination's write."""
        return self._hops[(src, dst)][2]

    def port_cycles(self, src: int, dst: int, nbytes: int) -> tuple[tuple[PortKey, int], ...]:
        """Cycles a hop of ``nbytes`` occupies each of its ports, in acquisition order
        (memoised per memory configuration: the mapper and the twin ask for the same hops)."""
        key = (src, dst, nbytes)
        hit = self._port_memo.get(key)
        if hit is None:
            if len(self._port_memo) >= 1 << 16:
                self._port_memo.clear()
            hit = self._port_memo[key] = self._port_cycles(src, dst, nbytes)
        return hit

    def _port_cycles(self, src: int, dst: int, nbytes: int) -> tuple[tuple[PortKey, int], ...]:
        ports, rates, bandwidth = self._hops[(src, dst)]
        if nbytes <= 0:
            return tuple((port, 0) for port in ports)
        if len(rates) == 2:
            (p0, r0), (p1, r1) = rates
            return ((p0, math.ceil(nbytes / r0)), (p1, math.ceil(nbytes / r1)))
        if len(rates) == 1:  # src == dst cannot happen; a shared port used both ways would
            return ((ports[0], math.ceil(nbytes / bandwidth)),)
        return tuple((port, math.ceil(nbytes / rate)) for port, rate in rates)

    def bursts(self, src: int, dst: int, nbytes: int) -> tuple[tuple[PortCycles, ...], ...]:
        """A hop's grants of its ports: one, ``port_cycles``, unless a level of the hop sets
        ``burst_bytes`` (the smaller of the two) and the tile is larger; then ``ceil(bytes /
        burst)`` grants, each port's cycles spread over them so that they sum to its
        ``port_cycles`` (memoised like it)."""
        key = ("bursts", src, dst, nbytes)
        hit = self._port_memo.get(key)
        if hit is None:
            whole = self.port_cycles(src, dst, nbytes)
            sizes = [b for b in (self.levels[src].burst_bytes, self.levels[dst].burst_bytes) if b]
            n = math.ceil(nbytes / min(sizes)) if sizes and nbytes > 0 else 1
            hit = (whole,) if n <= 1 else tuple(
                tuple((port, -(-c * (k + 1) // n) - -(-c * k // n)) for port, c in whole)
                for k in range(n)
            )  # fmt: skip
            self._port_memo[key] = hit
        return hit

    def transfer_cycles(self, src: int, dst: int, nbytes: int) -> int:
        """Cycles a hop of ``nbytes`` holds its ports (0 bytes take no time)."""
        return math.ceil(nbytes / self._hops[(src, dst)][2]) if nbytes > 0 else 0

    def latency(self, src: int) -> int:
        """Cycles from the end of a transfer out of ``src`` until the data is usable."""
        return self.levels[src].latency_cycles

    def access_cycles(self, level: int, read_bytes: int, write_bytes: int) -> int:
        """Cycles the ports of ``level`` are busy for these reads and writes (both directions
        share the port of a ``shared_port`` level; otherwise they proceed in parallel)."""
        reads = read_bytes / self._level_rate(level, "r") if read_bytes > 0 else 0.0
        writes = write_bytes / self._level_rate(level, "w") if write_bytes > 0 else 0.0
        busy = reads + writes if self.levels[level].shared_port else max(reads, writes)
        return math.ceil(busy)

    def stream_cycles(self, level: int, read_bytes: int, write_bytes: int) -> int:
        """A streaming pass over ``level``: its first access latency plus its port time."""
        return self.latency(level) + self.access_cycles(level, read_bytes, write_bytes)
