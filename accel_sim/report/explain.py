"""``accel-sim run ... --explain``: each matmul's mapping as a loop nest, what every memory level
keeps, the bytes crossing each link, and which bound binds — the teaching view of the mapper. On a
chip (``cores`` > 1) it first shows the partition across cores (``engine/chip.py``) and then
explains the slowest core's sub-GEMM on its per-core view of the chip.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_sim.arch.schema import Arch
from accel_sim.dataflow.plan import MatmulOp
from accel_sim.engine.chip import merge_factor, partition, reduce_cycles, scope, view_for
from accel_sim.engine.des_check import des_timing
from accel_sim.engine.mapper import estimate
from accel_sim.engine.mapping import OPERAND_DIMS, Mapping
from accel_sim.engine.step_costs import operand_bytes, tile_bytes


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"


@dataclass(frozen=True)
class Explanation:
    """The explain view of one matmul (plain data; ``text`` is what the CLI prints)."""

    op: str
    cycles: int
    twin_cycles: int
    bound: str
    bound_cycles: int
    text: str
    mapping: Mapping | None = None  # the chosen mapping (of the slowest core's part on a chip)


def explain_matmul(arch: Arch, op: MatmulOp) -> Explanation:
    """Mapping, per-level keeps, bytes and the binding bound of ``op`` on ``arch``; on a chip,
    the partition first, then the slowest core's sub-GEMM (``cycles`` are the chip's: that core's
    plus the K split's reduction)."""
    if arch.cores == 1:
        return _explain_core(arch, op)
    p = partition(arch, op)
    shared = ", ".join(level.name for level in arch.memory if level.shared) or "none"
    core = _explain_core(view_for(arch, op, p), p.largest(op))
    extra = reduce_cycles(arch, op, p.grid[3], p.active)[0]
    lines = [f"{op.name}: {op.M}x{op.K}x{op.N} {op.precision} (count {op.count}) on {arch.name} "
             f"({scope(arch)})",
             f"  partition: {p.describe()} -> {p.active} of {arch.cores} cores busy "
             f"(grid M x N x K = {p.grid[1]} x {p.grid[2]} x {p.grid[3]}; bound "
             f"{p.bound_cycles:,.0f} cycles)",
             f"  each busy core has 1/{p.active} of the shared levels ({shared}): capacity, "
             "bandwidth, DRAM in flight; the DRAM, fills and capacity x"
             f"{merge_factor(arch, op, p):.2f} (a grid row's cores fetch their common A tiles "
             "once, a column's B); the slowest core (largest part) below"]  # fmt: skip
    if extra:
        lines.append(f"  K split: partial sums at {op.accumulator_bits} bits to DRAM, added by "
                     f"{p.active} vector units: reduction {extra:,} cycles")  # fmt: skip
    lines += ["  " + line for line in core.text.splitlines()]
    lines.append(f"  chip: {core.cycles + extra:,} cycles (slowest core"
                 + (" + reduction)" if extra else ")"))  # fmt: skip
    return Explanation(op.name, core.cycles + extra, core.twin_cycles + extra, core.bound,
                       core.bound_cycles, "\n".join(lines), core.mapping)  # fmt: skip


def _explain_core(arch: Arch, op: MatmulOp) -> Explanation:
    """The single-core view of :func:`explain_matmul`."""
    program, timing = des_timing(arch, op)  # the mapping the DES runs (engine/des_check.py)
    mapping = program.mapping
    names = mapping.describe_loops()
    t = mapping.tile
    lines = [f"{op.name}: {op.M}x{op.K}x{op.N} {op.precision} (count {op.count}) on {arch.name} "
             f"[{arch.compute.describe()}]",
             f"  step: C[{t.tm}x{t.tn}] += A[{t.tm}x{t.tk}] · B[{t.tk}x{t.tn}] "
             f"({program.n_steps:,} steps)"]  # fmt: skip
    keeps: dict[int, list[str]] = {}
    for (operand, level), p, buffers in mapping.keep:
        rows, cols = mapping.footprint(operand, p, program.size)
        nbytes = operand_bytes(op, operand, rows, cols, t.tk)
        if operand == "C" and level == program.inner["C"]:  # partial sums: accumulator width
            nbytes = tile_bytes(rows, cols, op.accumulator_bits)
        what = "one tile" if p >= len(mapping.loops) else f"{rows}x{cols}"
        keeps.setdefault(p, []).append(
            f"{arch.memory[level].name} keeps {operand} {what} ({_size(nbytes)} x{buffers})"
        )
    depth = 0
    for i, (name, loop) in enumerate(zip(names, mapping.loops)):
        notes = "; ".join(keeps.get(i, []))
        if loop.count > 1 or notes:
            lines.append(f"  {'  ' * depth}for {name} in range({loop.count}):"
                         + (f"   # {notes}" if notes else ""))  # fmt: skip
            depth += 1
    inner = "; ".join(keeps.get(len(mapping.loops), []))
    lines.append(f"  {'  ' * depth}step" + (f"   # {inner}" if inner else ""))
    lines.append("  bytes per link (total):")
    for link, nbytes in zip(program.links, program.link_bytes):
        d0, d1 = OPERAND_DIMS[link.operand]
        whole = op.count * operand_bytes(op, link.operand, program.size[d0], program.size[d1],
                                         t.tk)  # fmt: skip
        reuse = f" = {nbytes / whole:.2f}x the operand" if whole else ""
        lines.append(f"    {link.operand} {link.label(arch):<14} {_size(nbytes):>10}{reuse}")
    est = estimate(arch, op, mapping)
    busy = {"compute (unit + accumulator port)": est.compute_cycles,
            **{f"port {label}": cycles for label, cycles in est.port_cycles.items()}}  # fmt: skip
    bound, bound_cycles = max(busy.items(), key=lambda kv: kv[1])
    lines.append("  bounds (cycles each resource is busy):")
    for label, cycles in sorted(busy.items(), key=lambda kv: -kv[1]):
        mark = "  <- binds" if label == bound else ""
        lines.append(f"    {label:<36} {cycles:>14,}{mark}")
    twin = est.cycles
    lines.append(f"  DES {timing.cycles:,} cycles = {timing.cycles / bound_cycles:.3f}x the "
                 f"binding bound; closed-form model {twin:,} "
                 f"({(twin - timing.cycles) / timing.cycles:+.1%})")  # fmt: skip
    if timing.stalls:
        top = sorted(timing.stalls.items(), key=lambda kv: -kv[1])[:3]
        lines.append("  stalls: " + ", ".join(f"{k} {v:,}" for k, v in top))
    return Explanation(op.name, timing.cycles, twin, bound, bound_cycles, "\n".join(lines),
                       mapping)  # fmt: skip
