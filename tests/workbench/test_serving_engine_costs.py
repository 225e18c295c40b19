"""The engine's host cost per step: sourced per engine (published/engine_costs.json), added once per engine
step, and carried alike by the fluid form, the chunk-exact form and the discrete-event simulation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.projection.engine_costs import INFERENCEX_ENGINE, engines, step_overhead_s
from tpu_workbench.bench.projection.requests import Request
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, steady_state
from tpu_workbench.bench.projection.serving_chunked import chunked_steady_state
from tpu_workbench.bench.projection.serving_sim import simulate
from tpu_workbench.bench.workloads.config import get_config


def _model(step_s: float, pp: int = 1) -> StepModel:
    d = ServingDeployment("TPU v6e", 8 // pp, "tp", pp=pp, max_batch=64, step_overhead_s=step_s)
    return StepModel.build(get_config("llama3-8b"), d)


@given(
    st.floats(0.0, 0.02),
    st.floats(0, 64),
    st.integers(0, 8192),
    st.integers(0, 2048),
    st.sampled_from([1, 2]),
)
@settings(max_examples=30, deadline=None)
def test_step_overhead_adds_once_per_step(step_s, seqs, ctx, prefill, pp):
    """Once per engine step, whatever the batch, the prefill or the pipeline depth (host work is per step)."""
    base, with_host = _model(0.0, pp), _model(step_s, pp)
    assert with_host.time(seqs, ctx, prefill) == pytest.approx(
        base.time(seqs, ctx, prefill) + step_s, rel=1e-12
    )


@pytest.mark.parametrize("state", [steady_state, chunked_steady_state])
def test_closed_forms_carry_the_step_overhead(state):
    """Every step of the closed forms pays it: their TPOT moves by exactly the host cost per step."""
    base, host = state(_model(0.0), 1024, 256, 16), state(_model(0.004), 1024, 256, 16)
    assert host.tpot_s == pytest.approx(base.tpot_s + 0.004, rel=1e-9)


def test_simulation_carries_the_step_overhead():
    """The discrete-event simulation steps the same model: n steps take n x the host cost more."""
    reqs = [Request(0.0, 512, 64) for _ in range(8)]
    a, b = simulate(_model(0.0), reqs), simulate(_model(0.003), reqs)
    assert b.makespan_s - a.makespan_s == pytest.approx(0.003 * b.steps, rel=1e-6)


def test_every_engine_is_sourced_and_hidden_only_when_overlapped():
    for e in engines().values():
        assert e.sources and all(s["url"] and s["date"] and s["what"] for s in e.sources), e.key
        assert e.exposed_step_s >= 0
        if e.host_overlapped:
            assert e.exposed_step_s == 0.0, e.key  # overlapped with the device step: hidden
    assert set(INFERENCEX_ENGINE.values()) <= set(engines())


def test_unknown_engine_is_an_error():
    with pytest.raises(KeyError):
        step_overhead_s("no-such-engine")


def test_inferencex_models_carry_their_engines_cost():
    from tpu_workbench.bench.projection.serving_validation import model_for

    for chip, engine in INFERENCEX_ENGINE.items():
        assert model_for(chip).deployment.step_overhead_s == step_overhead_s(engine)


def test_replace_keeps_the_field():
    d = replace(ServingDeployment("TPU v6e"), step_overhead_s=0.001)
    assert d.step_overhead_s == 0.001


@pytest.mark.slow  # (the whole table through the probe: 16 s)
def test_probe_at_the_registry_cost_reproduces_the_table():
    """The probe (benchmarks/serving_step_cost_probe.py) at the engines' sourced cost is the table itself."""
    from tpu_workbench.bench.projection.serving_validation import inferencex_errors, serving_rows

    table = {(r.id, r.chip): r.error_pct for r in serving_rows() if r.id in ("row 11", "row 12", "row 14")}
    probe = inferencex_errors(
        step_s={v: step_overhead_s(e) for v, e in (("tpu", "vllm-tpu"), ("gpu", "sglang"))}
    )
    for key, err in table.items():
        assert probe[key] == pytest.approx(err, abs=0.05), key
