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
