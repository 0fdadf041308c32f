"""Metadata streams: MX/NVFP4 block scales travel beside their tiles, hand-derived byte counts."""

from __future__ import annotations

import pytest

from accel_sim.arch.load import load_arch
from accel_sim.arch.units.base import StepTile
from accel_sim.dataflow.plan import MatmulOp, Scales
from accel_sim.dataflow.registry import get_dataflow
from accel_sim.engine.counts import matmul_counts
from accel_sim.engine.mapper import mapped_program
from accel_sim.engine.mapper_problem import _Space
from accel_sim.workload.gemm import Gemm

CUBE = "ascend_like_cube"
MX = Scales(8, 32)  # an E8M0 scale per 32 elements along K
PER_CHANNEL = Scales(32)


def _hops(program) -> dict[tuple[str, str], int]:
    arch = program.arch
    return {(ln.operand, ln.label(arch)): b for ln, b in zip(program.links, program.link_bytes)}


def test_blocks_per_tile_count_a_cut_block_twice():
    # K = 100 in tiles of 48, 48, 4: ceil(48/32) + ceil(48/32) + ceil(4/32) = 2 + 2 + 1
    assert MX.blocks(100, 48) == 5
    assert MX.blocks(100) == 4  # one tile: ceil(100/32)
    assert PER_CHANNEL.blocks(100, 48) == 1
    assert Scales(8, 16).bytes(3, 48) == 9  # NVFP4: 3 rows x 48/16 scales x 1 byte


@pytest.mark.parametrize("K,expected", [(48, 832), (64, 1088), (4096, 69632)])
def test_mxfp4_tile_and_scale_stream_on_every_hop(K, expected):
    """32xKx32 MXFP4 on the cube: each operand crosses every hop once.
    K = 48: A = 32·48 elements x 4 bit = 768 B, plus 32 rows x ceil(48/32) = 2 scales x 1 B = 64
    B: 832 B (the old 4.25-bit width gave 816: a partial block still costs a whole scale).
    K = 64: 1024 + 32·2 = 1088. K = 4096: 65,536 + 32·128 = 69,632 (= 4.25 bits/element).
    The unit reads its A tile (scales in) once per output tile along N and B once per output
    tile along M (at K = 48 the mapper splits N in two: 717 cycles, 743 as one 32x32 tile)."""
    op = MatmulOp("t", 32, K, 32, "fp4", 4, 4, 16, a_scales=MX, b_scales=MX)
    program = mapped_program(load_arch(CUBE), op)
    hops = _hops(program)
    for hop in (("A", "HBM->L2"), ("A", "L2->L1"), ("A", "L1->L0A"),
                ("B", "HBM->L2"), ("B", "L2->L1"), ("B", "L1->L0B")):  # fmt: skip
        assert hops[hop] == expected, hop
    assert hops[("C", "L2->HBM")] == 32 * 32 * 2
    counts = matmul_counts(program)  # energy sees the scales: HBM reads and the unit's reads
    assert counts.bytes_read["HBM"] == 2 * expected
    assert counts.bytes_read["L0A"] == expected * program.n_tiles["n"]
    assert counts.bytes_read["L0B"] == expected * program.n_tiles["m"]


def test_block_scales_are_in_the_mappers_footprints():
    """The mapper sizes a 32x64x32 step tile of A at 32·64/2 + 32·2 = 1088 B (scales in)."""
    op = MatmulOp("t", 32, 64, 32, "fp4", 4, 4, 16, a_scales=MX, b_scales=MX)
    space = _Space(load_arch(CUBE), op)
    assert space.tile_bytes("A", StepTile(32, 64, 32), False) == 1088
    assert space.total("A", 64) == 1088
    plain = _Space(load_arch(CUBE), MatmulOp("t", 32, 64, 32, "fp4", 4, 4, 16))
    assert plain.tile_bytes("A", StepTile(32, 64, 32), False) == 1024


def test_epilogue_scales_only_cross_from_dram():
    """Per-channel FP32 scales: 32 columns x 4 B, once per output tile, on the DRAM hop only."""
    op = MatmulOp("t", 32, 64, 32, "int8", 8, 8, 16, b_scales=PER_CHANNEL)
    hops = _hops(mapped_program(load_arch(CUBE), op))
    assert hops[("B", "HBM->L2")] == 64 * 32 + 32 * 4
    assert hops[("B", "L2->L1")] == hops[("B", "L1->L0B")] == 64 * 32


def test_osc_fused_op_moves_path_a_and_path_b_bytes():
    """OSC G=32 on 64x4096x4096 (cube, rates fp4:fp16 = 4:1): K' = 128, fused K = 4096 + 4·128.
    Per row of X: path A 4096 x 4 bit = 2048 B + 4096/32 = 128 scale bytes, path B 128 x 2 B =
    256 B: 2432 B (= 4096 x (4.25 + 16/32) / 8). The tiles carry 4-bit-average elements; the
    scales are a stream of their own."""
    arch = load_arch(CUBE)
    df = get_dataflow("osc")
    plan = df.build(Gemm(64, 4096, 4096), arch, None, df.resolve_knobs({"G": 32}))
    (op,) = plan.matmuls
    assert op.K == 4608 and op.a_bits == 4 and op.a_scales.block == 32
    program = mapped_program(arch, op)
    hops = _hops(program)
    # X (64 rows) fits L2 and crosses HBM once; W at least once. The averaged widths round up
    # to whole bytes per tile (elements and scales): less than 2 B per tile that crosses
    t = program.mapping.tile
    a_tiles = -(-64 // t.tm) * -(-4608 // t.tk)
    assert 0 <= hops[("A", "HBM->L2")] - 64 * 2432 < 2 * a_tiles
    assert hops[("B", "HBM->L2")] >= 4096 * 2432
