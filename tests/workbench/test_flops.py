import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import attention_flops_per_token, flops_per_step, flops_per_token, param_counts
from tpu_workbench.bench.workloads import build_model, decoder_step, get_config


@pytest.mark.parametrize("name", ["tiny", "tiny-moe"])
def test_param_count_matches_module(name):
    cfg = get_config(name)
    assert param_counts(cfg).total == sum(p.numel() for p in build_model(cfg).parameters())
    tied = cfg.with_(tie_embeddings=True)
    assert param_counts(tied).total == sum(p.numel() for p in build_model(tied).parameters())


@pytest.mark.parametrize("name", ["tiny", "tiny-moe"])
@pytest.mark.parametrize("phase", ["train", "prefill", "decode"])
def test_analytic_flops_match_flop_counter_within_5_percent(name, phase):
    cfg = get_config(name)
    step = decoder_step(cfg, phase, "cpu", batch=2, seq=48)
    with FlopCounterMode(display=False) as counter:
        step.fn()
    counted = counter.get_total_flops()
    analytic = flops_per_step(cfg, phase, batch=2, seq=48, convention="palm")
    assert counted == pytest.approx(analytic, rel=0.05)
    torch.set_grad_enabled(True)


def test_causal_convention_halves_only_attention():
    cfg = get_config("llama3-8b")
    palm = flops_per_token(cfg, "train", 8192, convention="palm")
    causal = flops_per_token(cfg, "train", 8192, convention="causal")
    assert palm - causal == pytest.approx(3 * attention_flops_per_token(cfg, 8192, causal_halved=True))
    assert flops_per_token(cfg, "decode", 100, convention="palm") == flops_per_token(
        cfg, "decode", 100, convention="causal"
    )


def test_large_presets_match_published_sizes():
    assert param_counts(get_config("llama3-70b")).total / 1e9 == pytest.approx(70.6, abs=0.3)
    q = param_counts(get_config("qwen3-235b-a22b"))
    assert q.total / 1e9 == pytest.approx(235, abs=1.5)
    assert q.active / 1e9 == pytest.approx(22, abs=1.0)
    # 6N rule of thumb for training with MoE active parameters
    assert flops_per_token(get_config("qwen3-235b-a22b"), "train", 1, convention="causal") == pytest.approx(
        6 * q.active_matmul, rel=0.01
    )


def test_unknown_convention_and_phase():
    with pytest.raises(WorkbenchError, match="palm"):
        flops_per_token(get_config("tiny"), "train", 8, convention="megatron")
    with pytest.raises(WorkbenchError, match="decode"):
        flops_per_token(get_config("tiny"), "serve", 8)
