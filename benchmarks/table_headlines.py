"""The headline numbers of the five paper tables, side by side for several versions of the code.

Run: ``python benchmarks/table_headlines.py --save DIR`` runs every ``accel-sim table NAME
--json`` with this checkout and keeps the JSON in ``DIR``; ``python benchmarks/table_headlines.py
DIR1 DIR2 …`` prints one column per saved directory (e.g. one saved on the previous commit and
one on this one), so a change to the engine is reported with what it moved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

TABLES = ("osc-table2", "prefixquant-fig6", "ops-fig3", "muxq-overhead", "tweo-static")


def save(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        proc = subprocess.run([sys.executable, "-m", "accel_sim.cli", "table", name, "--json"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        (out / f"{name}.json").write_text(proc.stdout)
        print(f"saved {out / name}.json", file=sys.stderr)


def _rows(folder: Path, name: str) -> list[dict]:
    return json.loads((folder / f"{name}.json").read_text())["rows"]


def headlines(folder: Path) -> dict[str, str]:
    """{headline label: value as text} from one directory of saved tables."""
    out = {}
    for r in _rows(folder, "osc-table2"):
        regime = "M=16-64" if r["regime"].startswith("M=16") else "M>=128"
        out[f"osc-table2 G={r['G']} {regime} min-max"] = f"{r['ours_min']:.2f}-{r['ours_max']:.2f}"
    pq = {(r["phase"], r["dataflow"]): r for r in _rows(folder, "prefixquant-fig6")}
    out["prefixquant-fig6 W4A4 prefill / decode speedup (paper 2.74 / 2.16)"] = (
        f"{pq['prefill', 'w4a4_static']['speedup']:.2f} / "
        f"{pq['decode', 'w4a4_static']['speedup']:.2f}")  # fmt: skip
    ops = {(r["arch"], r["model"], r["scheme"]): r["norm_cycles"]
           for r in _rows(folder, "ops-fig3")}  # fmt: skip
    for model in ("BERT-base", "LLaMA-7B"):
        values = [ops.get(("systolic_32x32_ws", model, s)) for s in
                  ("W8A8", "OSC", "MUXQ", "OPS τ=0")]  # fmt: skip
        out[f"ops-fig3 {model} W8A8/OSC/MUXQ/OPS τ=0 (32x32 WS, INT16=1)"] = "/".join(
            "-" if v is None else f"{v:.3f}" for v in values)
    muxq = {(r["arch"], r["scheme"]): r["overhead_%"]
            for r in _rows(folder, "muxq-overhead") if r["kind"] == "all"}  # fmt: skip
    for arch in sorted({a for a, _ in muxq}):
        values = [muxq.get((arch, s)) for s in ("llm_int8", "muxq exp=1", "muxq exp=1 fused")]
        out[f"muxq-overhead {arch} llm_int8/muxq/fused %"] = "/".join(
            "-" if v is None else f"{v:.1f}" for v in values)
    tweo = [r for r in _rows(folder, "tweo-static") if r["kind"] == "all"]
    out["tweo-static " + " / ".join(r["workload"] for r in tweo) + " static speedup"] = " / ".join(
        f"{r['speedup_static']:.3f}" for r in tweo)
    return out


def main() -> None:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="directories written by --save")
    parser.add_argument("--save", type=Path, help="run every table now and save its JSON here")
    args = parser.parse_args()
    if args.save:
        save(args.save)
    folders = args.folders or ([args.save] if args.save else [])
    if not folders:
        parser.error("give --save DIR or directories to compare")
    columns = [headlines(f) for f in folders]
    print("| headline | " + " | ".join(str(f) for f in folders) + " |")
    print("|---|" + "---|" * len(folders))
    for label in columns[0]:
        print(f"| {label} | " + " | ".join(c.get(label, "-") for c in columns) + " |")


if __name__ == "__main__":
    main()
