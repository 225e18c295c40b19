"""Evaluation and sampling idioms: @torch.inference_mode() / torch.no_grad() loops over a trained model whose
buffers (rotary tables, masks) are sliced per step, a growing KV cache, greedy and seeded sampling."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class RotaryLM(nn.Module):
    """A one-layer causal LM with a precomputed rotary table sliced to the sequence, as nanochat/llama do."""

    def __init__(self, vocab: int = 12, d: int = 8, ctx: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)
        angles = torch.outer(torch.arange(ctx, dtype=torch.float32), 1.0 / 100 ** (torch.arange(0, d, 2) / d))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def rotate(self, x: torch.Tensor, start: int) -> torch.Tensor:
        t = x.shape[1]
        cos, sin = self.cos[start : start + t], self.sin[start : start + t]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    def forward(self, idx: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        start = 0 if not cache else cache[0].shape[1]
        q, k, v = self.qkv(self.emb(idx)).chunk(3, dim=-1)
        q, k = self.rotate(q, start), self.rotate(k, start)
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], 1), torch.cat([cache[1], v], 1)
            cache[:] = [k, v]
        causal = start == 0 and idx.shape[1] > 1
        att = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=causal)[:, 0]
        return self.head(att)


def _greedy(model: nn.Module, prompt: list[int], n: int, device: str, use_cache: bool) -> list[int]:
    ids = torch.tensor([prompt], device=device)
    cache: list | None = [] if use_cache else None
    out = []
    logits = model(ids, cache)
    for _ in range(n):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out.append(int(nxt.item()))
        ids = torch.cat([ids, nxt], 1)
        logits = model(nxt if use_cache else ids, cache)
    return out


def _model(device: str) -> RotaryLM:
    torch.manual_seed(0)
    return RotaryLM().to(device).eval()


@pytest.mark.slow
@pytest.mark.parametrize("use_cache", [False, True])
def test_no_grad_greedy_decoding_matches_cpu(use_cache: bool) -> None:
    with torch.no_grad():
        want = _greedy(_model("cpu"), [1, 2, 3], 5, "cpu", use_cache)
        got = _greedy(_model("tpu"), [1, 2, 3], 5, "tpu", use_cache)
    assert got == want


@pytest.mark.slow
def test_kv_cache_decoding_equals_full_recompute() -> None:
    with torch.no_grad():
        model = _model("tpu")
        assert _greedy(model, [4, 5], 6, "tpu", True) == _greedy(model, [4, 5], 6, "tpu", False)


@pytest.mark.slow
def test_inference_mode_decoding_matches_cpu() -> None:
    cpu_model, tpu_model = _model("cpu"), _model("tpu")  # built outside, as a trained model is
    with torch.inference_mode():
        want = _greedy(cpu_model, [1, 2, 3], 5, "cpu", True)
        got = _greedy(tpu_model, [1, 2, 3], 5, "tpu", True)
    assert got == want


def test_views_of_ordinary_tensors_inside_inference_mode() -> None:
    buf = torch.arange(24.0).view(2, 3, 4)
    dev = buf.to("tpu")
    with torch.inference_mode():
        for view in (
            lambda t: t[:, 1:3],
            lambda t: t.view(6, 4),
            lambda t: t[0],
            lambda t: t.transpose(1, 2),
        ):
            assert torch.equal(view(dev).cpu(), view(buf))


@pytest.mark.slow
def test_seeded_sampling_is_reproducible() -> None:
    model = _model("tpu")

    def sample() -> list[int]:
        g = torch.Generator(device="tpu").manual_seed(42)
        ids = torch.tensor([[1, 2]], device="tpu")
        with torch.no_grad():
            for _ in range(5):
                probs = F.softmax(model(ids)[:, -1] / 0.8, dim=-1)
                ids = torch.cat([ids, torch.multinomial(probs, 1, generator=g)], 1)
        return ids[0].tolist()

    first = sample()
    assert first == sample()
    assert all(0 <= t < 12 for t in first)


@pytest.mark.slow
def test_eval_loop_accumulates_a_device_metric() -> None:
    """The validation loop: model.eval(), no_grad, losses summed on the device, one .item() at the end."""
    model = _model("tpu")
    g = torch.Generator().manual_seed(3)
    total, cpu_total = torch.zeros((), device="tpu"), 0.0
    cpu_model = _model("cpu")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randint(0, 12, (2, 6), generator=g)
            y = torch.roll(x, -1, 1)
            total += F.cross_entropy(model(x.to("tpu")).flatten(0, 1), y.to("tpu").flatten())
            cpu_total += F.cross_entropy(cpu_model(x).flatten(0, 1), y.flatten()).item()
    assert model.training is False
    assert total.item() == pytest.approx(cpu_total, rel=1e-5)
