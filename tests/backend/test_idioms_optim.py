"""Optimizer-side idioms: fused optimizers (picked by scripts whenever the device is an accelerator), decay /
no-decay parameter groups with a hand-set learning rate, schedulers, gradient clipping and accumulation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from idioms.tiny import TinyMLP, vector_batches


def _groups(model: torch.nn.Module, wd: float) -> list[dict]:
    """nanoGPT's split: matrices decay, biases and norm gains do not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip


def _lr(step: int, warmup: int = 2, total: int = 6, peak: float = 1e-2) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + torch.cos(torch.tensor((step - warmup) / (total - warmup) * torch.pi)).item())


OPTIMIZERS = {
    "adamw": lambda groups, **kw: torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), **kw),
    "adamw-amsgrad": lambda groups, **kw: torch.optim.AdamW(groups, lr=1e-2, amsgrad=True, **kw),
    "adam": lambda groups, **kw: torch.optim.Adam(groups, lr=1e-2, **kw),
    "sgd-nesterov": lambda groups, **kw: torch.optim.SGD(groups, lr=1e-2, momentum=0.9, nesterov=True, **kw),
}


def _run(device: str, name: str, steps: int = 5, **kw) -> tuple[list[float], list[torch.Tensor]]:
    torch.manual_seed(0)
    model = TinyMLP().to(device)
    opt = OPTIMIZERS[name](_groups(model, 0.1), **kw)
    losses = []
    for step, (x, y) in enumerate(vector_batches(steps)):
        for group in opt.param_groups:
            group["lr"] = _lr(step)
        _, loss = model(x.to(device), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_fused_optimizer_matches_the_cpu_loop(name: str) -> None:
    cpu_losses, cpu_params = _run("cpu", name, foreach=False)
    tpu_losses, tpu_params = _run("tpu", name, fused=True)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-5)
    for a, b in zip(tpu_params, cpu_params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_fused_adamw_under_a_grad_scaler_skips_inf_steps() -> None:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler("tpu", init_scale=256.0)
    x, y = (t.to("tpu") for t in vector_batches(1)[0])
    with torch.autocast("tpu", dtype=torch.float16):
        _, loss = model(x, y)
    scaler.scale(loss).backward()
    next(model.parameters()).grad.fill_(float("nan"))
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scaler.step(opt)  # the fused kernel receives found_inf and must leave the parameters alone
    scaler.update()
    assert all(torch.equal(a, p.detach().cpu()) for a, p in zip(before, model.parameters(), strict=True))
    assert scaler.get_scale() == 128.0


def test_scheduler_and_manual_lr_agree_between_devices() -> None:
    def lrs(device: str) -> list[float]:
        torch.manual_seed(0)
        model = TinyMLP().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=2)
        cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
        out = []
        for x, y in vector_batches(4):
            _, loss = model(x.to(device), y.to(device))
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            out.append(sched.get_last_lr()[0])
        return out

    assert lrs("tpu") == lrs("cpu")


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("foreach", [True, False])
def test_clip_grad_norm_matches_cpu(norm_type: float, foreach: bool) -> None:
    torch.manual_seed(0)
    grads = [torch.randn(12, 6) * 3, torch.randn(12), torch.randn(3, 12)]
    cpu_params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    tpu_params = [torch.nn.Parameter(torch.zeros_like(g, device="tpu")) for g in grads]
    for c, t, g in zip(cpu_params, tpu_params, grads, strict=True):
        c.grad, t.grad = g.clone(), g.to("tpu")
    want = torch.nn.utils.clip_grad_norm_(cpu_params, 1.5, norm_type=norm_type, foreach=foreach)
    got = torch.nn.utils.clip_grad_norm_(tpu_params, 1.5, norm_type=norm_type, foreach=foreach)
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    for c, t in zip(cpu_params, tpu_params, strict=True):
        torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=1e-6, atol=1e-6)


def test_clip_grad_norm_non_finite_raises_when_asked() -> None:
    p = torch.nn.Parameter(torch.zeros(3, device="tpu"))
    p.grad = torch.tensor([1.0, float("nan"), 2.0], device="tpu")
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    p.grad = torch.tensor([3.0, -7.0, 0.5], device="tpu")
    torch.nn.utils.clip_grad_value_([p], 2.0)
    assert p.grad.cpu().tolist() == [2.0, -2.0, 0.5]


def test_gradient_accumulation_equals_the_full_batch() -> None:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    x, y = vector_batches(1, batch=8)[0]
    x, y = x.to("tpu"), y.to("tpu")
    _, full = model(x, y)
    full.backward()
    want = [p.grad.cpu().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    micro = 4
    for xs, ys in zip(x.chunk(micro), y.chunk(micro), strict=True):
        _, loss = model(xs, ys)
        (loss / micro).backward()  # grads accumulate in .grad across micro-steps
    for p, w in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad.cpu(), w, rtol=1e-5, atol=1e-6)


def test_zero_grad_set_to_none_and_keep() -> None:
    model = TinyMLP().to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (t.to("tpu") for t in vector_batches(1)[0])
    F.cross_entropy(model(x)[0], y).backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.device.type == "tpu" and not p.grad.cpu().any() for p in
               model.parameters())  # fmt: skip
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
