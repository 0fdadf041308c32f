"""The schema of a compact trace's ``manifest.json`` and ``stats.json`` (``workload/trace.py``).

What ``workload/compact.py`` writes, checked when a trace is loaded so that a bad value is one
error naming the file and the key, before any output:

* ``manifest.json``: ``model`` (non-empty text) and ``tokens`` (integer ≥ 1), the keys the code
  reads; other keys (packages, versions, commands) are kept as they are.
* ``stats.json``: ``grid`` (the knob grid: ``osc_groups``, ``ops_chunks``, ``ops_taus``,
  ``ops_tiles``, ``ops_rows``; other grid keys are kept) and ``gemms``, one :class:`GemmStats` per
  row of ``gemms.csv``: counts are integers ≥ 0, fractions in [0, 1] (``null`` where the quantity is
  undefined: no afflicted group, no outlier event), magnitudes and errors finite and ≥ 0.

Checks that need the GEMM (its M, K) or the grid are in :func:`check_against`: ``shape`` is
``[M, K]``; ``outlier_channels`` ≤ K; the OSC tables have one entry per G of the grid with
``osc_table_channels[G]`` ≤ ceil(K/G) (live table entries, one per group at most); ``ops_skip``
has one entry per (chunk, τ) of the grid, each with one fraction per tile and per row width of
the grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from accel_sim.errors import UserInputError

Count = Annotated[int, Field(ge=0, description="an integer count, ≥ 0")]
Positive = Annotated[int, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Magnitude = Annotated[float, Field(ge=0, allow_inf_nan=False)]
GroupKey = Annotated[str, Field(pattern=r"^[1-9][0-9]{0,7}$", description="a group size G")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class OpsSkip(_Strict):
    """Early-bird skips of one (chunk, τ): fraction of computation sets; per square output tile
    size the fraction of (tile, chunk) pairs skipped entirely; per row width the fraction of
    (1 × width row segment, chunk) pairs skipped entirely (``workload/early_bird_blocks.py``)."""

    sets: Fraction
    tiles: dict[str, Fraction]
    rows: dict[str, Fraction]


class GemmStats(_Strict):
    """The statistics of one GEMM (``workload/compact.py``, ``stats_ops.tensor_stats``)."""

    shape: Annotated[list[Positive], Field(min_length=2, max_length=2,
                                           description="[M, K] of X")]  # fmt: skip
    absmax: Magnitude
    mean_abs: Magnitude
    osc_alpha: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    osc_threshold: Magnitude
    clustering_density: dict[GroupKey, Fraction | None]
    outlier_channels: Count
    int16_hi_zero_fraction: Fraction
    osc_table_channels: dict[GroupKey, Count]
    osc_table_hit_rate: dict[GroupKey, Fraction | None]
    osc_outlier_coverage: dict[GroupKey, Fraction | None]
    int16_hi_zero_fraction_w: Fraction
    ops_skip: dict[str, OpsSkip]
    errors: dict[Annotated[str, Field(min_length=1)], Magnitude]


class Grid(BaseModel):
    """The knob grid the statistics cover (the keys the checks use; others are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    osc_groups: Annotated[list[Positive], Field(min_length=1)]
    ops_chunks: Annotated[list[Positive], Field(min_length=1)]
    ops_taus: Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=1)]
    ops_tiles: Annotated[list[Positive], Field(min_length=1)]
    ops_rows: Annotated[list[Positive], Field(min_length=1)]


class StatsFile(BaseModel):
    """``stats.json``: the grid and one entry per GEMM (other top-level keys are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    grid: Grid
    gemms: list[GemmStats]


class Manifest(BaseModel):
    """The keys of ``manifest.json`` the code reads (others are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    model: Annotated[str, Field(min_length=1, description="the traced model's name")]
    tokens: Annotated[int, Field(ge=1, description="tokens of the captured forward pass")]


def expected_keys(loc: Sequence[str]) -> list[str]:
    """The keys allowed at ``loc`` of ``stats.json`` (for the unknown-key message)."""
    if len(loc) == 2 and loc[0] == "gemms":
        return list(GemmStats.model_fields)
    if len(loc) == 4 and loc[2] == "ops_skip":
        return list(OpsSkip.model_fields)
    return []


def ops_key(chunk: int, tau: float) -> str:
    """The ``ops_skip`` key of a (chunk, τ) pair, as ``compact.ops_statistics`` writes it."""
    return f"{chunk}:{tau:g}"


def _same_keys(found: dict, expected: list[str], what: str, source: str, key: str) -> None:
    if set(found) != set(expected):
        raise UserInputError(source, f"expected one entry per {what} ({', '.join(expected)}), "
                             f"got {', '.join(sorted(found)) or 'none'}", key)  # fmt: skip


def check_against(entry: dict[str, Any], M: int, K: int, grid: Grid, source: str,
                  key: str) -> None:  # fmt: skip
    """The checks of one (schema-valid) entry that need its GEMM's M, K or the grid."""
    if entry["shape"] != [M, K]:
        raise UserInputError(source, f"expected [M, K] = [{M}, {K}] as in gemms.csv, got "
                             f"{entry['shape']}", f"{key}.shape")  # fmt: skip
    if entry["outlier_channels"] > K:
        raise UserInputError(source, f"{entry['outlier_channels']} exceeds K = {K} (the GEMM's "
                             "input channels)", f"{key}.outlier_channels")  # fmt: skip
    groups = [str(G) for G in grid.osc_groups]
    for name in ("osc_table_channels", "osc_table_hit_rate", "osc_outlier_coverage"):
        _same_keys(entry[name], groups, "G of grid.osc_groups", source, f"{key}.{name}")
    for G in grid.osc_groups:
        live, most = entry["osc_table_channels"][str(G)], math.ceil(K / G)
        if live > most:
            raise UserInputError(source, f"{live} exceeds ceil(K/G) = {most}, the number of "
                                 f"groups of {G} of K = {K} channels (one table entry each)",
                                 f"{key}.osc_table_channels.{G}")  # fmt: skip
    pairs = [ops_key(c, t) for c in grid.ops_chunks for t in grid.ops_taus]
    _same_keys(entry["ops_skip"], pairs, "chunk:tau of grid.ops_chunks × grid.ops_taus", source,
               f"{key}.ops_skip")  # fmt: skip
    tiles = [str(t) for t in grid.ops_tiles]
    rows = [str(c) for c in grid.ops_rows]
    for pair, skip in entry["ops_skip"].items():
        _same_keys(skip["tiles"], tiles, "tile of grid.ops_tiles", source,
                   f"{key}.ops_skip.{pair}.tiles")  # fmt: skip
        _same_keys(skip["rows"], rows, "row width of grid.ops_rows", source,
                   f"{key}.ops_skip.{pair}.rows")  # fmt: skip
