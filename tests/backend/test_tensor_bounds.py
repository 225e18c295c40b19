"""``torch.linspace`` / ``torch.logspace`` with a 0-dim device tensor as a bound (ffjord's
``torch.linspace(0, end_time, ntimes)`` with ``end_time`` computed on the device): PyTorch reads the bound with
``.item()`` and builds on the requested device, the CPU by default, as on CUDA; differential against the CPU."""

from __future__ import annotations

import pytest
import torch

CASES = [
    ("linspace", lambda t: (0, t * t, 5), {}),
    ("linspace", lambda t: (t, 2.0, 4), {"device": "tpu"}),
    ("linspace", lambda t: (t, t + 1, 3), {"dtype": torch.float64}),
    ("logspace", lambda t: (0, t, 3), {}),
    ("logspace", lambda t: (t, 1.0, 4), {"base": 2.0, "device": "tpu"}),
]


@pytest.mark.parametrize("name, bounds, kwargs", CASES)
def test_a_device_scalar_bound_builds_where_asked_and_agrees_with_the_cpu(name, bounds, kwargs):
    factory = getattr(torch, name)
    on_device = factory(*bounds(torch.tensor(0.7, device="tpu")), **kwargs)
    cpu_kwargs = {k: v for k, v in kwargs.items() if k != "device"}
    on_cpu = factory(*bounds(torch.tensor(0.7)), **cpu_kwargs)
    assert on_device.device.type == torch.device(kwargs.get("device", "cpu")).type
    torch.testing.assert_close(on_device.cpu(), on_cpu)


def test_a_bound_with_dimensions_is_refused_as_pytorch_refuses_it():
    with pytest.raises(RuntimeError, match="0-dimensional start and end"):
        torch.linspace(0, torch.ones(2, device="tpu"), 3)
