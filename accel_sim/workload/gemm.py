"""The unit of work: one GEMM ``Y[M×N] = X[M×K] · W[K×N]``."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from accel_sim.errors import UserInputError

#: Largest dimension (and ``count``) accepted (2**24 = 16.7 M): beyond any model here. Cycle
#: and MAC counts are Python integers (simpy's clock too), exact at any size; near the limit
#: they outgrow 64 bits (2**72 MACs), and a Parquet file stores them as 38-digit decimals.
MAX_DIM = 2**24

#: Layer kinds a GEMM's input activation can belong to (OSC Table 1 naming).
GEMM_KINDS = ("attn_in", "o_in", "up_gate_in", "down_in", "lm_head_in", "attn_qk", "attn_pv", "")


def _clip(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters (error messages stay one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
            try:  # ints and integer scalars (numpy) only: not bool, float, str
                number = None if isinstance(value, bool) else operator.index(value)
            except TypeError:
                number = None
            if number is None or number <= 0:
                message = f"must be a positive integer, got {_clip(value)}"
                raise UserInputError(str(self.name) or "gemm", message, dim)
            object.__setattr__(self, dim, int(number))
            value = int(number)
            if value > MAX_DIM:
                raise UserInputError(
                    self.name or "gemm", f"{value} exceeds the limit {MAX_DIM}", dim
                )
        if not isinstance(self.name, str):
            raise UserInputError("gemm", f"name must be text, got {_clip(self.name)}", "name")
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


#: A GEMM dimension as written: ASCII digits only (no sign, exponent, point or other scripts).
_DIGITS = re.compile(r"[0-9]+")


def parse_dim(
    text: object, name: str, source: str, key: str | None = None, within: str = ""
) -> int:
    """A GEMM dimension from text: a strict ASCII decimal integer in ``1..MAX_DIM``.

    ``1e3``, ``16.0``, ``+16``, full-width or Arabic-Indic digits are refused (``int()`` and
    ``float()`` would accept them). Surrounding ASCII spaces are ignored. ``key`` names the field
    in the error; ``within`` is the whole text the value came from (``--gemm 16x1e3x64``).
    """
    raw = text if isinstance(text, str) else str(text)
    what = f"{name}={_clip(raw)}" + (f" in {_clip(within)}" if within else "")
    digits = raw.strip(" \t")
    if not _DIGITS.fullmatch(digits):
        raise UserInputError(
            source, f"{what} must be a positive integer written in ASCII digits", key
        )
    significant = digits.lstrip("0")
    if len(significant) > len(str(MAX_DIM)) or int(significant or "0") > MAX_DIM:
        raise UserInputError(source, f"{what} exceeds the limit {MAX_DIM}", key)
    value = int(significant or "0")
    if value <= 0:
        raise UserInputError(source, f"{what} must be a positive integer", key)
    return value


def parse_gemm(text: str, source: str = "--gemm") -> Gemm:
    """Parse ``"MxKxN"`` (e.g. ``2048x4096x4096``; ``×`` also separates) into a :class:`Gemm`.

    Each dimension is a strict ASCII decimal integer in ``1..MAX_DIM`` (:func:`parse_dim`)."""
    if not isinstance(text, str):
        raise UserInputError(source, f"expected 'MxKxN' text, got {_clip(text)}")
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 3:
        raise UserInputError(source, f"expected MxKxN such as 2048x4096x4096, got {_clip(text)}")
    dims = [parse_dim(part, name, source, within=text) for name, part in zip("MKN", parts)]
    return Gemm(*dims)
