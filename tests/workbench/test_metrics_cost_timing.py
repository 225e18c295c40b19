import time

import pytest

from workbench import cost
from workbench.catalog import load_catalog
from workbench.metrics import bandwidth_utilisation, measure_cpu_matmul_peak, mfu
from workbench.timing import time_callable


def test_time_callable_keeps_samples_and_first_call_apart():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.004 if len(calls) > 1 else 0.05)

    t = time_callable(fn, device="cpu", budget_s=0.2)
    assert t.first_call_s >= 0.05
    assert 0.004 <= t.median_s < 0.05  # the slow first call is not among the samples
    assert len(t.samples_s) >= 1 and t.iqr_s >= 0 and t.compile_s is None
    assert "adaptive_autorange" in t.method


def test_compile_time_is_first_call_minus_median():
    t = time_callable(lambda: None, device="cpu", budget_s=0.05, compiled=True)
    assert t.compile_s == pytest.approx(max(t.first_call_s - t.median_s, 0.0))


def test_mfu_and_mbu_identities():
    assert mfu(6e9, 1000.0, 12e12) == pytest.approx(0.5)
    assert bandwidth_utilisation(1e9, 0.01, 2e11) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mfu(1, 1, 0)


def test_measured_cpu_peak_is_positive_and_labelled():
    peak = measure_cpu_matmul_peak("fp32", n=256, budget_s=0.05)
    assert peak.value > 1e8 and "measured host-CPU matmul peak" in peak.basis and peak.samples


def test_cost_identities_reproduce_published_arithmetic():
    # $1.21/chip-hr at 9,364 tok/s per chip -> $0.0359 per million tokens
    assert cost.usd_per_million_tokens(1.21, 9364) == pytest.approx(1.21 / (9364 * 3600) * 1e6)
    assert cost.tokens_per_usd(1.0, 1.0) == 3600
    assert cost.usd_per_run(3600e3, 1000.0, 10, 2.0) == pytest.approx(0.1 * 10 * 2.0)
    assert cost.joules_per_token(700, 1000) == pytest.approx(0.7)


def test_cost_lines_per_tier_and_energy():
    h100 = load_catalog().chip("H100")
    lines = cost.cost_lines(h100.prices, 1000.0)
    assert {c.tier for c in lines} >= {"on-demand", "own-hyperscaler", "rent-3yr"}
    assert all(c.price_date and c.price_source for c in lines)
    e = cost.energy(h100, 1000.0)
    assert e["j_per_token_tdp"] == pytest.approx(0.7) and e["j_per_token_allin"] == pytest.approx(1.73)
    assert cost.energy(load_catalog().chip("TPU v5e"), 1.0) == {}
