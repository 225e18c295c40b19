"""Multi-head latent attention, shared experts and dense first layers in training FLOPs (DeepSeek-V3).

The reference is MaxText's own count (AI-Hypercomputer/maxtext src/maxtext/utils/maxtext_utils.py:
calculate_tflops_training_per_device, DEEPSEEK and MLA branches), written out again here independently of
workbench/flops.py, so that the projection's MFU and TFLOP/s are the ones the Ironwood README prints.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import flops_per_token, param_counts
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.projection.calibration import _config
from tpu_workbench.bench.published import training_points
from tpu_workbench.bench.workloads.config import DecoderConfig
from tpu_workbench.bench.workloads.decoder import build_model

DEEPSEEK_V3 = dict(
    vocab=129280,
    d_model=7168,
    n_layers=61,
    n_heads=128,
    n_kv_heads=128,
    ffn_dim=18432,
    n_experts=256,
    top_k=8,
    moe_ffn_dim=2048,
    n_shared_experts=1,
    dense_layers=3,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
)
DS_IDS = (
    "maxtext-tpu7x-deepseek-v3-128",
    "maxtext-tpu7x-deepseek-v3-256",
    "maxtext-tpu7x-deepseek-v3-fp8-128",
    "maxtext-tpu7x-deepseek-v3-fp8-256",
)


def maxtext_flops_per_token(c: dict, seq: int) -> float:
    """MaxText's training FLOPs per token for a DeepSeek decoder (batch 1 x seq, fwd + bwd = x 3)."""
    bl, e, h = seq, c["d_model"], c["n_heads"]
    rq, rkv = c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    qk = nope + rope
    if rq == 0:
        q = 2 * bl * e * h * qk
    else:
        q = 2 * bl * (e * rq + rq * h * qk)
    kv = 2 * bl * (e * (rkv + rope) + rkv * h * (nope + v))
    attention = 2 * bl * seq * h * (qk + v) / 2
    projection = 2 * bl * e * h * v

    def ffn(mlp: int) -> float:
        return 2 * bl * mlp * e * 2 + 2 * bl * mlp * e  # silu x linear in, one out

    gate = 2 * bl * e * c["n_experts"]
    n_dense, n_moe = c["dense_layers"], c["n_layers"] - c["dense_layers"]
    moe = gate + ffn(c["moe_ffn_dim"]) * c["n_shared_experts"] + ffn(c["moe_ffn_dim"]) * c["top_k"]
    total_ffn = ffn(c["ffn_dim"]) * n_dense + moe * n_moe
    embedding = 2 * bl * e * c["vocab"]
    learnable = (total_ffn + (q + kv + projection) * c["n_layers"] + embedding) * 3
    return (learnable + attention * c["n_layers"] * 3) / bl


def test_deepseek_v3_model_matches_maxtext_count_exactly():
    cfg = DecoderConfig("deepseek-v3", **DEEPSEEK_V3)
    assert cfg.head_dim == 192 and cfg.moe_layers == 58
    got = flops_per_token(cfg, "train", 4096, convention="causal")
    assert got == pytest.approx(maxtext_flops_per_token(DEEPSEEK_V3, 4096), rel=1e-12)
    assert param_counts(cfg).total == pytest.approx(671.0e9, rel=1e-3)  # DeepSeek-V3 without its MTP layer


@settings(max_examples=60, deadline=None)
@given(
    d=st.sampled_from([256, 512, 1024]),
    h=st.sampled_from([2, 4, 8]),
    rq=st.sampled_from([0, 64, 96]),
    rkv=st.sampled_from([32, 64]),
    nope=st.sampled_from([16, 32]),
    rope=st.sampled_from([8, 16]),
    v=st.sampled_from([16, 32, 48]),
    layers=st.integers(2, 6),
    dense=st.integers(0, 1),
    shared=st.integers(0, 2),
    seq=st.sampled_from([128, 1024, 4096]),
)
def test_mla_flops_match_maxtext_formula(d, h, rq, rkv, nope, rope, v, layers, dense, shared, seq):
    c = dict(
        vocab=1000,
        d_model=d,
        n_layers=layers,
        n_heads=h,
        n_kv_heads=h,
        ffn_dim=4 * d,
        n_experts=8,
        top_k=2,
        moe_ffn_dim=d // 2,
        n_shared_experts=shared,
        dense_layers=dense,
        q_lora_rank=rq,
        kv_lora_rank=rkv,
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=v,
    )
    cfg = DecoderConfig("mla", **c)
    got = flops_per_token(cfg, "train", seq, convention="causal")
    assert got == pytest.approx(maxtext_flops_per_token(c, seq), rel=1e-12)


@pytest.mark.parametrize("pid", DS_IDS)
def test_published_flops_per_token_reproduced(pid):
    """TFLOP/s / tokens/s of the README row is MaxText's count: the model's must be it within 1 %."""
    p = next(p for p in training_points() if p["id"] == pid)
    pub = p["published"]
    implied = pub["tflops_per_chip"] * 1e12 / pub["tokens_per_s_per_chip"]
    cfg = _config(p["setting"]["model"])
    got = flops_per_token(cfg, "train", p["setting"]["seq"], convention=p["setting"]["mfu_convention"])
    assert got == pytest.approx(implied, rel=0.01)
    assert "unanchored" not in p and p["model_gap"]["hypothesis"].startswith("HYPOTHESIS")


@pytest.mark.parametrize("drop", ["kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"])
def test_config_missing_mla_fields_is_refused(drop):
    c = {**DEEPSEEK_V3, drop: 0}
    with pytest.raises(WorkbenchError, match=f"multi-head latent attention.*missing: {drop}"):
        DecoderConfig("half-mla", **c)


def test_mla_head_dim_and_dense_layers_are_checked():
    with pytest.raises(WorkbenchError, match="qk_nope_head_dim \\+ qk_rope_head_dim = 192"):
        DecoderConfig("bad-hd", **{**DEEPSEEK_V3, "head_dim": 128})
    dense = {k: v for k, v in DEEPSEEK_V3.items() if k not in ("n_experts", "top_k", "moe_ffn_dim")}
    with pytest.raises(WorkbenchError, match="dense_layers"):
        DecoderConfig("dense-only", **dense)


def test_mla_is_refused_where_it_is_not_modelled():
    cfg = DecoderConfig("deepseek-v3", **DEEPSEEK_V3)
    with pytest.raises(WorkbenchError, match="modelled for training"):
        project("TPU v7", cfg, "decode", 64, "fsdp")
    with pytest.raises(WorkbenchError, match="runnable decoder"):
        build_model(cfg)


def test_without_mla_fields_nothing_changes():
    """A GQA model with the new fields at 0 counts exactly what it counted before (4·H·hd per key)."""
    cfg = DecoderConfig("gqa", vocab=1000, d_model=512, n_layers=4, n_heads=8, n_kv_heads=2, ffn_dim=1536)
    attn = flops_per_token(cfg, "prefill", 1024, convention="palm") - 2 * param_counts(cfg).active_matmul
    assert attn == pytest.approx(4 * 4 * 8 * 64 * 1024)
