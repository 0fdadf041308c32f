"""``accel-sim model``: parse its arguments, validate every input, run, print, write ``--out``.

Every check that can fail on user input (``--out``, the model, the sizes, the dataflows and
knobs) runs before the first GEMM is simulated, so a mistake costs no time and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING

from accel_sim.errors import UserInputError
from accel_sim.knobs import parse_knobs
from accel_sim.model_run.defaults import DEFAULT_ARCH, DEFAULT_STATS
from accel_sim.workers import MAX_JOBS, default_workers, parse_jobs
from accel_sim.workload.gemm import MAX_DIM

if TYPE_CHECKING:
    from accel_sim.workload.models import ModelSpec

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: int() would also take "+16", " 16" or "١٦"
#: lower()'s argument names as this command's flags (for size errors)
_FLAGS = {"extra_prefix_tokens": "--prefix-tokens", "kv_len": "--kv-len", "tokens": "--tokens",
          "batch": "--batch"}  # fmt: skip


def _count(low: int):
    """An argparse ``type``: a plain ASCII integer in ``low .. MAX_DIM`` (2**24)."""

    def parse(text: str) -> int:
        if not _DIGITS.fullmatch(text) or not low <= int(text) <= MAX_DIM:
            raise argparse.ArgumentTypeError(f"expected an integer in {low} .. {MAX_DIM} "
                                             f"(2**24), got {text[:40]!r}")  # fmt: skip
        return int(text)

    parse.__name__ = "integer"  # argparse names the type in its message
    return parse


def _model_spec(args: argparse.Namespace) -> ModelSpec:
    """The model of a command line: a shipped name, a model YAML or a Hugging Face config."""
    from accel_sim.workload.hf_config import load_hf_config
    from accel_sim.workload.models import load_model

    if args.hf_config is not None and args.name is not None:
        raise UserInputError("model", f"give a model NAME ({args.name!r}) or --hf-config "
                             f"({args.hf_config!r}), not both")  # fmt: skip
    if args.hf_config is not None:
        return load_hf_config(args.hf_config)
    if args.name is None:
        raise UserInputError("model", "give a model NAME (see `accel-sim model --list`), a "
                             "model YAML or --hf-config config.json")  # fmt: skip
    return load_model(args.name)


def _check_sizes(args: argparse.Namespace, spec: ModelSpec) -> None:
    """Products of the size flags within 2**24 (``--tokens × --batch`` ...), naming the flags."""
    from accel_sim.workload.models import workload_size_problem

    problem = workload_size_problem(spec, args.phase, args.tokens, args.batch, args.kv_len,
                                    args.prefix_tokens)  # fmt: skip
    if problem is not None:
        flags = [re.sub(rf"\b({'|'.join(_FLAGS)})\b", lambda m: _FLAGS[m.group(1)], text)
                 for text in problem]  # fmt: skip
        raise UserInputError(*flags)


def _print_models() -> None:
    from accel_sim.workload.models import list_models, load_model

    for name in list_models():
        print(f"{name:<18} {' '.join(load_model(name).source.split())}")


def run(args: argparse.Namespace) -> int:
    """Run ``accel-sim model`` from parsed arguments; returns the exit code (0)."""
    from accel_sim.model_run.report import format_report
    from accel_sim.model_run.simulate import simulate_model
    from accel_sim.report.io import check_output_path, write_table

    if args.list:
        _print_models()
        return 0
    if args.out is not None:  # first: a bad --out must not cost a whole simulation
        check_output_path(args.out)
    spec = _model_spec(args)
    if args.tokens is None:
        raise UserInputError("--tokens", "required: prompt length (prefill) or number of "
                             "generated tokens (decode)")  # fmt: skip
    _check_sizes(args, spec)
    result = simulate_model(
        args.arch, spec, args.phase, args.tokens, args.batch, args.kv_len,
        args.dataflow or ["w8a8"], parse_knobs(args.knob),
        None if args.stats_from == "none" else args.stats_from,
        args.prefix_tokens, args.engine, progress=sys.stderr.isatty(), logits=args.logits,
        jobs=default_workers() if args.jobs is None else args.jobs,
    )  # fmt: skip
    if args.out is not None:
        write_table(result.table, args.out)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_report(result))
        if args.out is not None:
            print(f"\nwrote {args.out}")
    return 0


def add_parser(subparsers) -> None:
    """Register ``accel-sim model [NAME | --hf-config FILE] ...`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "model", help="simulate a whole model (prefill or decode)",
        description="Lower one model (a shipped model file from workloads/models/, your own "
        "model YAML, or a Hugging Face config.json) to its GEMMs and vector work for one phase, "
        "simulate every row under each dataflow and print totals per dataflow and the share of "
        "cycles per layer kind. Time and energy with SI prefixes (µs, ms, s; µJ, mJ, J), "
        "rates in tokens/s.",
    )  # fmt: skip
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="shipped model name (list them with --list; the files are in "
                        "workloads/models/) or the path of a model YAML")  # fmt: skip
    p.add_argument("--hf-config", metavar="FILE",
                   help="a Hugging Face config.json (or the folder holding it) instead of NAME: "
                        "model_type llama, qwen2, qwen3, qwen3_moe, mixtral, gpt2, opt or "
                        "bert")  # fmt: skip
    p.add_argument("--list", action="store_true",
                   help="list the shipped models with their sources and exit")  # fmt: skip
    p.add_argument("--phase", choices=("prefill", "decode"), default="prefill",
                   help="prefill: one pass over the prompt; decode: --tokens one-token steps "
                        "(default: prefill)")  # fmt: skip
    p.add_argument("--tokens", type=_count(1), metavar="T",
                   help="prompt length in tokens (prefill) or generated tokens (decode); "
                        "required")  # fmt: skip
    p.add_argument("--batch", type=_count(1), default=1, metavar="B",
                   help="sequences processed together (default: 1)")  # fmt: skip
    p.add_argument("--kv-len", type=_count(0), default=0, metavar="TOKENS",
                   help="tokens already in the KV cache before this phase "
                        "(default: 0)")  # fmt: skip
    p.add_argument("--prefix-tokens", type=_count(0), default=0, metavar="TOKENS",
                   help="PrefixQuant's prefixed outlier tokens already in the KV cache; they "
                        "lengthen attention only (default: 0)")  # fmt: skip
    p.add_argument("--dataflow", action="extend", nargs="+", metavar="NAME",
                   help="dataflow names (see `accel-sim dataflows`) or 'all'; repeatable "
                        "(default: w8a8)")  # fmt: skip
    p.add_argument("--knob", action="append", metavar="DATAFLOW.NAME=VALUE",
                   help="set a dataflow knob of the linear GEMMs, e.g. osc.G=64; "
                        "repeatable")  # fmt: skip
    p.add_argument("--arch", default=DEFAULT_ARCH,
                   help="shipped architecture name (see `accel-sim arch list`) or a YAML file "
                        f"(default: {DEFAULT_ARCH})")  # fmt: skip
    p.add_argument("--stats-from", default=DEFAULT_STATS, metavar="TRACE",
                   help="trace whose statistics (by layer kind) drive OSC, MUXQ, LLM.int8() "
                        f"and OPS: shipped name or directory, or 'none' (default: "
                        f"{DEFAULT_STATS})")  # fmt: skip
    p.add_argument("--logits", choices=("all", "last"), default="all",
                   help="prefill LM head over all prompt tokens or only the last one "
                        "(default: all)")  # fmt: skip
    p.add_argument("--engine", choices=("des", "twin"), default="des",
                   help="des: the discrete-event simulation; twin: its closed-form model, "
                        "faster (default: des)")  # fmt: skip
    p.add_argument("--jobs", type=parse_jobs, default=None, metavar="N",
                   help=f"forked processes simulating the distinct GEMM rows, 1..{MAX_JOBS}; the "
                        "result is the same for any N (default: $ACCEL_SIM_WORKERS, else the "
                        "usable CPUs, at most 8)")  # fmt: skip
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (totals, by_kind, rows) instead of the "
                        "report")  # fmt: skip
    p.add_argument("--out", metavar="FILE",
                   help="also write the per-row table to FILE.csv, .parquet or .json "
                        "(checked before any work)")  # fmt: skip
    p.set_defaults(func=run)
