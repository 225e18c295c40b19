"""Property tests: the analytic counts hold for any small shape, not just the presets."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench import cost
from tpu_workbench.bench.flops import param_counts
from tpu_workbench.bench.workloads import DecoderConfig, build_model


@st.composite
def configs(draw):
    kv = draw(st.integers(1, 3))
    heads = kv * draw(st.integers(1, 3))
    moe = draw(st.booleans())
    experts = draw(st.integers(2, 6)) if moe else 0
    return DecoderConfig(
        "h",
        vocab=draw(st.integers(8, 64)),
        d_model=heads * draw(st.integers(1, 4)) * 2,
        n_layers=draw(st.integers(1, 3)),
        n_heads=heads,
        n_kv_heads=kv,
        ffn_dim=draw(st.integers(1, 32)),
        n_experts=experts,
        top_k=draw(st.integers(1, experts)) if moe else 0,
        moe_ffn_dim=draw(st.integers(1, 16)) if moe else 0,
        n_shared_experts=draw(st.integers(0, 2)) if moe else 0,
        tie_embeddings=draw(st.booleans()),
        max_seq=16,
    )


@settings(max_examples=25, deadline=None)
@given(configs())
def test_param_counts_match_any_built_model(cfg):
    assert param_counts(cfg).total == sum(p.numel() for p in build_model(cfg).parameters())


@given(st.floats(0.01, 100), st.floats(1, 1e6))
def test_cost_per_mtok_and_tokens_per_usd_are_reciprocal(price, tps):
    assert abs(cost.usd_per_million_tokens(price, tps) * cost.tokens_per_usd(price, tps) - 1e6) < 1e-3
