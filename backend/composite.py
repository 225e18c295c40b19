"""Autograd-level kernels for composite ops whose stock C++ decomposition cannot run on TPU wrappers.

These are registered for AutogradPrivateUse1, which wins over the CompositeImplicitAutograd kernel; they
are written in torch ops, so autograd still records the ops they call.

- ``matmul(1-D, 2-D)`` decomposes to ``mm(a.unsqueeze(0), b).squeeze_(0)``; a Python wrapper's sizes cannot be
  changed after creation, so this kernel uses the out-of-place ``squeeze``. Other shapes take the stock path.
- ``quantile`` / ``nanquantile`` end with ``squeeze_`` / ``unsqueeze_().transpose_()`` on their result (same
  problem): re-implemented here step for step with out-of-place ops.
- ``tensor_split(Tensor indices)`` insists on a CPU indices tensor because it reads the values on the host
  (a CUDA tensor is refused). A TPU indices tensor is read back to the host here (one sync, as ``.tolist()``
  would do) instead of refusing it, since that is the whole point of the CPU requirement.
"""

from __future__ import annotations

from typing import Any

import torch

_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dim() == 2 and b.dim() == 2:
        return torch.mm(a, b)
    if a.dim() == 1 and b.dim() == 2:
        return torch.mm(a.unsqueeze(0), b).squeeze(0)
    return torch.ops.aten.matmul.default.decompose(a, b)


def _quantile_impl(x: torch.Tensor, q: torch.Tensor, dim: int | None, keepdim: bool, interpolation: str,
                   ignore_nan: bool, name: str) -> torch.Tensor:
    """ATen's quantile_compute, with out-of-place reshapes instead of its final in-place ones."""
    if x.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if q.dim() > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if x.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if q.dtype != x.dtype:
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    if interpolation not in _QUANTILE_MODES:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                           f"Got {interpolation}")
    if dim is not None and x.dim() > 0:
        d = dim % x.dim() if -x.dim() <= dim < x.dim() else None
        if d is None:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-x.dim()}, {x.dim() - 1}], "
                             f"but got {dim})")
        base = list(x.shape)
        if keepdim:
            base[d] = 1
        else:
            del base[d]
        srt = x.movedim(d, -1).sort().values
    else:
        if dim is not None and dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        base = [1] * x.dim() if keepdim and dim is None else []
        srt = x.reshape(-1).sort().values
    n = srt.shape[-1]
    srt = srt.reshape([*base, n])
    qv = q.reshape(-1)
    if ignore_nan:
        ranks = qv * (srt.isnan().logical_not().sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        last = n - 1
        scaled, anynan = torch.broadcast_tensors(qv * last, srt.isnan().any(-1, keepdim=True))
        ranks = scaled.masked_fill(anynan, last)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below_idx = ranks.to(torch.long)
    out = srt.gather(-1, below_idx)
    if interpolation in ("linear", "midpoint"):
        weights = torch.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below_idx
        above = srt.gather(-1, ranks.ceil().to(torch.long))
        out = out.lerp(above, weights)
    if q.dim() == 0:
        return out.squeeze(-1)
    return out.movedim(-1, 0)


def _scalar_q(x: torch.Tensor, q: float, name: str) -> torch.Tensor:
    if not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    return torch.scalar_tensor(q, dtype=x.dtype, device=x.device)


def _quantile_kernel(name: str, scalar_q: bool) -> Any:
    """The kernel for one of quantile / quantile.scalar / nanquantile / nanquantile.scalar."""
    ignore_nan = name == "nanquantile"

    def kernel(x: torch.Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
               interpolation: str = "linear") -> torch.Tensor:
        qt = _scalar_q(x, q, name) if scalar_q else q
        return _quantile_impl(x, qt, dim, keepdim, interpolation, ignore_nan, name)

    return kernel


def _tensor_split_tensor(x: torch.Tensor, indices_or_sections: torch.Tensor, dim: int = 0) -> Any:
    t = indices_or_sections
    if t.device.type != "cpu":
        t = t.detach().cpu()
    return torch.ops.aten.tensor_split.tensor_indices_or_sections.decompose(x, t, dim)


def install() -> list[Any]:
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("matmul", _matmul, "AutogradPrivateUse1")
    for name in ("quantile", "nanquantile"):
        lib.impl(name, _quantile_kernel(name, False), "AutogradPrivateUse1")
        lib.impl(f"{name}.scalar", _quantile_kernel(name, True), "AutogradPrivateUse1")
    lib.impl("tensor_split.tensor_indices_or_sections", _tensor_split_tensor, "AutogradPrivateUse1")
    return [lib]
