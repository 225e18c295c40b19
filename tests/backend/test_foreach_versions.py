"""In-place ``_foreach_*`` ops bump the version counters of the tensors they write, as CUDA's foreach kernels do,
so autograd refuses a backward through a graph whose saved tensors an optimizer step has since changed (before
2026-12-06 the "tpu" computed that backward silently with the new weights: PyTorch-GAN's softmax_gan)."""

from __future__ import annotations

import pytest
import torch

INPLACE = {
    "add_list": lambda ts, os_: torch._foreach_add_(ts, os_),
    "add_scalar": lambda ts, os_: torch._foreach_add_(ts, 2.0),
    "mul_scalar": lambda ts, os_: torch._foreach_mul_(ts, 0.5),
    "addcmul": lambda ts, os_: torch._foreach_addcmul_(ts, os_, os_, value=0.1),
    "lerp": lambda ts, os_: torch._foreach_lerp_(ts, os_, 0.3),
    "maximum": lambda ts, os_: torch._foreach_maximum_(ts, os_),  # (no per-tensor maximum_: copied back)
    "zero": lambda ts, os_: torch._foreach_zero_(ts),
    "sqrt": lambda ts, os_: torch._foreach_sqrt_(ts),
}


def _versions(device: str, op) -> list[int]:
    ts = [torch.ones(3, device=device) * (i + 1) for i in range(3)]
    os_ = [torch.full((3,), 0.5, device=device) for _ in range(3)]
    op(ts, os_)
    op(ts, os_)
    return [t._version for t in ts]


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_an_inplace_foreach_op_bumps_versions_as_on_cpu(name):
    assert _versions("tpu", INPLACE[name]) == _versions("cpu", INPLACE[name])


@pytest.mark.parametrize("foreach", [True, False])
def test_a_backward_through_weights_an_optimizer_changed_refuses_as_on_cpu(foreach):
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        d = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, 1)).to(
            device
        )
        opt = torch.optim.Adam(d.parameters(), lr=0.1, foreach=foreach)
        out = d(torch.randn(3, 4, device=device))
        out.sum().backward(retain_graph=True)
        opt.step()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (out * 2).sum().backward()
