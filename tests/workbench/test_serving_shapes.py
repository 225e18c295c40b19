"""Model shapes from transformers config.json: GQA, MLA, sliding window, hybrid linear attention, MoE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import param_counts
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, kv_capacity
from tpu_workbench.bench.projection.shape import ServingShape, load_hf_config

MODELS = Path(__file__).parents[2] / "workbench" / "published" / "models"
LLAMA31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "vocab_size": 129280,
}
GEMMA3 = {
    "model_type": "gemma3_text",
    "hidden_size": 5376,
    "intermediate_size": 21504,
    "num_hidden_layers": 62,
    "num_attention_heads": 32,
    "num_key_value_heads": 16,
    "head_dim": 128,
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
    "vocab_size": 262208,
}


def test_a_llama_config_matches_the_preset_shape():
    cfg, shape = load_hf_config(LLAMA31_8B, "llama3.1-8b")
    assert (cfg.n_kv_heads, cfg.head_dim, cfg.is_moe) == (8, 128, False)
    assert param_counts(cfg).total == pytest.approx(8.03e9, rel=0.01)
    assert shape == ServingShape.of(cfg)


def test_qwen35_hybrid_layers_carry_a_state_not_a_cache():
    cfg, shape = load_hf_config(MODELS / "qwen3.5-397b-a17b.json")
    assert (shape.full_layers, shape.linear_layers, cfg.n_experts, cfg.top_k) == (15, 45, 512, 10)
    total = param_counts(cfg).total + shape.extra_params
    assert total == pytest.approx(397e9, rel=0.02)  # the name's 397B
    per_seq_8k = shape.kv_bytes(9216, 1.0)  # fp8 cache at 8k in + 1k out
    assert per_seq_8k == pytest.approx(15 * 9216 * 2 * 2 * 256)
    assert shape.state_bytes(2.0) > 0.5 * per_seq_8k  # the delta-rule state is not negligible


def test_mla_caches_one_latent_and_gemma_windows_its_local_layers():
    cfg, mla = load_hf_config(DEEPSEEK_V3, "deepseek-v3")
    assert mla.kv_values_per_position == 576 and any("dense MLP" in n for n in mla.notes)
    assert (cfg.dense_layers, cfg.moe_layers) == (3, 58)
    # 671B published (without the MTP layer): the first 3 layers' dense MLPs are not counted as experts
    assert param_counts(cfg).total + mla.extra_params == pytest.approx(671e9, rel=0.01)
    _, gemma = load_hf_config(GEMMA3, "gemma3-27b")
    assert (gemma.full_layers, gemma.window_layers, gemma.window) == (10, 52, 1024)
    assert gemma.cached_positions(32768) == 10 * 32768 + 52 * 1024
    m = StepModel.build(cfg, ServingDeployment("B200", 8, "tp", precision="fp8"), shape=mla)
    assert m.kv_share() == 1.0 and kv_capacity(m, 4096).max_seqs > 0


def test_bad_configs_are_refused_in_one_line(tmp_path):
    with pytest.raises(WorkbenchError, match="lacks hidden_size"):
        load_hf_config({"num_hidden_layers": 2}, "x")
    broken = dict(json.loads((MODELS / "qwen3.5-397b-a17b.json").read_text()))
    del broken["linear_num_value_heads"]
    with pytest.raises(WorkbenchError, match="linear_num_value_heads"):
        load_hf_config(broken, "q")
    with pytest.raises(WorkbenchError, match="cannot read"):
        load_hf_config(tmp_path / "missing.json")
    with pytest.raises(WorkbenchError, match="unknown layer type"):
        load_hf_config({**LLAMA31_8B, "layer_types": ["mamba"] * 32}, "m")


def test_vllm_tpu_pads_each_devices_kv_heads_to_the_cache_dtype_packing():
    """tpu-inference's RPA cache stores a device's K and V heads in rows of 32 / bits (fp8: 4): one fp8 KV head
    per device (Qwen3-Coder-480B's 8 heads over 8 TensorCores) takes two heads' bytes; four per device do not
    pad; without ``tp_devices`` (another engine, or data-parallel attention) nothing changes."""
    cfg, shape = load_hf_config(MODELS / "qwen3-coder-480b-a35b.json")
    assert (cfg.n_kv_heads, cfg.head_dim) == (8, 128)

    def share(chips, devices, kv="fp8"):
        d = ServingDeployment("TPU v7", chips, "tp", precision="fp8", kv_precision=kv, tp_devices=devices)
        return StepModel.build(cfg, d, shape=shape).kv_share()

    assert share(4, 0) == pytest.approx(1 / 4)
    assert share(4, 8) == pytest.approx(2 / 4)  # 1 head per device: K, V + 2 padding rows
    assert share(4, 8, "bf16") == pytest.approx(1 / 4)  # bf16 packs 2: K and V fill the row
    assert share(4, 16) == pytest.approx(4 / 4)  # 16 devices > 8 heads: replicated, then padded
    assert share(1, 2) == pytest.approx(1.0)  # 4 heads per device: no padding
    with pytest.raises(WorkbenchError, match="multiple"):
        share(4, 6)

    def per_token(devices):
        d = ServingDeployment("TPU v7", 4, "tp", precision="fp8", kv_precision="fp8", tp_devices=devices)
        return StepModel.build(cfg, d, shape=shape).kv_bytes_per_token_per_chip()

    assert per_token(8) == pytest.approx(2 * per_token(0))  # capacity and bytes read follow the share
