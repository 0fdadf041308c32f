"""Step classes and where they repeat (mixed into ``program.Program``).

A step's class is the tuple of its loops' index classes — first, middle, last or only (one
digit per loop, base 4). :class:`ClassPeriods` holds the searches the DES's steady-state collapse
(``collapse.py``) uses to prove that a stretch of steps has the classes of the stretch one period
earlier, vectorised over the raw class digits (numpy), never step by step.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

FIRST, MIDDLE, LAST, ONLY = 0, 1, 2, 3  # index class within one loop (ONLY = first and last)


def _class_counts(count: int) -> dict[int, int]:
    if count == 1:
        return {ONLY: 1}
    if count == 2:
        return {FIRST: 1, LAST: 1}
    return {FIRST: 1, MIDDLE: count - 2, LAST: 1}


def _class_of(index: int, count: int) -> int:
    if index == count - 1:
        return ONLY if index == 0 else LAST
    return FIRST if index == 0 else MIDDLE


def _classes_of(index: np.ndarray, count: int) -> np.ndarray:
    cls = np.where(index == 0, FIRST, MIDDLE)
    return np.where(index == count - 1, np.where(index == 0, ONLY, LAST), cls)


class ClassPeriods:
    """Periodicity of the step classes, and the vectorised class codes of steps
    (:meth:`codes_at`, :attr:`canonical`). Uses the program's ``count``, ``_radix``,
    ``n_steps``, ``loops``, ``multiplicity``, ``code``, ``class_of`` and ``_mismatch`` (its
    cache)."""

    def codes_at(self, steps: np.ndarray, canonical: bool = True) -> np.ndarray:
        """Class codes (canonical, or raw digits) of the given step indices (vectorised)."""
        rest = np.array(steps, dtype=np.int64)
        raw = np.zeros_like(rest)
        for n, radix in zip(reversed(self.count), reversed(self._radix)):
            raw += _classes_of(rest % n, n) * radix
            rest //= n
        return self.canonical[raw] if canonical else raw

    @cached_property
    def canonical(self) -> np.ndarray:
        """Maps each valid raw class code to the smallest code with an identical step class
        (``program.StepClass``): the engine only looks at a step's class, so steps of equal
        classes are interchangeable (a full-size last block is the same as a middle one)."""
        seen: dict = {}  # StepClass -> code
        table = np.arange(4 ** len(self.loops), dtype=np.int64)
        for code in sorted(self.multiplicity):
            table[code] = seen.setdefault(self.class_of(code), code)
        return table

    @cached_property
    def canonical_list(self) -> dict[int, int]:
        """:attr:`canonical` of the program's codes, as a dict (faster to look up one code at a
        time than the array, and not 4^loops entries long)."""
        table = self.canonical
        return {code: int(table[code]) for code in self.multiplicity}

    def first_mismatch(self, lo: int, period: int) -> int:
        """Smallest ``x ≥ lo`` whose raw class digits differ from those of ``x - period``, or
        ``n_steps``. (Equal raw digits imply equal classes, so a jump up to there is exact;
        comparing raw digits lets loops whose whole cycle divides the period be skipped.)

        The answer f found from some lo₀ holds for every lo in [lo₀, f], and the engine asks with
        growing lo, so the last answer per period is remembered."""
        cached = self._mismatch.get(period)
        if cached is not None and cached[0] <= lo <= cached[1]:
            return cached[1]
        found = self._first_mismatch(lo, period)
        self._mismatch[period] = (lo, found)
        return found

    def _change_points(self, a: int, b: int, period: int) -> np.ndarray:
        """Steps p in (a, b) whose class may differ from step p−1's: where some loop index
        enters or leaves its first or last value (at most three per sweep of that loop).
        A loop whose whole cycle (stride × count) divides ``period`` has the same digit at x and
        x − period, so it cannot cause a mismatch and its (dense) points are skipped."""
        points = []
        stride = 1
        for n in reversed(self.count):
            if n > 1 and (period == 0 or period % (stride * n)):
                lo_m, hi_m = a // stride + 1, (b - 1) // stride
                if hi_m >= lo_m:
                    for residue in {0, 1, n - 1}:
                        first = lo_m + (residue - lo_m) % n
                        points.append(np.arange(first, hi_m + 1, n, dtype=np.int64) * stride)
            stride *= n
        return np.concatenate(points) if points else np.empty(0, dtype=np.int64)

    @cached_property
    def _loop_cycles(self) -> tuple[tuple[int, int], ...]:
        """Per iterating loop (count > 1): (count n, stride s: the steps of one of its indices);
        its digit repeats every s·n steps."""
        out, stride = [], 1
        for n in reversed(self.count):
            if n > 1:
                out.append((n, stride))
            stride *= n
        return tuple(out)

    def _first_mismatch(self, lo: int, period: int) -> int:
        """Closed form, O(loops): loop i's digit differs at x and x − period on a set of steps
        that repeats every s·n steps (its whole cycle) and changes only where either side's
        index enters 0, 1 or n − 1 (its class changes). So the first such x ≥ x0 is among x0
        and those ≤ 6 entry points in [x0, x0 + s·n), or there is none; the answer is the
        least over the loops."""
        x0 = max(lo, period)
        best = self.n_steps
        for n, s in self._loop_cycles:
            cycle = s * n
            if period % cycle == 0 or x0 >= best:
                continue  # aligned: equal digits at x and x − period
            points = {x0}
            for r in {0, 1, n - 1}:
                points.add(x0 + (r * s - x0) % cycle)
                points.add(x0 + (r * s + period - x0) % cycle)
            for x in sorted(points):
                if x >= best:
                    break
                if _class_of((x // s) % n, n) != _class_of(((x - period) // s) % n, n):
                    best = x
                    break
        return best

    def match_end(self, lo: int, period: int, stop: int | None = None) -> int:
        """A step F ≥ ``lo`` such that every step x in [lo, F) has the same *class* as step
        x − ``period``: the first step that does not, or ``stop`` (default ``n_steps``) if all
        before it do, or where the search ran out of budget (always a safe answer: every
        step before F matches).

        :meth:`first_mismatch` compares raw digits, which lets whole loops be skipped but
        stops where two stretches in different blocks or instances differ in an outer loop's
        digit although no window or edge tells them apart; from there the classes themselves
        (canonical codes) are compared (:meth:`class_mismatch`)."""
        stop = self.n_steps if stop is None else min(stop, self.n_steps)
        if stop - lo <= 256:  # a short stretch: from one raw mismatch to the next
            x, found = self._hop(lo, period, stop, 8)
            if found:
                return x
            canon, code = self.canonical_list, self.code
            for y in range(x, stop):  # dense raw mismatches: step by step
                if canon[code(y)] != canon[code(y - period)]:
                    return y
            return stop
        cached = self._match.get((period, stop))
        if cached is not None and cached[0] <= lo <= cached[1]:
            return cached[1]  # no mismatch in [cached lo, answer): the same answer from here
        start = self.first_mismatch(lo, period)
        found = stop if start >= stop else self.class_mismatch(start, period, stop)
        if len(self._match) > 4096:
            self._match.clear()
        self._match[(period, stop)] = (lo, found)
        return found

    def _hop(self, x: int, period: int, stop: int, hops: int) -> tuple[int, bool]:
        """Compare classes only where raw digits differ: from ``x``, up to ``hops`` raw
        mismatches (:meth:`_first_mismatch`, closed form). ``(step, True)``: the first step in
        [x, stop) whose class differs from the step a period before, or ``stop``; ``(step,
        False)``: every step before it matches, the search goes on from there."""
        canon, code = self.canonical_list, self.code
        for _ in range(hops):
            x = self._first_mismatch(x, period)
            if x >= stop or canon[code(x)] != canon[code(x - period)]:
                return min(x, stop), True
            x += 1  # equal classes despite different digits
        return x, False

    def class_mismatch(self, x0: int, period: int, stop: int, budget: int = 1 << 15) -> int:
        """The first step x in [``x0``, ``stop``) whose class differs from step x − ``period``'s;
        ``stop`` if none does; or where the search ran out of ``budget`` points.

        Loops whose whole cycle divides the period (*aligned*) have equal digits at x and
        x − period; the others' digits change only at their (sparse) change points. Between two
        of those the unaligned digits of both sides are fixed, so if the classes agree for every
        possible combination of aligned digits (:meth:`_pairs_agree`, tabled) the whole stretch
        matches; only stretches where they do not are compared at every change point of every
        loop (:meth:`_dense_mismatch`)."""
        table = self.canonical_list
        if x0 >= stop or table[self.code(x0)] != table[self.code(x0 - period)]:
            return min(x0, stop)  # the usual case: the raw mismatch is a class mismatch
        key = (x0, period, stop)
        cached = self._class_mismatch.get(key)
        if cached is not None:
            return cached
        if len(self._class_mismatch) > 4096:
            self._class_mismatch.clear()
        x, hit = self._hop(x0 + 1, period, stop, 16)  # sparse raw mismatches first
        if hit:
            self._class_mismatch[key] = x
            return x
        spent, chunk = 0, 4096
        found = None
        while found is None and x < stop and spent < budget:
            hi = min(stop, x + chunk)
            starts = np.unique(np.concatenate((
                np.array([x], dtype=np.int64),
                self._change_points(x, hi, period),
                self._change_points(x - period, hi - period, period) + period,
            )))  # fmt: skip
            agree = self._pairs_agree(starts, period)
            spent += starts.size
            for i in np.nonzero(~agree)[0]:
                s, e = int(starts[i]), int(starts[i + 1]) if i + 1 < starts.size else hi
                m, cost = self._dense_mismatch(s, e, period, budget - spent)
                spent += cost
                if m < e:
                    found = m
                    break
            else:
                x, chunk = max(hi, self._periodic_end(x0, hi, period, stop)), chunk * 4
        if found is None:
            found = x
        self._class_mismatch[key] = found
        return found

    def _periodic_end(self, x0: int, hi: int, period: int, stop: int) -> int:
        """How far the match proven on [x0, hi) extends by periodicity (``hi`` if no further).

        Take a loop of count n and stride s (one index: s steps) and one of its cycles, from
        ``base`` (all loops outside it fixed). On R = [base + s + period, base + (n − 1)·s) both x
        and x − period lie in that cycle with the loop's index in 1 … n − 2 (a middle one):
        the outer loops' digits are equal and fixed, this loop's are both *middle*, and the
        inner loops' digits depend only on x mod s and (x − period) mod s. So whether x and
        x − period have equal classes repeats every s steps on R, and a proven stretch of R
        as long as s proves all of R (e.g. one instance of a ``count`` of thousands proves
        every middle instance). Exact: the collapse fuzz and ``tests/test_program_periods``
        compare it with a step-by-step scan."""
        end = hi
        for n, s in self._loop_cycles:
            if n < 4:
                continue  # (no room for a middle stretch worth a jump)
            base = (hi - 1) // (s * n) * (s * n)
            lo_r, hi_r = base + s + period, base + (n - 1) * s
            if lo_r <= hi - 1 < hi_r and hi - max(x0, lo_r) >= s:
                end = max(end, min(hi_r, stop))
        return end

    def _aligned(self, period: int) -> tuple[np.ndarray, np.ndarray]:
        """(per-loop flag: aligned with ``period``, raw-code parts of every valid combination
        of the aligned loops' digits)."""
        cached = self._aligned_cache.get(period)
        if cached is None:
            flags, combos, stride = [], np.zeros(1, dtype=np.int64), 1
            for n, radix in zip(reversed(self.count), reversed(self._radix)):
                aligned = n == 1 or period % (stride * n) == 0
                flags.append(aligned)
                if aligned:
                    digits = np.array(list(_class_counts(n)), dtype=np.int64) * radix
                    combos = (combos[:, None] + digits[None, :]).ravel()
                stride *= n
            if len(self._aligned_cache) > 1024:
                self._aligned_cache.clear()
            cached = self._aligned_cache[period] = (np.array(flags[::-1]), combos)
        return cached

    def _pairs_agree(self, starts: np.ndarray, period: int) -> np.ndarray:
        """Per stretch start x: whether x and x − period have equal classes whatever the
        aligned loops' digits are (tabled per pair of unaligned digit codes)."""
        flags, combos = self._aligned(period)
        here = self._raw_part(starts, ~flags)
        there = self._raw_part(starts - period, ~flags)
        pairs, inverse = np.unique(here * len(self.canonical) + there, return_inverse=True)
        table = self.canonical
        agree = np.empty(pairs.size, dtype=bool)
        for i, pair in enumerate(pairs.tolist()):
            ok = self._agree.get((period, pair))
            if ok is None:
                if len(self._agree) > 65536:
                    self._agree.clear()
                a, b = divmod(pair, len(table))
                ok = self._agree[(period, pair)] = bool(
                    np.array_equal(table[combos + a], table[combos + b])
                )
            agree[i] = ok
        return agree[inverse.ravel()]

    def _raw_part(self, steps: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Raw codes of ``steps`` counting only the loops flagged in ``keep``."""
        rest = np.array(steps, dtype=np.int64)
        raw = np.zeros_like(rest)
        for j in reversed(range(len(self.count))):
            n = self.count[j]
            if keep[j]:
                raw += _classes_of(rest % n, n) * self._radix[j]
            rest //= n
        return raw

    def _dense_mismatch(self, s: int, e: int, period: int, budget: int) -> tuple[int, int]:
        """(first step in [s, e) whose class differs from step x − period's, else e; points
        compared) — every change point of every loop on both sides; past ``budget`` points it
        answers where it got to (every step before the answer matches)."""
        x, spent, chunk = s, 0, 1024
        while x < e:
            hi = min(e, x + chunk)
            candidates = np.concatenate((
                np.array([x], dtype=np.int64),
                self._change_points(x, hi, 0),
                self._change_points(x - period, hi - period, 0) + period,
            ))  # fmt: skip
            spent += candidates.size
            diff = self.codes_at(candidates) != self.codes_at(candidates - period)
            if diff.any():
                return int(candidates[diff].min()), spent
            if spent > budget:
                return hi, spent  # [s, hi) checked: a safe answer (hi < e reads as a mismatch)
            x, chunk = hi, chunk * 4
        return e, spent
