"""The DES's check of the mapper's choice (engine/des_check.py)."""

from __future__ import annotations

from dataclasses import replace

from accel_sim.api import _as_gemm, get_dataflow
from accel_sim.arch.load import load_arch
from accel_sim.engine import des_check, mapper
from accel_sim.engine.des import simulate_program
from accel_sim.engine.program import Program
from accel_sim.engine.run import _CACHE
from accel_sim.engine.twin import twin_cycles


def _op(arch, gemm, flow, knobs=None):
    f = get_dataflow(flow)
    (op,) = f.build(_as_gemm(gemm), arch, None, f.resolve_knobs(knobs)).matmuls
    return op


def _cold() -> None:
    _CACHE.clear()
    mapper._CACHE.clear()
    mapper._PROGRAMS.clear()
    mapper._SHORTLISTS.clear()
    des_check.clear()


def test_a_choice_the_model_misjudges_is_replaced_by_a_faster_one():
    """OSC 2048x512x12288 at G=32 on the cube: the model's choice (a 64x576x64 step tile, C
    stored every step) runs 36 % above the model in the DES; the check runs the next candidate
    the model puts within 2 % and keeps it: faster in the DES, and no slower than the choice."""
    arch = load_arch("ascend_like_cube")
    op = _op(arch, (2048, 512, 12288), "osc", {"G": 32})
    _cold()
    model_choice = mapper.mapped_program(arch, op)
    ran = simulate_program(model_choice)
    assert ran.cycles > twin_cycles(model_choice) * (1 + des_check.CHECK)
    program, timing = des_check.des_timing(arch, op)
    assert (program.mapping.tile, program.mapping.loops) != (
        model_choice.mapping.tile, model_choice.mapping.loops)  # fmt: skip
    assert timing.cycles < 0.8 * ran.cycles
    assert timing.cycles == simulate_program(program, collapse=False).cycles


def test_a_miss_under_five_per_cent_is_checked_too():
    """OSC 2048x512x12288 at G=16 on the cube: the model puts its choice (64x640x64, C stored
    every step) at 1,500,200 cycles, the DES runs it in 1,563,984 (+4.2 %, under the 5 % the
    check used to allow); the next candidate, 0.9 % behind in the model, runs in 1,495,714."""
    arch = load_arch("ascend_like_cube")
    op = _op(arch, (2048, 512, 12288), "osc", {"G": 16})
    _cold()
    model_choice = mapper.mapped_program(arch, op)
    ran = simulate_program(model_choice).cycles
    assert 1.02 < ran / twin_cycles(model_choice) < 1.05
    program, timing = des_check.des_timing(arch, op)
    assert program.mapping != model_choice.mapping
    assert timing.cycles < 0.97 * ran


def test_alternatives_never_return_the_choice():
    arch = load_arch("ascend_like_cube")
    op = _op(arch, (2048, 512, 12288), "osc", {"G": 32})
    chosen = mapper.map_matmul(arch, op)
    for prog in mapper.alternatives(arch, op, 5, 1.0):
        assert (prog.mapping.tile, prog.mapping.loops) != (chosen.tile, chosen.loops)


def test_the_checked_result_does_not_depend_on_what_ran_before():
    """The check's next candidate is the same whether the mapper's search just ran (its
    shortlist kept) or ran long ago (searched again): before the two listings were made the
    same, this matmul's checked run took 50,420 cycles one way and 45,742 the other."""
    arch = load_arch("rtx3090_like")
    op = _op(arch, (1024, 4096, 768), "w8a8")
    _cold()
    fresh = des_check.des_timing(arch, op)[1].cycles
    _cold()
    mapper.map_matmul(arch, op)  # the search runs, then its shortlist is evicted
    mapper._SHORTLISTS.clear()
    later = des_check.des_timing(arch, op)[1].cycles
    assert fresh == later


def test_twin_cycles_are_memoised_per_program():
    arch = load_arch("ascend_like_cube")
    op = replace(_op(arch, (256, 1024, 512), "w8a8"), name="")
    program = Program(arch, op, mapper.map_matmul(arch, op))
    first = twin_cycles(program)
    assert program.__dict__["_twin_cycles"] == first == twin_cycles(program)


#: OPS's interleaved matmul of LLaMA-7B's up-projection at τ=4 (ops-fig3): the 133 rows that
#: remain of 2048, 16-bit slices widened by the plan's row cost, over 32 layers
_OPS_UP = dict(name="", M=133, K=4096, N=11008, precision="int16", a_bits=246.37593984962405,
               b_bits=16, c_bits=246.37593984962405, accumulator_bits=493,
               epilogue_ops_per_output=15.398496240601503)  # fmt: skip


def test_the_runner_up_is_run_and_kept_where_the_des_finds_it_faster():
    """1076x3394x854 W8A8 on rtx3090_like: the model puts a K-above mapping (48,846 cycles) ahead
    of its K-innermost choice (49,708) by less than K_ABOVE_MARGIN (within its error there): the
    DES runs both and keeps the K-above one, which it runs faster (48,830 against 50,448)."""
    arch = load_arch("rtx3090_like")
    op = replace(_op(arch, (1076, 3394, 854), "w8a8"), name="")
    _cold()
    choice = mapper.mapped_program(arch, op)
    second = mapper.runner_up(arch, op)
    assert choice.mapping.loops[-1].dim == "k" and second is not None
    rival = Program(arch, op, second)
    assert rival.mapping.loops[-1].dim != "k"  # K above the block loop
    assert 1 - mapper.K_ABOVE_MARGIN < twin_cycles(rival) / twin_cycles(choice) < 1
    program, timing = des_check.des_timing(arch, op)
    assert (program.mapping.tile, program.mapping.loops) == (second.tile, second.loops)
    assert timing.cycles < simulate_program(choice).cycles


def test_choices_are_weighed_per_instance():
    """OPS's interleaved matmul of LLaMA-7B's up-projection over 32 layers and one layer get the
    same mapping: its K-above loop order, which the DES runs in 1.73 G cycles for 32 layers
    (the K-innermost order the model preferred before it charged a store queued ahead of the
    streamed input on the shared LPDDR bus took 2.09 G; the DES check then ran both)."""
    from accel_sim.dataflow.plan import MatmulOp

    arch = load_arch("ops_bitslice")
    _cold()
    choice = mapper.mapped_program(arch, MatmulOp(count=32, **_OPS_UP))
    assert choice.mapping.loops[-1].dim != "k"
    one = mapper.map_matmul(arch, MatmulOp(count=1, **_OPS_UP))
    assert one.loops[1:] == choice.mapping.loops[1:]
    assert des_check.des_timing(arch, MatmulOp(count=32, **_OPS_UP))[1].cycles < 1.8e9


def test_a_faster_candidate_that_moves_more_dram_bytes_must_win_by_their_dram_time():
    """GPT2-medium's 1024x1024x1024 W8A8 x 24 layers on the 32x32 WS array: the runner-up runs
    3.5 % faster alone but moves 2.2x the DRAM bytes, more than its gain in DRAM time; it made
    the overlapped plan (quantize pass beside the matmul) 7.9 % slower, so it is not kept."""
    arch = load_arch("systolic_32x32_ws")
    op = replace(_op(arch, (1024, 1024, 1024), "w8a8"), count=24, name="")
    _cold()
    choice = mapper.mapped_program(arch, op)
    rival = Program(arch, op, mapper.runner_up(arch, op))
    gain = simulate_program(choice).cycles - simulate_program(rival).cycles
    extra = mapper.dram_bytes(rival) - mapper.dram_bytes(choice)
    assert gain > 0 and extra / arch.memory[0].read_bytes_per_cycle > gain
    program = des_check.des_program(arch, op)
    assert (program.mapping.tile, program.mapping.loops) == (
        choice.mapping.tile, choice.mapping.loops)  # fmt: skip
