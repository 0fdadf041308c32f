"""Every output directory says what produced it: a sweep's ``manifest.json`` (a table's
``NAME.manifest.json`` is checked in ``test_tables_paper.py``) — the validated sweep file, the
base architecture's hash, the code's hash and each file's sha256 — and a rerun that computes
nothing rewrites it unchanged (no time stamp)."""

from __future__ import annotations

import hashlib
import json

from accel_sim.sweep import run_sweep

SPEC = """\
name: tiny
base_arch: ascend_like_cube
engine: des
grid:
  memory.HBM.read_bytes_per_cycle: [18.5, 37]
dataflows: [w8a8, fp16]
workloads:
  - {gemm: 16x512x512}
baseline: w8a8
"""


def test_a_sweep_directory_has_a_manifest(tmp_path):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    run_sweep(spec, out, scheduler="synchronous", progress=False)
    first = (out / "manifest.json").read_text()
    doc = json.loads(first)
    assert doc["spec"]["base_arch"] == "ascend_like_cube" and doc["spec"]["engine"] == "des"
    assert doc["points"] == 4 and len(doc["source_sha256"]) == 64
    for name in ("results.csv", "results.parquet", "pareto.png", "heatmap.png"):
        assert doc["files"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    run_sweep(spec, out, scheduler="synchronous", progress=False)  # resumed: nothing computed
    assert (out / "manifest.json").read_text() == first
