"""Physical lower bounds: no projected decode step beats the bytes it must read (the weights and every
sequence's whole KV cache) at the chip's peak HBM bandwidth, nor its FLOPs (attention over the context
included) at the chip's peak; a setting that does not fit carries no throughput and no price."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.flops import flops_per_token, kv_bytes_per_token, param_counts
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.workloads import get_config

CATALOG = load_catalog()
MODELS = ("llama3-8b", "llama3-70b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b")
CHIPS = ("H100 SXM", "H200", "B200", "MI300X", "TPU v5e", "TPU v6e", "TPU v7")


def _min_bytes_per_chip(cfg, tp: int, batch: int, context: int, nb: float) -> float:
    """Bytes a decode step must read on one chip of a tp group: its shard of the matmul weights a token
    uses (MoE: top_k experts only, a lower bound) and its KV heads of every sequence's cache."""
    pc = param_counts(cfg)
    weights = pc.active_matmul * nb / tp
    kv_heads_per_chip = max(cfg.n_kv_heads // tp, 1) / cfg.n_kv_heads
    cache = batch * tp * context * kv_bytes_per_token(cfg, nb) * kv_heads_per_chip
    return weights + cache


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    chip=st.sampled_from(CHIPS),
    tp=st.sampled_from((1, 2, 4, 8)),
    batch=st.sampled_from((1, 4, 16, 64, 256)),
    context=st.sampled_from((128, 1024, 4096, 16384, 65536)),
)
def test_no_decode_step_beats_its_bytes_or_flops_at_peak(model, chip, tp, batch, context):
    cfg, c = get_config(model), CATALOG.chip(chip)
    r = project(c, cfg, "decode", tp, "tp", batch=batch, seq=context, catalog=CATALOG)
    if not r.extra["fits_in_hbm"]:
        assert r.tokens_per_s_per_chip is None and r.step_median_s is None and r.cost == []
        assert r.mfu is None and r.energy == {} and "does not fit" in r.extra["infeasible"]
        return
    t = r.step_median_s
    assert t >= _min_bytes_per_chip(cfg, tp, batch, context, 2.0) / (c.hbm_bw_gbps * 1e9)
    assert t >= batch * flops_per_token(cfg, "decode", context) / c.peak("bf16")
    assert r.extra["hbm_bytes_per_step"] >= _min_bytes_per_chip(cfg, tp, batch, context, 2.0)
    assert r.mbu <= 1.0 and r.mfu <= 1.0


def test_the_issue_setting_decode_reads_the_cache_and_a_setting_that_does_not_fit_has_no_price():
    """Llama-3-8B on 8 x TPU v6e, tp=8, 64 sequences: the step grows with the context (before the fix it
    was 2.43 / 2.47 / 2.61 ms at 512 / 4k / 16k with 2.077 GB read per step, and 32k was priced)."""
    v6e = CATALOG.chip("TPU v6e")
    recs = {
        ctx: project(v6e, "llama3-8b", "decode", 8, "tp", batch=8, seq=ctx)
        for ctx in (512, 4096, 16384, 32768)
    }
    cache_16k = 64 * 16385 * kv_bytes_per_token(get_config("llama3-8b"), 2.0) / 8
    assert recs[16384].step_median_s >= cache_16k / (v6e.hbm_bw_gbps * 1e9)  # 10.5 ms at peak bandwidth
    assert recs[512].step_median_s < recs[4096].step_median_s < recs[16384].step_median_s
    assert recs[16384].extra["hbm_bytes_per_step"] == pytest.approx(19.26e9, rel=0.01)
    assert recs[16384].mbu > recs[16384].mfu  # decode is memory bound: MBU above MFU
    big = recs[32768]
    assert not big.extra["fits_in_hbm"] and big.cost == [] and big.tokens_per_s is None
    assert big.extra["infeasible"].startswith("does not fit in HBM")


def test_an_fp8_kv_cache_halves_the_cache_read_and_is_recorded():
    kw = dict(batch=8, seq=16384)
    bf16 = project("TPU v6e", "llama3-8b", "decode", 8, "tp", **kw)
    fp8 = project("TPU v6e", "llama3-8b", "decode", 8, "tp", kv_precision="fp8", **kw)
    assert fp8.extra["memory_breakdown_gb"]["kv_cache"] == pytest.approx(
        bf16.extra["memory_breakdown_gb"]["kv_cache"] / 2
    )
    assert fp8.step_median_s < 0.6 * bf16.step_median_s


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    chip=st.sampled_from(CHIPS),
    tp=st.sampled_from((1, 2, 4, 8)),
    seqs=st.sampled_from((1, 8, 64, 512)),
    context=st.sampled_from((128, 4096, 32768)),
)
def test_no_serving_engine_step_beats_its_bytes_or_flops_at_peak(model, chip, tp, seqs, context):
    from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel

    cfg, c = get_config(model), CATALOG.chip(chip)
    m = StepModel.build(cfg, ServingDeployment(chip, tp, "tp"), catalog=CATALOG)
    t = m.time(seqs, context, 0)
    per_chip = max(seqs / tp, 1e-9)  # sequences' worth of FLOPs per chip of the TP group
    assert t >= _min_bytes_per_chip(cfg, tp, seqs / tp, context, 2.0) / (c.hbm_bw_gbps * 1e9)
    assert t >= per_chip * flops_per_token(cfg, "decode", context) / c.peak("bf16")
