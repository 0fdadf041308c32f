"""Model-level workloads: a transformer config lowered to GEMMs and vector work.

A model file (``workloads/models/<name>.yaml``) holds the shape of one published model plus a
``source:`` citation. :func:`lower` turns it into a :class:`Workload` for one phase:

* **prefill** of ``tokens`` tokens per sequence: linear layers have ``M = tokens·batch``;
  attention has ``T_q = tokens``, ``T_kv = kv_len + tokens + extra_prefix_tokens`` (``kv_len`` > 0
  is a chunked prefill continuing a cache).
* **decode** of ``tokens`` successive one-token steps: linear layers have ``M = batch`` (``count``
  × steps); step ``i`` (0-based) has ``T_q = 1``, ``T_kv = kv_len + i + 1 + extra_prefix_tokens``
  and its own attention rows.

Modelling assumptions:

* ``count`` = identical instances (layers × experts × steps; heads × batch × layers for
  attention, below), ``layer = -1``; ``expand_layers=True`` emits one row per layer instead.
* Llama-style names for every family (``layers.*.self_attn.q_proj``, ``layers.*.mlp.up_proj``);
  GPT-2's fused ``c_attn`` becomes q/k/v GEMMs. Biases, norm weights and embedding lookups are
  not GEMMs.
* Attention is per query head and per sequence: QKᵀ is ``T_q × head_dim × T_kv`` and PV is
  ``T_q × T_kv × head_dim``, ``count = heads × batch × layers``, except in decode with
  grouped-query attention, where the ``group = heads / kv_heads`` query heads sharing a K/V
  head are one matmul with their rows stacked (``M = group``, ``count = kv_heads × batch ×
  layers``: the same MACs), as GQA decode kernels compute them, so a step reads each K/V head
  once; prefill keeps one matmul per query head, as FlashAttention runs it. **Causal
  prefill is counted as full** (no saving from the mask), as a dense accelerator kernel computes
  the masked blocks anyway; the true causal work is about half for ``kv_len = 0``.
* MoE: ``routed = M · active_experts`` token-expert pairs are spread evenly over
  ``used = min(experts, routed)`` experts, each getting ``ceil(routed / used)`` tokens. With
  ``routed ≥ experts`` this is the brief's average ``ceil(M·active/experts)`` per expert; in small
  decode batches only ``routed`` experts (and their weights) are touched. The router is a
  ``M × hidden × experts`` GEMM (kind ``up_gate_in``, it reads the same normalised input).
* Decoders end in an LM head over every token (``logits="all"``, the ``2·params·tokens`` rule)
  or only the last token of each sequence (``logits="last"``, what serving needs). Encoders have
  no LM head (pooler not modelled) and no decode phase. Sampling is not modelled.
* ``extra_prefix_tokens`` (PrefixQuant's ``o`` prefixed outlier tokens, already in the KV cache)
  only lengthens ``T_kv``; they are not recomputed.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal

from accel_sim.errors import UserInputError
from accel_sim.workload.gemm import MAX_DIM, Gemm
from accel_sim.workload.model_spec import (  # noqa: F401 - the model API, imported from here too
    ATTENTION_KINDS,
    FLOPS_PER_ELEMENT,
    MODELS_DIR,
    PHASES,
    VECTOR_KINDS,
    ModelSpec,
    MoESpec,
    list_models,
    load_model,
    parse_model,
)


@dataclass(frozen=True)
class VectorWork:
    """Element-wise / reduction work outside the GEMMs, run on the vector unit.

    ``flops = elements × flops_per_element × count``. Per-element costs are modelling assumptions
    (a per-row reciprocal/rsqrt is amortised over the row and not counted):

    * ``norm``: RMSNorm 4 (square, accumulate, × rsqrt, × γ); LayerNorm 7 (accumulate mean,
      subtract, square, accumulate variance, × rsqrt, × γ, + β).
    * ``softmax``: 5 (max, subtract, exp, sum, divide); the 1/√d scale is folded into the exp.
    * ``activation``: SiLU·mul 4 (exp and reciprocal of the sigmoid, × x, × up); GELU 9 (tanh
      form: x³ 2, × 0.044715, + x, × √(2/π), tanh, + 1, × 0.5, × x); ReLU 1.
    * ``rotary``: 3 (x·cos + rotate_half(x)·sin) on every q and k element.
    * ``residual``: 1 (one add); also learned position add (1) and the MoE combine (2 per active
      expert: multiply by the routing weight, accumulate).
    * ``router_topk``: softmax over the experts (5) + top-k selection (⌈log2 k⌉ compares).
    """

    name: str
    kind: str
    elements: int
    flops_per_element: float
    count: int = 1

    def __post_init__(self) -> None:
        if self.kind not in VECTOR_KINDS:
            raise UserInputError(self.name, f"unknown kind {self.kind!r}; expected {VECTOR_KINDS}")
        for attr in ("elements", "count"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserInputError(self.name, f"must be a positive integer, got {value!r}", attr)
        if not self.flops_per_element >= 0:
            raise UserInputError(self.name, "must be >= 0", "flops_per_element")

    @property
    def flops(self) -> float:
        """Flops of all ``count`` instances."""
        return self.elements * self.flops_per_element * self.count


@dataclass(frozen=True)
class Workload:
    """One phase of one model, lowered (see the module docstring for the assumptions)."""

    model: str
    phase: str
    tokens: int
    batch: int
    kv_len: int
    extra_prefix_tokens: int
    gemms: tuple[Gemm, ...]
    vector_ops: tuple[VectorWork, ...]

    @property
    def weight_params(self) -> int:
        """Weight elements read by one forward pass: Σ K·N·count over non-attention GEMMs."""
        total = sum(g.K * g.N * g.count for g in self.gemms if g.kind not in ATTENTION_KINDS)
        return total // (self.tokens if self.phase == "decode" else 1)  # per decode step

    @property
    def gemm_macs(self) -> int:
        return sum(g.macs * g.count for g in self.gemms)

    @property
    def attention_macs(self) -> int:
        return sum(g.macs * g.count for g in self.gemms if g.kind in ATTENTION_KINDS)

    @property
    def vector_flops(self) -> float:
        return sum(v.flops for v in self.vector_ops)

    @property
    def flops(self) -> float:
        """2 flops per MAC plus the vector work."""
        return 2 * self.gemm_macs + self.vector_flops


def expert_load(moe: MoESpec, m: int) -> tuple[int, int]:
    """(experts that receive tokens, tokens per such expert) for ``m`` tokens; see module doc."""
    routed = m * moe.active_experts
    used = min(moe.experts, routed)
    return used, math.ceil(routed / used)


def attention_matmuls(spec: ModelSpec, phase: str) -> int:
    """Attention matmuls (each of QKᵀ and PV) per sequence, layer and pass: one per query head,
    or in decode one per key/value head, the query heads sharing it stacked as rows (GQA)."""
    return spec.kv_heads if phase == "decode" else spec.heads


def workload_size_problem(
    spec: ModelSpec,
    phase: str,
    tokens: int,
    batch: int = 1,
    kv_len: int = 0,
    extra_prefix_tokens: int = 0,
    *,
    expand_layers: bool = False,
) -> tuple[str, str] | None:
    """The first size of a :func:`lower` call beyond :data:`MAX_DIM` (2**24), or ``None``.

    Returns ``(arguments, message)``: ``arguments`` names the arguments at fault with ``lower``'s
    parameter names (``"tokens × batch"``), for the caller to name them as its user wrote them.
    Checked: each argument; ``tokens × batch`` (prefill: the M of every linear GEMM);
    ``kv_len + tokens + extra_prefix_tokens`` (the longest attention T_kv); the GEMM counts
    ``heads × batch × layers`` (attention; decode: ``kv_heads × batch × layers``) and
    ``layers × tokens`` (decode steps; MoE: × the experts used).
    """
    values = dict(tokens=tokens, batch=batch, kv_len=kv_len,
                  extra_prefix_tokens=extra_prefix_tokens)  # fmt: skip
    for key, value in values.items():
        if value > MAX_DIM:
            return key, f"{value} exceeds the limit {MAX_DIM} (2**24)"
    decode = phase == "decode"
    m = batch if decode else tokens * batch
    layers = 1 if expand_layers else spec.layers
    times = tokens if decode else 1
    used = expert_load(spec.moe, m)[0] if spec.moe is not None else 1
    t_kv = kv_len + tokens + extra_prefix_tokens
    instances = attention_matmuls(spec, phase)
    checks = [  # (arguments, value, what the value is if not just the arguments, meaning)
        ("tokens × batch", m, "", "the M of every linear GEMM"),
        ("kv_len + tokens + extra_prefix_tokens", t_kv, "", "the longest attention length T_kv"),
        ("batch", instances * batch * layers, f"{'key/value ' if decode else ''}heads "
         f"({instances}) × batch × layers ({layers})", "the count of the attention matmuls"),
        ("tokens", used * layers * times, f"{'experts used × ' if spec.moe else ''}layers "
         f"({layers}) × tokens", "the count of the linear GEMMs over the decode steps"),
    ]  # fmt: skip
    for arguments, value, what, meaning in checks:
        if value > MAX_DIM:
            value_is = f"{what} = {value}" if what else str(value)
            return arguments, f"{value_is} exceeds the limit {MAX_DIM} ({meaning})"
    return None


def _layer_rows(spec: ModelSpec, m: int) -> tuple[list[tuple], list[tuple]]:
    """Per-layer GEMMs (name, kind, M, K, N, count) and vector ops (name, kind, elems, f, count)."""
    h, q, kv = spec.hidden, spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    attn, fpe = "layers.*.self_attn.", FLOPS_PER_ELEMENT
    gemms = [
        (attn + "q_proj", "attn_in", m, h, q, 1),
        (attn + "k_proj", "attn_in", m, h, kv, 1),
        (attn + "v_proj", "attn_in", m, h, kv, 1),
        (attn + "o_proj", "o_in", m, q, h, 1),
    ]
    norm_f, act_f = fpe[spec.norm], fpe[spec.ffn_type]
    vec = [("layers.*.input_layernorm", "norm", m * h, norm_f, 1)]
    if spec.qk_norm:
        vec.append((attn + "qk_norm", "norm", m * (q + kv), fpe["rmsnorm"], 1))
    if spec.positional == "rotary":
        vec.append((attn + "rotary", "rotary", m * (q + kv), fpe["rotary"], 1))
    vec.append(("layers.*.post_attention_layernorm", "norm", m * h, norm_f, 1))
    rows, f, n, mlp = m, spec.ffn, 1, "layers.*.mlp."  # dense MLP
    if spec.moe is not None:
        moe, (n, rows) = spec.moe, expert_load(spec.moe, m)
        f, topk_f = moe.expert_ffn, fpe["softmax"] + math.ceil(math.log2(moe.active_experts))
        gemms.append((mlp + "gate", "up_gate_in", m, h, moe.experts, 1))
        vec.append((mlp + "router_topk", "router_topk", m * moe.experts, topk_f, 1))
        vec.append((mlp + "combine", "residual", m * h, 2.0 * moe.active_experts, 1))
        mlp += "experts.*."
    if spec.ffn_type == "gated_silu":
        gemms.append((mlp + "gate_proj", "up_gate_in", rows, h, f, n))
    gemms.append((mlp + "up_proj", "up_gate_in", rows, h, f, n))
    gemms.append((mlp + "down_proj", "down_in", rows, f, h, n))
    vec.append((mlp + "act", "activation", rows * f, act_f, n))
    vec.append(("layers.*.residual", "residual", m * h, fpe["residual"], 2))
    return gemms, vec


def _expand(rows, layers: int, times: int, expand: bool, make):
    """Per-layer rows → aggregated rows (count × layers × times) or one row per layer."""
    out = []
    for name, kind, *dims, count in rows:
        if not expand:
            out.append(make(name, kind, *dims, count=count * layers * times, layer=-1))
            continue
        for i in range(layers):
            label = name.replace("layers.*", f"layers.{i}", 1)
            out.append(make(label, kind, *dims, count=count * times, layer=i))
    return out


def _gemm(name, kind, m, k, n, *, count, layer):
    return Gemm(m, k, n, name=name, kind=kind, layer=layer, count=count)


def _vector(name, kind, elements, fpe, *, count, layer):
    return VectorWork(name=name, kind=kind, elements=elements, flops_per_element=fpe, count=count)


def lower(
    spec: ModelSpec,
    phase: Literal["prefill", "decode"],
    tokens: int,
    batch: int = 1,
    kv_len: int = 0,
    extra_prefix_tokens: int = 0,
    *,
    logits: Literal["all", "last"] = "all",
    expand_layers: bool = False,
) -> Workload:
    """Lower ``spec`` to the GEMMs and vector work of one phase (module docstring: assumptions).

    Args:
        phase: ``"prefill"`` or ``"decode"``.
        tokens: prompt length (prefill) or number of one-token decode steps (decode), ≥ 1.
        batch: sequences processed together.
        kv_len: tokens already in the KV cache before this phase.
        extra_prefix_tokens: PrefixQuant prefixed tokens in the cache (lengthen attention only).
        logits: LM head over ``"all"`` tokens of a prefill or only the ``"last"`` one.
        expand_layers: one row per layer (``layer`` set) instead of aggregated rows.
    """
    if phase not in PHASES:
        raise UserInputError("lower()", f"unknown phase {phase!r}; expected one of {PHASES}")
    ints = dict(tokens=tokens, batch=batch, kv_len=kv_len, extra_prefix_tokens=extra_prefix_tokens)
    for key, value in ints.items():
        low = 1 if key in ("tokens", "batch") else 0
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise UserInputError("lower()", f"must be an integer >= {low}, got {value!r}", key)
    # (numpy's integers are integers too)
    tokens, batch, kv_len, extra_prefix_tokens = (int(v) for v in ints.values())
    if logits not in ("all", "last"):
        raise UserInputError("lower()", f"expected 'all' or 'last', got {logits!r}", "logits")
    if spec.family == "encoder" and (phase == "decode" or kv_len):
        raise UserInputError(spec.name, "an encoder has no KV cache: use prefill with kv_len=0")
    problem = workload_size_problem(spec, phase, tokens, batch, kv_len, extra_prefix_tokens,
                                    expand_layers=expand_layers)  # fmt: skip
    if problem is not None:
        raise UserInputError("lower()", problem[1], problem[0])

    decode, fpe = phase == "decode", FLOPS_PER_ELEMENT
    m = batch if decode else tokens * batch
    times = tokens if decode else 1
    layer_g, layer_v = _layer_rows(spec, m)
    gemms = _expand(layer_g, spec.layers, times, expand_layers, _gemm)
    vecs = _expand(layer_v, spec.layers, times, expand_layers, _vector)

    # (T_q, T_kv) of each forward pass; decode step i sees i + 1 new tokens.
    passes = [(1, kv_len + i + 1) for i in range(tokens)] if decode else [(tokens, kv_len + tokens)]
    # decode with grouped-query attention: the query heads that share a key/value head are one
    # matmul (their rows stacked, M = group), so a step reads each K/V head once, as GQA decode
    # kernels do; prefill runs one matmul per query head (as FlashAttention does)
    matmuls = attention_matmuls(spec, phase)
    group, per, heads = spec.heads // matmuls, matmuls * batch, spec.heads * batch
    d, attn = spec.head_dim, "layers.*.self_attn."
    for t_q, t_kv in passes:
        t_kv += extra_prefix_tokens
        label = f"[kv{t_kv}]" if decode and tokens > 1 else ""
        att_g = [(attn + "qk" + label, "attn_qk", group * t_q, d, t_kv, per)]
        att_g.append((attn + "pv" + label, "attn_pv", group * t_q, t_kv, d, per))
        att_v = [(attn + "softmax" + label, "softmax", t_q * t_kv, fpe["softmax"], heads)]
        gemms += _expand(att_g, spec.layers, 1, expand_layers, _gemm)
        vecs += _expand(att_v, spec.layers, 1, expand_layers, _vector)

    h = spec.hidden
    if spec.positional == "learned":
        vecs.append(VectorWork("embed_positions.add", "residual", m * h, fpe["residual"], times))
    if spec.family == "decoder":
        vecs.append(VectorWork("norm", "norm", m * h, fpe[spec.norm], times))
        m_head = batch if logits == "last" else m
        gemms.append(Gemm(m_head, h, spec.vocab, name="lm_head", kind="lm_head_in", count=times))
    else:
        vecs.append(VectorWork("embeddings.layernorm", "norm", m * h, fpe[spec.norm], times))
    args = (spec.name, phase, tokens, batch, kv_len, extra_prefix_tokens)
    return Workload(*args, gemms=tuple(gemms), vector_ops=tuple(vecs))


def embedding_params(spec: ModelSpec) -> int:
    """Embedding-table elements that are not also a GEMM weight.

    The word table counts unless it is the (tied) LM head GEMM of a decoder; a learned position
    table adds ``max_positions × hidden``. BERT's 2-row token-type table is not modelled.
    """
    words = spec.vocab * spec.hidden if (spec.family == "encoder" or not spec.tied_lm_head) else 0
    positions = (spec.max_positions or 0) * spec.hidden if spec.positional == "learned" else 0
    return words + positions


def parameter_count(spec: ModelSpec, active: bool = False) -> int:
    """GEMM weights + embedding tables (biases and norm weights excluded).

    ``active=True`` counts only what one decode token touches (MoE: ``active_experts`` experts).
    """
    if active or spec.moe is None:
        work = lower(spec, "decode" if spec.family == "decoder" else "prefill", 1)
    else:  # enough tokens that every expert is used
        work = lower(spec, "prefill", math.ceil(spec.moe.experts / spec.moe.active_experts))
    return work.weight_params + embedding_params(spec)
