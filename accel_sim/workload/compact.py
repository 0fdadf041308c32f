"""Turn a full trace (every X and W) into a compact trace (``workload/trace.py``).

Statistics per GEMM, over a documented grid (``GRID``):

* tokens are split in two halves: the first half *calibrates* (OSC's lookup table by Algorithm 1
  with T = α·mean|X|, α = 5; static activation scales), the second half is *held out*: every
  hit rate and every numerical error is measured on it;
* OSC: live table entries K' per G, clustering density (OSC §2.2; groups without an afflicted
  token are left out of the mean), table hit rate and outlier coverage on held-out tokens;
* outlier channels (any |x| > 6) for MUXQ and LLM.int8();
* OPS: zero fraction of sign-magnitude INT16 high slices of X and W; for every (chunk, τ) the
  fraction of computation sets the early bird skips and the fraction of blocks × chunk skipped
  entirely (what an array that cannot drop single sets can drop, ``early_bird_blocks``): per
  square output tile of 16/32/64/128 outputs (``tiles``) and per row segment of 16/32/64/128
  outputs of one token (``rows``: a lockstep array of that many columns);
* errors: ‖Y − Y_fp32‖_F / ‖Y_fp32‖_F of each dataflow with real formats (``quant/reference``).

The LM head (N = 49152) is measured on its first ``LM_HEAD_COLUMNS`` output columns.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from accel_sim.errors import UserInputError
from accel_sim.quant import reference as ref
from accel_sim.quant.formats import mse_clip_scale
from accel_sim.report.io import atomic_write_text, read_csv_checked, read_json_file, sha256_file
from accel_sim.workload import stats as S
from accel_sim.workload import stats_ops as SO
from accel_sim.workload.early_bird_blocks import full_skip_fraction_of_sets as blocks
from accel_sim.workload.npio import load_npy

GRID = {
    "osc_alpha": 5.0,
    "osc_groups": [16, 32, 64],
    "outlier_threshold": 6.0,
    "ops_chunks": [16, 32, 64],
    "ops_taus": [-1, 0, 1, 4, 16],
    "ops_tiles": [16, 32, 64, 128],
    "ops_rows": [16, 32, 64, 128],
    "ops_error_chunk": 32,
    "ops_presets": ["zero", "hi_only"],
    "muxq_exps": [1, 2],
    "osc_bases": ["mxfp4", "nvfp4"],
}
LM_HEAD_COLUMNS = 8192
SAMPLE_TOKENS = 64
SAMPLE_ROWS = 256


def ops_statistics(X: np.ndarray, W: np.ndarray) -> dict[str, Any]:
    """Early-bird skip fractions over the (chunk, τ) grid; the partial sums come from one exact
    float64 matmul per chunk (``stats_ops.early_bird_partial_sums_ref``), which is faster than
    re-running the kernel once per τ and tile."""
    out = {}
    for chunk in GRID["ops_chunks"]:
        partial = np.abs(SO.early_bird_partial_sums_ref(X, W, chunk))
        for tau in GRID["ops_taus"]:
            skip = partial <= tau
            out[f"{chunk}:{tau:g}"] = {
                "sets": float(skip.mean()),
                "tiles": {str(t): blocks(skip, t, t) for t in GRID["ops_tiles"]},
                "rows": {str(c): blocks(skip, 1, c) for c in GRID["ops_rows"]},
            }
    return out


def x_statistics(X: np.ndarray) -> dict[str, Any]:
    """Statistics of X alone (shared by q/k/v, which read the same X)."""
    half = X.shape[0] // 2
    calib, held = X[:half], X[half:]
    T = S.osc_threshold(calib, GRID["osc_alpha"])
    out = SO.tensor_stats(X, GRID["osc_alpha"])
    tables, osc = {}, {"table_channels": {}, "hit_rate": {}, "coverage": {}}
    for G in GRID["osc_groups"]:
        table = S.osc_lookup_table(calib, G, T)
        tables[G] = table
        osc["table_channels"][str(G)] = int((table >= 0).sum())
        osc["hit_rate"][str(G)] = _nan_to_none(S.table_hit_rate(held, table, G, T))
        osc["coverage"][str(G)] = _nan_to_none(S.osc_branch_coverage(held, table, G, T))
    out["osc_table_channels"] = osc["table_channels"]
    out["osc_table_hit_rate"] = osc["hit_rate"]
    out["osc_outlier_coverage"] = osc["coverage"]
    out["_tables"] = tables
    return out


def _nan_to_none(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def dataflow_errors(X: np.ndarray, W: np.ndarray, tables: dict[int, np.ndarray],
                    kind: str) -> dict[str, float]:  # fmt: skip
    """Relative Frobenius error of every dataflow's Y on the held-out tokens."""
    half = X.shape[0] // 2
    calib, held = X[:half], X[half:]
    exact = ref.y_exact(held, W)
    err = {}

    def put(key: str, Y: np.ndarray) -> None:
        err[key] = float(ref.relative_error(Y, exact))

    put("fp16", ref.y_fp16(held, W))
    put("w8a8", ref.y_w8a8(held, W, per_token=True))
    put("w8a8_static", ref.y_w8a8(held, W, per_token=False,
                                  act_scale=float(np.abs(calib).max()) / 127))  # fmt: skip
    put("int8_per_tensor", ref.y_w8a8(held, W, per_token=False))  # naive: absmax of this X
    put("int16", ref.y_int16(held, W))
    # PrefixQuant: the prefixed (sink) token 0 is excluded from calibration; MSE-clipped scale
    put("w4a4_static", ref.y_w4a4_static(held, W, act_scale=float(mse_clip_scale(calib[1:], 4))))
    put("llm_int8", ref.y_llm_int8(held, W, GRID["outlier_threshold"]))
    for exp in GRID["muxq_exps"]:
        put(f"muxq:exp={exp}", ref.y_muxq(held, W, exp=exp))
    for G, table in tables.items():
        # stats kernels give global channel indices; the reference wants them local to the group
        local = np.where(table >= 0, table - np.arange(table.size) * G, -1)
        for base in GRID["osc_bases"]:
            put(f"osc:G={G},base={base}", ref.y_osc(held, W, local, G, base))
    put("osc:mxfp8", ref.y_mx(held, W, "mxfp8"))
    chunk = GRID["ops_error_chunk"]
    for tau in GRID["ops_taus"]:
        for preset in GRID["ops_presets"]:
            Y, _ = ref.y_ops(held, W, chunk=chunk, tau=tau, preset=preset)
            put(f"ops:chunk={chunk},tau={tau:g},preset={preset}", Y)
    return err


def compact_trace(full_dir: str | Path, out_dir: str | Path, progress: bool = True) -> Path:
    """Build the compact trace of the full trace in ``full_dir`` into ``out_dir``."""
    full, out = Path(full_dir), Path(out_dir)
    df = read_csv_checked(full / "gemms.csv", ["index", "layer", "name", "kind", "M", "K", "N"])
    manifest = read_json_file(full / "manifest.json", "file (not a full trace?)")
    if not isinstance(manifest, dict):
        raise UserInputError(str(full / "manifest.json"), "expected a JSON object at the top level")
    x_cache: dict[str, dict] = {}
    per_gemm, samples = [], {}
    sample_at = _sample_indices(df)
    rows = df.itertuples(index=False)
    if progress:
        from tqdm import tqdm

        rows = tqdm(list(rows), desc="compacting", unit="gemm")
    for row in rows:
        X = load_npy(full / f"X_{row.index}.npy").astype(np.float32)
        W = load_npy(full / f"W_{row.index}.npy").astype(np.float32)
        if not (np.isfinite(X).all() and np.isfinite(W).all()):
            raise UserInputError(str(full / f"X_{row.index}.npy"), "NaN or Inf in the trace")
        if row.kind == "lm_head_in":
            W = W[:LM_HEAD_COLUMNS]
        key = hashlib.sha1(X.tobytes()).hexdigest()
        if key not in x_cache:
            x_cache[key] = x_statistics(X)
        xs = x_cache[key]
        entry = {k: v for k, v in xs.items() if not k.startswith("_")}
        entry["int16_hi_zero_fraction_w"] = SO.int16_hi_zero_fraction(W)
        entry["ops_skip"] = ops_statistics(X, W)
        entry["errors"] = dataflow_errors(X, W, xs["_tables"], row.kind)
        per_gemm.append(entry)
        if row.index in sample_at:
            samples[f"X_{row.index}"] = X[:SAMPLE_TOKENS].astype(np.float16)
            samples[f"W_{row.index}"] = W[:SAMPLE_ROWS].astype(np.float16)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    df.to_csv(tmp / "gemms.csv", index=False, lineterminator="\n")
    atomic_write_text(tmp / "stats.json", json.dumps({"grid": GRID, "gemms": per_gemm}) + "\n")
    np.savez_compressed(tmp / "samples.npz", **samples)
    manifest["compact"] = {
        "grid": GRID,
        "lm_head_columns": LM_HEAD_COLUMNS,
        "calibration": "first half of the tokens; errors and hit rates on the second half",
        "samples": sorted(samples),
        "command": f"accel-sim trace compact {full} --out {out}",
        "files": {
            name: sha256_file(tmp / name) for name in ("gemms.csv", "stats.json", "samples.npz")
        },  # fmt: skip
    }
    atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _sample_indices(df: pd.DataFrame) -> set[int]:
    """One GEMM per kind from layer 0, plus the down-projection with the largest outlier."""
    picks = set()
    for kind in ("attn_in", "o_in", "up_gate_in", "down_in"):
        rows = df[(df["kind"] == kind) & (df["layer"] == 0)]
        if len(rows):
            picks.add(int(rows["index"].iloc[0]))
    return picks
