"""Proof that a faster engine gives bit-identical results: record every field of many results
with one version of the code, then check another version against the record.

Run: ``python benchmarks/bench_identical.py --record FILE`` (e.g. with ``PYTHONPATH`` pointing
at a checkout of the reference commit), then ``python benchmarks/bench_identical.py --check
FILE`` (exit status 1 if any result differs). Options: ``--n`` random shapes per (arch,
dataflow) (default 8), ``--seed`` (default 11).

The cases: every shipped architecture (``arch_configs/``) × fp16, w8a8, w8a8_static,
w4a4_static and osc (G=16) × seeded log-uniform shapes 1…8192 per dimension, under the DES and
(for the same cases) the closed-form twin, plus every simulation of ``osc-table2``. A result is
compared as the ``repr`` of ``SimResult.to_dict()`` (floats to the last bit); a case that raises
is compared by its error's type and message (paths relative to the checkout).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path

import accel_sim

ROOT = Path(__file__).resolve().parents[1]
DATAFLOWS = (("fp16", None), ("w8a8", None), ("w8a8_static", None), ("w4a4_static", None),
             ("osc", {"G": 16}))  # fmt: skip
#: osc-table2's grid (accel_sim.tables.osc_table2: SIZES, M_MEMORY + M_COMPUTE, GROUPS)
TABLE_SIZES = (512, 768, 2048, 4096, 12288)
TABLE_MS = (16, 32, 64, 128, 256, 512, 1024, 2048)
TABLE_GROUPS = (16, 32, 64)


def _log_uniform(rng: random.Random, top: int = 8192) -> int:
    return int(round(math.exp(rng.uniform(0, math.log(top)))))


def cases(n: int, seed: int) -> list[tuple]:
    """(arch, (M, K, N), dataflow, knobs, engine) of the set, in a fixed order."""
    rng = random.Random(seed)
    archs = sorted(p.stem for p in (ROOT / "arch_configs").glob("*.yaml"))
    out = []
    for arch in archs:
        for dataflow, knobs in DATAFLOWS:
            for _ in range(n):
                shape = tuple(_log_uniform(rng) for _ in range(3))
                for engine in ("des", "twin"):
                    out.append((arch, shape, dataflow, knobs, engine))
    for M in TABLE_MS:
        for K in TABLE_SIZES:
            for N in TABLE_SIZES:
                out.append(("ascend_like_cube", (M, K, N), "w8a8", None, "des"))
                for G in TABLE_GROUPS:
                    out.append(("ascend_like_cube", (M, K, N), "osc", {"G": G}, "des"))
    return out


def run(case: tuple) -> str:
    """The case's result (or error) as text, with the code's checkout path as ``<root>``."""
    arch, shape, dataflow, knobs, engine = case
    try:
        text = repr(accel_sim.simulate(arch, shape, dataflow, knobs, engine=engine).to_dict())
    except Exception as exc:  # noqa: BLE001 - an error is a result to compare too
        text = f"{type(exc).__name__}: {exc}"
    return text.replace(str(Path(accel_sim.__file__).resolve().parents[1]), "<root>")


def _cycles(text: str) -> int:
    """The ``cycles`` field of a stored result (0 for an error)."""
    found = re.search(r"'cycles': (\d+)", text)
    return int(found.group(1)) if found else 0


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", type=Path, help="store every result as JSON")
    what.add_argument("--check", type=Path, help="compare every result with a stored record")
    parser.add_argument("--n", type=int, default=8, help="random shapes per (arch, dataflow)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the random shapes")
    args = parser.parse_args()
    start = time.perf_counter()
    todo = cases(args.n, args.seed)
    results = {json.dumps(case): run(case) for case in todo}
    took = time.perf_counter() - start
    if args.record:
        args.record.write_text(json.dumps(results, indent=0))
        print(f"recorded {len(results)} results in {took:.1f} s ({accel_sim.__file__})")
        return
    stored = json.loads(args.check.read_text())
    differ = [key for key in stored if results.get(key) != stored[key]]
    missing = len(set(stored) ^ set(results))
    print(f"{len(results)} results in {took:.1f} s: {len(differ)} differ, "
          f"{missing} not in both")  # fmt: skip
    for key in differ[:10]:
        print(f"  {key}\n    stored: {stored[key][:300]}\n    now:    {results.get(key, '')[:300]}")
    moved = sorted((_cycles(results.get(key, "")) / _cycles(stored[key]) - 1, key) for key in differ
                   if _cycles(stored[key]) and _cycles(results.get(key, "")))  # fmt: skip
    if moved:
        print(f"cycles of the {len(moved)} differing results: now/stored - 1 from "
              f"{100 * moved[0][0]:+.3f} % to {100 * moved[-1][0]:+.3f} %")  # fmt: skip
    sys.exit(1 if differ or missing else 0)


if __name__ == "__main__":
    main()
