"""A forward with autograd on and no backward frees its activations, as on CUDA.

Autograd saves the output of ``tanh``/``sigmoid``/``relu``/``exp``/softmax ... as a detached alias held by the
output's own grad_fn in C++. Before 2026-12-06 that alias referred back to the output, a cycle Python's gc
cannot see: an evaluation loop without ``no_grad`` (pyGAT's validation) grew by each step's activations."""

from __future__ import annotations

import gc
import weakref

import jax
import pytest
import torch

SAVES_OUTPUT = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "exp": torch.exp,
    "softmax": lambda t: torch.softmax(t, -1),
    "log_softmax": lambda t: torch.log_softmax(t, -1),
    "elu": torch.nn.functional.elu,
    "sqrt": lambda t: torch.sqrt(t.abs() + 1),
}


def _weights() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(16, 16, device="tpu")
    w = torch.randn(16, 16, device="tpu", requires_grad=True)
    return x, w


@pytest.mark.parametrize("name", sorted(SAVES_OUTPUT))
def test_output_dropped_without_backward_is_freed(name: str) -> None:
    x, w = _weights()
    y = SAVES_OUTPUT[name](x @ w)
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None, f"{name}: the output (and its graph) outlived every reference to it"


def test_eval_loop_without_no_grad_holds_no_growing_arrays() -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8), torch.nn.Sigmoid()
    ).to("tpu")
    x = torch.randn(4, 32, device="tpu")

    def live_after(steps: int) -> int:
        for _ in range(steps):
            model(x).sum().item()
        gc.collect()
        return len(jax.live_arrays())

    base = live_after(2)
    assert live_after(20) <= base


def test_alias_of_an_output_still_shares_writes_both_ways() -> None:
    x, w = _weights()
    y = torch.tanh(x @ w)
    d = y.detach()
    assert d.data_ptr() == y.data_ptr()
    with torch.no_grad():
        d.zero_()
    assert torch.equal(y.cpu(), torch.zeros(16, 16))
    with torch.no_grad():
        y.add_(2)
    assert torch.equal(d.cpu(), torch.full((16, 16), 2.0))


def test_gradients_through_saved_outputs_match_cpu() -> None:
    torch.manual_seed(0)
    xc, wc = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    xt, wt = xc.to("tpu"), wc.detach().to("tpu").requires_grad_()
    for x, w in ((xc, wc), (xt, wt)):
        y = torch.sigmoid(torch.tanh(x @ w))
        z = (y * y.exp()).sum()
        del y  # the saved outputs alone carry the backward
        z.backward()
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-5)


def test_inplace_write_after_save_refuses_backward_as_on_cpu() -> None:
    for device in ("cpu", "tpu"):
        w = torch.randn(4, 4, device=device, requires_grad=True)
        y = torch.tanh(w * 2)
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
