"""Serving model: engine step times, KV capacity, closed form vs discrete-event simulation, prices at an
interactivity target, request mixes and traces."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.projection.requests import Request, RequestMix, load_trace
from tpu_workbench.bench.projection.serving import (
    ServingDeployment,
    StepModel,
    at_interactivity,
    curve,
    kv_capacity,
    steady_state,
)
from tpu_workbench.bench.projection.serving_sim import simulate


@pytest.fixture(scope="module")
def v6e():
    return StepModel.build("llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=64))


def test_a_decode_only_step_is_the_projected_decode_step(v6e):
    for ctx in (512, 16384):
        rec = project("TPU v6e", "llama3-8b", "decode", 8, "tp", batch=8, seq=ctx)
        assert v6e.time(64, ctx, 0) == pytest.approx(rec.step_median_s, rel=0.01)
    assert v6e.time(64, 1024, 2048) > v6e.time(64, 1024, 0)  # a prefill chunk costs time


def test_kv_capacity_counts_paged_blocks_after_the_weights():
    m = StepModel.build("llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=10_000))
    short, long = kv_capacity(m, 2048), kv_capacity(m, 32768)
    assert short.max_seqs > 10 * long.max_seqs > 0
    per_seq_gb = 32768 * m.kv_bytes_per_token_per_chip() / 1e9
    assert long.max_seqs == pytest.approx(long.kv_gb_per_chip / per_seq_gb, abs=1)
    tiny = StepModel.build("llama3-70b", ServingDeployment("TPU v5e", 1, "tp"))
    assert kv_capacity(tiny, 2048).infeasible.startswith("does not fit in HBM")


def test_the_simulation_and_the_closed_form_agree_on_a_steady_state(v6e):
    sim = simulate(v6e, RequestMix(1024, 256, n=640).sample())
    st = steady_state(v6e, 1024, 256, 64)
    assert sim.output_tok_s_per_chip == pytest.approx(st.output_tok_s_per_chip, rel=0.06)
    assert sim.pct("tpot_s", 50) == pytest.approx(st.tpot_s, rel=0.05)
    assert sim.pct("ttft_s", 99) > sim.pct("ttft_s", 50)  # offline: later requests queue


def test_a_dense_cache_is_read_whole_in_the_closed_form_and_the_simulation_alike():
    """jetstream-pytorch's preallocated cache: every decode step attends over all of it, so the step is
    slower than a paged one at the same lengths, and the simulation and the closed form still agree."""
    dense = StepModel.build(
        "llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=64, dense_cache_tokens=4096)
    )
    paged = StepModel.build("llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=64))
    st = steady_state(dense, 1024, 256, 64)
    assert st.tpot_s > steady_state(paged, 1024, 256, 64).tpot_s
    assert st.tpot_s == pytest.approx(dense.time(64, 4096, 64 * 1024 / 256, 512))
    assert kv_capacity(dense, 1280).max_seqs == kv_capacity(paged, 4096).max_seqs  # a slot holds it all
    sim = simulate(dense, RequestMix(1024, 256, n=640).sample())
    assert sim.output_tok_s_per_chip == pytest.approx(st.output_tok_s_per_chip, rel=0.06)
    assert sim.pct("tpot_s", 50) == pytest.approx(st.tpot_s, rel=0.05)


def test_poisson_arrivals_below_capacity_keep_ttft_short(v6e):
    light = simulate(v6e, RequestMix(1024, 128, rate_per_s=2.0, n=100).sample())
    heavy = simulate(v6e, RequestMix(1024, 128, n=100).sample())
    assert light.pct("ttft_s", 90) < heavy.pct("ttft_s", 90)
    assert light.pct("tpot_s", 50) < heavy.pct("tpot_s", 50)


def test_price_at_an_interactivity_target_meets_it_and_refuses_what_cannot(v6e):
    p = at_interactivity(v6e, 1024, 1024, 200.0, 2.7)
    assert p.state.tok_s_per_user >= 200 and p.infeasible is None
    assert (
        steady_state(v6e, 1024, 1024, p.state.concurrency + 1).tok_s_per_user < 200
        or p.state.concurrency == 64
    )
    assert p.usd_per_m_output > p.usd_per_m_total > p.usd_per_m_input > 0
    slo = at_interactivity(v6e, 1024, 1024, 10_000.0, 2.7)
    assert slo.usd_per_m_output is None and slo.infeasible.startswith("misses the SLO")
    no = at_interactivity(
        StepModel.build("llama3-70b", ServingDeployment("TPU v5e", 1, "tp")), 1024, 1024, 20, 1.0
    )
    assert no.usd_per_m_total is None and no.infeasible.startswith("does not fit")


def test_the_curve_trades_interactivity_for_throughput_and_names_what_does_not_fit():
    m = StepModel.build("llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=4096))
    pts = curve(m, 8192, 1024, concurrencies=[1, 16, 128, 100_000])
    fit = [p for p in pts if p.infeasible is None]
    assert [p.tok_s_per_user for p in fit] == sorted((p.tok_s_per_user for p in fit), reverse=True)
    assert [p.output_tok_s_per_chip for p in fit] == sorted(p.output_tok_s_per_chip for p in fit)
    assert pts[-1].output_tok_s_per_chip is None and "KV capacity" in pts[-1].infeasible


def test_traces_and_mixes_refuse_bad_input_in_one_line(tmp_path):
    good = tmp_path / "t.jsonl"
    good.write_text(
        json.dumps({"input_tokens": 10, "output_tokens": 5, "arrival_s": 1.5})
        + "\n"
        + json.dumps({"input_tokens": 3, "output_tokens": 2})
        + "\n"
    )
    assert load_trace(good) == [Request(0.0, 3, 2), Request(1.5, 10, 5)]
    bad = tmp_path / "b.jsonl"
    for text, msg in (
        ('{"input_tokens": 10}\n', "needs input_tokens"),
        ('{"input_tokens": 0, "output_tokens": 5}\n', ">= 1"),
        ("", "no requests"),
    ):
        bad.write_text(text)
        with pytest.raises(WorkbenchError, match=msg):
            load_trace(bad)
    with pytest.raises(WorkbenchError, match="exceeds the model's context"):
        load_trace(good, max_context=12)
    with pytest.raises(WorkbenchError, match="unknown request mix"):
        RequestMix.named("2k/2k")
    spread = RequestMix.named("8k/1k", spread=0.5, n=2000).sample()
    assert abs(sum(r.input_tokens for r in spread) / 2000 / 8192 - 1) < 0.05


def test_the_notebook_tables_give_reasons_not_prices_where_a_chip_cannot_serve():
    from tpu_workbench.bench.projection import serving_views as sv

    costs = sv.cost_table(["TPU v5e", "B200"], "llama3-70b", n_chips=1, target=20.0)
    v5e, b200 = costs.to_dict("records")
    assert v5e["why not"] and v5e.get("$/M output") != v5e.get("$/M output")  # NaN: no price
    listed = sv.cost_table(["TPU v5e"], "llama3-70b", n_chips=1, target=20.0, price_kind="list")
    assert listed["why not"].iloc[0].startswith("does not fit in HBM: weights 141.1 GB")
    assert b200["why not"] == "" and b200["$/M output"] > b200["$/M input"] > 0
    ctx = sv.decode_context_frame("TPU v6e", "llama3-8b", contexts=(4096, 32768))
    assert ctx["step ms"].iloc[0] > 0 and ctx["why not"].iloc[1].startswith("does not fit")


def test_the_serve_cli_prices_searches_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    from tpu_workbench.bench.cli import main

    base = ["project", "--serve", "-w", "llama3-8b", "--chip", "TPU v7", "B200"]
    assert main([*base, "--chips", "8", "--layout", "tp", "--target", "50"]) == 0
    out = capsys.readouterr().out
    assert "$/M output" in out and "TPU v7" in out and "serving model" in out
    assert main([*base, "--search"]) == 0 and "cheapest" in capsys.readouterr().out
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"input_tokens": 512, "output_tokens": 64}\n' * 8)
    assert main([*base, "--chips", "8", "--layout", "tp", "--trace", str(trace)]) == 0
    assert "ttft_p99_s" in capsys.readouterr().out
    bad_cfg = tmp_path / "config.json"
    bad_cfg.write_text('{"num_hidden_layers": 2}')
    long = tmp_path / "long.jsonl"
    long.write_text('{"input_tokens": 9000, "output_tokens": 64}\n')
    for extra, msg in (
        (["--chip", "A100", "--precision", "fp8"], "no catalog peak for precision 'fp8'"),
        (["--config-json", str(bad_cfg)], "lacks hidden_size"),
        (["--mix", "1k-1k"], "bad --mix"),
        (["--mix", "8192/1024"], "exceeds llama3-8b's context"),
        (["--trace", str(long), "--chips", "8", "--layout", "tp"], "exceeds the model's context"),
        (["-o", str(tmp_path / "r.jsonl")], "writes no records"),
    ):
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.jsonl").exists()


def test_mlperf_offline_and_server_scenarios(v6e):
    from dataclasses import replace

    from tpu_workbench.bench.projection.serving_sim import offline_throughput, server_throughput

    mix = RequestMix(1024, 128, n=200)
    assert offline_throughput(v6e, mix) > 0
    rate, run = server_throughput(v6e, mix, ttft_p99_s=0.5, tpot_p99_s=0.02)
    assert rate > 0 and run.pct("ttft_s", 99) <= 0.5 and run.pct("tpot_s", 99) <= 0.02
    faster = simulate(v6e, replace(mix, rate_per_s=2 * rate).sample())
    assert (
        faster.pct("ttft_s", 99) > 0.5
    )  # twice the rate misses the TTFT limit: the bisection found the edge
    strict, none = server_throughput(v6e, mix, ttft_p99_s=1e-4, tpot_p99_s=0.02, iterations=4)
    assert strict == 0.0 and none is None


def test_a_closed_loop_of_clients_keeps_the_concurrency_and_serves_every_request(v6e):
    reqs = RequestMix(1024, 64, n=96).sample()
    run = simulate(v6e, reqs, clients=16)
    assert len(run.e2e_s) == 96
    assert (
        run.output_tok_s_per_chip < simulate(v6e, reqs, clients=64).output_tok_s_per_chip
    )  # more clients, more tok/s


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    text=st.text(max_size=20),
    rows=st.lists(
        st.dictionaries(
            st.sampled_from(["input_tokens", "output_tokens", "arrival_s", "x"]),
            st.one_of(st.integers(-5, 10**6), st.floats(), st.text(max_size=3)),
            max_size=4,
        ),
        max_size=4,
    ),
)
def test_mix_and_trace_input_is_parsed_or_refused_in_one_line(tmp_path_factory, text, rows):
    from tpu_workbench.bench.projection.serve_cli import parse_mix

    try:
        i, o = parse_mix(text)
        assert i >= 1 and o >= 1
    except WorkbenchError as e:
        assert "\n" not in str(e)
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    try:
        reqs = load_trace(path, max_context=8192)
        assert all(r.input_tokens >= 1 and r.output_tokens >= 1 and r.arrival_s >= 0 for r in reqs)
    except WorkbenchError as e:
        assert "\n" not in str(e)
