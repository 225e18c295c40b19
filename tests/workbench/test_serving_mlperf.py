"""MLPerf Inference llama2-70b rows: every published point is read from its log (source, commit, path),
projected as a validation row, and the projection follows the scenario's rules (offline at the batch or KV
limit, server within the latency limits)."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.projection.serving import kv_capacity, steady_state
from tpu_workbench.bench.projection.serving_mlperf import (
    ASSUMED_INPUT_TOKENS,
    SERVER_TPOT_S,
    SERVER_TTFT_S,
    _model,
    points,
    project_point,
    projections,
)
from tpu_workbench.bench.projection.serving_validation import SEQ_OVERHEAD_S, serving_rows

GPU = SEQ_OVERHEAD_S["gpu"]


def test_every_point_names_its_log_and_both_scenarios_per_system():
    ps = points()
    assert len(ps) >= 6
    for p in ps:
        s = p["source"]
        assert s["repo"] == "mlcommons/inference_results_v4.1" and len(s["commit"]) == 40
        assert s["path"].endswith("mlperf_log_summary.txt") and p["scenario"].capitalize() in s["path"]
        assert p["tokens_per_s"] > p["samples_per_s"] > 0
    systems = {(p["chip"], p["chips"]) for p in ps}
    for sys_ in systems:
        assert {p["scenario"] for p in ps if (p["chip"], p["chips"]) == sys_} == {"offline", "server"}


def test_each_point_is_a_validation_row_with_its_error():
    rows = {r.id: r for r in serving_rows()}
    for p in points():
        r = rows[p["id"]]
        assert r.role == "validation" and r.vendor == "gpu" and r.phase == "serve"
        assert r.published == pytest.approx(p["tokens_per_s"] / p["chips"])
        assert r.projected and r.error_pct == pytest.approx(100 * (r.projected / r.published - 1))
        assert "ASSUMED" in r.note and p["source"]["commit"][:9] in r.source


def test_offline_runs_at_the_batch_or_kv_limit_and_server_within_the_latency_limits():
    for pr in projections(GPU):
        p = pr.point
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
    p = next(p for p in points() if p["scenario"] == "offline")
    short, long_ = project_point(p, GPU, 256), project_point(p, GPU, 1024)
    assert long_.concurrency < short.concurrency
    assert long_.output_tok_s_per_chip < short.output_tok_s_per_chip
    assert project_point(p, GPU).input_tokens == ASSUMED_INPUT_TOKENS
