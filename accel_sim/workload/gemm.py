"""The unit of work: one GEMM ``Y[M×N] = X[M×K] · W[K×N]``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from accel_sim.errors import UserInputError

#: Layer kinds a GEMM's input activation can belong to (OSC Table 1 naming).
#: Largest dimension accepted (2**24 = 16.7 M): beyond any model here, and it keeps cycle counts
#: within simpy's 64-bit clock.
MAX_DIM = 2**24

GEMM_KINDS = ("attn_in", "o_in", "up_gate_in", "down_in", "lm_head_in", "attn_qk", "attn_pv", "")


@dataclass(frozen=True)
class Gemm:
    """One matrix multiplication.

    Attributes:
        M: rows of X and Y (tokens × batch).
        K: reduction size (input features).
        N: columns of W and Y (output features).
        name: free-form label (``layers.3.mlp.down_proj``).
        kind: the layer kind of X, one of :data:`GEMM_KINDS` (used to pick trace statistics).
        layer: transformer block index, -1 when not applicable.
        count: how many identical instances this row stands for (heads, experts, layers).
    """

    M: int
    K: int
    N: int
    name: str = ""
    kind: str = ""
    layer: int = -1
    count: int = 1

    def __post_init__(self) -> None:
        for dim in ("M", "K", "N", "count"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserInputError(
                    self.name or "gemm", f"{dim} must be a positive integer, got {value!r}", dim
                )
            if value > MAX_DIM:
                raise UserInputError(
                    self.name or "gemm", f"{dim}={value} exceeds the limit {MAX_DIM}", dim
                )
        if self.kind not in GEMM_KINDS:
            raise UserInputError(
                self.name or "gemm", f"unknown kind {self.kind!r}; expected one of {GEMM_KINDS}"
            )

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one instance."""
        return self.M * self.K * self.N

    @property
    def label(self) -> str:
        return self.name or f"{self.M}x{self.K}x{self.N}"


def parse_gemm(text: str, source: str = "--gemm") -> Gemm:
    """Parse ``"MxKxN"`` (e.g. ``2048x4096x4096``) into a :class:`Gemm`."""
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 3:
        raise UserInputError(source, f"expected MxKxN such as 2048x4096x4096, got {text!r}")
    dims = []
    for name, part in zip("MKN", parts):
        try:
            value = float(part)
        except ValueError:
            raise UserInputError(source, f"{name}={part!r} in {text!r} is not a number") from None
        if not math.isfinite(value) or value != int(value) or value <= 0:
            raise UserInputError(source, f"{name}={part!r} in {text!r} must be a positive integer")
        if value > MAX_DIM:
            raise UserInputError(source, f"{name}={part!r} in {text!r} exceeds the limit {MAX_DIM}")
        dims.append(int(value))
    return Gemm(*dims)
