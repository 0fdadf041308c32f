"""A Hugging Face ``config.json`` read as a :class:`~accel_sim.workload.models.ModelSpec`.

``load_hf_config("path/to/config.json")`` (or the folder holding it) returns the same model
object a shipped model file gives, so ``accel-sim model --hf-config FILE`` lowers and simulates
exactly like ``accel-sim model NAME``. Supported ``model_type`` values and the keys read:

* ``llama``, ``qwen2``, ``qwen3`` (gated SiLU MLP, RMSNorm, rotary; Qwen3 adds q/k RMSNorm):
  ``num_hidden_layers``, ``hidden_size``, ``intermediate_size``, ``num_attention_heads``,
  ``num_key_value_heads`` (absent or null: as many as the query heads, HF's default, i.e. no
  GQA), ``head_dim`` (absent or null: ``hidden_size / num_attention_heads``; required for Qwen3,
  whose HF default is not derived), ``vocab_size``, ``tie_word_embeddings`` (default false).
* ``qwen3_moe``: the above plus ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``; ``mixtral``: plus ``num_local_experts``, ``num_experts_per_tok``
  (the expert size is ``intermediate_size``). Every layer must be MoE without a shared expert.
* ``gpt2``: ``n_layer``, ``n_embd``, ``n_head``, ``n_inner`` (absent or null: ``4·n_embd``),
  ``vocab_size``, ``n_positions``, ``activation_function``; LayerNorm, learned positions, tied
  LM head unless ``tie_word_embeddings`` is false.
* ``opt``: ``num_hidden_layers``, ``hidden_size``, ``ffn_dim``, ``num_attention_heads``,
  ``vocab_size``, ``max_position_embeddings``, ``activation_function``; ``word_embed_proj_dim``
  must equal ``hidden_size`` (OPT-350m's project_in/out GEMMs are not modelled).
* ``bert`` (an encoder: no LM head, no decode): ``num_hidden_layers``, ``hidden_size``,
  ``intermediate_size``, ``num_attention_heads``, ``vocab_size``, ``max_position_embeddings``,
  ``hidden_act``; absolute position embeddings only.

Every size must be a JSON integer in ``1 .. 2**24`` (:data:`~accel_sim.workload.gemm.MAX_DIM`).
Keys that do not change the GEMMs (dropouts, token ids, rope settings, dtypes) are ignored.
Settings that would change them but are not modelled (sliding-window attention, mixed dense and
MoE layers, projections of OPT-350m, relative position embeddings) are refused, never ignored.
The model is named after the folder holding ``config.json`` (``…/qwen3-8b/config.json`` →
``qwen3-8b``), or after the file's stem for any other file name. Every problem is one
:class:`~accel_sim.errors.UserInputError` naming the file and the key (or the line, for JSON
syntax).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from accel_sim.errors import UserInputError, user_error_from_validation
from accel_sim.workload.gemm import MAX_DIM
from accel_sim.workload.models import ModelSpec, parse_model

#: Largest config.json read, in bytes (real ones are a few KiB).
MAX_CONFIG_BYTES = 2**20
#: Deepest JSON nesting accepted (real configs nest 3 levels).
MAX_DEPTH = 32

Size = Annotated[int, Field(gt=0, le=MAX_DIM)]

#: Activation names of the non-gated MLPs → our ``ffn_type``.
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
               "gelu_fast": "gelu", "gelu_python": "gelu", "relu": "relu"}  # fmt: skip


class _HF(BaseModel):
    """Keys of one family; others in the file are ignored (they do not shape the GEMMs)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


def _heads(hidden: int, heads: int, kv_heads: int | None, head_dim: int | None,
           names: tuple[str, str]) -> tuple[int, int]:  # fmt: skip
    """(kv_heads, head_dim) with HF's defaults; ``names``: (hidden key, heads key)."""
    kv = heads if kv_heads is None else kv_heads
    if heads % kv:
        raise ValueError(f"num_key_value_heads: {kv} does not divide {names[1]}={heads}")
    if head_dim is None:
        if hidden % heads:
            raise ValueError(f"{names[0]}: {hidden} is not a multiple of {names[1]}={heads} "
                             "(and no head_dim is given)")  # fmt: skip
        head_dim = hidden // heads
    return kv, head_dim


def _activation(value: str, key: str) -> str:
    if value not in ACTIVATIONS:
        raise ValueError(f"{key}: {value!r} is not modelled; expected one of "
                         f"{', '.join(ACTIVATIONS)}")  # fmt: skip
    return ACTIVATIONS[value]


class _Llama(_HF):
    """``llama`` / ``qwen2`` / ``qwen3``: gated SiLU MLP, RMSNorm, rotary positions."""

    num_hidden_layers: Size
    hidden_size: Size
    intermediate_size: Size
    num_attention_heads: Size
    num_key_value_heads: Size | None = None
    head_dim: Size | None = None
    vocab_size: Size
    hidden_act: str = "silu"
    tie_word_embeddings: bool = False
    use_sliding_window: bool = False

    @model_validator(mode="after")
    def _check(self) -> _Llama:
        if self.hidden_act not in ("silu", "swish"):
            raise ValueError(f"hidden_act: {self.hidden_act!r} is not modelled; the gated MLP "
                             "is modelled with silu")  # fmt: skip
        if self.use_sliding_window:
            raise ValueError("use_sliding_window: sliding-window attention is not modelled")
        kv, head_dim = self.dims()
        if head_dim % 2:
            raise ValueError(f"head_dim: rotary embeddings need an even head_dim, got {head_dim}")
        return self

    def dims(self) -> tuple[int, int]:
        """(kv_heads, head_dim)."""
        return _heads(self.hidden_size, self.num_attention_heads, self.num_key_value_heads,
                      self.head_dim, ("hidden_size", "num_attention_heads"))  # fmt: skip

    def moe(self) -> dict[str, int] | None:
        """Our ``moe`` mapping, or ``None`` for a dense MLP."""
        return None

    def spec(self, qk_norm: bool) -> dict[str, Any]:
        kv, head_dim = self.dims()
        return dict(family="decoder", layers=self.num_hidden_layers, hidden=self.hidden_size,
                    ffn=self.intermediate_size, heads=self.num_attention_heads, kv_heads=kv,
                    head_dim=head_dim, vocab=self.vocab_size, ffn_type="gated_silu",
                    norm="rmsnorm", positional="rotary", tied_lm_head=self.tie_word_embeddings,
                    qk_norm=qk_norm, moe=self.moe())  # fmt: skip


class _Qwen3(_Llama):
    """``qwen3``: ``head_dim`` is required (HF's default, 128, is not derived from the sizes)."""

    head_dim: Size


class _Qwen3Moe(_Qwen3):
    """``qwen3_moe``: every layer a routed MoE (``decoder_sparse_step`` 1, no dense layers)."""

    num_experts: Size
    num_experts_per_tok: Size
    moe_intermediate_size: Size
    decoder_sparse_step: Size = 1
    mlp_only_layers: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_moe(self) -> _Qwen3Moe:
        if self.decoder_sparse_step != 1 or self.mlp_only_layers:
            key = "mlp_only_layers" if self.mlp_only_layers else "decoder_sparse_step"
            raise ValueError(f"{key}: mixed dense and MoE layers are not modelled")
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(f"num_experts_per_tok: {self.num_experts_per_tok} exceeds "
                             f"num_experts={self.num_experts}")  # fmt: skip
        return self

    def moe(self) -> dict[str, int] | None:
        return dict(experts=self.num_experts, active_experts=self.num_experts_per_tok,
                    expert_ffn=self.moe_intermediate_size)  # fmt: skip


class _Mixtral(_Llama):
    """``mixtral``: every layer a routed MoE whose experts have ``intermediate_size``."""

    num_local_experts: Size
    num_experts_per_tok: Size
    sliding_window: Size | None = None

    @model_validator(mode="after")
    def _check_moe(self) -> _Mixtral:
        if self.sliding_window is not None:
            raise ValueError("sliding_window: sliding-window attention is not modelled")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError(f"num_experts_per_tok: {self.num_experts_per_tok} exceeds "
                             f"num_local_experts={self.num_local_experts}")  # fmt: skip
        return self

    def moe(self) -> dict[str, int] | None:
        return dict(experts=self.num_local_experts, active_experts=self.num_experts_per_tok,
                    expert_ffn=self.intermediate_size)  # fmt: skip


class _GPT2(_HF):
    n_layer: Size
    n_embd: Size
    n_head: Size
    n_inner: Size | None = None
    vocab_size: Size
    n_positions: Size
    activation_function: str = "gelu_new"
    tie_word_embeddings: bool = True

    @model_validator(mode="after")
    def _check(self) -> _GPT2:
        _heads(self.n_embd, self.n_head, None, None, ("n_embd", "n_head"))
        _activation(self.activation_function, "activation_function")
        return self

    def spec(self) -> dict[str, Any]:
        return dict(family="decoder", layers=self.n_layer, hidden=self.n_embd,
                    ffn=self.n_inner or 4 * self.n_embd, heads=self.n_head, kv_heads=self.n_head,
                    head_dim=self.n_embd // self.n_head, vocab=self.vocab_size,
                    ffn_type=_activation(self.activation_function, "activation_function"),
                    norm="layernorm", positional="learned", max_positions=self.n_positions,
                    tied_lm_head=self.tie_word_embeddings)  # fmt: skip


class _OPT(_HF):
    num_hidden_layers: Size
    hidden_size: Size
    ffn_dim: Size
    num_attention_heads: Size
    vocab_size: Size
    max_position_embeddings: Size
    activation_function: str = "relu"
    word_embed_proj_dim: Size | None = None
    tie_word_embeddings: bool = True

    @model_validator(mode="after")
    def _check(self) -> _OPT:
        _heads(self.hidden_size, self.num_attention_heads, None, None,
               ("hidden_size", "num_attention_heads"))  # fmt: skip
        _activation(self.activation_function, "activation_function")
        proj = self.word_embed_proj_dim
        if proj is not None and proj != self.hidden_size:
            raise ValueError(f"word_embed_proj_dim: {proj} != hidden_size={self.hidden_size}; "
                             "the project_in/project_out GEMMs are not modelled")  # fmt: skip
        return self

    def spec(self) -> dict[str, Any]:
        heads = self.num_attention_heads
        return dict(family="decoder", layers=self.num_hidden_layers, hidden=self.hidden_size,
                    ffn=self.ffn_dim, heads=heads, kv_heads=heads,
                    head_dim=self.hidden_size // heads, vocab=self.vocab_size,
                    ffn_type=_activation(self.activation_function, "activation_function"),
                    norm="layernorm", positional="learned",
                    max_positions=self.max_position_embeddings,
                    tied_lm_head=self.tie_word_embeddings)  # fmt: skip


class _BERT(_HF):
    num_hidden_layers: Size
    hidden_size: Size
    intermediate_size: Size
    num_attention_heads: Size
    vocab_size: Size
    max_position_embeddings: Size
    hidden_act: str = "gelu"
    position_embedding_type: str = "absolute"
    tie_word_embeddings: bool = True

    @model_validator(mode="after")
    def _check(self) -> _BERT:
        _heads(self.hidden_size, self.num_attention_heads, None, None,
               ("hidden_size", "num_attention_heads"))  # fmt: skip
        _activation(self.hidden_act, "hidden_act")
        if self.position_embedding_type != "absolute":
            raise ValueError(f"position_embedding_type: {self.position_embedding_type!r} is "
                             "not modelled; expected 'absolute'")  # fmt: skip
        return self

    def spec(self) -> dict[str, Any]:
        heads = self.num_attention_heads
        return dict(family="encoder", layers=self.num_hidden_layers, hidden=self.hidden_size,
                    ffn=self.intermediate_size, heads=heads, kv_heads=heads,
                    head_dim=self.hidden_size // heads, vocab=self.vocab_size,
                    ffn_type=_activation(self.hidden_act, "hidden_act"), norm="layernorm",
                    positional="learned", max_positions=self.max_position_embeddings,
                    tied_lm_head=self.tie_word_embeddings)  # fmt: skip


#: ``model_type`` → (its keys, builder of our model mapping).
FAMILIES: dict[str, tuple[type[_HF], Callable[[Any], dict[str, Any]]]] = {
    "llama": (_Llama, lambda c: c.spec(qk_norm=False)),
    "qwen2": (_Llama, lambda c: c.spec(qk_norm=False)),
    "qwen3": (_Qwen3, lambda c: c.spec(qk_norm=True)),
    "qwen3_moe": (_Qwen3Moe, lambda c: c.spec(qk_norm=True)),
    "mixtral": (_Mixtral, lambda c: c.spec(qk_norm=False)),
    "gpt2": (_GPT2, lambda c: c.spec()),
    "opt": (_OPT, lambda c: c.spec()),
    "bert": (_BERT, lambda c: c.spec()),
}


def _depth(value: Any, limit: int) -> bool:
    """True when ``value`` nests no deeper than ``limit`` lists/dicts."""
    if limit < 0:
        return False
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return all(_depth(v, limit - 1) for v in items)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


class _Duplicate(Exception):
    """A key given twice in one JSON object (``json.loads`` would keep the last silently)."""


def read_hf_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """(the config file, its JSON object); a folder means its ``config.json``."""
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "config.json"
    if not file.is_file():
        raise UserInputError(str(file), "config file not found")
    try:
        size = file.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise UserInputError(str(file), f"{size} bytes; a config.json is limited to "
                                 f"{MAX_CONFIG_BYTES}")  # fmt: skip
        text = file.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserInputError(str(file), f"cannot read: {err.__class__.__name__}") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise UserInputError(f"{file}:{err.lineno}", f"not valid JSON: {err.msg} "
                             f"(column {err.colno})") from None  # fmt: skip
    except _Duplicate as dup:
        raise UserInputError(str(file), "key given twice", str(dup)) from None
    except RecursionError:
        data = None  # refused just below
    if data is None or not _depth(data, MAX_DEPTH):
        raise UserInputError(str(file), f"JSON nested deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict):
        raise UserInputError(str(file), f"expected a JSON object, got a {type(data).__name__}")
    return file, data


def hf_config_spec(data: dict[str, Any], source: str, name: str) -> ModelSpec:
    """Our model spec from a parsed ``config.json`` (``source``: the file, for messages)."""
    model_type = data.get("model_type")
    if model_type not in FAMILIES:
        archs = data.get("architectures")
        known = ", ".join(sorted(FAMILIES))
        what = "required key is missing" if model_type is None else \
            f"unknown architecture {model_type!r}"  # fmt: skip
        raise UserInputError(source, f"{what} (architectures: {archs!r}); supported model_type: "
                             f"{known}", "model_type")  # fmt: skip
    schema, build = FAMILIES[model_type]
    try:
        config = schema.model_validate(data)
    except ValidationError as err:
        raise user_error_from_validation(err, source) from None
    cite = data.get("_source")
    citation = f"{source} (Hugging Face config.json" + (f" of {cite})" if isinstance(cite, str)
                                                        else ")")  # fmt: skip
    return parse_model({"source": citation, "name": name, **build(config)}, source)


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (or its folder) as a model spec; module docstring."""
    file, data = read_hf_config(path)
    if name is None:
        name = file.stem if file.name != "config.json" else file.resolve().parent.name
    return hf_config_spec(data, str(file), name or "hf-model")
