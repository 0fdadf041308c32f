"""Shared building blocks of the architecture schema: strict models, precisions, operands."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

#: Precisions a matmul can run at. The rate table maps each to MACs per cycle relative to FP16.
PRECISIONS = ("fp16", "bf16", "fp8", "fp4", "int16", "int8", "int4")
Precision = Literal["fp16", "bf16", "fp8", "fp4", "int16", "int8", "int4"]
Operand = Literal["A", "B", "C"]  # A = activations X, B = weights W, C = outputs Y

DEFAULT_RATES = {"fp16": 1, "bf16": 1, "fp8": 2, "fp4": 4, "int16": 1, "int8": 2, "int4": 4}


class Strict(BaseModel):
    """Base of every config model: unknown keys rejected, immutable, no NaN or infinity;
    integers and booleans are strict where declared ``StrictInt``/``StrictBool``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Bounds on physical parameters. Every one keeps results finite (and well inside float64) for the
# largest GEMM the parser accepts (2**24 per dimension); each field's description states its own.
#: Clock frequency range, Hz (1 MHz .. 100 GHz).
MIN_CLOCK_HZ, MAX_CLOCK_HZ = 1e6, 1e11
#: Largest latency, pipeline or startup cost of any component, cycles.
MAX_LATENCY_CYCLES = 10**6
#: Bandwidth range of any port, bytes per cycle (one byte per 1024 cycles .. 1e9).
MIN_BYTES_PER_CYCLE, MAX_BYTES_PER_CYCLE = 2.0**-10, 1e9
#: Largest capacity or in-flight window of a memory level, bytes (1 PiB).
MAX_CAPACITY_BYTES = 2**50
#: Smallest ``burst_bytes``: each burst is one DES event, and a grain below a cache line only
#: costs time (a 1-byte grain took a 2048³ FP16 run on the cube past 150 s; docs/engine.md
#: finds 2 KB and 128 B within 0.03 % of each other).
MIN_BURST_BYTES = 64
#: Largest per-action energy (pJ/byte, pJ/op, pJ/MAC) or leakage power (mW).
MAX_ENERGY_VALUE = 1e9
#: Largest count of parallel hardware (comparators per cycle, PEs along one side).
MAX_PARALLEL = 2**20
#: Largest rate of a precision relative to FP16 (MACs per cycle multiplier).
MAX_RATE = 64
#: Smallest efficiency factor (the largest slowdown is 1000×).
MIN_EFFICIENCY = 1e-3
#: Most cores of one chip (``Arch.cores``): each shares the shared levels' bandwidth, and the
#: partitioner (``engine/chip.py``) enumerates grids up to this size.
MAX_CORES = 1024
#: Most steps a DES mover may run ahead (``Arch.dma_queue_steps``): its token queue's size.
MAX_DMA_QUEUE_STEPS = 4096
