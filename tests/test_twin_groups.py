"""The closed-form twin's per-group terms against the DES, on pinned mappings where a shared
DRAM bus serves a big transfer ahead of an input streamed one tile per step (first come, first
served): the numbers in the docstrings are derived by hand from the architecture files."""

from __future__ import annotations

import pytest

from accel_sim.arch.load import load_arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapping import Loop, Mapping
from accel_sim.engine.program import Program
from accel_sim.engine.program_periods import _class_of
from accel_sim.engine.twin import twin_cycles
from accel_sim.engine.twin_groups import _prefetch_idle, _store_ahead, _write_block
from accel_sim.engine.twin_steps import _group_loop
from accel_sim.workload.gemm import Gemm


def _program(arch_name: str, flow: str, gemm, tile, loops: str, keep) -> Program:
    """The program of ``flow``'s matmul under the mapping ``tile``, ``loops`` (outermost first,
    e.g. ``"b1 n1 m1 k32 n2 m1"``) and ``keep``."""
    arch, dataflow = load_arch(arch_name), get_dataflow(flow)
    (op,) = dataflow.build(Gemm(*gemm), arch, None, dataflow.resolve_knobs(None)).matmuls
    loops = tuple(Loop(loop[0], int(loop[1:])) for loop in loops.split())
    return Program(arch, op, Mapping(StepTile(*tile), loops, keep))


def test_the_next_window_goes_ahead_of_the_last_tile_of_this_one():
    """247x1993x52 W8A8-static on the 32x32 WS: for each of 32 K blocks (loop k) the A tile
    247x64 (15,808 B: 618 cycles on the 25.6 B/cycle LPDDR bus) is kept for the two N steps
    (loop n) whose B tiles (2,048 and 1,280 B: 80 and 50 cycles) are kept for the block too;
    a step computes for 341 cycles. Both inputs of a block are requested when the block two back
    closes, and A's next tile, requested when the block before closes, goes ahead of this
    block's second B tile. So every two blocks take 618 + 80 + 618 + 50 + 150 (latency) + 341
    = 1,857 cycles (the DES's collapsed period), the bus idling 150 + 341 − 130 = 361 of them,
    where the group's own bus work (748) is only 66 cycles above its compute (682)."""
    keep = ((("A", 1), 6, 2), (("B", 2), 4, 2), (("C", 3), 3, 2))
    program = _program("systolic_32x32_ws", "w8a8_static", (247, 1993, 52), (247, 64, 32),
                       "b1 n1 m1 k32 n2 m1", keep)  # fmt: skip
    mem = program.memory
    assert [mem.transfer_cycles(0, 1, 15808), mem.transfer_cycles(0, 2, 2048),
            mem.transfer_cycles(0, 2, 1280)] == [618, 80, 50]  # fmt: skip
    assert program.step_at(0).compute_cycles == 341
    g = _group_loop(program)
    radix = program._radix[g]
    middle = program.code(2) - (program.code(2) // radix % 4) * radix  # block 1's group class
    busy = {"compute": 682, (0, "rw"): 748}
    assert _prefetch_idle(program, g, radix, middle, busy) == {(0, "rw"): (150 + 341 - 130) / 2}
    des = simulate_program(program).cycles
    assert des == 31233
    assert abs(twin_cycles(program) - des) <= 0.01 * des  # was 26,417 (-15.4 %) without the term


def test_a_store_goes_ahead_of_the_next_streamed_tile():
    """1575x1791x464 W4A4-static on the edge NPU: each group is one 512x64 output tile's 7 K
    steps (702 cycles each), B streamed one 8 KB tile per step (241 cycles on the 34.1 B/cycle
    LPDDR bus, two slots). The tile's INT16 output (64 KB: 1,922 cycles on the bus) is requested
    when its epilogue ends, 2,048 cycles (32,768 outputs on 16 lanes) after the last step, i.e.
    58 cycles before the next step boundary, where B's next tile is requested; it waits behind
    the store and is usable 1,922 − 58 + 241 + 150 (latency) = 2,255 cycles later, 1,553 after
    the step that was to hide it. The DES charges these stalls to the B load."""
    program = _program("edge_npu_int8", "w4a4_static", (1575, 1791, 464), (512, 256, 64),
                       "b1 m4 n8 m1 n1 k7", ((("A", 1), 5, 2), (("B", 2), 6, 2)))  # fmt: skip
    mem = program.memory
    g = _group_loop(program)
    radix = program._radix[g]
    outer = program.code(7) - (program.code(7) // radix % 4) * radix  # the second output tile
    last = program.class_of(outer + _class_of(6, 7) * radix)
    assert dict(mem.port_cycles(3, 0, last.link_bytes[2]))[(0, "rw")] == 1922
    assert mem.transfer_cycles(0, 2, 8192) == 241 and -2048 % 702 == 58
    assert _store_ahead(program, g, radix, outer) == 1922 - 58 + 241 + 150 - 702
    des = simulate_program(program)
    assert des.cycles == 200090 and des.stalls["load:DRAM->FILTER_SRAM"] > 40000
    assert abs(twin_cycles(program) - des.cycles) <= 0.02 * des.cycles  # was -14.9 % without it



def test_an_output_tile_moving_into_l2_idles_the_hbm_port():
    """216x177x2362 FP16 on the cube: each group is one 216x128 output tile's 12 K steps, B
    streamed from HBM into L2 one 16x128 tile (4,096 B) per step: 111 cycles of HBM's port (37
    B/cycle), 32 of L2's write port (128 B/cycle). The finished tile (55,296 B) moves from L0C
    into L2 before L2 stores it to HBM, holding L2's write port 432 cycles; B's next tile needs
    that port too, so HBM idles until the move ends, less what the B tile in flight still has on
    HBM after its L2 part (79 cycles): all of it if the move came during that part, half on
    average if after, 79 x (32 + 79 / 2) / 111 in expectation. The DES's trace shows 419 idle
    cycles a tile (HBM 32,451 -> 32,870 behind the move 32,438 -> 32,870)."""
    keep = ((("A", 1), 5, 2), (("A", 2), 5, 2), (("A", 3), 6, 2), (("B", 1), 5, 2),
            (("B", 2), 5, 2), (("B", 4), 6, 2))  # fmt: skip
    program = _program("ascend_like_cube", "fp16", (216, 177, 2362), (224, 16, 128),
                       "b1 m1 n19 m1 n1 k12", keep)  # fmt: skip
    mem = program.memory
    assert dict(mem.port_cycles(0, 1, 4096)) == {(0, "rw"): 111, (1, "w"): 32}
    assert dict(mem.port_cycles(5, 1, 55296))[(1, "w")] == 432
    g = _group_loop(program)
    radix = program._radix[g]
    outer = program.code(12) - (program.code(12) // radix % 4) * radix  # the second tile
    idle, tiles = _write_block(program, g, radix, outer)
    assert tiles == 1 and idle == {(0, "rw"): pytest.approx(432 - 79 * (32 + 79 / 2) / 111)}
    des = simulate_program(program).cycles
    assert des == 60179
    assert abs(twin_cycles(program) - des) <= 0.02 * des  # was 53,108 (-11.7 %) without it
