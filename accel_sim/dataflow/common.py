"""Building blocks the dataflow modules share (vector passes, scale widths)."""

from __future__ import annotations

import math

from accel_sim.dataflow.plan import MatmulOp, Scales, VectorOp
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm

FP16_BYTES = 2
#: An FP32 scale per row (per-token) or column (per-channel): a metadata stream of the matmul
#: (``MatmulOp.a_scales`` / ``b_scales``, read once per output tile), not bits inside its tiles.
PER_CHANNEL_SCALES = Scales(32)
#: Block-scaled formats as (element bits, block-scale stream): MX (OCP MX v1.0) has an 8-bit
#: E8M0 scale per 32 elements along K, NVFP4 an 8-bit E4M3 scale per 16 (its one FP32
#: per-tensor scale is not charged). MXFP4 moves 4 + 8/32 = 4.25 bits per element in all.
BLOCK_FORMATS = {"mxfp4": (4, Scales(8, 32)), "nvfp4": (4, Scales(8, 16)),
                 "mxfp8": (8, Scales(8, 32))}  # fmt: skip


def block_format_bytes(fmt: str, rows: int, k: int) -> int:
    """Bytes of a rows×k matrix in block format ``fmt`` (blocks along k): elements plus scales."""
    bits, scales = BLOCK_FORMATS[fmt]
    return math.ceil(rows * k * bits / 8) + scales.bytes(rows, k)


#: ``fusion`` knob values: how the passes over X join the matmul that consumes them
#: (docs/dataflows.md, "Overlap and fusion"). ``auto`` = ``tile`` on accelerators, ``none`` on
#: GPU proxies and with ``overlap=False`` (``accel_sim.api``).
FUSIONS = ("auto", "tile", "producer", "none")


def gpu_proxy(arch) -> bool:
    """A GPU proxy (``efficiency.launch_us``): every op is a kernel launched after the previous
    one, so nothing overlaps across ops unless fused (docs/engine.md, "Overlap and fusion")."""
    return bool(arch.efficiency.get("launch_us"))


def fusion(knobs, arch) -> str:
    """The ``fusion`` knob resolved: ``tile`` | ``producer`` | ``none``."""
    value = knobs["fusion"]
    if value not in FUSIONS:
        raise UserInputError("knobs", f"fusion must be one of {FUSIONS}, got {value!r}", "fusion")
    if value == "auto":
        return "none" if gpu_proxy(arch) else "tile"
    return value


def fused_pass(name: str, elements: int, ops_per_element: float, out_bytes: int,
               where: str, count: int) -> VectorOp:  # fmt: skip
    """One vector pass doing several element-wise steps on one read of X (FP16, ``elements``):
    ``where`` = ``tile`` reads X from memory once and writes ``out_bytes``; ``producer`` runs in
    the epilogue of X's producer, which already holds X on chip and writes the ``out_bytes``
    instead of FP16 X: no memory traffic is charged to this plan, only the vector operations."""
    if where == "producer":
        return VectorOp(f"{name}_in_producer", elements, ops_per_element, 0, 0, count)
    return VectorOp(name, elements, ops_per_element, elements * FP16_BYTES, out_bytes, count)


def absmax_pass(gemm: Gemm, columns: int | None = None, name: str = "absmax") -> VectorOp:
    """Per-token |x| maximum over X (FP16): one compare per element, reads X once."""
    k = gemm.K if columns is None else columns
    return VectorOp(name, gemm.M * k, 1.0, gemm.M * k * FP16_BYTES, 0, gemm.count)


def quantize_pass(gemm: Gemm, out_bits: float, columns: int | None = None,
                  name: str = "quantize") -> VectorOp:  # fmt: skip
    """Scale, round and convert X (FP16) to ``out_bits``: 2 ops per element (multiply, convert);
    reads X, writes the quantized copy."""
    k = gemm.K if columns is None else columns
    elements = gemm.M * k
    return VectorOp(
        name, elements, 2.0, elements * FP16_BYTES, int(elements * out_bits / 8 + 0.5), gemm.count
    )


def static_quantize_pass(gemm: Gemm, out_bits: float, name: str = "quantize") -> VectorOp:
    """Quantize X (FP16) with a static per-tensor scale: multiply, round and clip, 3 ops per
    element; reads X, writes the ``out_bits`` copy (PrefixQuant-O2, docs/modelling.md)."""
    elements = gemm.M * gemm.K
    return VectorOp(name, elements, 3.0, elements * FP16_BYTES,
                    int(elements * out_bits / 8 + 0.5), gemm.count)  # fmt: skip


def hadamard_factors(n: int) -> tuple[int, int]:
    """(length of the fast Walsh–Hadamard part, order m of the dense ±1 factor) of an online
    Hadamard transform of length ``n`` (QuaRot/SpinQuant style: H_n = H_m ⊗ H_(n/m)).

    ``n = 2**p``: (n, 1), a fast transform only. ``n = odd·2**p`` with odd > 1: Hadamard orders
    above 2 are multiples of 4, so m = 4·odd (e.g. 172 for Llama-2's 11008 = 172·64) and the fast
    part is n / m. With fewer than two factors of 2 no such decomposition exists: (1, n), a dense
    n×n ±1 matrix."""
    if n < 1:
        raise ValueError(f"Hadamard length must be positive, got {n}")
    p = (n & -n).bit_length() - 1  # factors of 2
    odd = n >> p
    if odd == 1:
        return n, 1
    if p < 2:
        return 1, n
    return n // (4 * odd), 4 * odd


def hadamard_passes(gemm: Gemm, length: int, columns: int, name: str,
                    dense_on_matrix_unit: bool) -> tuple[MatmulOp | VectorOp, ...]:  # fmt: skip
    """Online Hadamard rotation of each row of an M×``columns`` FP16 tensor in blocks of
    ``length`` (``columns`` = ``length``: whole rows; ``head_dim``: head-wise), as QuaRot's
    ``matmul_hadU_cuda`` runs it: a fast Walsh–Hadamard transform of the power-of-two part on the
    vector unit (log2 of its length butterfly stages, one add or subtract per element per stage;
    reads and writes FP16), then, when ``length`` is not a power of two, the dense ±1 factor of
    order m (:func:`hadamard_factors`) as an FP16 matmul (m × m times m × M·columns/m) when
    ``dense_on_matrix_unit``, else as m adds per element on the vector unit."""
    fast, m = hadamard_factors(length)
    elements = gemm.M * columns
    vector_ops = (fast.bit_length() - 1) + (0 if dense_on_matrix_unit else m - (m == 1))
    out: list[MatmulOp | VectorOp] = []
    if vector_ops:
        out.append(VectorOp(name, elements, float(vector_ops), elements * FP16_BYTES,
                            elements * FP16_BYTES, gemm.count))  # fmt: skip
    if m > 1 and dense_on_matrix_unit:
        # H_m @ X viewed as (m, elements / m) per instance, as QuaRot writes it (hadK @ input)
        out.append(MatmulOp(f"{name}_dense", m, m, elements // m, "fp16", 16, 16, 16,
                            count=gemm.count))  # fmt: skip
    return tuple(out)
