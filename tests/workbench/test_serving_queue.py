"""The closed-form server scenario (serving_queue): Erlang C against textbook values, the bound sits where
the p99 wait meets the TTFT limit, and it agrees with the discrete-event server scenario on small replicas
(conservative: its slots always step at full occupancy)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.projection.requests import RequestMix
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, steady_state
from tpu_workbench.bench.projection.serving_queue import erlang_c, server_bound, wait_tail
from tpu_workbench.bench.projection.serving_sim import server_throughput


def _v6e(max_batch: int) -> StepModel:
    return StepModel.build("llama3-8b", ServingDeployment("TPU v6e", 8, "tp", max_batch=max_batch))


def test_erlang_c_matches_the_textbook():
    assert erlang_c(1, 0.7) == pytest.approx(0.7)  # M/M/1: an arrival waits with probability rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(8, 0.0) == 0.0
    assert erlang_c(100, 95.0) > erlang_c(100, 80.0) > erlang_c(200, 160.0)  # pooling: same rho, fewer waits


def test_the_bound_is_where_the_p99_wait_meets_the_ttft_limit():
    m, i, o, c = _v6e(16), 512, 128, 16
    b = server_bound(m, i, o, c, ttft_limit_s=1.0)
    st = steady_state(m, i, o, c)
    assert b.service_s == pytest.approx(st.ttft_s + (o - 1) * st.step_s)
    assert 0.5 < b.utilisation < 1
    assert wait_tail(c, b.service_s, b.rate_per_s, 1.0 - st.ttft_s) == pytest.approx(0.01, rel=1e-3)
    assert wait_tail(c, b.service_s, 1.05 * b.rate_per_s, 1.0 - st.ttft_s) > 0.01
    assert b.output_tok_s_per_chip == pytest.approx(b.rate_per_s * o / 8)
    assert b.output_tok_s_per_chip < st.output_tok_s_per_chip  # below offline saturation
    looser = server_bound(m, i, o, c, ttft_limit_s=5.0)
    assert looser.rate_per_s > b.rate_per_s
    assert server_bound(m, i, o, c, ttft_limit_s=st.ttft_s / 2) is None  # the prefill alone misses it


@pytest.mark.slow  # (7 s; its spread-lengths sibling and test_serving.py keep the agreement in the quick loop)
def test_agrees_with_the_discrete_event_server_scenario_fixed_lengths():
    m, i, o = _v6e(16), 512, 128
    des, _ = server_throughput(
        m, RequestMix(i, o, n=3000, seed=1), ttft_p99_s=1.0, tpot_p99_s=10.0, iterations=14
    )
    closed = server_bound(m, i, o, 16, ttft_limit_s=1.0, cv2=0.0).rate_per_s
    assert 0.93 * des <= closed <= des


@pytest.mark.slow
def test_agrees_with_the_discrete_event_server_scenario_spread_lengths():
    sigma = 0.6  # log-normal lengths: squared coefficient of variation e^(sigma^2) - 1
    for c, i in ((16, 512), (64, 256)):
        m = _v6e(c)
        mix = RequestMix(i, 128, spread=sigma, n=8000, seed=1)
        des, _ = server_throughput(m, mix, ttft_p99_s=1.0, tpot_p99_s=10.0, iterations=12)
        closed = server_bound(m, i, 128, c, ttft_limit_s=1.0, cv2=math.exp(sigma**2) - 1).rate_per_s
        assert 0.93 * des <= closed <= des, (c, des, closed)


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 400), rho=st.floats(0.01, 0.99), bump=st.floats(1.001, 1.2))
def test_erlang_c_is_a_probability_rising_with_load(c, rho, bump):
    a = rho * c
    p = erlang_c(c, a)
    assert 0.0 <= p <= 1.0
    if rho * bump < 1:
        assert erlang_c(c, a * bump) >= p
    # the wait tail falls with the time waited and rises with the arrival rate
    service = 10.0
    rate = a / service
    assert wait_tail(c, service, rate, 1.0) >= wait_tail(c, service, rate, 2.0)
    assert wait_tail(c, service, rate * min(bump, 1 / rho), 1.0) >= wait_tail(c, service, rate, 1.0)
    assert wait_tail(c, service, c / service, 1.0) == 1.0  # at capacity the queue never drains
