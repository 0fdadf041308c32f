"""Cross-check against ZigZag 3.9.1: our simulator vs ZigZag's latency-optimal LOMA mapping.

Run: ``python benchmarks/bench_mapper.py [--quick]`` (ZigZag needs ``benchmarks/setup_zigzag.sh``).

For each GEMM (M×K×N) on ``ascend_like_cube`` and ``systolic_32x32_ws``, at FP16 (our ``fp16``
dataflow) and INT8 (our ``w8a8_static``), this runs

* ZigZag 3.9.1 (``zigzag.api.get_hardware_performance_zigzag``, LOMA temporal mapper,
  ``opt="latency"``, ``lpf_limit`` bounded) in its own venv via a subprocess that prints JSON, on
  the hand-written equivalent descriptions in ``benchmarks/zigzag_hw/`` (their headers list what
  could not be matched), and
* ``accel_sim.simulate(arch, gemm, dataflow)``,

and prints cycles, DRAM bytes (read + written at the outermost level), energy and wall time of
both. ZigZag's energy is MAC + memory accesses only, so ours is shown both in total and without
leakage and the vector unit ("dyn"). ZigZag is priced with our model's own effective energies
(pJ/MAC and pJ/byte per level, read back from a ``simulate`` run after our node scaling), so
energy differences come from access counts, not prices. The capacities and bandwidths of the
ZigZag descriptions are checked against ``arch_configs/`` on every run (differences beyond the
documented ones are printed as notes). ZigZag's wall time is its API call in the subprocess
(after a warm-up call, without interpreter start and imports); ours is one ``simulate`` call
with the engine's result cache cleared. Both are single runs on a possibly busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HW_DIR = Path(__file__).resolve().parent / "zigzag_hw"
ZIGZAG_PY = Path(
    os.environ.get(
        "ACCEL_SIM_ZIGZAG_PYTHON", Path.home() / ".cache/accel-sim/zigzag-venv/bin/python"
    )  # fmt: skip
)

ARCHS = ("ascend_like_cube", "systolic_32x32_ws")
GEMMS = ("512x512x512", "2048x4096x4096", "1x4096x4096", "128x4096x11008", "7760x407x1420",
         "256x1024x1024")  # fmt: skip
QUICK_GEMMS = ("512x512x512", "1x4096x4096", "7760x407x1420")
CALIBRATION_GEMM = "512x512x512"  # prices our energies per byte and per MAC (every level busy)

# precision -> (our dataflow, ZigZag operand precisions in bits)
PRECISIONS = {
    # FP16 X, W, Y; 32-bit accumulators (our MatmulOp's accumulator_bits)
    "fp16": ("fp16", {"I": 16, "W": 16, "O": 32, "O_final": 16}),
    # w8a8_static: INT8 X and W (plus 32/K bits of per-channel scale per weight, which ZigZag's
    # integer precisions cannot carry), INT32 accumulators, FP16 Y; its 2 epilogue multiplies per
    # output run on the vector unit, which ZigZag does not have
    "int8": ("w8a8_static", {"I": 8, "W": 8, "O": 32, "O_final": 16}),
}

# The ZigZag side, run by the venv's interpreter: jobs (JSON list) on stdin, one JSON line per
# job on stdout.
RUNNER = r'''
import json, logging, sys, time, traceback
logging.basicConfig(level=logging.ERROR)  # before zigzag's own basicConfig(INFO), which then no-ops
import yaml
from zigzag.api import get_hardware_performance_zigzag
from zigzag.mapping.data_movement import DataDirection, DataMoveAttr

def dram_bytes(cme):
    """Bytes read from and written to the outermost level, from the chosen mapping's data movement
    (the same terms as ZigZag's memory_word_access, without rounding to port-width accesses)."""
    read = written = 0.0
    for op in cme.layer.layer_operands:
        top = cme.mapping.mem_level[op] - 1
        move = cme.mapping.unit_mem_data_movement[op][top]
        amount = move.get_attribute(DataMoveAttr.DATA_TRANS_AMOUNT_PER_PERIOD)
        bits = move.get_attribute(DataMoveAttr.DATA_PRECISION)
        periods = move.get_attribute(DataMoveAttr.DATA_TRANS_PERIOD_COUNT)
        units = cme.mapping.spatial_mapping.unit_count[op][top + 1]
        for d in DataDirection:
            b = amount.get(d) * bits.get(d) * periods.get(d) * units / 8
            if d in (DataDirection.RD_OUT_TO_LOW, DataDirection.RD_OUT_TO_HIGH):
                read += b
            else:
                written += b
    return read, written

def run(job):
    layer = {"id": 0, "name": "gemm", "operator_type": "Gemm",
             "equation": "O[m][n]+=I[m][k]*W[k][n]", "dimension_relations": [],
             "loop_dims": ["M", "N", "K"], "loop_sizes": [job["M"], job["N"], job["K"]],
             "operand_precision": job["precision"], "operand_source": {"I": 0, "W": 0}}
    workload = job["dump"] + "/workload.yaml"
    with open(workload, "w") as f:
        yaml.safe_dump([layer], f)
    start = time.perf_counter()
    energy, latency, cmes = get_hardware_performance_zigzag(
        workload, job["hardware"], job["mapping"], temporal_mapping_search_engine="loma",
        opt="latency", dump_folder=job["dump"], lpf_limit=job["lpf"],
        loma_show_progress_bar=False)
    wall = time.perf_counter() - start
    cme = cmes[0][1][0][0]
    read, written = dram_bytes(cme)
    return dict(ok=True, cycles=float(latency), energy_pj=float(energy), wall_s=wall,
                mac_energy_pj=float(cme.mac_energy), mem_energy_pj=float(cme.mem_energy),
                ideal_cycles=float(cme.ideal_temporal_cycle),
                stall_cycles=float(cme.stall_slack_comb),
                onload_cycles=float(cme.data_onloading_cycle),
                offload_cycles=float(cme.data_offloading_cycle),
                drain_cycles=float(getattr(cme, "systolic_drain_cycle", 0.0)),
                dram_read_bytes=read, dram_written_bytes=written,
                temporal_mapping=str(cme.temporal_mapping).strip())

jobs = json.load(sys.stdin)
if jobs:  # warm-up (lazy imports, first-call set-up), so each job's wall time is its own
    try:
        run(dict(jobs[0], M=16, K=16, N=16))
    except Exception:
        pass
for job in jobs:
    out = {"key": job["key"]}
    try:
        out.update(run(job))
    except Exception as exc:  # report it in this job's row and go on
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}",
                   tb=traceback.format_exc()[-2000:])
    print(json.dumps(out), flush=True)
'''


def parse_gemm(label: str) -> tuple[int, int, int]:
    m, k, n = (int(x) for x in label.lower().split("x"))
    return m, k, n


def int8_variant(hardware: dict, mapping: list) -> tuple[dict, list]:
    """The INT8 version of an FP16 ZigZag description: our rate table runs INT8 at 2× FP16 by
    packing two INT8 operands per FP16 lane along the reduction, so the K unrolling (D2) doubles
    while every port keeps its bits/cycle (the same bytes now carry twice the elements); per-PE
    weight registers keep holding two weights."""
    hw = json.loads(json.dumps(hardware))
    mp = json.loads(json.dumps(mapping))
    array = hw["operational_array"]
    array["sizes"][array["dimensions"].index("D2")] *= 2
    array["input_precision"] = [8, 8]
    reg = hw["memories"].get("pe_w_reg")
    if reg:
        reg["size"] //= 2
        for port in reg["ports"]:
            port["bandwidth_min"] //= 2
            port["bandwidth_max"] //= 2
    for entry in mp:
        entry["spatial_mapping"]["D2"] = [
            f"{dim}, {int(size) * 2}"
            for dim, size in (s.split(", ") for s in entry["spatial_mapping"]["D2"])
        ]
    return hw, mp


def our_prices(arch: str, dataflow: str) -> dict:
    """Our model's effective energy prices (after its node scaling): pJ per MAC and pJ per byte
    read/written at each level, read back from one simulate() run as energy ÷ traffic. The ZigZag
    descriptions are priced with these, so both sides charge the same per MAC and per byte even
    while our YAMLs' energy entries change."""
    import accel_sim

    res = accel_sim.simulate(arch, CALIBRATION_GEMM, dataflow)
    parts = res.energy_breakdown_pj
    macs = [v for k, v in parts.items() if k.startswith("mac_")]
    prices: dict = {"mac": sum(macs) / res.macs, "levels": {}}
    for level in set(res.bytes_read) | set(res.bytes_written):
        rd, wr = res.bytes_read.get(level, 0), res.bytes_written.get(level, 0)
        prices["levels"][level] = (
            parts.get(f"{level}_read", 0.0) / rd if rd else None,
            parts.get(f"{level}_write", 0.0) / wr if wr else None,
        )
    return prices


def _port_bits(memory: dict, kind: str) -> int:
    """bandwidth_max of a memory's first port that can ``kind`` ("read"/"write")."""
    return next(p["bandwidth_max"] for p in memory["ports"] if p["type"] in (kind, "read_write"))


def apply_prices(hardware: dict, prices: dict) -> list[str]:
    """Set unit_energy and each level's r_cost/w_cost (pJ per access of its port's bandwidth_max
    bits) from ``prices``; levels ours does not price (acc_reg, pe_w_reg) keep their YAML value.
    Returns the levels left at their YAML value for want of a price."""
    hardware["operational_array"]["unit_energy"] = prices["mac"]
    kept = []
    for name, memory in hardware["memories"].items():
        read_pjb, write_pjb = prices["levels"].get(name, (None, None))
        if name in ("acc_reg", "pe_w_reg"):
            continue
        if read_pjb is None or write_pjb is None:
            kept.append(name)
        if read_pjb is not None:
            memory["r_cost"] = read_pjb * _port_bits(memory, "read") / 8
        if write_pjb is not None:
            memory["w_cost"] = write_pjb * _port_bits(memory, "write") / 8
    return kept


# Bandwidths of the ZigZag descriptions that knowingly differ from our YAMLs (see their headers)
KNOWN_BW_DIFFS = {("L0C", "read"), ("OFMAP_SRAM", "read"), ("DRAM", "read"), ("DRAM", "write")}


def check_against_ours(arch: str, hardware: dict) -> list[str]:
    """Capacities and bandwidths of the ZigZag description vs our arch YAML (which is being
    edited concurrently): the differences, beyond the documented ones."""
    ours = yaml.safe_load((ROOT / "arch_configs" / f"{arch}.yaml").read_text())
    diffs = []
    for level in ours["memory"]:
        memory = hardware["memories"].get(level["name"])
        if memory is None:
            diffs.append(f"{level['name']}: not in the ZigZag description")
            continue
        if memory["size"] != level["capacity_bytes"] * 8:
            diffs.append(f"{level['name']}: {memory['size']} bits vs ours "
                         f"{level['capacity_bytes']} B")  # fmt: skip
        for kind in ("read", "write"):
            want = level[f"{kind}_bytes_per_cycle"] * 8
            have = _port_bits(memory, kind)
            if have != want and (level["name"], kind) not in KNOWN_BW_DIFFS:
                diffs.append(f"{level['name']} {kind}: {have} bits/cycle vs ours {want}")
    return diffs


def zigzag_inputs(arch: str, prec: str, workdir: Path, notes: list[str]) -> tuple[str, str]:
    """Write the ZigZag hardware and mapping YAMLs for one architecture and precision, priced
    with our model's effective energies; returns their paths."""
    hardware = yaml.safe_load((HW_DIR / f"{arch}.yaml").read_text())
    mapping = yaml.safe_load((HW_DIR / f"{arch}.mapping.yaml").read_text())
    if prec == "fp16":
        try:
            notes.extend(f"{arch}: {d}" for d in check_against_ours(arch, hardware))
        except Exception as exc:  # our YAML schema is being edited concurrently
            notes.append(f"{arch}: could not compare with arch_configs ({exc!r})")
    else:
        hardware, mapping = int8_variant(hardware, mapping)
    try:
        kept = apply_prices(hardware, our_prices(arch, PRECISIONS[prec][0]))
        if kept:
            notes.append(f"{arch} {prec}: no price from our model for {kept}; YAML energies kept")
    except Exception as exc:  # our engine is being rewritten: fall back to the YAML's energies
        notes.append(
            f"{arch} {prec}: could not read our energy prices ({type(exc).__name__}: "
            f"{exc}); ZigZag uses the 45 nm energies written in zigzag_hw/{arch}.yaml"
        )
    out_hw, out_map = workdir / f"{arch}_{prec}.yaml", workdir / f"{arch}_{prec}.mapping.yaml"
    out_hw.write_text(yaml.safe_dump(hardware, sort_keys=False))
    out_map.write_text(yaml.safe_dump(mapping, sort_keys=False))
    return str(out_hw), str(out_map)


def run_zigzag(jobs: list[dict], timeout_s: float) -> dict[str, dict]:
    """Run ZigZag jobs in one venv subprocess; results by job key (missing ones: the error)."""
    results: dict[str, dict] = {}
    try:
        proc = subprocess.run(
            [str(ZIGZAG_PY), "-c", RUNNER], input=json.dumps(jobs), capture_output=True,
            text=True, timeout=timeout_s, cwd=ROOT,
        )  # fmt: skip
        stdout, stderr, why = proc.stdout, proc.stderr, f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        why = f"timeout after {timeout_s:.0f} s"
    for line in stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row["key"]] = row
    for job in jobs:
        results.setdefault(job["key"], {"ok": False, "error": f"ZigZag subprocess: {why}: "
                                        f"{stderr.strip().splitlines()[-1:] or ''}"})  # fmt: skip
    return results


def run_ours(arch: str, gemm: str, dataflow: str) -> dict:
    """accel_sim.simulate on one GEMM; its errors are returned, not raised (the engine is being
    rewritten: an import or run failure is shown in the row)."""
    try:
        import accel_sim

        try:
            from accel_sim.engine.run import _CACHE

            _CACHE.clear()
        except Exception:  # the cache is an engine detail; time without clearing if it moved
            pass
        start = time.perf_counter()
        res = accel_sim.simulate(arch, gemm, dataflow)
        wall = time.perf_counter() - start
    except Exception as exc:
        msg = f"{type(exc).__name__}: {exc}"
        unmappable = "cannot be tiled" in msg or "does not fit" in msg
        return {"ok": False, "error": msg, "short": "unmappable" if unmappable else "error"}
    top = yaml.safe_load((ROOT / "arch_configs" / f"{arch}.yaml").read_text())["memory"][0]["name"]
    side = res.energy_breakdown_pj.get("leakage", 0.0) + res.energy_breakdown_pj.get("vector", 0.0)
    return {"ok": True, "cycles": res.cycles, "compute_cycles": res.compute_cycles,
            "energy_pj": res.energy_pj, "dyn_energy_pj": res.energy_pj - side, "wall_s": wall,
            "dram_read_bytes": res.bytes_read.get(top, 0),
            "dram_written_bytes": res.bytes_written.get(top, 0), "stalls": res.stalls}  # fmt: skip


def _fmt(value, spec: str, width: int, missing: str = "-") -> str:
    return f"{format(value, spec) if value is not None else missing:>{width}}"


def _ratio(value) -> str:
    if value is None:
        return f"{'-':>8}"
    return f"{value:7,.0f}x" if value >= 10 else f"{value:7.2f}x"


def print_table(rows: list[dict]) -> None:
    head = (f"{'GEMM MxKxN':>15} {'prec':>4} {'ours cyc':>11} {'ZZ cyc':>11} {'ours/ZZ':>7} "
            f"{'ours DRAM MB':>12} {'ZZ DRAM MB':>10} {'ours uJ':>9} {'ours dyn':>9} "
            f"{'ZZ uJ':>9} {'dyn/ZZ':>6} {'ours ms':>8} {'ZZ s':>6} {'ZZ/ours':>8}")  # fmt: skip
    arch = None
    for row in rows:
        if row["arch"] != arch:
            arch = row["arch"]
            print(f"\n{arch}\n{head}")
        o, z = row["ours"], row["zz"]
        oc = o["cycles"] if o["ok"] else None
        zc = z["cycles"] if z["ok"] else None
        o_dram = (o["dram_read_bytes"] + o["dram_written_bytes"]) / 1e6 if o["ok"] else None
        z_dram = (z["dram_read_bytes"] + z["dram_written_bytes"]) / 1e6 if z["ok"] else None
        o_e = o["energy_pj"] / 1e6 if o["ok"] else None
        o_dyn = o["dyn_energy_pj"] / 1e6 if o["ok"] else None
        z_e = z["energy_pj"] / 1e6 if z["ok"] else None
        o_w = o["wall_s"] * 1e3 if o["ok"] else None
        z_w = z["wall_s"] if z["ok"] else None
        both = o["ok"] and z["ok"]
        print(f"{row['gemm']:>15} {row['prec']:>4} "
              f"{_fmt(oc, ',d', 11, o.get('short', 'error'))} "
              f"{_fmt(zc, ',.0f', 11, 'error')} "
              f"{_fmt(oc / zc if both else None, '.2f', 7)} "
              f"{_fmt(o_dram, '.2f', 12)} {_fmt(z_dram, '.2f', 10)} "
              f"{_fmt(o_e, ',.1f', 9)} {_fmt(o_dyn, ',.1f', 9)} {_fmt(z_e, ',.1f', 9)} "
              f"{_fmt(o_dyn / z_e if both else None, '.2f', 6)} "
              f"{_fmt(o_w, '.1f', 8)} {_fmt(z_w, '.2f', 6)} "
              f"{_ratio(z_w / o['wall_s'] if both else None)}")  # fmt: skip
    errors = [(r, side) for r in rows for side in ("ours", "zz") if not r[side]["ok"]]
    if errors:
        print("\nerrors:")
        for row, side in errors:
            print(f"  {row['arch']} {row['gemm']} {row['prec']} ({side}): {row[side]['error']}")


def main(argv=None) -> int:
    os.environ["ACCEL_SIM_CACHE"] = "off"  # the engine is measured, never the result cache
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_GEMMS)}")
    parser.add_argument("--gemms", nargs="+", help="GEMMs as MxKxN (default: the built-in list)")
    parser.add_argument("--arch", nargs="+", choices=ARCHS, default=list(ARCHS))
    parser.add_argument("--prec", nargs="+", choices=list(PRECISIONS), default=list(PRECISIONS))
    parser.add_argument(
        "--lpf",
        type=int,
        default=6,
        help="LOMA lpf_limit (ZigZag's default 6; 8 costs ~20 s per GEMM)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds per ZigZag GEMM before its subprocess is stopped",
    )
    parser.add_argument("--json", type=Path, help="also write every row (with ZigZag's loop "
                        "nest and latency breakdown) to this file")  # fmt: skip
    parser.add_argument("--mappings", action="store_true", help="print ZigZag's chosen loop nests")
    args = parser.parse_args(argv)

    if not ZIGZAG_PY.exists():
        print(
            f"ZigZag venv not found at {ZIGZAG_PY}.\n"
            f"Create it with: bash {Path(__file__).resolve().parent / 'setup_zigzag.sh'}\n"
            "(or point ACCEL_SIM_ZIGZAG_PYTHON at a python with zigzag-dse==3.9.1 and six)."
        )
        return 0
    gemms = args.gemms or (QUICK_GEMMS if args.quick else GEMMS)

    t0 = time.perf_counter()
    rows: list[dict] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_mapper_") as tmp:
        workdir = Path(tmp)
        jobs = []
        for arch in args.arch:
            for prec in args.prec:
                hw, mp = zigzag_inputs(arch, prec, workdir, notes)
                for gemm in gemms:
                    m, k, n = parse_gemm(gemm)
                    key = f"{arch}|{gemm}|{prec}"
                    dump = workdir / key.replace("|", "_")
                    dump.mkdir()
                    jobs.append({"key": key, "M": m, "K": k, "N": n, "hardware": hw,
                                 "mapping": mp, "precision": PRECISIONS[prec][1],
                                 "dump": str(dump), "lpf": args.lpf})  # fmt: skip
                    rows.append({"arch": arch, "gemm": gemm, "prec": prec, "key": key})
        print(f"ZigZag 3.9.1 (LOMA, opt=latency, lpf_limit={args.lpf}): {len(jobs)} runs ...",
              flush=True)  # fmt: skip
        zz = run_zigzag(jobs, args.timeout * len(jobs))
    t_zz = time.perf_counter() - t0
    run_ours(ARCHS[0], "16x16x16", "fp16")  # warm-up: imports and first-call set-up
    for row in rows:
        row["zz"] = zz[row["key"]]
        row["ours"] = run_ours(row["arch"], row["gemm"], PRECISIONS[row["prec"]][0])
    print_table(rows)
    if notes:
        print("\nnotes:")
        for note in notes:
            print(f"  {note}")
    if args.mappings:
        print("\nZigZag loop nests (innermost first, per operand per memory level):")
        for row in rows:
            if row["zz"]["ok"]:
                print(f"  {row['arch']} {row['gemm']} {row['prec']}: "
                      f"{row['zz']['temporal_mapping']}")  # fmt: skip
    ok = [r for r in rows if r["zz"]["ok"]]
    if ok:
        walls = [r["zz"]["wall_s"] for r in ok]
        print(f"\nZigZag wall time per GEMM: mean {sum(walls) / len(walls):.2f} s, max "
              f"{max(walls):.2f} s (API call only); ZigZag subprocess total {t_zz:.1f} s; "
              f"whole bench {time.perf_counter() - t0:.1f} s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
        print(f"rows written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
