"""Ports granted a burst at a time (``burst_bytes`` of a memory level): the split of a transfer
into grants, and the case that needs it. (Collapse on/off with bursts: ``test_collapse_fuzz.py``.)
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from accel_sim.arch.load import arch_from_dict, load_arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine.chip import Partition, Split, view_for
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapping import Loop, Mapping
from accel_sim.engine.memory import MemorySystem
from accel_sim.engine.program import Program
from accel_sim.engine.twin import twin_cycles
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm


def _with_dram_burst(name: str, burst: int | None):
    data = json.loads(load_arch(name).model_dump_json())
    data["memory"][0]["burst_bytes"] = burst
    return arch_from_dict(data, f"{name}+burst")


def test_a_transfer_is_split_into_bursts_that_add_up():
    """HBM -> L2 on the cube: 37 B/cycle on HBM's port, 128 B/cycle on L2's write port. A
    10,000 B tile in 4,096 B bursts is ceil(10000 / 4096) = 3 grants; each port's cycles are
    spread over them and add up to the whole tile's (271 and 79)."""
    mem = MemorySystem(_with_dram_burst("ascend_like_cube", 4096))
    whole = mem.port_cycles(0, 1, 10_000)
    assert whole == (((0, "rw"), 271), ((1, "w"), 79))
    grants = mem.bursts(0, 1, 10_000)
    assert len(grants) == 3
    for k, (_, cycles) in enumerate(whole):
        assert sum(g[k][1] for g in grants) == cycles
        assert max(g[k][1] for g in grants) - min(g[k][1] for g in grants) <= 1
    assert mem.bursts(0, 1, 4096) == (mem.port_cycles(0, 1, 4096),)  # one burst: one grant
    assert mem.bursts(1, 2, 10_000) == (mem.port_cycles(1, 2, 10_000),)  # no burst on L2, L1
    plain = MemorySystem(load_arch("ascend_like_cube"))
    assert plain.bursts(0, 1, 10_000) == (plain.port_cycles(0, 1, 10_000),)


@pytest.mark.parametrize("burst", [0, 1, 63])
def test_a_burst_is_at_least_a_cache_line(burst):
    """Each burst is one DES event: a 1-byte grain took a 2048³ FP16 run on the cube past
    150 s, so the schema refuses grains below 64 B, in one line naming the field."""
    with pytest.raises(UserInputError, match="burst_bytes.*greater than or equal to 64"):
        _with_dram_burst("ascend_like_cube", burst)
    assert _with_dram_burst("ascend_like_cube", 64).memory[0].burst_bytes == 64


def test_a_vector_unit_has_at_least_one_lane():
    """``vector.bytes_per_cycle`` counts FP16 lanes × 2 bytes: 1 B/cycle would be no lane at
    all (it divided by zero), so the schema refuses it; an odd count's last byte is idle."""
    data = json.loads(load_arch("systolic_32x32_ws").model_dump_json())
    data["vector"]["bytes_per_cycle"] = 1
    with pytest.raises(UserInputError, match="vector.bytes_per_cycle"):
        arch_from_dict(data, "one-byte vector")
    data["vector"]["bytes_per_cycle"] = 3
    assert arch_from_dict(data, "three-byte vector").vector.lanes == 1


def test_small_loads_no_longer_wait_for_whole_stores():
    """4893x49x4771 W8A8-static on rtx3090_chip split 9 x 3 runs as 544x49x1592 per core
    (the grid is pinned: the partitioner now prefers 18 x 1, 272x49x4771). Under the
    mapping below each output tile is 7 K steps, each loading a 128 B tile of B over the core's
    DRAM port, and ends with a 17 KB store holding that port for 809 cycles. A port granted a
    whole tile at a time makes every B load queued behind a store wait all of it: loads and
    stores alternate, the unit starves and the port idles a quarter of the run (113,417 cycles
    against 85,585 busy). Granted 2 KB at a time (a memory controller interleaves requests),
    the loads pass between bursts and the run is port-bound: within 0.1 % of the model, which
    shares a port out in proportion."""
    tile, loops = (544, 8, 16), (("b", 1), ("m", 1), ("n", 100), ("m", 1), ("n", 1), ("k", 7))
    keep = ((("A", 1), 5, 2), (("A", 2), 5, 2), (("A", 3), 6, 2), (("B", 1), 5, 2),
            (("B", 2), 5, 2), (("B", 4), 5, 2))  # fmt: skip
    mapping = Mapping(StepTile(*tile), tuple(Loop(d, n) for d, n in loops), keep)
    cycles = {}
    for burst in (None, 2048):
        arch, flow = _with_dram_burst("rtx3090_chip", burst), get_dataflow("w8a8_static")
        (op,) = flow.build(Gemm(4893, 49, 4771), arch, None, flow.resolve_knobs(None)).matmuls
        grid = Partition((Split(1, 1), Split(4893, 544), Split(4771, 1592), Split(49, 49)))
        view, part = view_for(arch, op, grid), grid.largest(op)
        assert (part.M, part.K, part.N) == (544, 49, 1592)
        program = Program(view, replace(part, name=""), mapping)
        busy = sum(c for link, nbytes in zip(program.links, program.link_bytes)
                   for port, c in program.memory.port_cycles(link.src, link.dst, nbytes)
                   if port == (0, "rw"))  # fmt: skip
        assert busy == 85_585
        fast, slow = simulate_program(program), simulate_program(program, collapse=False)
        assert (fast.cycles, fast.stalls) == (slow.cycles, slow.stalls)
        cycles[burst] = (fast.cycles, twin_cycles(program))
    assert cycles[None][0] == 113_417
    des, model = cycles[2048]
    assert des < 1.02 * busy and abs(model - des) <= 0.001 * des
