"""Autograd-level kernels for composite ops whose stock decomposition changes a tensor's shape in place.

``matmul(1-D, 2-D)`` decomposes to ``mm(a.unsqueeze(0), b).squeeze_(0)``; a Python wrapper's sizes cannot be
changed after creation, so this kernel (registered for AutogradPrivateUse1, which wins over the
CompositeImplicitAutograd kernel) uses the out-of-place ``squeeze``. Other shapes take the stock path.
"""

from __future__ import annotations

from typing import Any

import torch


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dim() == 2 and b.dim() == 2:
        return torch.mm(a, b)
    if a.dim() == 1 and b.dim() == 2:
        return torch.mm(a.unsqueeze(0), b).squeeze(0)
    return torch.ops.aten.matmul.default.decompose(a, b)


def install() -> list[Any]:
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("matmul", _matmul, "AutogradPrivateUse1")
    return [lib]
