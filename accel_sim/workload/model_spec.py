"""Model files: the pydantic schema of ``workloads/models/<name>.yaml`` (a published model's
shape plus its ``source:`` citation), and loading one by name or path. Lowering a model to GEMMs
and vector work is ``models.py``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from accel_sim import resources
from accel_sim.errors import UserInputError, user_error_from_validation
from accel_sim.workload.gemm import MAX_DIM
from accel_sim.yaml_io import read_yaml

#: Folder holding the shipped model files (see :mod:`accel_sim.resources`).
MODELS_DIR = resources.data_dir("model")

PHASES = ("prefill", "decode")
VECTOR_KINDS = ("norm", "softmax", "activation", "rotary", "residual", "router_topk")
ATTENTION_KINDS = ("attn_qk", "attn_pv")

#: Flops per element of each vector op (assumptions, see VectorWork), keyed by norm / ffn_type.
FLOPS_PER_ELEMENT = {"rmsnorm": 4.0, "layernorm": 7.0, "softmax": 5.0, "rotary": 3.0}
FLOPS_PER_ELEMENT |= {"residual": 1.0, "gated_silu": 4.0, "gelu": 9.0, "relu": 1.0}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


#: A size of a model file: an integer in ``1 .. MAX_DIM`` (2**24 = 16,777,216, the largest GEMM
#: dimension and count, see :data:`accel_sim.workload.gemm.MAX_DIM`).
Size = Annotated[int, Field(gt=0, le=MAX_DIM)]
_LIMIT = f"1 .. {MAX_DIM:,} (2**24)"


def _size(description: str, default=...):
    return Field(default, description=f"{description}; an integer in {_LIMIT}")


class MoESpec(_Strict):
    """Routed mixture-of-experts MLP (every layer; no shared expert)."""

    experts: Size = _size("routed experts per layer; layers × experts ≤ 2**24 too")
    active_experts: Size = _size("experts per token (top-k)")
    expert_ffn: Size = _size("intermediate size of one expert")


class ModelSpec(_Strict):
    """Shape of one transformer, as published in its config.json.

    Every size is an integer in ``1 .. 2**24`` (:data:`~accel_sim.workload.gemm.MAX_DIM`), and so
    is every product of sizes that becomes one GEMM dimension or count: ``heads × head_dim`` (the
    N of q_proj), ``layers × heads`` (the count of the attention matmuls at batch 1) and
    ``layers × moe.experts``. Products with the run's tokens and batch are checked by
    :func:`workload_size_problem`.
    """

    source: str = Field(min_length=1, description="citation: config.json URL and/or paper")
    name: str = Field(min_length=1)
    family: Literal["decoder", "encoder"]
    layers: Size = _size("transformer blocks; layers × heads ≤ 2**24 too")
    hidden: Size = _size("hidden size (model width)")
    ffn: Size = _size("dense MLP intermediate size")
    heads: Size = _size("query heads; heads × head_dim ≤ 2**24 too")
    kv_heads: Size = _size("key/value heads (divides heads)")
    head_dim: Size = _size("channels per head")
    vocab: Size = _size("vocabulary size (the N of the LM head)")
    ffn_type: Literal["gated_silu", "gelu", "relu"]
    norm: Literal["rmsnorm", "layernorm"]
    positional: Literal["rotary", "learned"]
    tied_lm_head: bool
    moe: MoESpec | None = None
    max_positions: Size | None = _size("rows of a learned position table", None)
    qk_norm: bool = Field(False, description="RMSNorm on every q and k head (Qwen3)")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads: {self.kv_heads} does not divide heads={self.heads}")
        if self.positional == "learned" and self.max_positions is None:
            raise ValueError("max_positions: required when positional is learned")
        if self.moe is not None and self.moe.active_experts > self.moe.experts:
            raise ValueError("moe.active_experts: must not exceed moe.experts")
        if self.positional == "rotary" and self.head_dim % 2:
            raise ValueError("head_dim: rotary embeddings need an even head_dim")
        products = [("heads", "heads × head_dim", self.heads * self.head_dim, "the N of q_proj"),
                    ("layers", "layers × heads", self.layers * self.heads,
                     "the count of the attention matmuls at batch 1")]  # fmt: skip
        if self.moe is not None:
            products.append(("moe.experts", "layers × moe.experts", self.layers * self.moe.experts,
                             "the count of the expert GEMMs"))  # fmt: skip
        for key, what, value, meaning in products:
            if value > MAX_DIM:
                raise ValueError(f"{key}: {what} = {value} exceeds the limit {MAX_DIM} ({meaning})")
        return self


def list_models() -> list[str]:
    """Names of the shipped models (file stems in :data:`MODELS_DIR`)."""
    return resources.list_names("model")


def load_model(name_or_path: str | Path) -> ModelSpec:
    """Load a shipped model by name (``qwen3-8b``) or any model YAML by path.

    A Hugging Face ``config.json`` is read by :func:`accel_sim.workload.hf_config.load_hf_config`
    (``accel-sim model --hf-config``), not here.
    """
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith((".yaml", ".yml", ".json")) or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise UserInputError(text, "model file not found")
        if path.suffix == ".json":
            raise UserInputError(text, "a JSON file is not a model YAML; for a Hugging Face "
                                 "config.json use `accel-sim model --hf-config FILE`")  # fmt: skip
    else:
        path = resources.resolve("model", text)  # a shipped name; unknown: one line naming them
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise UserInputError(str(path), "expected a mapping of model fields at the top level")
    return parse_model(data, str(path))


def _expected_keys(loc: Sequence[str]) -> list[str]:
    """The keys allowed at ``loc`` of a model file (for the unknown-key message)."""
    return list((MoESpec if list(loc[:1]) == ["moe"] else ModelSpec).model_fields)


def parse_model(data: dict, source: str = "model") -> ModelSpec:
    """Validate a model mapping; any problem becomes a :class:`UserInputError` naming the key."""
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as err:
        raise user_error_from_validation(err, source, expected_keys=_expected_keys) from None
