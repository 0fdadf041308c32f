"""Model files and their lowering to GEMMs (accel_sim/workload/models.py)."""

from __future__ import annotations

import math

import pytest
import yaml

from accel_sim.errors import UserInputError
from accel_sim.workload.models import (
    MODELS_DIR,
    ModelSpec,
    list_models,
    load_model,
    lower,
    parameter_count,
)

# Published parameter counts, independent of the lowering (model cards / papers / HF checkpoints).
PUBLISHED = {
    "llama-2-7b": 6.74e9,  # Llama 2 paper / HF checkpoint 6,738,415,616
    "qwen3-8b": 8.2e9,  # Qwen3-8B model card, incl. embeddings
    "qwen3-30b-a3b": 30.5e9,  # Qwen3-30B-A3B model card, total
    "gpt2-small": 124e6,  # HF checkpoint 124,439,808 (tied LM head; paper says 117M)
    "gpt2-medium": 355e6,  # HF checkpoint 354,823,168 (paper: 345M)
    "gpt2-large": 774e6,  # HF checkpoint 774,030,080 (paper: 762M)
    "gpt2-xl": 1.558e9,  # HF checkpoint 1,557,611,200 ("1.5B"; the GPT-2 paper says 1542M)
    "opt-6.7b": 6.7e9,  # OPT paper Table 1
    "bert-base": 110e6,  # BERT paper
    "smollm2-135m": 135e6,  # SmolLM2 model card
    "all-minilm-l6-v2": 22.7e6,  # sentence-transformers model card
}


def _spec(name: str) -> ModelSpec:
    return load_model(name)


def test_every_shipped_yaml_loads_and_is_cited():
    names = list_models()
    assert set(PUBLISHED) <= set(names)
    for name in names:
        spec = load_model(name)
        assert spec.name == name
        assert "http" in spec.source or "arXiv" in spec.source
        assert load_model(MODELS_DIR / f"{name}.yaml") == spec


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published(name):
    count = parameter_count(_spec(name))
    assert count == pytest.approx(PUBLISHED[name], rel=0.03)


def test_decode_weights_are_gemm_weights_plus_untied_embedding():
    spec = _spec("llama-2-7b")
    work = lower(spec, "decode", 1)
    dense = sum(g.K * g.N * g.count for g in work.gemms if g.kind not in ("attn_qk", "attn_pv"))
    assert work.weight_params == dense
    assert work.weight_params + spec.vocab * spec.hidden == pytest.approx(6.74e9, rel=0.01)


def test_qwen3_8b_non_embedding_and_moe_active_parameters():
    work = lower(_spec("qwen3-8b"), "decode", 1)
    head = sum(g.K * g.N * g.count for g in work.gemms if g.kind == "lm_head_in")
    assert work.weight_params - head == pytest.approx(6.95e9, rel=0.01)  # model card
    assert parameter_count(_spec("qwen3-30b-a3b"), active=True) == pytest.approx(3.3e9, rel=0.03)


def test_prefill_flops_are_two_params_tokens_plus_attention():
    spec, tokens, batch = _spec("llama-2-7b"), 64, 2
    work = lower(spec, "prefill", tokens, batch=batch)
    attention = 2 * 2 * spec.layers * spec.heads * batch * tokens * tokens * spec.head_dim
    gemm_flops = 2 * work.gemm_macs
    assert gemm_flops == 2 * work.weight_params * tokens * batch + attention
    assert 2 * work.attention_macs == attention
    approx = 2 * PUBLISHED["llama-2-7b"] * tokens * batch + attention
    assert gemm_flops == pytest.approx(approx, rel=0.03)  # embeddings do no matmul
    assert work.flops > gemm_flops  # vector work adds a little
    assert work.vector_flops < 0.01 * gemm_flops


def test_prefill_shapes_and_kinds():
    spec = _spec("qwen3-8b")
    work = lower(spec, "prefill", 128, batch=4)
    by_name = {g.name: g for g in work.gemms}
    q = by_name["layers.*.self_attn.q_proj"]
    assert (q.M, q.K, q.N, q.kind, q.count) == (512, 4096, 4096, "attn_in", 36)
    assert by_name["layers.*.self_attn.k_proj"].N == 8 * 128
    assert by_name["layers.*.self_attn.o_proj"].kind == "o_in"
    down = by_name["layers.*.mlp.down_proj"]
    assert (down.K, down.N, down.kind) == (12288, 4096, "down_in")
    assert by_name["lm_head"].kind == "lm_head_in" and by_name["lm_head"].M == 512
    qk, pv = by_name["layers.*.self_attn.qk"], by_name["layers.*.self_attn.pv"]
    # prefill: one matmul per query head (GQA's heads are not stacked, as in FlashAttention)
    assert (qk.M, qk.K, qk.N, qk.count) == (128, 128, 128, 32 * 4 * 36)
    assert (pv.M, pv.K, pv.N, pv.kind) == (128, 128, 128, "attn_pv")
    assert lower(spec, "prefill", 128, batch=4, logits="last").gemms[-1].M == 4
    kinds = {v.kind for v in work.vector_ops}
    assert kinds == {"norm", "rotary", "activation", "residual", "softmax"}


def test_decode_kv_len_and_prefix_tokens_extend_attention():
    spec = _spec("smollm2-135m")
    work = lower(spec, "decode", 1, batch=3, kv_len=100)
    qk = next(g for g in work.gemms if g.kind == "attn_qk")
    pv = next(g for g in work.gemms if g.kind == "attn_pv")
    group = spec.heads // spec.kv_heads  # 9 query heads over 3 key/value heads
    assert (group, spec.kv_heads) == (3, 3)
    assert (qk.M, qk.K, qk.N) == (group, 64, 101)
    assert (pv.M, pv.K, pv.N) == (group, 101, 64)
    assert qk.count == spec.kv_heads * 3 * spec.layers
    # the same MACs as one matmul per query head: heads × batch × layers rows of 1 × 64 × 101
    assert qk.M * qk.count == spec.heads * 3 * spec.layers
    assert all(g.M == 3 for g in work.gemms if not g.kind.startswith("attn_"))
    prefixed = lower(spec, "decode", 1, kv_len=100, extra_prefix_tokens=4)
    assert next(g for g in prefixed.gemms if g.kind == "attn_qk").N == 105
    pre = lower(spec, "prefill", 16, kv_len=8, extra_prefix_tokens=2)
    assert next(g for g in pre.gemms if g.kind == "attn_qk").N == 26


def test_decode_steps_grow_the_cache():
    work = lower(_spec("gpt2-small"), "decode", 3, kv_len=10)
    assert [g.N for g in work.gemms if g.kind == "attn_qk"] == [11, 12, 13]
    assert work.weight_params == lower(_spec("gpt2-small"), "decode", 1).weight_params
    q = next(g for g in work.gemms if g.name.endswith("q_proj"))
    assert q.count == 12 * 3


def test_moe_expert_routing():
    spec = _spec("qwen3-30b-a3b")
    decode = {g.name: g for g in lower(spec, "decode", 1).gemms}
    up = decode["layers.*.mlp.experts.*.up_proj"]
    assert (up.M, up.K, up.N, up.count) == (1, 2048, 768, 8 * 48)  # only 8 experts touched
    prefill = {g.name: g for g in lower(spec, "prefill", 1000).gemms}
    up = prefill["layers.*.mlp.experts.*.up_proj"]
    assert (up.M, up.count) == (math.ceil(1000 * 8 / 128), 128 * 48)
    router = prefill["layers.*.mlp.gate"]
    assert (router.M, router.K, router.N) == (1000, 2048, 128)


def test_expand_layers_matches_aggregated():
    spec = _spec("gpt2-small")
    flat = lower(spec, "prefill", 32)
    per_layer = lower(spec, "prefill", 32, expand_layers=True)
    assert per_layer.gemm_macs == flat.gemm_macs
    assert per_layer.vector_flops == flat.vector_flops
    assert {g.layer for g in per_layer.gemms} == set(range(12)) | {-1}
    assert any(g.name == "layers.11.mlp.down_proj" for g in per_layer.gemms)


def test_encoder_has_no_head_and_no_decode():
    spec = _spec("bert-base")
    work = lower(spec, "prefill", 128)
    assert not any(g.kind == "lm_head_in" for g in work.gemms)
    with pytest.raises(UserInputError):
        lower(spec, "decode", 1)


def test_bad_lower_arguments():
    spec = _spec("gpt2-small")
    with pytest.raises(UserInputError, match="phase"):
        lower(spec, "train", 1)
    with pytest.raises(UserInputError) as err:
        lower(spec, "prefill", 0)
    assert err.value.key == "tokens"


def _write(tmp_path, data):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_key_names_the_file_and_key(tmp_path):
    data = yaml.safe_load((MODELS_DIR / "qwen3-30b-a3b.yaml").read_text())
    path = _write(tmp_path, {**data, "hiden": 1})
    with pytest.raises(UserInputError) as err:
        load_model(path)
    assert err.value.key == "hiden" and err.value.source == str(path)
    path = _write(tmp_path, {**data, "moe": {**data["moe"], "shared": 1}})
    with pytest.raises(UserInputError) as err:
        load_model(path)
    assert err.value.key == "moe.shared"


def test_invalid_values_name_the_key(tmp_path):
    data = yaml.safe_load((MODELS_DIR / "llama-2-7b.yaml").read_text())
    for bad, key in [
        ({"layers": 0}, "layers"),
        ({"kv_heads": 5}, "kv_heads"),
        ({"layers": "32"}, "layers"),
    ]:
        with pytest.raises(UserInputError) as err:
            load_model(_write(tmp_path, {**data, **bad}))
        assert err.value.key == key
    missing = {k: v for k, v in data.items() if k != "vocab"}
    with pytest.raises(UserInputError) as err:
        load_model(_write(tmp_path, missing))
    assert err.value.key == "vocab"


def test_unknown_model_lists_known_names():
    with pytest.raises(UserInputError) as err:
        load_model("llama-9-1b")
    assert "qwen3-8b" in str(err.value) and "llama-9-1b" in str(err.value)


@pytest.mark.parametrize(
    ("bad", "key", "needle"),
    [
        ({"layers": 1_000_000_000}, "layers", "less than or equal to 16777216"),
        ({"vocab": 100_000_000_000}, "vocab", "less than or equal to 16777216"),
        ({"hidden": 2**24 + 1}, "hidden", "less than or equal to 16777216"),
        ({"heads": 4096, "kv_heads": 4096, "head_dim": 8192}, "heads", "heads × head_dim"),
        ({"layers": 2**20, "heads": 32}, "layers", "layers × heads"),
    ],
)
def test_sizes_are_bounded_by_2_to_the_24(tmp_path, bad, key, needle):
    data = yaml.safe_load((MODELS_DIR / "llama-2-7b.yaml").read_text())
    path = _write(tmp_path, {**data, **bad})
    with pytest.raises(UserInputError) as err:
        load_model(path)
    assert (err.value.source, err.value.key) == (str(path), key)
    assert needle in err.value.message and "16777216" in err.value.message


def test_moe_layers_times_experts_bounded(tmp_path):
    data = yaml.safe_load((MODELS_DIR / "qwen3-30b-a3b.yaml").read_text())
    path = _write(tmp_path, {**data, "layers": 2**17 + 1, "heads": 1, "kv_heads": 1})
    with pytest.raises(UserInputError) as err:
        load_model(path)
    assert err.value.key == "moe.experts" and "layers × moe.experts" in err.value.message


def test_size_limit_is_in_the_field_descriptions():
    for name in ("layers", "hidden", "ffn", "heads", "kv_heads", "head_dim", "vocab"):
        assert "16,777,216" in ModelSpec.model_fields[name].description


@pytest.mark.parametrize(
    ("phase", "kwargs", "key"),
    [
        ("prefill", {"tokens": 2**25}, "tokens"),
        ("prefill", {"tokens": 8192, "batch": 4096}, "tokens × batch"),
        ("prefill", {"tokens": 16, "kv_len": 2**24 - 8}, "kv_len + tokens + extra_prefix_tokens"),
        ("prefill", {"tokens": 1, "batch": 100_000}, "batch"),  # 9 heads × 30 layers × it
        ("decode", {"tokens": 1, "batch": 200_000}, "batch"),  # 3 K/V heads × 30 layers × it
        ("decode", {"tokens": 1_000_000}, "tokens"),
    ],
)
def test_lower_sizes_are_bounded(phase, kwargs, key):
    with pytest.raises(UserInputError) as err:
        lower(_spec("smollm2-135m"), phase, **kwargs)
    assert (err.value.source, err.value.key) == ("lower()", key)
    assert "exceeds the limit 16777216" in err.value.message
    lower(_spec("smollm2-135m"), "prefill", 4096, batch=4096)  # exactly 2**24 rows: fine
