"""OSC: outlier suppression by a static per-group channel table (OSC §3, Alg. 1; docs/dataflows.md).

Offline, Algorithm 1 picks for each group of G channels along K the channel that most often holds
a token's largest outlier (T = α·mean|X|, α = 5); the table has ``K' ≤ ceil(K/G)`` live entries.
Online, per GEMM:

1. vector unit gathers the K' table channels of X into B (M×K', FP16) and zeroes them in X;
2. vector unit MX-quantizes X (MXFP4: 4-bit elements in blocks of 32 with an 8-bit E8M0 scale;
   NVFP4: blocks of 16 with an 8-bit E4M3 scale): block absmax, scale, convert;
3. path A: ``M×K×N`` at the FP4 rate against W in the same format. Its operands are 4 bits per
   element; their block scales are metadata streams of their own (``MatmulOp.a_scales`` /
   ``b_scales``: ``ceil(k/block)`` scales per row of X and column of W for a tile's K extent k),
   carried with their tiles over every hop and into every buffer (docs/engine.md, "Metadata
   streams");
4. path B: ``M×K'×N`` at the FP16 rate against W_L (the K' rows of W kept in FP16).
   ``branch: fused`` (default, OSC eq. 5 as one accumulation): for every output tile the unit
   runs path B's K'-steps and path A's K-steps into the same accumulator, and Y is written
   once. The engine runs this as one matmul at the FP4 rate whose inner size is
   ``K + ceil(K'·r_fp4 / r_fp16)`` (an FP16 MAC costs r_fp4/r_fp16 FP4-MAC slots on this unit,
   from its rate table) with element widths and block-scale widths averaged over that inner
   size, so the bytes moved are exactly path A's elements and scales plus path B's (a tile of
   the fused op carries its share of both). ``branch: separate`` runs two matmuls and adds path
   B's output in its epilogue (Y written twice);
5. the table itself (``ceil(K/G)`` 16-bit channel indices) is read from the first on-chip
   level, where it stays (OSC §3.3.2). It is also the gather's index stream — the only one: the
   gather of step 1 reads X's table channels by these indices, while path B's W_L is stored
   already gathered (offline), so the matmuls need no indices.

``fusion`` (docs/dataflows.md, "Overlap and fusion"): ``tile`` (``auto`` on an accelerator) —
steps 1 and 2 in one vector pass over each row block of X (one read of X: the K' table channels
go out in FP16, the rest MX-quantized), streamed to the matmul; ``producer`` — that pass in the
epilogue of X's producer (MX blocks of 32 need no whole row, so any producer can do it), X
arrives gathered and quantized; ``none`` (``auto`` on GPU proxies and with ``overlap=False``) —
two passes, each reading X.

Down-projection inputs (``kind == "down_in"``) fall back to MXFP8 with no branch when
``fallback_down`` is on (OSC §3.4). Without trace statistics K' = ceil(K/G), the table's upper
bound, which is exactly the paper's Table 2 assumption: compute-bound speedup over W8A8
0.5 / (0.25 + 1/G) = 1.60 / 1.78 / 1.88 for G = 16 / 32 / 64.
"""

from __future__ import annotations

import math
from fractions import Fraction

from accel_sim.dataflow.base import register
from accel_sim.dataflow.common import (
    BLOCK_FORMATS,
    FP16_BYTES,
    block_format_bytes,
    fused_pass,
    fusion,
)
from accel_sim.dataflow.plan import Edge, MatmulOp, Plan, Scales, TransferOp, VectorOp, streamed
from accel_sim.errors import UserInputError

KNOBS = {"G": 32, "base": "mxfp4", "fallback_down": True, "alpha": 5.0, "branch": "fused",
         "fusion": "auto"}  # fmt: skip


def table_channels(gemm, stats, G: int, alpha: float) -> tuple[int, str]:
    """K' (live table entries) from the trace statistics, or the upper bound ceil(K/G)."""
    groups = math.ceil(gemm.K / G)
    if stats and "osc_table_channels" in stats:
        if alpha != 5.0:
            raise UserInputError("knobs", "the compact trace has OSC tables for α = 5 only; "
                                 "capture a full trace to use another α", "alpha")  # fmt: skip
        table = stats["osc_table_channels"]
        if str(G) not in table:
            raise UserInputError("knobs", f"the trace has OSC tables for G in {sorted(table)} "
                                 "only; capture a full trace for other G", "G")  # fmt: skip
        return min(int(table[str(G)]), groups), "trace"
    return groups, "upper bound ceil(K/G)"


def _mx_quantize(gemm, fmt: str, name: str) -> VectorOp:
    """X (FP16) read, written in block format ``fmt`` (elements and their block scales)."""
    elements = gemm.M * gemm.K
    # block absmax (1) + scale (1) + convert (1) per element
    return VectorOp(name, elements, 3.0, elements * FP16_BYTES,
                    block_format_bytes(fmt, gemm.M, gemm.K), gemm.count)  # fmt: skip


def _error_key(knobs, gemm) -> str | None:
    if gemm.kind == "down_in" and knobs["fallback_down"]:
        return "osc:mxfp8"
    return f"osc:G={knobs['G']},base={knobs['base']}" if knobs["alpha"] == 5.0 else None


def _fused_dual_path(gemm, arch, k_table: int, base: str) -> MatmulOp:
    """Path A and path B as one accumulation (see the module docstring): over the fused inner
    size ``k_eff``, elements average ``(K·4 + K'·16) / k_eff`` bits, and the block-scale stream
    keeps the format's block with ``ceil(K/block)`` scales per row (column) spread over
    ``ceil(k_eff/block)`` blocks, so a whole row carries exactly path A's scales."""
    rates = arch.compute.rates
    if not rates.get("fp16") or not rates.get("fp4"):
        raise UserInputError(arch.origin, "OSC needs FP4 and FP16 matrix rates", "compute.rates")
    k_eff = gemm.K + math.ceil(k_table * rates["fp4"] / rates["fp16"])
    bits, scales = BLOCK_FORMATS[base]
    a_bits = (gemm.K * bits + k_table * 16) / k_eff
    # exact (a Fraction), so that a whole row's scale bytes round to path A's
    spread = Scales(Fraction(scales.bits) * scales.blocks(gemm.K) / scales.blocks(k_eff),
                    scales.block)  # fmt: skip
    # (energy: K FP4 and K' FP16 MACs, not k_eff FP4 ones: an FP16 MAC takes r_fp4/r_fp16 FP4
    # slots of the unit's time, but costs an FP16 MAC's energy)
    split = ((("fp4", Fraction(gemm.K, k_eff)), ("fp16", Fraction(k_table, k_eff)))
             if k_table else None)  # fmt: skip
    return MatmulOp("dual_path_fp4_fp16", gemm.M, k_eff, gemm.N, "fp4", a_bits, a_bits, 16,
                    epilogue_ops_per_output=1.0, count=gemm.count, a_scales=spread,
                    b_scales=spread, mac_split=split)  # fmt: skip


@register("osc", KNOBS, "MXFP4/NVFP4 base path + FP16 branch of the table's channels",
          needs_stats=True, error_key=_error_key)  # fmt: skip
def build(gemm, arch, stats, knobs) -> Plan:
    G, base = knobs["G"], knobs["base"]
    if base not in ("mxfp4", "nvfp4"):
        raise UserInputError("knobs", f"base must be mxfp4 or nvfp4, got {base!r}", "base")
    if not isinstance(G, int) or G <= 0:
        raise UserInputError("knobs", f"G must be a positive integer, got {G!r}", "G")
    if knobs["branch"] not in ("fused", "separate"):
        raise UserInputError("knobs", "branch must be 'fused' or 'separate'", "branch")
    if not knobs["alpha"] > 0:  # (outliers are |x| > α × mean|x|)
        raise UserInputError("knobs", f"alpha must be > 0, got {knobs['alpha']!r}", "alpha")
    how = fusion(knobs, arch)
    elements = gemm.M * gemm.K
    if gemm.kind == "down_in" and knobs["fallback_down"]:
        bits, scales = BLOCK_FORMATS["mxfp8"]
        quantize = (_mx_quantize(gemm, "mxfp8", "quantize_mxfp8") if how != "producer" else
                    fused_pass("quantize_mxfp8", elements, 3.0, 0, how, gemm.count))  # fmt: skip
        ops = (
            quantize,
            MatmulOp("path_mxfp8", gemm.M, gemm.K, gemm.N, "fp8", bits, bits, 16,
                     epilogue_ops_per_output=1.0, count=gemm.count, a_scales=scales,
                     b_scales=scales),
        )  # fmt: skip
        return Plan("osc", gemm, ops, ("down-projection input: MXFP8 fallback, no branch",),
                    {**knobs, "table_channels": 0, "fusion": how},
                    streamed(*(op.name for op in ops)))  # fmt: skip
    k_table, source = table_channels(gemm, stats, G, knobs["alpha"])
    bits, scales = BLOCK_FORMATS[base]
    # the table is a few bytes per group and stays on chip (OSC §3.3.2, "Negligible Indexing")
    ops: list = [TransferOp("lookup_table", 2 * math.ceil(gemm.K / G), gemm.count, resident=True)]
    gathered = gemm.M * k_table
    if how == "none":
        if k_table:
            ops.append(VectorOp("gather_branch", gathered, 1.0, gathered * FP16_BYTES,
                                gathered * FP16_BYTES, gemm.count))  # fmt: skip
        ops.append(_mx_quantize(gemm, base, f"quantize_{base}"))
    else:  # gather (1 op per branch element) beside the MX quantize (3 per element), one read
        out = block_format_bytes(base, gemm.M, gemm.K) + gathered * FP16_BYTES
        ops.append(fused_pass(f"gather_quantize_{base}", elements, 3.0 + gathered / elements,
                              out, how, gemm.count))  # fmt: skip
    if knobs["branch"] == "fused" and k_table:
        ops.append(_fused_dual_path(gemm, arch, k_table, base))
    else:
        ops.append(MatmulOp("path_a_fp4", gemm.M, gemm.K, gemm.N, "fp4", bits, bits, 16,
                            epilogue_ops_per_output=1.0, count=gemm.count, a_scales=scales,
                            b_scales=scales))  # fmt: skip
        if k_table:
            ops.append(MatmulOp("path_b_fp16", gemm.M, k_table, gemm.N, "fp16", 16, 16, 16,
                                epilogue_ops_per_output=1.0, count=gemm.count))  # fmt: skip
    notes = (f"branch width K'={k_table} ({source}); path B {knobs['branch']}; "
             f"fusion {how}",)  # fmt: skip
    # the table gates the gather; then every pass and path goes row block by row block
    names = [op.name for op in ops]
    edges = (Edge(names[0], names[1], streamed=False),
             *(Edge(a, b) for a, b in zip(names[1:], names[2:])))  # fmt: skip
    if len(names) > 3 and names[-1] == "path_b_fp16":  # path B needs the gathered X, not path A
        edges = (*edges[:-1], Edge(names[-3], names[-1]))
    return Plan("osc", gemm, tuple(ops), notes,
                {**knobs, "table_channels": k_table, "fusion": how}, edges)  # fmt: skip
