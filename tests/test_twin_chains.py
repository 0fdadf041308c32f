"""The closed-form twin's chains against the DES: the stores, loads and input windows that must
run in sequence, on hand-built mappings (single cores and chips' per-core views) and as
lower bounds on random ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel_sim.arch.load import load_arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.des import simulate_program
from accel_sim.engine.mapper import mapped_program
from accel_sim.engine.twin import twin_cycles

CUBE = "ascend_like_cube"

def _chip_part(arch_name, flow_name, gemm, tile, loops, keep, split=None):
    """(per-core view, slowest core's part, a factory of its program under the given mapping)
    of the one matmul of ``flow_name`` on a chip: what the chip's DES runs for that part.
    ``split``: the per-core (M, N) of the partition, pinned (else the partitioner's choice),
    so that the case stays the one described whatever grid the partitioner ranks first."""
    from accel_sim.arch.units.base import StepTile
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.engine.chip import slowest_core
    from accel_sim.engine.mapping import Loop, Mapping
    from accel_sim.engine.program import Program
    from accel_sim.workload.gemm import Gemm

    arch, flow = load_arch(arch_name), get_dataflow(flow_name)
    (op,) = flow.build(Gemm(*gemm), arch, None, flow.resolve_knobs(None)).matmuls
    if split is None:
        view, part = slowest_core(arch, op)
    else:
        from accel_sim.engine.chip import Partition, Split, view_for

        p = Partition((Split(op.count, op.count), Split(op.M, split[0]), Split(op.N, split[1]),
                       Split(op.K, op.K)))  # fmt: skip
        view, part = view_for(arch, op, p), p.largest(op)
    mapping = Mapping(StepTile(*tile), tuple(Loop(d, n) for d, n in loops), keep)
    return view, part, lambda: Program(view, replace(part, name=""), mapping)


def test_stores_behind_a_long_window_load_stall_the_unit():
    """1442x325x1430 W8A8-static on rtx3090_chip runs as 112x325x240 per core. Under the mapping
    below each step (82 cycles) is one 16x16 output tile stored straight to DRAM (512 B: 29
    cycles of the core's 18.2 B/cycle share), and every 7 steps B's next window tile (5,264 B:
    290 cycles) crosses the same DRAM port. The stores behind it wait, each holding one of the
    2 accumulator slots; the unit fills the other slot and then stalls 290 - 82 - 29 = 179
    cycles, in each of the 14 windows after the first (whose loads precede every store). The
    DES charges 2,212 cycles to store:L0C->DRAM; the model, which had no such term, said 11,610
    against the DES's 14,088 (-17.6 %). Ranked by the corrected model the mapper picks a
    mapping the DES runs in under 12,000 cycles."""
    from accel_sim.engine.twin import blocked_stores

    loops = (("b", 1), ("m", 1), ("n", 15), ("m", 7), ("n", 1), ("k", 1))
    keep = ((("A", 1), 3, 2), (("A", 2), 3, 2), (("A", 3), 6, 2), (("B", 1), 6, 2),
            (("B", 2), 6, 2), (("B", 4), 6, 2))  # fmt: skip
    view, part, build = _chip_part("rtx3090_chip", "w8a8_static", (1442, 325, 1430),
                                   (16, 328, 16), loops, keep, (112, 240))  # fmt: skip
    assert (part.M, part.K, part.N) == (112, 325, 240)
    program = build()
    mem = program.memory
    assert mem.transfer_cycles(0, 1, 5264) == 290 and mem.transfer_cycles(5, 0, 512) == 29
    assert program.step_at(0).compute_cycles == 82
    assert blocked_stores(program) == 14 * (290 - 82 - 29)
    des = simulate_program(build())
    assert des.cycles == 14088 and des.stalls["store:L0C->DRAM"] == 2212
    assert abs(twin_cycles(program) - des.cycles) <= 0.10 * des.cycles
    assert simulate_program(mapped_program(view, part)).cycles < 12000


def test_an_outer_levels_slots_stay_held_while_its_windows_are_in_flight():
    """3886x11x1135 FP16 on rtx3090_chip runs as 144x11x1135 per core (27 x 1 cores). Under the
    mapping below each output tile (144x64, 6 K steps) streams its B window step by step from
    DRAM into L2, over the port its 18 KB store leaves by (``twin_tiles.streamed_input``). L2
    keeps 2 windows of B (the arch file's buffers); a window frees its slot only once it has
    arrived (600 cycles of DRAM latency) and moved on to SMEM (5 cycles), so window w + 2 is
    not requested before then, although SMEM and L0B could hold 2 windows more each (a lead of
    6). Counting only the lead, the model said 17,278 against the DES's 20,626 (-16.2 %). With
    the slot held (2, 605) and the windows beyond the first two queued on the port with the
    first stores (not loaded back to back from time 0), it says 20,626."""
    from accel_sim.arch.units.base import StepTile
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.engine.chip import Partition, Split, view_for
    from accel_sim.engine.mapping import Loop, Mapping
    from accel_sim.engine.program import Program
    from accel_sim.engine.twin_tiles import _held, streamed_input
    from accel_sim.workload.gemm import Gemm

    arch, flow = load_arch("rtx3090_chip"), get_dataflow("fp16")
    (op,) = flow.build(Gemm(3886, 11, 1135), arch, None, flow.resolve_knobs(None)).matmuls
    grid = Partition((Split(1, 1), Split(3886, 144), Split(1135, 1135), Split(11, 11)))
    view, part = view_for(arch, op, grid), replace(grid.largest(op), name="")
    keep = tuple(((o, lv), 5, 2) for o, lv in (("A", 1), ("A", 2), ("A", 3), ("B", 1),
                                                ("B", 2), ("B", 4)))  # fmt: skip
    loops = (Loop("b", 1), Loop("m", 1), Loop("n", 18), Loop("m", 1), Loop("n", 1), Loop("k", 6))
    mapping = Mapping(StepTile(144, 2, 64), loops, keep)
    program = Program(view, part, mapping)
    stream = streamed_input(program)
    assert stream == ("tile", 3, 6)  # B's DRAM -> L2 hop, 6 windows of lead
    assert _held(program, stream) == (2, 600 + 5)
    des = simulate_program(Program(view, part, mapping)).cycles
    model = twin_cycles(program)
    assert (des, model) == (20_626, 20_626)


def test_twin_tracks_des_on_the_views_chips_run():
    """The chips' matmuls run on per-core views (``chip.slowest_core``: the slowest core's part,
    with its share of the shared levels and merged DRAM fetches). There the model tracked the
    DES less well than on single cores (docs/engine.md, *Chips measured on the views they run*):
    on these 240 random matmuls (seed 7) the model measures p90 1.75 %, max 7.7 %, within the
    targets (p90 <= 2 %, max <= 10 %), which this guards. (240, not 120: on 120 the p90 is the
    12th largest gap, which one grid choosing differently moves by 0.7 points; the stores'
    stretch of the windows' transfers, ``twin_windows._store_stretch``, did that when it came to
    count only the stores issued while a window loads.)"""
    import numpy as np

    from accel_sim.arch.load import list_archs
    from accel_sim.engine.agreement import agreement, grid_ops
    from accel_sim.engine.chip import slowest_core

    chips = [name for name in list_archs() if load_arch(name).cores > 1]
    errors = []
    for name, flow, arch, op in grid_ops(seed=7, n=240, archs=chips):
        view, part = slowest_core(arch, op)
        errors.append(abs(agreement(name, flow, view, part).error))
    errors = np.array(errors)
    assert np.median(errors) < 0.005
    assert np.percentile(errors, 90) <= 0.02
    assert errors.max() <= 0.10


def test_suffix_of_the_last_tile_is_on_the_critical_path():
    """180x535x19 W4A4 on the edge NPU runs in 3 K steps (256, 256, 23 deep). Step 1 computes
    only after A and B of steps 0 and 1 crossed the one DRAM port (676 + 74 + 676 + 72 cycles)
    and the DRAM latency (150), then steps 1 and 2 compute (739), the epilogue (214) and the C
    store (201) follow: 2,802 cycles, which the model had put at 2,500 (only the last step's
    loads on its chain)."""
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.workload.gemm import Gemm

    arch, flow = load_arch("edge_npu_int8"), get_dataflow("w4a4_static")
    plan = flow.build(Gemm(180, 535, 19), arch, None, flow.resolve_knobs(None))
    (op,) = plan.matmuls
    program = mapped_program(arch, op)
    assert program.n_steps == 3
    des = simulate_program(program).cycles
    assert des == 676 + 74 + 676 + 72 + 150 + 739 + 214 + 201
    assert abs(twin_cycles(program) - des) <= 2


def test_load_chains_bound_the_des_from_below():
    """The load ports' chains (``twin_chains.load_bound``, with the last tile's suffixes) are
    work that must run in order, so the DES never takes fewer cycles."""
    from accel_sim.engine.agreement import grid_ops
    from accel_sim.engine.twin_chains import load_bound

    for _, _, arch, op in grid_ops(seed=11, n=40):
        program = mapped_program(arch, op)
        assert load_bound(program) <= simulate_program(mapped_program(arch, op)).cycles


def test_a_port_serves_no_load_before_the_first_data_reach_it():
    """13x4598x26 W4A4 on the 910B chip runs as 13x4598x16 on each of 2 cores: 5 K steps of
    16x1024x16 INT4 tiles. Every A and B tile crosses L1's 128 B/cycle write port (A 4 x 6,656 +
    3,263 B, B 4 x 8,192 + 4,016 B: 522 cycles), and it can start only once the first A tile is
    in L2 (its HBM transfer, 15 cycles, and HBM's 500-cycle latency). After the last load the
    last A tile needs L2's latency (100), its hop to L0A (13) and L1's latency (10), then the
    last compute (8) and the way out (5): 515 + 522 + 123 + 13 = 1,173 cycles. The model left
    out the 515 before the port's first load and said 906; the DES takes 1,176. (The model now
    says 1,192: its one group's loads end 515 + 522 cycles in and are followed by the first
    step's way in from the port, 142 cycles with B's longer hop, where the short edge step's
    last tile needs 123.)"""
    from accel_sim.dataflow.registry import get_dataflow
    from accel_sim.engine.chip import core_view, partition
    from accel_sim.engine.twin_chains import load_bound
    from accel_sim.workload.gemm import Gemm

    arch, flow = load_arch("ascend910b_chip"), get_dataflow("w4a4_static")
    (op,) = flow.build(Gemm(13, 4598, 26), arch, None, flow.resolve_knobs(None)).matmuls
    p = partition(arch, op)
    assert p.active == 2
    program = mapped_program(core_view(arch, p.active), p.largest(op))
    assert program.n_steps == 5
    assert load_bound(program) == 515 + 522 + 123 + 13
    des = simulate_program(program).cycles
    assert load_bound(program) <= des <= 1.01 * load_bound(program)
    assert abs(twin_cycles(program) - des) <= 0.02 * des


def test_the_first_group_loads_after_the_first_data_arrive():
    """89x2525x64 W8A8 on the 910B chip runs as 32x2525x32 on each of 6 cores. Under the mapping
    below (16x512x16 steps, K innermost, 2 x 2 output tiles) every A and B tile crosses L1's
    128 B/cycle write port, which can start only once the first A tile is in L2 (its HBM
    transfer, 24 cycles, and HBM's 500-cycle latency): the first group's ten 8 KB tiles take
    640 cycles there from cycle 524, not from 0. The model's body let them start at 0 and said
    1,837 against the DES's 2,425 (-24 %); with the head it says 2,153 (the rest of the gap:
    the single-buffered L0A window leaves the second M block's L1 reads after the last L1
    write). Ranked by the corrected model, the mapper picks a mapping the DES runs in under
    2,100 cycles."""
    from accel_sim.engine.twin_chains import _heads

    loops = (("b", 1), ("m", 2), ("n", 2), ("m", 1), ("n", 1), ("k", 5))
    keep = ((("A", 1), 5, 2), (("A", 2), 5, 2), (("A", 3), 5, 1), (("B", 1), 2, 2),
            (("B", 2), 2, 2), (("B", 4), 6, 2))  # fmt: skip
    view, part, build = _chip_part("ascend910b_chip", "w8a8", (89, 2525, 64), (16, 512, 16),
                                   loops, keep, (32, 32))  # fmt: skip
    assert (part.M, part.K, part.N) == (32, 2525, 32)
    program = build()
    l1_write = (2, "w")
    assert _heads(program)[l1_write] == 24 + 500
    des = simulate_program(build()).cycles
    assert des == 2425
    assert abs(twin_cycles(program) - des) <= 0.12 * des
    assert simulate_program(mapped_program(view, part)).cycles < 2100


def _latency_bound_windows():
    """1792×192×48 FP16 on the cube with 8× its HBM bandwidth, A kept in L2 for the 3 K steps
    of each of 28 output tiles in 2 slots: the 500-cycle HBM latency, not bandwidth or compute
    (4,032 cycles), paces the run."""
    import json

    from accel_sim.arch.load import arch_from_dict
    from accel_sim.arch.units.base import StepTile
    from accel_sim.engine.mapping import Loop, Mapping
    from accel_sim.engine.program import Program

    data = json.loads(load_arch(CUBE).model_dump_json())
    data["memory"][0].update(read_bytes_per_cycle=296.0, write_bytes_per_cycle=296.0)
    arch = arch_from_dict(data, "cube, 8x HBM")
    loops = (Loop("b", 1), Loop("m", 1), Loop("n", 1), Loop("m", 28), Loop("n", 1), Loop("k", 3))
    keep = ((("A", 1), 5, 2), (("A", 2), 6, 2), (("A", 3), 6, 2),
            (("B", 1), 5, 2), (("B", 2), 5, 2), (("B", 4), 5, 2))  # fmt: skip
    mapping = Mapping(StepTile(64, 64, 48), loops, keep)
    return lambda: Program(arch, MatmulOp("t", 1792, 192, 48, "fp16", 16, 16), mapping)


def test_window_slots_bound_a_latency_bound_run():
    """Each A window in L2 holds one of 2 slots from its first tile's transfer until its last
    tile has moved on to L1: 3 tiles of 8 KB at L2's 128 B/cycle write port (64 cycles each),
    the HBM latency (500), the last tile's hop to L1 (64), or the first tile, the latency and
    all three hops to L1: 64 + 500 + 3 × 64 = 756 either way. Windows w, w + 2, … share a slot,
    so 28 windows take at least 28 × 756 / 2 = 10,584 cycles (the chains' mean). The chain
    holding the last window also waits for window 1's start (the mover's 3 × 64 cycles of
    window 0 before it) and ends with the last step's way to the unit, its compute and the way
    out. The DES's nested L1 slots add more (12,205); the per-group model alone said 9,480.

    The model's estimate also stretches each window's transfers by the output stores issued
    on the hop's ports while it loads (first come, first served): window w takes its slot when
    window w - 2 closes its output tile (a 1792 x 48 FP16 run's 64 x 48 tiles: 48 cycles each
    of L2's write port, the busier of the hop's ports, 47 of HBM's) and loads while window
    w - 1 computes and closes its own, so two stores (96 cycles) queue among its three tiles
    (192): x 1.5. Window 1 meets only window 0's store (x 1.25), window 0 none."""
    from accel_sim.engine.twin_windows import window_chains, window_slot_bound

    program = _latency_bound_windows()
    assert program().compute_cycles == 4032
    assert window_slot_bound(program()) == 28 * (3 * 64 + 500 + 64) / 2
    bound = window_chains(program())
    des = simulate_program(program()).cycles
    # window 0's transfers, 14 holds, then L2's latency, L1's latency and the hop to L0A (32),
    # the last step's compute (48) and the last C tile's way out (96)
    tail = 100 + 10 + 32 + 48 + 96
    assert bound == 3 * 64 + 14 * 756 + tail
    stretched = window_chains(program(), stretch=True)
    hold = 3 * 64 * 1.5 + 500 + 64
    odd = 3 * 64 + (3 * 64 * 1.25 + 500 + 64) + 13 * hold + tail  # windows 1, 3, ..., 27
    # windows 0, 2, ..., 26: window 0's tiles leave L2 beside B's three (48 cycles each on L2's
    # read port, estimate only: twin_windows._shared_next), so it holds its slot 64 + 500 +
    # 3 x (64 + 48); once window 26 has its slot, its first tile's way to the unit (64 + 500 +
    # 64 + 100 + 32 + 10), the last 6 steps' compute (48 each) and the way out (96)
    even = 64 + 500 + 3 * (64 + 48) + 12 * hold + 770 + 6 * 48 + 96
    assert stretched == pytest.approx(max(odd, even)) and odd > even
    assert bound <= des == 12205
    assert abs(stretched - des) <= 0.015 * des  # an estimate, not a bound: 12,358 (+1.3 %)
    assert twin_cycles(program()) >= bound


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_window_slots_bound_the_des_from_below(seed):
    """The windows' slot chains are holds that must run in sequence, on any mapping the
    mapper considers (not only the ones it picks), chips' per-core views included."""
    import random
    from dataclasses import replace

    from accel_sim.arch.load import list_archs
    from accel_sim.engine.agreement import grid_ops
    from accel_sim.engine.chip import partition, view_for
    from accel_sim.engine.mapper import candidates
    from accel_sim.engine.program import Program
    from accel_sim.engine.twin_windows import window_chains, window_slot_bound

    rng = random.Random(seed)
    for _, _, arch, op in grid_ops(seed=seed, n=1, archs=list_archs(), top=2048):
        if arch.cores > 1:
            p = partition(arch, op)
            arch, op = view_for(arch, op, p), p.largest(op)
        op = replace(op, name="")
        _, _, mapping = rng.choice(list(candidates(arch, op)))
        if Program(arch, op, mapping).n_steps <= 4096:
            program = Program(arch, op, mapping)
            bound = max(window_slot_bound(program), window_chains(program))
            assert bound <= simulate_program(Program(arch, op, mapping)).cycles


def test_a_late_window_then_every_later_step_through_the_unit():
    """540x166x419 W8A8 on ascend910b_chip runs as 48x166x419 per core: under the mapping below,
    24 steps in 4 windows of B (one 128-wide N tile each, 6 K steps) through 2 L2 slots. Window
    2 enters L2 only once window 0 has left it; its first tile then needs 29 cycles over the
    core's HBM share (4,608 B at 163 B/cycle), HBM's 500 of latency, 32 into L1 (4,096 B at
    128 B/cycle), L2's 100, 16 into L0B, L1's 10: 687 cycles to the unit. Every step from there
    on follows on the unit, one after the other (6 x 24 + 6 x 9 = 198 cycles for the last, narrow
    N tile's), then the last tiles' way out. The chains ended with the last step's own way in and
    out; the model said 1,595 against the DES's 1,860 (-14.3 %)."""
    import numpy as np

    from accel_sim.engine.twin_windows import _step_classes, _unit_after, window_chains

    loops = (("b", 1), ("m", 1), ("n", 4), ("m", 1), ("n", 1), ("k", 6))
    keep = ((("A", 1), 5, 2), (("A", 2), 5, 2), (("A", 3), 5, 2), (("B", 1), 5, 2),
            (("B", 2), 5, 2), (("B", 4), 5, 2))  # fmt: skip
    view, part, build = _chip_part("ascend910b_chip", "w8a8", (540, 166, 419), (48, 32, 128),
                                   loops, keep, (48, 419))  # fmt: skip
    assert (part.M, part.K, part.N) == (48, 166, 419)
    program = build()
    hbm_to_l2_b = next(j for j, ln in enumerate(program.links) if ln.operand == "B")
    way, computes, out = _unit_after(program, hbm_to_l2_b, *_step_classes(program))
    assert way[12] == 29 + 500 + 32 + 100 + 16 + 10
    assert computes[12] == 6 * 24 + 6 * 9 and np.all(np.diff(computes) < 0)
    des = simulate_program(build()).cycles
    assert des == 1860
    assert window_chains(program) <= des  # a bound of the DES without the model's drain
    assert abs(twin_cycles(program) - des) <= 0.05 * des


def test_a_first_pass_that_loads_a_kept_panel_then_the_rest_on_the_unit():
    """3172x129x346 W8A8 on rtx3090_chip runs as 64x129x346 per core. Under the mapping below B's
    panel (11 N tiles) is kept in L2 and SMEM across the two M passes: the first pass loads it
    over the core's DRAM share (4,352 B tiles, about 210 cycles each) beside that pass's 101-cycle
    stores, the second reads it on chip and is compute-bound (136 cycles a step). The unit's
    last 12 steps follow the first pass's last B tile (DRAM, 600 cycles of latency, SMEM, L0B).
    The whole-run chains average the two passes; the model said 5,198 against the DES's 5,875
    (-11.5 %)."""
    from accel_sim.engine.twin_first_pass import first_pass_estimate

    loops = (("b", 1), ("m", 2), ("n", 11), ("m", 1), ("n", 1), ("k", 1))
    keep = ((("A", 1), 6, 2), (("A", 2), 6, 2), (("A", 3), 6, 2), (("B", 1), 2, 2),
            (("B", 2), 2, 2), (("B", 4), 6, 2))  # fmt: skip
    view, part, build = _chip_part("rtx3090_chip", "w8a8", (3172, 129, 346), (32, 136, 32),
                                   loops, keep, (64, 346))  # fmt: skip
    assert (part.M, part.K, part.N) == (64, 129, 346)
    program = build()
    assert program.step_at(0).compute_cycles == 136
    des = simulate_program(build()).cycles
    assert des == 5875
    # the pass's loads and most of its stores, the way in, 12 steps on the unit, the way out
    assert first_pass_estimate(program) > 5875 - 3 * 136
    assert abs(twin_cycles(program) - des) <= 0.05 * des
    assert simulate_program(mapped_program(view, part)).cycles < 5300
