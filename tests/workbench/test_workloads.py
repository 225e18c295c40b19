import pytest
import torch

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.workloads import KVCache, build_model, get_config, preset_names, vision_step


@pytest.mark.parametrize("name", ["tiny", "tiny-moe"])
def test_kv_cache_decode_matches_full_forward(name):
    cfg = get_config(name)
    model = build_model(cfg).eval()
    tokens = torch.randint(0, cfg.vocab, (2, 12))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache(cfg, 2, 12, device="cpu", dtype=torch.float32)
        model(tokens[:, :8], cache=cache, start=0)
        steps = [model(tokens[:, i : i + 1], cache=cache, start=i) for i in range(8, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, 8:], rtol=1e-4, atol=1e-4)


def test_attention_is_causal():
    cfg = get_config("tiny")
    model = build_model(cfg).eval()
    a = torch.randint(0, cfg.vocab, (1, 10))
    b = a.clone()
    b[0, 7:] = (b[0, 7:] + 1) % cfg.vocab
    with torch.no_grad():
        torch.testing.assert_close(model(a)[:, :7], model(b)[:, :7])


def test_unknown_preset_lists_names():
    with pytest.raises(WorkbenchError) as err:
        get_config("llama9")
    for name in ("tiny", "llama3-70b", "qwen3-235b-a22b"):
        assert name in str(err.value)
    assert {"tiny", "small", "llama3-70b", "qwen3-235b-a22b"} <= set(preset_names())


@pytest.mark.slow
def test_vision_train_step_reduces_loss():
    step = vision_step(
        __import__("tpu_workbench.bench.workloads", fromlist=["VisionConfig"]).VisionConfig(),
        "train",
        "cpu",
        batch=8,
    )
    first = float(step.fn().detach())
    for _ in range(20):
        last = float(step.fn().detach())
    assert last < first
