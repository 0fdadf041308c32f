"""PrefixQuant Fig. 6 on an RTX-3090-like GPU: the set-up shared by the table and its
calibration, and the calibration itself — efficiency {matmul, dram} fitted on the paper's FP16
rows only (the table's module docstring, ``prefixquant_fig6.py``, says how and why)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from accel_sim.arch.load import arch_from_dict, load_arch, resolve_arch_path
from accel_sim.model_run import simulate_model
from accel_sim.yaml_io import load_yaml_text

ARCH = "rtx3090_like"
MODEL = "llama-2-7b"
PREFILL_TOKENS = 2048
DECODE_TOKENS = 256
PREFIX_TOKENS = 3  # PrefixQuant Table 5: Llama-2-7B ".", "\n", [BOS]
FLOWS = {"FP16": "fp16", "W4A4 (PrefixQuant-O2)": "w4a4_static"}
#: PrefixQuant Fig. 6 (RTX 3090): prefill ms, decode tokens/s.
PAPER = {"FP16": {"prefill": 489.0, "decode": 43.0},
         "W4A4 (PrefixQuant-O2)": {"prefill": 178.0, "decode": 93.0}}  # fmt: skip
PAPER_SPEEDUP = {"prefill": 2.74, "decode": 2.16}
UNIT = {"prefill": "ms", "decode": "tokens/s"}
#: Calibration: relative tolerance on FP16 cycles, evaluations per 1-D solve, rounds per engine,
#: largest slowdown (1 / factor) searched.
TOLERANCE = 5e-3
MAX_EVALS = 12
MAX_ROUNDS = 4
MAX_SLOWDOWN = 20.0
#: Share of the cube's per-precision rate a precision's GA102 tensor peak is ([GA102] whitepaper,
#: dense): FP16 with FP32 accumulate 71 of the cube's 142 TFLOPS (GeForce half rate), INT8 284
#: and INT4 568 TOPS = the cube's rates 2 and 4 in full. The fitted ``matmul`` (FP16) factor is
#: this share × a kernel-overhead fraction; the same fraction of each integer peak gives
#: ``matmul_int8`` / ``matmul_int4`` (module docstring).
PEAK_SHARE = {"fp16": 0.5, "int8": 1.0, "int4": 1.0}


def derived_matmul(matmul: float, digits: int = 3) -> dict[str, float]:
    """``matmul_int8`` / ``matmul_int4`` from the FP16 ``matmul`` factor: the same
    kernel-overhead fraction (matmul / PEAK_SHARE["fp16"]) of each integer peak (capped at 1)."""
    overhead = matmul / PEAK_SHARE["fp16"]
    return {f"matmul_{p}": round(min(1.0, overhead * PEAK_SHARE[p]), digits)
            for p in ("int8", "int4")}  # fmt: skip


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors fitted on the FP16 rows (module docstring)."""

    matmul: float  # unrounded DES solution
    dram: float
    target_cycles: dict[str, float]  # per phase
    achieved_cycles: dict[str, int]  # DES, with the rounded factors
    evaluations: tuple[tuple[str, str, float, float, int], ...] = field(repr=False)
    launch_us: float = 0.0  # cited in the YAML, not fitted
    vector: float = 1.0  # not fitted

    def factors(self, digits: int = 3) -> dict[str, float]:
        """The YAML ``efficiency`` map (fitted factors rounded; integer factors derived from the
        rounded ``matmul``; launch_us and vector as given)."""
        matmul = round(self.matmul, digits)
        return {"matmul": matmul, **derived_matmul(matmul, digits),
                "dram": round(self.dram, digits), "vector": self.vector,
                "launch_us": self.launch_us}  # fmt: skip

    def evaluation_count(self, engine: str, phase: str) -> int:
        return sum(1 for e in self.evaluations if e[0] == engine and e[1] == phase)


@lru_cache(maxsize=4)
def _arch_data(arch: str) -> tuple[str, str]:
    path = resolve_arch_path(arch)
    return str(path), path.read_text(encoding="utf-8")


def file_launch_us(arch: str) -> float:
    """The cited per-kernel launch cost of the file (``efficiency.launch_us``; 0 if absent)."""
    path, text = _arch_data(arch)
    return float((load_yaml_text(text, path).get("efficiency") or {}).get("launch_us", 0.0))


def candidate_arch(arch: str, matmul: float, dram: float):
    """``arch`` with efficiency {matmul, its derived integer factors, dram, vector 1, the file's
    launch_us}, validated like a file."""
    path, text = _arch_data(arch)
    data = load_yaml_text(text, path)
    data["efficiency"] = {"matmul": matmul, **derived_matmul(matmul, 6), "dram": dram,
                          "vector": 1.0, "launch_us": file_launch_us(arch)}  # fmt: skip
    return arch_from_dict(data, f"{path} (calibration candidate matmul {matmul}, dram {dram})")


#: w4a4_static without its online work (the model before this table modelled it), for the notes.
BARE_W4A4 = {"quantize": False, "hadamard": False, "quantize_lm_head": True}


def _run(arch, phase: str, flow: str, engine: str = "des", knobs: dict | None = None):
    prefix = PREFIX_TOKENS if flow == "w4a4_static" else 0
    knobs = {flow: knobs} if knobs else None
    if phase == "prefill":
        return simulate_model(arch, MODEL, "prefill", PREFILL_TOKENS, dataflows=(flow,),
                              stats_from=None, extra_prefix_tokens=prefix,
                              engine=engine, knobs=knobs)  # fmt: skip
    return simulate_model(arch, MODEL, "decode", DECODE_TOKENS, kv_len=PREFILL_TOKENS,
                          dataflows=(flow,), stats_from=None, extra_prefix_tokens=prefix,
                          engine=engine, knobs=knobs)  # fmt: skip


def target_cycles(clock_hz: float) -> dict[str, float]:
    """The paper's FP16 row in cycles: 489 ms prefill, 256 tokens at 43 tokens/s."""
    return {"prefill": PAPER["FP16"]["prefill"] * 1e-3 * clock_hz,
            "decode": DECODE_TOKENS / PAPER["FP16"]["decode"] * clock_hz}  # fmt: skip


def _solve(cycles_at: Callable[[float], int], target: float, start: float) -> float:
    """The factor e in [1/MAX_SLOWDOWN, 1] with ``cycles_at(e)`` within TOLERANCE of ``target``.

    ``cycles_at`` is non-increasing in e. Works in the slowdown x = 1/e, in which cycles grow
    about affinely while one resource binds: the first step is proportional (x·target/cycles),
    later ones secant through the last two points, replaced by bisection when they leave the
    bracket found so far. At most MAX_EVALS evaluations; the first is at ``start``.
    """
    lo, hi = 1.0, MAX_SLOWDOWN  # bracket on x: cycles(lo) ≤ target ≤ cycles(hi) once seen
    seen_lo = seen_hi = False
    prev: tuple[float, int] | None = None
    x = 1.0 / start
    for _ in range(MAX_EVALS):
        c = cycles_at(1.0 / x)
        if abs(c / target - 1) <= TOLERANCE:
            return 1.0 / x
        if c < target:
            lo, seen_lo = x, True
        else:
            hi, seen_hi = x, True
        if c > target and x == 1.0:
            raise ValueError(
                f"FP16 is slower than the paper even at factor 1 ({c:,} > {target:,.0f} "
                "cycles): the two-factor fit is impossible (a vector factor would be needed)"
            )
        if c < target and x == MAX_SLOWDOWN:
            raise ValueError(f"FP16 still faster than the paper at factor 1/{MAX_SLOWDOWN}")
        if prev is None or prev[1] == c:
            nxt = x * target / c
        else:
            nxt = x + (target - c) * (x - prev[0]) / (c - prev[1])
        if (seen_lo and seen_hi) and not lo < nxt < hi:
            nxt = (lo + hi) / 2
        prev, x = (x, c), min(max(nxt, 1.0), MAX_SLOWDOWN)
    raise ValueError(f"calibration did not converge in {MAX_EVALS} evaluations")


def _alternate(
    arch: str, engine: str, matmul: float, dram: float, log: list
) -> tuple[float, float]:
    """Alternate the decode (dram) and prefill (matmul) solves on ``engine`` until a round
    starts with decode already on target (module docstring)."""
    target = target_cycles(load_arch(arch).clock_hz)

    def cycles(phase: str, e_m: float, e_d: float) -> int:
        res = _run(candidate_arch(arch, e_m, e_d), phase, "fp16", engine)
        c = int(res.totals.iloc[0]["cycles"])
        log.append((engine, phase, e_m, e_d, c))
        return c

    for round_ in range(MAX_ROUNDS):
        before = len(log)
        dram = _solve(lambda e, m=matmul: cycles("decode", m, e), target["decode"], dram)
        if round_ > 0 and len(log) - before == 1:
            return matmul, dram  # decode on target where prefill just was: both hold
        matmul = _solve(lambda e, d=dram: cycles("prefill", e, d), target["prefill"], matmul)
    raise ValueError(f"calibration ({engine}) did not converge in {MAX_ROUNDS} rounds")


@lru_cache(maxsize=4)
def calibrate_rtx3090(arch: str = ARCH) -> Calibration:
    """Fit efficiency {matmul, dram} (vector 1) on the two FP16 rows (module docstring).

    Twin search from (1, 1), then DES search from the twin's answer, then one DES run per phase
    with the factors rounded to 3 decimals (the YAML's values).
    """
    log: list[tuple[str, str, float, float, int]] = []
    matmul, dram = _alternate(arch, "twin", 1.0, 1.0, log)
    matmul, dram = _alternate(arch, "des", matmul, dram, log)
    launch = file_launch_us(arch)
    calib = Calibration(matmul, dram, target_cycles(load_arch(arch).clock_hz), {}, (), launch)
    f = calib.factors()
    rounded = candidate_arch(arch, f["matmul"], f["dram"])
    achieved = {p: int(_run(rounded, p, "fp16").totals.iloc[0]["cycles"])
                for p in ("prefill", "decode")}  # fmt: skip
    return Calibration(matmul, dram, calib.target_cycles, achieved, tuple(log), launch)
