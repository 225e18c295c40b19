"""Sliding-window layers in training and decode FLOPs: MaxText's own count, the kernel's whole blocks, refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import attention_flops_per_token, flops_per_token
from tpu_workbench.bench.projection.work import _keys_per_query
from tpu_workbench.bench.workloads import get_config
from tpu_workbench.bench.workloads.config import DecoderConfig
from tpu_workbench.bench.workloads.decoder import build_model

BASE = get_config("llama3-8b")


def _windowed(window: int, layers: int) -> DecoderConfig:
    return BASE.with_(name="windowed", window=window, window_layers=layers)


def _maxtext_attention_per_token(cfg: DecoderConfig, seq: int) -> float:
    """maxtext@e591f30 calculate_mixed_attention_model_tflops_training_per_device, forward, per token."""
    w = min(cfg.window, seq)
    full = 2 * seq**2 * cfg.n_heads * cfg.head_dim
    local = 4 * (seq * w - 0.5 * w**2) * cfg.n_heads * cfg.head_dim
    return ((cfg.n_layers - cfg.window_layers) * full + cfg.window_layers * local) / seq


@settings(max_examples=60, deadline=None)
@given(
    window=st.integers(1, 20_000),
    layers=st.integers(1, BASE.n_layers),
    seq=st.integers(1, 16_384),
)
def test_windowed_attention_is_maxtexts_count_and_never_above_full(window, layers, seq):
    cfg = _windowed(window, layers)
    got = attention_flops_per_token(cfg, seq, causal_halved=True)
    assert got == pytest.approx(_maxtext_attention_per_token(cfg, seq), rel=1e-9)
    full = attention_flops_per_token(BASE, seq, causal_halved=True)
    # the exact band (T*W - W^2/2) is at most the halved T^2 of a full causal layer... plus half a key per query
    assert got <= full + 2.0 * cfg.n_heads * cfg.head_dim * layers
    assert attention_flops_per_token(cfg, seq, causal_halved=False) == pytest.approx(
        2 * attention_flops_per_token(cfg, seq, causal_halved=True)
    )


def test_a_decode_query_reads_at_most_the_window():
    cfg = _windowed(128, 16)
    per_key = 4 * cfg.n_heads * cfg.head_dim
    got = attention_flops_per_token(cfg, 4097, causal_halved=False, decode=True)
    assert got == pytest.approx(per_key * (16 * 4097 + 16 * 128))
    assert flops_per_token(cfg, "decode", 4096) < flops_per_token(BASE, "decode", 4096)


def test_the_kernel_computes_whole_blocks_of_a_window():
    # a 128-key window under 1,024-key blocks: the diagonal block and the one before it
    assert _keys_per_query(8192, None, True, 1024, 128) == 2048
    assert _keys_per_query(8192, None, True, 1024, 2048) == 3072
    # never more than a full causal layer's keys, decode reads the window plus itself
    assert _keys_per_query(2048, None, True, 1024, 4096) == _keys_per_query(2048, None, True, 1024)
    assert _keys_per_query(8192, 4096, True, 1024, 128) == 129


def test_gpt_oss_is_set_up_and_its_flop_count_is_the_published_one():
    from tpu_workbench.bench.projection import projection_vs_published

    table = projection_vs_published()
    rows = table[table["id"].str.startswith("maxtext-tpu7x-gpt-oss-120b")]
    assert len(rows) == 4 and not (rows["category"] == "unanchored").any()
    # 330.25 TFLOP/s / 9,581.66 tokens/s = 34.5 GFLOP/token: MaxText's windowed count, reproduced
    assert rows["consistency"].str.contains(r"reproduced by causal \(34\.5 GFLOP/token").all()


def test_window_settings_are_checked_and_the_runnable_decoder_refuses_them():
    with pytest.raises(WorkbenchError, match="sliding-window"):
        BASE.with_(window=128, window_layers=0)
    with pytest.raises(WorkbenchError, match="sliding-window"):
        BASE.with_(window=128, window_layers=BASE.n_layers + 1)
    tiny = get_config("tiny").with_(window=8, window_layers=1)
    with pytest.raises(WorkbenchError, match="projection only"):
        build_model(tiny)
