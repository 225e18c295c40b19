"""Held-out serving rows (published/tpu_recipes.json: vLLM on Ironwood, AI-Hypercomputer/tpu-recipes): each
names its source, is a validation row marked held out, and is projected as the closed-loop benchmark_serving
run it was (``max_concurrency`` clients, ``num_prompts`` requests of lengths U[r x, x], drain included)
with the engine settings the recipe gives (block size, memory utilization), nothing fitted on them."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.projection.serving_benchmarks import (
    _model,
    closed_loop_run,
    points,
    random_requests,
)
from tpu_workbench.bench.projection.serving_validation import SEQ_OVERHEAD_S, serving_rows

TPU = SEQ_OVERHEAD_S["tpu"]


def _held_out() -> list[dict]:
    return [p for p in points() if p["file"] == "tpu_recipes.json"]


def test_held_out_points_name_their_source_and_setting():
    ps = _held_out()
    assert len(ps) >= 4
    for p in ps:
        s = p["source"]
        assert s["repo"] == "AI-Hypercomputer/tpu-recipes" and len(s["commit"]) == 40 and s["date"]
        assert p["held_out"] and p["scenario"] == "closed_loop" and p["tokens_per_s"] > 0
        assert p["num_prompts"] >= p["max_concurrency"] >= 1 and 0 < p["random_range_ratio"] <= 1
        assert "benchmark_serving.py" in p["setting"]


def test_held_out_points_are_validation_rows_marked_held_out():
    ids = {p["id"] for p in _held_out()}
    rows = [r for r in serving_rows() if r.id in ids]
    assert len(rows) == len(ids)
    for r in rows:
        assert r.role == "validation" and r.vendor == "tpu" and r.projected and r.error_pct is not None
        assert "HELD-OUT" in r.note
        if abs(r.error_pct) > 15:  # a miss keeps its row and says why
            assert r.note.startswith("MISS") and "hypothesis" in r.note


def test_the_recipes_engine_settings_reach_the_deployment():
    for p in _held_out():
        d = _model(p, TPU).deployment
        assert d.block_tokens == p["block_tokens"] and d.hbm_utilization == p["hbm_utilization"]
        assert d.max_batch == p["engine_batch"] and d.chunk_tokens == p["chunk_tokens"]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 20_000),
    st.integers(1, 20_000),
    st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    st.integers(1, 400),
    st.integers(0, 3),
)
def test_random_dataset_lengths_lie_in_the_clients_range(i, o, r, n, seed):
    p = {"input_tokens": i, "output_tokens": o, "random_range_ratio": r, "num_prompts": n}
    reqs = random_requests(p, seed)
    assert len(reqs) == n and all(q.arrival_s == 0.0 for q in reqs)
    assert all(int(r * i) <= q.input_tokens <= i and int(r * o) <= q.output_tokens <= o for q in reqs)


def test_sampled_lengths_match_a_published_log():
    """The Qwen3.5-397B 1k/8k log (tpu-recipes@976253b): 640 requests, 590,227 input and 4,727,146 generated
    tokens, i.e. 922.2 / 7,386 per request; the sampled means agree within 1 %."""
    p = next(p for p in _held_out() if p["id"] == "tpu-recipes-qwen3.5-397b-v7x4-1k8k")
    reqs = random_requests(p)
    assert len(reqs) == 640
    assert math.isclose(sum(q.input_tokens for q in reqs), 590_227, rel_tol=0.01)
    assert math.isclose(sum(q.output_tokens for q in reqs), 4_727_146, rel_tol=0.01)


def _small(**kw) -> dict:
    p = next(p for p in _held_out() if p["id"] == "tpu-recipes-qwen3-32b-v7-1k1k")
    return {**p, "input_tokens": 256, "output_tokens": 64, "num_prompts": 48, "max_concurrency": 48, **kw}


def test_closed_loop_throughput_is_output_tokens_over_the_whole_run_drain_included():
    pr = closed_loop_run(_small(), TPU)
    r = pr.sim
    assert len(r.e2e_s) == 48 and pr.concurrency == 48
    assert math.isclose(pr.output_tok_s_per_chip, r.output_tokens / r.makespan_s / pr.point["chips"])
    # one more wave of the same requests, with the engine capped below the clients: a tail with fewer
    # running sequences than the cap, so less throughput than a run of exactly full waves
    full = closed_loop_run(_small(engine_batch=16, num_prompts=48), TPU)
    ragged = closed_loop_run(_small(engine_batch=16, num_prompts=49), TPU)
    assert full.concurrency == ragged.concurrency == 16
    assert ragged.output_tok_s_per_chip < full.output_tok_s_per_chip


def test_fewer_clients_give_less_throughput_and_faster_tokens():
    few = closed_loop_run(_small(max_concurrency=4), TPU)
    many = closed_loop_run(_small(max_concurrency=48), TPU)
    assert few.output_tok_s_per_chip < many.output_tok_s_per_chip
    assert (
        sorted(few.sim.tpot_s)[len(few.sim.tpot_s) // 2] < sorted(many.sim.tpot_s)[len(many.sim.tpot_s) // 2]
    )


def test_gemma_2b_single_chip_row_keeps_its_miss_with_the_sourced_cache_arithmetic():
    """The table's v5e-1 setting (batch 1,024, cache 2,048, bf16) cannot fit one 16 GB chip: the reason cites
    the engine's cache allocation at the row's date and its size follows from the model file."""
    p = next(p for p in points() if p["id"] == "jetstream-pt-gemma-2b-bf16-v5e1")
    m = _model(p, TPU)
    cache = m.shape.kv_bytes(p["cache_tokens"], 2) * p["engine_batch"]  # bf16, whole model, every slot
    assert math.isclose(cache / 1e9, 38.7, abs_tol=0.05)
    assert cache > m.chip.hbm_gbytes_per_device * 1e9
    why = p["miss_reason"]
    assert "jetstream-pytorch@97aaeae" in why and "engine.py:875-883" in why and "38.7 GB" in why
