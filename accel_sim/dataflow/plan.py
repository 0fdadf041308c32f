"""Execution plans: what a dataflow asks the hardware to do for one GEMM.

A dataflow lowers a :class:`~accel_sim.workload.gemm.Gemm` into a :class:`Plan`: its operations and
the dependencies between them (docs/dataflows.md), each operation on one unit (:func:`unit_of`):

* :class:`MatmulOp` — a matmul on the matrix unit at one precision, with operand widths in pure
  *bits per element* (MXFP4 = 4) and each operand's scales as a metadata stream of its own
  (:class:`Scales`: per-token/per-channel scales, MX/NVFP4 block scales), so scale traffic is
  counted where it travels;
* :class:`VectorOp` — element-wise work on the vector unit (absmax, quantize, dequantize, gather);
* :class:`ComparatorOp` — OPS's early-bird comparisons;
* :class:`TransferOp` — extra bytes moved from DRAM (lookup tables, index lists).

**Dependencies** (:class:`Edge`): ``Edge(src, dst, streamed)`` says ``dst`` consumes what
``src`` produces. ``streamed``: row block by row block (block i of ``dst`` may start once block i
of ``src`` is done, through a bounded buffer); otherwise ``dst`` waits for all of ``src`` (e.g. a
per-tensor scale needs the whole tensor). A plan without edges is a chain: each operation waits
for all of the previous one. ``engine/schedule.py`` runs the graph on concurrent units;
``run_plan(..., overlap=False)`` runs the operations one after another in list order (the old
behaviour, docs/engine.md "Overlap and fusion").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from accel_sim.arch.schema import PRECISIONS
from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import Gemm

#: Storage width of each element type, in bits.
ELEMENT_BITS = {
    "fp32": 32, "int32": 32, "fp16": 16, "bf16": 16, "int16": 16,
    "fp8": 8, "int8": 8, "fp4": 4, "int4": 4,
}  # fmt: skip


@dataclass(frozen=True)
class Scales:
    """A metadata stream: the scales of one matmul operand, one per row of A (column of B) per
    ``block`` elements of K.

    Attributes:
        bits: bits per scale (32: an FP32 per-token/per-channel scale; 8: an MX E8M0 or NVFP4
            E4M3 block scale; an average, possibly a ``Fraction``, where a fused op spreads a
            format's scales over a longer K).
        block: elements of K that share a scale (MX: 32, NVFP4: 16); 0: one scale per row of A
            (per-token) or column of B (per-channel) for the whole K, applied in the epilogue.

    How each kind travels (docs/engine.md, "Metadata streams"): a block scale is needed inside
    the K reduction, so it goes wherever its tile goes (every hop, every buffer, the unit's
    reads); an epilogue scale (``block == 0``) is read from DRAM once per output tile.
    """

    bits: float | Fraction
    block: int = 0

    def blocks(self, k: int, tk: int | None = None) -> int:
        """Scales per row of A (column of B) for ``k`` elements of K held as step tiles ``tk``
        deep (default: one tile): ``ceil(tk / block)`` per tile, since a block cut by a tile
        edge travels with both tiles; 1 for an epilogue scale."""
        if not self.block:
            return 1
        full, rest = divmod(k, tk or k)
        return full * math.ceil((tk or k) / self.block) + math.ceil(rest / self.block)

    def bytes(self, lines: int, k: int, tk: int | None = None) -> int:
        """Bytes of the scales of ``lines`` rows of A (columns of B) over ``k`` elements of K
        (:meth:`blocks`), rounded up to whole bytes. A ``Fraction`` width is rounded in integer
        arithmetic (the same exact ceiling as ``Fraction``'s, without building one: a hot path
        of the mapper)."""
        bits = self.bits
        if isinstance(bits, Fraction):
            return -(-lines * self.blocks(k, tk) * bits.numerator // (8 * bits.denominator))
        return math.ceil(lines * self.blocks(k, tk) * bits / 8)


@dataclass(frozen=True)
class MatmulOp:
    """``C[M×N] (+)= A[M×K] · B[K×N]`` on the matrix unit.

    Attributes:
        precision: the rate-table key the unit runs at (``fp16``, ``int8``, ``fp4``...).
        a_bits, b_bits: stored bits per element of A and B, scales excluded (MXFP4: 4).
        a_scales, b_scales: the operands' metadata streams (:class:`Scales`), or None: per-token
            scales of A / per-channel scales of B (``block == 0``), or block scales along K
            (MX, NVFP4). They are bytes of their own beside the operand tiles.
        c_bits: bits per element of the result written out (accumulators stay on chip).
        accumulator_bits: bits per element of the on-chip accumulator (capacity only).
        epilogue_ops_per_output: vector-unit element operations per output element done as
            the tile drains (dequantize = 1 multiply by ``s_x[m]·s_w[n]``), in the DES pipeline.
        decode: the decoders the operands pass through at the array edge (``"olive4"``,
            ``"ant8"``...: OliVe's and ANT's codes to exponent-integer pairs), priced per decoded
            element of A and B as the compute unit's action ``decode_<decode>`` (pJ/op,
            ``engine/counts.py``); ``None``: the operands enter the array as stored.
        mac_split: for one accumulation fusing work of several precisions, the useful MACs
            per multiply-accumulate slot of the op, per precision (energy): OSC's dual path
            runs K FP4 and K' FP16 elements in ``K_eff = K + K'·r_fp4/r_fp16`` FP4 slots, so
            ``(("fp4", K/K_eff), ("fp16", K'/K_eff))`` as exact fractions. Per slot, so that a
            part of the op (a chip's core with a share of K) keeps its share of each;
            ``None``: all ``M·K·N`` at ``precision``.
    """

    name: str
    M: int
    K: int
    N: int
    precision: str
    a_bits: float
    b_bits: float
    c_bits: float = 16.0
    accumulator_bits: int = 32
    epilogue_ops_per_output: float = 0.0
    count: int = 1
    a_scales: Scales | None = None
    b_scales: Scales | None = None
    decode: str | None = None
    mac_split: tuple[tuple[str, Fraction], ...] | None = None

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UserInputError(
                self.name, f"unknown precision {self.precision!r}; known: {PRECISIONS}"
            )
        for dim in ("M", "K", "N", "count"):
            if getattr(self, dim) <= 0:
                raise UserInputError(self.name, f"{dim} must be positive", dim)

    @property
    def macs(self) -> int:
        """Multiply-accumulate slots at ``precision`` (the unit's time: ``macs / rate``)."""
        return self.M * self.K * self.N * self.count

    def macs_by_precision(self) -> dict[str, int | Fraction]:
        """Useful MACs per precision (energy): :attr:`mac_split`'s parts, else all of
        :attr:`macs` at ``precision``."""
        if not self.mac_split:
            return {self.precision: self.macs}
        out: dict[str, Fraction] = {}  # exact: a chip's parts add up to the op's counts
        for precision, per_slot in self.mac_split:
            out[precision] = out.get(precision, 0) + self.macs * per_slot
        return out

    def scales(self, operand: str) -> Scales | None:
        """The metadata stream of operand ``A`` or ``B`` (None for ``C`` or none)."""
        return self.a_scales if operand == "A" else self.b_scales if operand == "B" else None


@dataclass(frozen=True)
class VectorOp:
    """Element-wise work on the vector unit.

    Attributes:
        elements: elements touched.
        ops_per_element: vector operations per element (absmax = 1 compare, quantize = 2).
        read_bytes, write_bytes: bytes the op reads and writes at the level it runs from.
    """

    name: str
    elements: int
    ops_per_element: float
    read_bytes: int
    write_bytes: int
    count: int = 1


@dataclass(frozen=True)
class ComparatorOp:
    """Early-bird comparisons (OPS): one per computation set."""

    name: str
    comparisons: int
    count: int = 1


@dataclass(frozen=True)
class TransferOp:
    """Bytes read that no matmul operand accounts for (lookup tables, index lists).

    ``resident``: the data stays on chip between calls (read from the first on-chip level),
    else it comes from DRAM."""

    name: str
    read_bytes: int
    count: int = 1
    resident: bool = False


Op = MatmulOp | VectorOp | ComparatorOp | TransferOp

#: The unit each kind of operation runs on (separate, concurrent units in ``engine/schedule.py``).
UNITS = {MatmulOp: "matrix", VectorOp: "vector", ComparatorOp: "comparator", TransferOp: "dma"}


def unit_of(op: Op) -> str:
    """``matrix``, ``vector``, ``comparator`` (early bird) or ``dma`` (plan transfers)."""
    return UNITS[type(op)]


@dataclass(frozen=True)
class Edge:
    """``dst`` consumes ``src``'s output: block by block when ``streamed``, else all of it."""

    src: str
    dst: str
    streamed: bool = True


def streamed(*names: str) -> tuple[Edge, ...]:
    """A chain of streamed edges: ``streamed("a", "b", "c")`` = a→b, b→c, row block by row block."""
    return tuple(Edge(a, b) for a, b in zip(names, names[1:]))


@dataclass(frozen=True)
class Plan:
    """A dataflow's execution plan for one GEMM: operations and the edges between them
    (no edges: a chain, each operation after all of the previous one)."""

    dataflow: str
    gemm: Gemm
    ops: tuple[Op, ...]
    notes: tuple[str, ...] = ()
    knobs: dict[str, object] = field(default_factory=dict)
    edges: tuple[Edge, ...] | None = None

    def __post_init__(self) -> None:
        names = [op.name for op in self.ops]
        if self.edges is not None:
            if len(set(names)) != len(names):  # pragma: no cover - a builder bug
                raise ValueError(f"{self.dataflow}: op names must be unique, got {names}")
            order = {name: i for i, name in enumerate(names)}
            for edge in self.edges:
                if order.get(edge.src, len(names)) >= order.get(edge.dst, -1):
                    raise ValueError(f"{self.dataflow}: edge {edge} must run from an earlier op "
                                     "to a later one of the plan")  # fmt: skip

    @property
    def matmuls(self) -> tuple[MatmulOp, ...]:
        return tuple(op for op in self.ops if isinstance(op, MatmulOp))

    def graph(self) -> tuple[tuple[tuple[int, bool], ...], ...]:
        """Per operation, its inputs as (index of the producing op, streamed); without edges a
        chain of whole-op dependencies."""
        if self.edges is None:
            return tuple(((i - 1, False),) if i else () for i in range(len(self.ops)))
        index = {op.name: i for i, op in enumerate(self.ops)}
        deps: list[list[tuple[int, bool]]] = [[] for _ in self.ops]
        for edge in self.edges:
            deps[index[edge.dst]].append((index[edge.src], edge.streamed))
        return tuple(tuple(d) for d in deps)
