"""Hugging Face config.json → model spec (accel_sim/workload/hf_config.py) and `--hf-config`.

Fixtures: tests/data/hf_configs/<name>/config.json, transcribed from the public configs (see the
README there). Where the zoo ships the same model, both must give the same spec and GEMMs; the
others' shapes are derived by hand from the published sizes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from accel_sim.errors import UserInputError
from accel_sim.workload.hf_config import load_hf_config
from accel_sim.workload.models import load_model, lower, parameter_count

HF = Path(__file__).parent / "data" / "hf_configs"
SHIPPED = ["bert-base", "gpt2-small", "llama-2-7b", "opt-6.7b", "qwen3-30b-a3b", "qwen3-8b",
           "smollm2-135m"]  # fmt: skip


def _gemms(spec, phase, tokens, **kw):
    work = lower(spec, phase, tokens, **kw)
    return [(g.name, g.kind, g.M, g.K, g.N, g.count) for g in work.gemms]


def _by_name(spec, phase="prefill", tokens=512, **kw):
    return {g.name: (g.M, g.K, g.N, g.count) for g in lower(spec, phase, tokens, **kw).gemms}


def test_every_fixture_cites_its_hf_repo():
    folders = sorted(p.name for p in HF.iterdir() if p.is_dir())
    assert set(SHIPPED) < set(folders)
    for name in folders:
        data = json.loads((HF / name / "config.json").read_text())
        assert data["_source"].startswith("https://huggingface.co/")
        spec = load_hf_config(HF / name)
        assert spec.name == name and data["_source"] in spec.source


@pytest.mark.parametrize("name", SHIPPED)
def test_hf_config_equals_the_shipped_model(name):
    hf, ours = load_hf_config(HF / name / "config.json"), load_model(name)
    assert hf.model_dump(exclude={"source"}) == ours.model_dump(exclude={"source"})
    assert _gemms(hf, "prefill", 512) == _gemms(ours, "prefill", 512)
    assert _gemms(hf, "prefill", 64, batch=2, logits="last") == \
        _gemms(ours, "prefill", 64, batch=2, logits="last")  # fmt: skip
    if ours.family == "decoder":
        assert _gemms(hf, "decode", 3, kv_len=100) == _gemms(ours, "decode", 3, kv_len=100)
    assert parameter_count(hf) == parameter_count(ours)


def test_gpt2_shapes_by_hand():
    g = _by_name(load_hf_config(HF / "gpt2-small"))
    layers, heads = 12, 12
    assert g["layers.*.self_attn.q_proj"] == (512, 768, 768, layers)
    assert g["layers.*.self_attn.k_proj"] == (512, 768, 768, layers)  # no GQA
    assert g["layers.*.mlp.up_proj"] == (512, 768, 3072, layers)  # n_inner absent: 4 * n_embd
    assert g["layers.*.mlp.down_proj"] == (512, 3072, 768, layers)
    assert "layers.*.mlp.gate_proj" not in g  # GELU MLP, not gated
    assert g["layers.*.self_attn.qk"] == (512, 64, 512, heads * layers)
    assert g["lm_head"] == (512, 768, 50257, 1)
    assert load_hf_config(HF / "gpt2-small").ffn_type == "gelu"  # gelu_new


def test_opt_125m_shapes_and_published_size():
    spec = load_hf_config(HF / "opt-125m")
    g = _by_name(spec, tokens=256)
    assert g["layers.*.self_attn.v_proj"] == (256, 768, 768, 12)
    assert g["layers.*.mlp.up_proj"] == (256, 768, 3072, 12)  # ffn_dim
    assert g["layers.*.mlp.down_proj"] == (256, 3072, 768, 12)
    assert g["layers.*.self_attn.pv"] == (256, 256, 64, 12 * 12)
    assert g["lm_head"] == (256, 768, 50272, 1)
    assert (spec.ffn_type, spec.max_positions, spec.tied_lm_head) == ("relu", 2048, True)
    assert parameter_count(spec) == pytest.approx(125e6, rel=0.01)  # OPT paper Table 1


def test_bert_is_an_encoder():
    spec = load_hf_config(HF / "bert-base")
    g = _by_name(spec, tokens=128)
    assert g["layers.*.self_attn.q_proj"] == (128, 768, 768, 12)
    assert g["layers.*.mlp.up_proj"] == (128, 768, 3072, 12)
    assert g["layers.*.self_attn.qk"] == (128, 64, 128, 12 * 12)
    assert "lm_head" not in g and spec.family == "encoder"
    with pytest.raises(UserInputError, match="encoder"):
        lower(spec, "decode", 1)


def test_moe_shapes_by_hand():
    qwen = load_hf_config(HF / "qwen3-30b-a3b")
    g = _by_name(qwen)
    assert g["layers.*.self_attn.q_proj"] == (512, 2048, 32 * 128, 48)  # head_dim 128 given
    assert g["layers.*.self_attn.k_proj"] == (512, 2048, 4 * 128, 48)  # 4 KV heads
    assert g["layers.*.self_attn.o_proj"] == (512, 4096, 2048, 48)
    assert g["layers.*.mlp.gate"] == (512, 2048, 128, 48)  # router over num_experts
    per_expert = math.ceil(512 * 8 / 128)  # tokens x top-8 spread over 128 experts
    assert g["layers.*.mlp.experts.*.up_proj"] == (per_expert, 2048, 768, 128 * 48)
    assert g["layers.*.mlp.experts.*.down_proj"] == (per_expert, 768, 2048, 128 * 48)
    assert qwen.qk_norm
    mixtral = load_hf_config(HF / "mixtral-8x7b")
    g = _by_name(mixtral)
    assert g["layers.*.self_attn.k_proj"] == (512, 4096, 8 * 128, 32)
    assert g["layers.*.mlp.gate"] == (512, 4096, 8, 32)
    assert g["layers.*.mlp.experts.*.gate_proj"] == (512 * 2 // 8, 4096, 14336, 8 * 32)
    assert not mixtral.qk_norm and not mixtral.tied_lm_head
    # Mixtral 8x7B: 46.7 B parameters, 12.9 B active per token (Mistral AI's announcement)
    assert parameter_count(mixtral) == pytest.approx(46.7e9, rel=0.01)
    assert parameter_count(mixtral, active=True) == pytest.approx(12.9e9, rel=0.01)


def test_cli_hf_config_runs_like_the_shipped_name(run_cli):
    common = ["--phase", "prefill", "--tokens", "512", "--dataflow", "w8a8", "--engine", "twin",
              "--json"]  # fmt: skip
    code, out, err = run_cli(["model", "--hf-config", HF / "smollm2-135m" / "config.json",
                              *common])  # fmt: skip
    assert code == 0, err
    hf = json.loads(out)
    code, out, err = run_cli(["model", "smollm2-135m", *common])
    assert code == 0, err
    ours = json.loads(out)
    assert hf["model"] == ours["model"] == "smollm2-135m"
    assert hf["rows"] == ours["rows"] and hf["totals"] == ours["totals"]
    assert hf["totals"][0]["cycles"] > 0


def _qwen() -> dict:
    return json.loads((HF / "qwen3-8b" / "config.json").read_text())


def _write(tmp_path: Path, data: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


BAD = [  # (edit of Qwen3-8B's config, words the one-line message must hold)
    ({"model_type": "falcon", "architectures": ["FalconForCausalLM"]},
     ["model_type", "falcon", "FalconForCausalLM", "qwen3"]),
    ({"model_type": None}, ["model_type", "required key is missing"]),
    ({"hidden_size": None}, ["hidden_size"]),
    ({"num_hidden_layers": 0}, ["num_hidden_layers", "greater than 0"]),
    ({"intermediate_size": -1}, ["intermediate_size", "greater than 0"]),
    ({"vocab_size": 151936.0}, ["vocab_size", "integer"]),
    ({"num_attention_heads": "32"}, ["num_attention_heads", "integer"]),
    ({"hidden_size": 2**30}, ["hidden_size", "16777216"]),
    ({"num_key_value_heads": 5}, ["num_key_value_heads", "does not divide"]),
    ({"head_dim": 127}, ["head_dim", "even"]),
    ({"hidden_act": "gelu"}, ["hidden_act", "gelu"]),
    ({"use_sliding_window": True}, ["use_sliding_window", "not modelled"]),
    ({"tie_word_embeddings": "no"}, ["tie_word_embeddings"]),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "words"), BAD, ids=[str(e) for e, _ in BAD])
def test_bad_config_is_one_line_exit_2(run_cli, tmp_path, edit, words):
    path = _write(tmp_path, {**_qwen(), **edit})
    code, out, err = run_cli(["model", "--hf-config", path, "--tokens", "1", "--engine", "twin"])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"accel-sim: error: {path}")
    for word in words:
        assert word in err, err


def test_missing_key_names_file_and_key(run_cli, tmp_path):
    for name, key in [("qwen3-8b", "head_dim"), ("qwen3-30b-a3b", "moe_intermediate_size"),
                      ("gpt2-small", "n_embd"), ("opt-125m", "ffn_dim"),
                      ("bert-base", "max_position_embeddings"),
                      ("mixtral-8x7b", "num_local_experts")]:  # fmt: skip
        data = json.loads((HF / name / "config.json").read_text())
        del data[key]
        path = _write(tmp_path, data)
        code, out, err = run_cli(["model", "--hf-config", path, "--tokens", "1"])
        assert code == 2 and out == ""
        assert err == f"accel-sim: error: {path}: {key}: required key is missing\n"


def test_family_specific_refusals(tmp_path):
    def load(name, **edit):
        data = json.loads((HF / name / "config.json").read_text())
        return load_hf_config(_write(tmp_path, {**data, **edit}))

    cases = [
        ("qwen3-30b-a3b", {"num_experts_per_tok": 129}, "num_experts_per_tok"),
        ("qwen3-30b-a3b", {"mlp_only_layers": [0, 1]}, "mlp_only_layers"),
        ("qwen3-30b-a3b", {"decoder_sparse_step": 2}, "decoder_sparse_step"),
        ("mixtral-8x7b", {"sliding_window": 4096}, "sliding_window"),
        ("opt-125m", {"word_embed_proj_dim": 512}, "word_embed_proj_dim"),
        ("opt-125m", {"activation_function": "swish"}, "activation_function"),
        ("gpt2-small", {"n_head": 7}, "n_embd"),
        ("bert-base", {"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ]
    for name, edit, key in cases:
        with pytest.raises(UserInputError) as err:
            load(name, **edit)
        assert err.value.key == key, (name, edit, str(err.value))
    # HF defaults: no num_key_value_heads → one KV head per query head; no head_dim → hidden/heads
    llama = json.loads((HF / "llama-2-7b" / "config.json").read_text())
    del llama["num_key_value_heads"]
    spec = load_hf_config(_write(tmp_path, llama))
    assert (spec.kv_heads, spec.head_dim) == (32, 128)
    assert load("gpt2-small", n_inner=1000).ffn == 1000


@pytest.mark.parametrize(("text", "where", "words"), [
    ('{\n  "model_type": "qwen3",\n  "hidden_size": 4096,\n}\n', ":4", ["not valid JSON"]),
    ('{"model_type": "qwen3"\n "x": 1}', ":2", ["Expecting ','"]),
    ("", ":1", ["not valid JSON"]),
    ('{"a": 1, "a": 2}', "", ["a", "given twice"]),
    ("[1, 2]", "", ["expected a JSON object"]),
    ("[" * 5000 + "]" * 5000, "", ["nested deeper"]),
])  # fmt: skip
def test_malformed_json_names_file_and_line(run_cli, tmp_path, text, where, words):
    path = tmp_path / "config.json"
    path.write_text(text)
    code, out, err = run_cli(["model", "--hf-config", path, "--tokens", "1"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"accel-sim: error: {path}{where}: ")
    for word in words:
        assert word in err, err


def test_cli_model_source_mistakes(run_cli, tmp_path):
    code, _, err = run_cli(["model", "--hf-config", tmp_path / "nope.json", "--tokens", "1"])
    assert code == 2 and "nope.json: config file not found" in err
    code, _, err = run_cli(["model", "--hf-config", tmp_path, "--tokens", "1"])  # no config.json
    assert code == 2 and f"{tmp_path / 'config.json'}: config file not found" in err
    code, _, err = run_cli(["model", "qwen3-8b", "--hf-config", HF / "qwen3-8b", "--tokens", "1"])
    assert code == 2 and "not both" in err and err.count("\n") == 1
    code, _, err = run_cli(["model", "--tokens", "1"])
    assert code == 2 and "--hf-config" in err
    code, _, err = run_cli(["model", HF / "qwen3-8b" / "config.json", "--tokens", "1"])
    assert code == 2 and "use `accel-sim model --hf-config FILE`" in err
