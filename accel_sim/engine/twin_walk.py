"""The closed-form twin's walks over a program's runs (``twin_tiles.py``: output tiles,
``twin_prefetch.py``: groups of steps), in program order without visiting every step.

A step's class depends only on whether each loop index is first, middle or last, so the units of
a walk (a tile, a group) under a loop come as its first index, a run of identical middle indices
and its last index. The walk visits the first, then middle runs one at a time until the model's
``step`` finds its state recurring (or extrapolates it) and jumps over whole periods of runs,
then the last.
"""

from __future__ import annotations

from collections.abc import Callable

from accel_sim.engine.program import Program


def walk(program: Program, loops: list[int], code: int, leaf: Callable[[int], None],
         step: Callable[[list, int], int], k: int = 0) -> None:  # fmt: skip
    """Visit every unit of the loops ``loops[k:]`` (indices into ``program.count``, outermost
    first) under the class digits ``code`` of the loops outside them: ``leaf(code)`` once per
    unit; after each middle run ``step(history, middle)`` (``history``: the model's record of
    this loop's runs so far, a list it appends to; ``middle``: the middle runs still to come)
    may shift the model's state over whole periods and returns how many runs it skipped."""
    if k == len(loops):
        leaf(code)
        return
    i = loops[k]
    radix = program._radix[i]
    walk(program, loops, code, leaf, step, k + 1)  # FIRST
    middle, history = program.count[i] - 2, []
    while middle > 0:
        walk(program, loops, code + radix, leaf, step, k + 1)
        middle -= 1
        middle -= step(history, middle)
    walk(program, loops, code + 2 * radix, leaf, step, k + 1)  # LAST
