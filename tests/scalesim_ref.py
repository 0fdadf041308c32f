"""Run the real SCALE-Sim v3 (``scalesim==3.0.0``) as a reference, out of process.

SCALE-Sim lives in its own virtualenv (``.ci/setup_scalesim.sh`` creates it) because it pins
old numpy/pandas versions; we never import it here. :func:`run_scalesim` writes a cfg, a GEMM
topology csv and an (empty) layout csv into a temporary directory, runs SCALE-Sim's own driver
class (``scalesim.scale_sim.scalesim``, the object ``python -m scalesim.scale -i gemm`` builds)
in a subprocess with traces disabled, and parses the reports it writes.

Units: every cycle count is in array clock cycles; every size in SCALE-Sim *words* except
the SRAM sizes (kB, SCALE-Sim uses 1 byte per word internally); bandwidths in words/cycle.

GEMM convention: a layer ``(M, K, N)`` computes ``C[M×N] = A[M×K] · B[K×N]``. SCALE-Sim's
GEMM topology row is ``name, M, N, K,`` (trailing comma); internally it becomes a convolution
with an M×K ifmap, N filters of width K, so its ifmap operand matrix is A (M×K), the filter
operand matrix is B (K×N) and the ofmap operand matrix is C (M×N).
"""

from __future__ import annotations

import csv
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

DEFAULT_PYTHON = str(Path.home() / ".cache" / "accel-sim" / "scalesim-venv" / "bin" / "python")
ENV_VAR = "ACCEL_SIM_SCALESIM_PYTHON"

_DRIVER = """
import sys
from scalesim.scale_sim import scalesim
s = scalesim(save_disk_space=True, verbose=False, config=sys.argv[1], topology=sys.argv[2],
             layout=sys.argv[3], input_type_gemm=True)
s.run_scale(top_path=sys.argv[4])
"""

# Report columns -> our keys (SCALE-Sim writes ", "-separated headers with a trailing comma).
_COMPUTE_COLS = {
    "Total Cycles (incl. prefetch)": "total_cycles_incl_prefetch",
    "Total Cycles": "total_cycles",
    "Stall Cycles": "stall_cycles",
    "Overall Util %": "overall_util_pct",
    "Mapping Efficiency %": "mapping_efficiency_pct",
    "Compute Util %": "compute_util_pct",
}
_BW_COLS = {
    "Avg IFMAP SRAM BW": "avg_ifmap_sram_bw",
    "Avg FILTER SRAM BW": "avg_filter_sram_bw",
    "Avg OFMAP SRAM BW": "avg_ofmap_sram_bw",
    "Avg IFMAP DRAM BW": "avg_ifmap_dram_bw",
    "Avg FILTER DRAM BW": "avg_filter_dram_bw",
    "Avg OFMAP DRAM BW": "avg_ofmap_dram_bw",
}
_DETAIL_COLS = {
    "SRAM IFMAP Reads": "sram_ifmap_reads",
    "SRAM Filter Reads": "sram_filter_reads",
    "SRAM OFMAP Writes": "sram_ofmap_writes",
    "DRAM IFMAP Start Cycle": "dram_ifmap_start_cycle",
    "DRAM IFMAP Stop Cycle": "dram_ifmap_stop_cycle",
    "DRAM IFMAP Reads": "dram_ifmap_reads",
    "DRAM Filter Start Cycle": "dram_filter_start_cycle",
    "DRAM Filter Stop Cycle": "dram_filter_stop_cycle",
    "DRAM Filter Reads": "dram_filter_reads",
    "DRAM OFMAP Start Cycle": "dram_ofmap_start_cycle",
    "DRAM OFMAP Stop Cycle": "dram_ofmap_stop_cycle",
    "DRAM OFMAP Writes": "dram_ofmap_writes",
}


def scalesim_python() -> str:
    """Path of the SCALE-Sim venv's interpreter (``$ACCEL_SIM_SCALESIM_PYTHON`` or default)."""
    return os.environ.get(ENV_VAR, DEFAULT_PYTHON)


def ensure_scalesim() -> bool:
    """Create the SCALE-Sim venv with ``.ci/setup_scalesim.sh`` if it is missing (first use of
    ``pytest`` on a new machine; needs PyPI). True when SCALE-Sim is usable afterwards."""
    if scalesim_available():
        return True
    script = Path(__file__).resolve().parents[1] / ".ci" / "setup_scalesim.sh"
    try:
        subprocess.run(["bash", str(script)], check=True, timeout=900, capture_output=True)
    except (subprocess.SubprocessError, OSError):
        return False
    return scalesim_available()


def scalesim_available(python: str | None = None) -> bool:
    """True when the interpreter exists and can import ``scalesim``."""
    exe = python or scalesim_python()
    if not Path(exe).exists():
        return False
    probe = subprocess.run(
        [exe, "-c", "import scalesim.scale_sim"], capture_output=True, timeout=120
    )
    return probe.returncode == 0


def write_cfg(
    path: Path,
    rows: int,
    cols: int,
    dataflow: str,
    bandwidth_mode: str = "CALC",
    sram_kb: tuple[int, int, int] = (256, 256, 256),
    bandwidth: int | None = None,
    run_name: str = "ref",
) -> None:
    """Write a SCALE-Sim 3.0.0 cfg with every section its parser requires.

    ``bandwidth`` (words/cycle) feeds both ``[architecture_presets] Bandwidth`` (used by the
    OFMAP drain in USER mode) and ``[layout] Ifmap/FilterSRAMBankBandwidth`` (what 3.0.0
    actually uses as the IFMAP/filter DRAM->SRAM fill bandwidth in USER mode).
    """
    bw = int(bandwidth) if bandwidth is not None else 10
    ifmap_kb, filter_kb, ofmap_kb = sram_kb
    path.write_text(
        f"""[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_kb}
FilterSramSzkB: {filter_kb}
OfmapSramSzkB: {ofmap_kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bw}
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: {bandwidth_mode}
UseRamulatorTrace: False
"""
    )


def _read_report(path: Path, columns: dict[str, str]) -> list[dict[str, float]]:
    with path.open() as fh:
        rows = [[c.strip() for c in line] for line in csv.reader(fh) if line]
    header = rows[0]
    out = []
    for row in rows[1:]:
        rec = dict(zip(header, row, strict=False))
        out.append({ours: float(rec[theirs]) for theirs, ours in columns.items()})
    return out


def run_scalesim(
    rows: int,
    cols: int,
    dataflow: str,
    gemms: Sequence[tuple[int, int, int]],
    bandwidth_mode: str = "CALC",
    sram_kb: tuple[int, int, int] = (256, 256, 256),
    bandwidth: int | None = None,
    python: str | None = None,
    timeout_s: float = 600,
) -> list[dict[str, float]]:
    """Simulate ``gemms`` (each ``(M, K, N)``) on an ``rows×cols`` array, one SCALE-Sim run.

    Args:
        rows, cols: PE array height R and width C.
        dataflow: ``"ws"``, ``"os"`` or ``"is"``.
        gemms: layers as ``(M, K, N)``: ``C[M×N] = A[M×K]·B[K×N]``.
        bandwidth_mode: ``"CALC"`` (stall-free, bandwidth estimated) or ``"USER"``.
        sram_kb: (ifmap, filter, ofmap) SRAM sizes in kB (SCALE-Sim: 1 word = 1 byte).
        bandwidth: DRAM words/cycle for USER mode (see :func:`write_cfg`).
        python: SCALE-Sim venv interpreter; default :func:`scalesim_python`.

    Returns:
        One dict per layer, in order, with ``M``, ``K``, ``N`` and the numbers of
        COMPUTE_REPORT.csv (``total_cycles``, ``stall_cycles``, ``total_cycles_incl_prefetch``,
        utilisations in %), BANDWIDTH_REPORT.csv (``avg_*_bw`` words/cycle) and
        DETAILED_ACCESS_REPORT.csv (SRAM/DRAM access counts in words, DRAM start/stop cycles).
    """
    if bandwidth_mode not in ("CALC", "USER"):
        raise ValueError(f"bandwidth_mode must be CALC or USER, got {bandwidth_mode!r}")
    if bandwidth_mode == "USER" and bandwidth is None:
        raise ValueError("USER bandwidth mode needs bandwidth (words/cycle)")
    exe = python or scalesim_python()
    with tempfile.TemporaryDirectory(prefix="scalesim_") as tmp:
        d = Path(tmp)
        write_cfg(d / "run.cfg", rows, cols, dataflow, bandwidth_mode, sram_kb, bandwidth)
        topo = "Layer, M, N, K,\n" + "".join(
            f"g{i}, {m}, {n}, {k},\n" for i, (m, k, n) in enumerate(gemms)
        )
        (d / "topo.csv").write_text(topo)
        (d / "layout.csv").write_text("Layer name,\n")
        proc = subprocess.run(
            [exe, "-c", _DRIVER, "run.cfg", "topo.csv", "layout.csv", "out"],
            cwd=d,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        report_dir = d / "out" / "ref"
        if proc.returncode != 0 or not (report_dir / "COMPUTE_REPORT.csv").exists():
            raise RuntimeError(
                f"SCALE-Sim failed (rc={proc.returncode}):\n{proc.stdout[-2000:]}\n"
                f"{proc.stderr[-4000:]}"
            )
        compute = _read_report(report_dir / "COMPUTE_REPORT.csv", _COMPUTE_COLS)
        bw = _read_report(report_dir / "BANDWIDTH_REPORT.csv", _BW_COLS)
        detail = _read_report(report_dir / "DETAILED_ACCESS_REPORT.csv", _DETAIL_COLS)
    results = []
    for (m, k, n), c, b, det in zip(gemms, compute, bw, detail, strict=True):
        rec: dict[str, float] = {"M": m, "K": k, "N": n, **c, **b, **det}
        for key in ("total_cycles", "stall_cycles", "total_cycles_incl_prefetch"):
            rec[key] = int(rec[key])
        results.append(rec)
    return results


if __name__ == "__main__":  # pragma: no cover - manual smoke run
    import json
    import sys

    R, C, DF = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[4:]]
    print(json.dumps(run_scalesim(R, C, DF, shapes), indent=1))  # type: ignore[arg-type]
