"""Published serving benchmarks (MLPerf Inference llama2-70b on GPUs, jetstream-pytorch on TPU v5e): every
point names its source (repository, commit, path), is projected as a validation row, and the projection
follows the scenario's rules (offline at the batch or KV limit, server within the latency limits; a dense
preallocated cache is read whole every decode step)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tpu_workbench.bench.projection.serving import StepModel, kv_capacity, steady_state
from tpu_workbench.bench.projection.serving_benchmarks import (
    PUBLISHED,
    SERVER_TPOT_S,
    SERVER_TTFT_S,
    _model,
    points,
    project_point,
    projections,
)
from tpu_workbench.bench.projection.serving_validation import SEQ_OVERHEAD_S, serving_rows

GPU = SEQ_OVERHEAD_S["gpu"]


def _mlperf():
    return [p for p in points() if p["file"] == "mlperf_inference.json"]


def test_every_point_names_its_source_and_mlperf_systems_have_both_scenarios():
    ps = points()
    assert len(ps) >= 12 and {p["chip"] for p in ps} >= {"H100 SXM", "H200", "B200", "TPU v5e"}
    for p in ps:
        s = p["source"]
        assert s["repo"] and len(s["commit"]) == 40 and s["path"] and s["date"]
        assert p["tokens_per_s"] > 0 and p["unit"].startswith("output tok/s per chip")
    for p in _mlperf():
        assert p["source"]["path"].endswith("mlperf_log_summary.txt")
        assert p["scenario"].capitalize() in p["source"]["path"]
    systems = {(p["chip"], p["chips"]) for p in _mlperf()}
    for sys_ in systems:
        assert {p["scenario"] for p in _mlperf() if (p["chip"], p["chips"]) == sys_} == {"offline", "server"}


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
def test_each_point_is_a_validation_row_with_its_error():
    rows = {r.id: r for r in serving_rows()}
    for p in points():
        r = rows[p["id"]]
        assert r.role == "validation" and r.phase == "serve"
        assert r.vendor == ("tpu" if p["chip"].startswith("TPU") else "gpu")
        assert r.published == pytest.approx(p["tokens_per_s"] / p["chips"])
        assert r.projected and r.error_pct == pytest.approx(100 * (r.projected / r.published - 1))
        assert "ASSUMED" in r.note and p["source"]["commit"][:9] in r.source


def test_offline_runs_at_the_batch_or_kv_limit_and_server_within_the_latency_limits():
    for pr in projections(SEQ_OVERHEAD_S):
        p = pr.point
        if p["file"] != "mlperf_inference.json":
            continue
        m = _model(p, GPU)
        cap = kv_capacity(m, pr.input_tokens + pr.output_tokens // 2).max_seqs
        if p["scenario"] == "offline":
            assert pr.concurrency == cap  # max_batch (the config's batch) already caps the capacity
        else:
            assert pr.concurrency <= cap
            assert pr.state.ttft_s <= SERVER_TTFT_S and pr.state.tpot_s <= SERVER_TPOT_S
            if pr.concurrency < cap:  # one more sequence would break a limit
                nxt = steady_state(m, pr.input_tokens, pr.output_tokens, pr.concurrency + 1)
                assert nxt.ttft_s > SERVER_TTFT_S or nxt.tpot_s > SERVER_TPOT_S


def test_longer_prompts_hold_fewer_sequences_and_give_less_throughput():
    p = next(p for p in _mlperf() if p["scenario"] == "offline")
    short, long_ = project_point(p, GPU, 256), project_point(p, GPU, 1024)
    assert long_.concurrency < short.concurrency
    assert long_.output_tok_s_per_chip < short.output_tok_s_per_chip
    assert project_point(p, GPU).input_tokens == p["input_tokens"]


def test_a_dense_preallocated_cache_is_read_whole_every_decode_step():
    p = next(p for p in points() if p["kv_allocation"] == "fixed" and "llama-2-7b" in p["model"])
    pr = project_point(p, SEQ_OVERHEAD_S["tpu"])
    m = _model(p, SEQ_OVERHEAD_S["tpu"])
    assert m.deployment.dense_cache_tokens == p["cache_tokens"] == 2048
    assert pr.concurrency == p["engine_batch"]
    paged = StepModel(m.cfg, replace(m.deployment, dense_cache_tokens=0), m.setting, m.shape)
    assert pr.state.step_s > steady_state(paged, pr.input_tokens, pr.output_tokens, pr.concurrency).step_s


def test_mlperf_input_length_is_the_sourced_dataset_mean_not_an_assumption():
    doc = json.loads((PUBLISHED / "mlperf_inference.json").read_text())
    lengths = doc["input_lengths"]
    assert (
        lengths["samples"] == 24576 and lengths["max"] < 1024
    )  # the dataset's count and processorca's limit
    assert lengths["median"] <= lengths["mean"] <= lengths["p90"] <= lengths["max"]
    assert "@" in lengths["source"] and ".csv" in lengths["source"]
    for p in _mlperf():
        assert p["input_tokens"] == round(lengths["mean"])
        r = project_point(p, GPU)
        assert "ASSUMED: input" not in r.note() and f"input {r.input_tokens} tokens (dataset mean" in r.note()


def test_mlperf_server_rows_report_the_poisson_bound_below_the_saturated_projection():
    for pr in projections(SEQ_OVERHEAD_S):
        if pr.point["file"] != "mlperf_inference.json":
            continue
        if pr.point["scenario"] == "offline":
            assert pr.poisson_bound is None and "Poisson" not in pr.note()
            continue
        assert 0.8 * pr.output_tok_s_per_chip < pr.poisson_bound < pr.output_tok_s_per_chip
        assert f"{pr.poisson_bound:.0f} tok/s/chip" in pr.note()


def test_jetstream_points_run_the_interleaved_orchestrator_with_one_engine_per_host():
    from tpu_workbench.bench.projection.serving_benchmarks import interleaved_state

    tpu = SEQ_OVERHEAD_S["tpu"]
    for p in (q for q in points() if q["file"] == "jetstream_pytorch.json"):
        assert "@" in p["orchestrator_source"]
        # JetStream's interleaved mode arrived on 2024-05-01 (a3546e8): earlier runs used the threaded orchestrator
        assert p["orchestrator"] == ("threaded" if p["source"]["date"] < "2024-05-01" else "interleaved")
        if p["orchestrator"] != "interleaved":
            continue
        pr, m = project_point(p, tpu), _model(p, tpu)
        replicas = p["chips"] // p["tp"]
        st = pr.state
        assert st.concurrency == pr.concurrency * replicas
        # each prompt's batch-1 prefill is serialized with the generate steps: B tokens every g + B p / O
        prefill = m.time(0, 0, pr.input_tokens)
        g = m.time(pr.concurrency, p["cache_tokens"], 0) + tpu * (st.concurrency - pr.concurrency)
        assert st.step_s == pytest.approx(g + st.concurrency * prefill / pr.output_tokens)
        assert pr.output_tok_s_per_chip == pytest.approx(st.concurrency / st.step_s / p["chips"])
        assert "interleaved orchestrator" in pr.note()
    # one engine over 8 data-parallel chips pays its host cost on all 512 slots: slower per chip than
    # 8 separate engines of 64 would be
    dp = next(q for q in points() if q["id"] == "jetstream-pt-gemma-2b-bf16-v5e8")
    m = _model(dp, tpu)
    one_engine = interleaved_state(m, dp, 256, 256, tpu, 64)
    separate = interleaved_state(m, {**dp, "chips": 1}, 256, 256, tpu, 64)
    assert one_engine.output_tok_s_per_chip < separate.output_tok_s_per_chip
    assert (
        interleaved_state(m, dp, 256, 256, 0.0, 64).output_tok_s_per_chip > one_engine.output_tok_s_per_chip
    )


def test_threaded_orchestrator_overlaps_host_work_with_the_prefills():
    """Before interleaved mode the generate thread's host work runs while the chips prefill: B tokens every
    g_dev + max(host, B p / O), never slower than the interleaved orchestrator, and equal with no host cost."""
    from tpu_workbench.bench.projection.serving_benchmarks import interleaved_state, threaded_state

    tpu = SEQ_OVERHEAD_S["tpu"]
    threaded = [q for q in points() if q.get("orchestrator") == "threaded"]
    assert {q["id"] for q in threaded} >= {"jetstream-pt-llama-3-8b-bf16", "jetstream-pt-llama-2-7b-bf16"}
    for p in threaded:
        pr, m = project_point(p, tpu), _model(p, tpu)
        st = pr.state
        inter = interleaved_state(m, p, pr.input_tokens, pr.output_tokens, tpu, pr.concurrency)
        host = tpu * st.concurrency
        g_dev = inter.decode_only_step_s - host
        assert st.step_s == pytest.approx(g_dev + max(host, st.concurrency * inter.ttft_s / pr.output_tokens))
        assert inter.step_s > st.step_s >= g_dev + host
        assert "threaded orchestrator" in pr.note()
        m0 = _model(p, 0.0)
        no_host = threaded_state(m0, p, pr.input_tokens, pr.output_tokens, 0.0, pr.concurrency)
        same = interleaved_state(m0, p, pr.input_tokens, pr.output_tokens, 0.0, pr.concurrency)
        assert no_host.step_s == pytest.approx(same.step_s)


def test_jetstream_int8_rows_are_weight_only_bf16_matmuls_on_int8_weights():
    tpu = SEQ_OVERHEAD_S["tpu"]
    for p in (q for q in points() if q["file"] == "jetstream_pytorch.json"):
        m = _model(p, tpu)
        assert m.deployment.weight_only == (p["precision"] == "int8")
        if p["precision"] != "int8":
            continue
        w8a8 = StepModel.build(m.cfg, replace(m.deployment, weight_only=False), shape=m.shape)
        assert m.setting.wb == w8a8.setting.wb == 1.0  # int8 weights read either way
        assert m.setting.peak == m.chip.peak("bf16", per="chip") < w8a8.setting.peak
        assert m.time(0, 0, 2048) > w8a8.time(0, 0, 2048)  # a compute-bound prefill runs at the bf16 peak
        assert "W8A16" in project_point(p, tpu).note()


def test_jetstream_llama3_int8_regression_between_orchestrators_is_reproduced():
    """The same Llama 3 8B int8 setting published on 2024-04-24 (threaded orchestrator) and 2024-07-29
    (interleaved, 'a regression'): the projected ratio follows the published one."""
    tpu = SEQ_OVERHEAD_S["tpu"]
    by_id = {q["id"]: q for q in points()}
    old, new = by_id["jetstream-pt-llama-3-8b-int8"], by_id["jetstream-pt-llama-3-8b-int8-2024-07"]
    assert (old["orchestrator"], new["orchestrator"]) == ("threaded", "interleaved")
    published = old["tokens_per_s"] / new["tokens_per_s"]
    projected = project_point(old, tpu).output_tok_s_per_chip / project_point(new, tpu).output_tok_s_per_chip
    assert projected > 1.1 and projected == pytest.approx(published, rel=0.1)


def test_jetstream_lengths_are_measured_for_the_llama_tokenizers_and_assumed_otherwise():
    """Llama rows take the per-request means of a logged run of the same benchmark (ShareGPT through JetStream's
    benchmark_serving.py with that tokenizer); the Gemma rows, with no such run, say ASSUMED in their note."""
    tpu = SEQ_OVERHEAD_S["tpu"]
    logged = {"llama-2": (220_485, 608_985, 1_999), "llama-3": (214_914, 415_416, 1_780)}
    for p in (q for q in points() if q["file"] == "jetstream_pytorch.json"):
        pr = project_point(p, tpu)
        family = next((k for k in logged if p["model"].startswith(k)), None)
        if family is None:
            assert p["lengths_assumed"] and "lengths_source" not in p
            assert f"ASSUMED: input {pr.input_tokens} / output {pr.output_tokens} tokens" in pr.note()
            continue
        tin, tout, n = logged[family]
        assert (pr.input_tokens, pr.output_tokens) == (round(tin / n), round(tout / n))
        assert not p["lengths_assumed"] and "pull request" in p["lengths_source"]
        assert f"{tin:,} input and {tout:,} generated tokens" in p["lengths_source"]
        assert p["lengths_source"] in pr.note()
