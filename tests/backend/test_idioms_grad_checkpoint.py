"""Activation (gradient) checkpointing as memory-bound scripts use it: torch.utils.checkpoint around blocks,
both re-entrant and not, checkpoint_sequential, and dropout whose recomputed mask must equal the first one."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from idioms.tiny import TinyMLP, vector_batches
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


class Checkpointed(nn.Module):
    """An MLP whose hidden blocks run under torch.utils.checkpoint when `ckpt` is set."""

    def __init__(self, ckpt: bool, reentrant: bool, dropout: float = 0.0) -> None:
        super().__init__()
        self.ckpt, self.reentrant = ckpt, reentrant
        self.inp = nn.Linear(6, 12)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(12), nn.Linear(12, 12), nn.GELU(), nn.Dropout(dropout))
            for _ in range(2)
        )
        self.out = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            if self.ckpt:
                h = h + checkpoint(block, h, use_reentrant=self.reentrant)
            else:
                h = h + block(h)
        return self.out(h)


def _grads(
    ckpt: bool, reentrant: bool, dropout: float, device: str = "tpu"
) -> tuple[float, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = Checkpointed(ckpt, reentrant, dropout).to(device)
    x, y = (t.to(device) for t in vector_batches(1)[0])
    torch.manual_seed(7)  # the dropout stream: identical for the plain and the checkpointed run
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.cpu() for p in model.parameters()]


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_blocks_give_the_plain_gradients(reentrant: bool) -> None:
    plain_loss, plain = _grads(False, reentrant, 0.0)
    ck_loss, ck = _grads(True, reentrant, 0.0)
    assert ck_loss == plain_loss
    for a, b in zip(ck, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    cpu_loss, cpu = _grads(True, reentrant, 0.0, device="cpu")
    assert abs(ck_loss - cpu_loss) < 1e-5
    for a, b in zip(ck, cpu, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_recomputes_the_same_dropout_mask(reentrant: bool) -> None:
    plain_loss, plain = _grads(False, reentrant, 0.3)
    ck_loss, ck = _grads(True, reentrant, 0.3)
    assert ck_loss == plain_loss
    for a, b in zip(ck, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_checkpoint_sequential_matches_the_plain_sequential() -> None:
    torch.manual_seed(0)
    seq = nn.Sequential(*(nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(4))).to("tpu")
    x = torch.randn(5, 6, device="tpu", requires_grad=True)
    seq(x).square().sum().backward()
    want = [p.grad.cpu().clone() for p in seq.parameters()] + [x.grad.cpu().clone()]
    seq.zero_grad()
    x.grad = None
    checkpoint_sequential(seq, 2, x, use_reentrant=False).square().sum().backward()
    got = [p.grad.cpu() for p in seq.parameters()] + [x.grad.cpu()]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_checkpoint_inside_autocast() -> None:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    x, y = (t.to("tpu") for t in vector_batches(1)[0])
    with torch.autocast("tpu", dtype=torch.bfloat16):
        logits = checkpoint(model.net, x, use_reentrant=False)
        assert logits.dtype == torch.bfloat16
        loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())
