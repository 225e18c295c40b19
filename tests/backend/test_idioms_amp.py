"""Mixed precision as GPU scripts write it: autocast("tpu") with bfloat16 or float16, GradScaler's scale /
unscale_ / step / update cycle (including skipped steps on inf), clipping of unscaled gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from idioms.tiny import TinyMLP, vector_batches


def _amp_losses(device: str, dtype: torch.dtype, steps: int = 4) -> list[float]:
    torch.manual_seed(0)
    model = TinyMLP().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device, enabled=dtype == torch.float16)
    losses = []
    for x, y in vector_batches(steps):
        with torch.autocast(device_type=device, dtype=dtype):
            _, loss = model(x.to(device), y.to(device))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def _fp32_losses(steps: int = 4) -> list[float]:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in vector_batches(steps):
        _, loss = model(x.to("tpu"), y.to("tpu"))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_training_tracks_float32(dtype: torch.dtype) -> None:
    amp, fp32 = _amp_losses("tpu", dtype), _fp32_losses()
    assert all(math.isfinite(v) for v in amp)
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    for a, b in zip(amp, fp32, strict=True):
        assert abs(a - b) <= tol * max(1.0, abs(b)), (amp, fp32)


def test_autocast_dtype_policy_matches_cuda() -> None:
    x = torch.randn(4, 6, device="tpu")
    w = torch.randn(6, 6, device="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        h = x @ w
        assert h.dtype == torch.bfloat16  # matmul family runs in the low precision
        assert F.linear(x, w).dtype == torch.bfloat16
        assert torch.softmax(h, -1).dtype == torch.float32  # CUDA's fp32 list: softmax, norms, losses
        assert F.layer_norm(h, (6,)).dtype == torch.float32
        assert F.cross_entropy(h, torch.tensor([0, 1, 2, 3], device="tpu")).dtype == torch.float32
        assert torch.relu(h).dtype == torch.bfloat16  # others follow their input
        assert torch.cat([h, x]).dtype == torch.float32  # promote to the widest input
        with torch.autocast("tpu", enabled=False):
            assert (x @ w).dtype == torch.float32
    assert (x @ w).dtype == torch.float32
    assert torch.is_autocast_enabled("tpu") is False


def test_grad_scaler_grows_and_backs_off() -> None:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu", init_scale=1024.0, growth_interval=2)
    x, y = vector_batches(1)[0]
    x, y = x.to("tpu"), y.to("tpu")

    def step(poison: bool) -> None:
        with torch.autocast("tpu", dtype=torch.float16):
            _, loss = model(x, y)
        scaler.scale(loss).backward()
        if poison:
            next(model.parameters()).grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    step(False)
    step(False)
    assert scaler.get_scale() == 2048.0  # two clean steps at growth_interval=2 double the scale
    before = [p.detach().cpu().clone() for p in model.parameters()]
    step(True)
    assert scaler.get_scale() == 1024.0  # an inf halves it ...
    after = [p.detach().cpu() for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))  # ... and the step is skipped
    step(False)
    assert any(not torch.equal(a, p.detach().cpu()) for a, p in zip(before, model.parameters(), strict=True))


def test_unscale_then_clip_sees_the_true_gradient_norm() -> None:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    x, y = (t.to("tpu") for t in vector_batches(1)[0])
    _, loss = model(x, y)
    loss.backward()
    plain = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
    model.zero_grad()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu", init_scale=2.0**12)
    _, loss = model(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    clipped_from = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=plain / 2).item()
    assert clipped_from == pytest.approx(plain, rel=1e-5)
    after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
    assert after == pytest.approx(plain / 2, rel=1e-4)
