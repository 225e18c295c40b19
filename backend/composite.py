"""Autograd-level kernels for composite ops whose stock C++ decomposition cannot run on TPU wrappers.

These are registered for AutogradPrivateUse1, which wins over the CompositeImplicitAutograd kernel; they
are written in torch ops, so autograd still records the ops they call.

- ``matmul(1-D, 2-D)`` decomposes to ``mm(a.unsqueeze(0), b).squeeze_(0)``; a Python wrapper's sizes cannot be
  changed after creation, so this kernel uses the out-of-place ``squeeze``. A batch times a matrix folds into one
  ``mm`` as ATen's C++ matmul does (the Python decomposition's shape logic cost ~100 us a call in eager). Other
  shapes take the stock path.
- ``quantile`` / ``nanquantile`` end with ``squeeze_`` / ``unsqueeze_().transpose_()`` on their result (same
  problem): re-implemented here step for step with out-of-place ops.
- ``tensor_split(Tensor indices)`` insists on a CPU indices tensor because it reads the values on the host
  (a CUDA tensor is refused). A TPU indices tensor is read back to the host here (one sync, as ``.tolist()``
  would do) instead of refusing it, since that is the whole point of the CPU requirement.
- ``linear`` runs as one op forward and one backward (``mkldnn_linear``: PyTorch's linear op with its own
  derivative; backend/ops/linear.py) instead of ``t`` + ``mm`` + views and four autograd nodes.
- ``scaled_dot_product_attention`` takes PyTorch's fused "overrideable" op (one op forward, one backward) where
  that computes what the math path does; PyTorch picks the kernel through a C++ stub Python cannot register.
- ``_pad_packed_sequence`` and ``_pack_padded_sequence_backward`` copy one time step at a time into slices of a
  new tensor (a Python loop of view writes here, each step a new shape to compile); the same result is one
  ``index_select`` / ``index_copy`` with the row map computed on the host from the CPU ``batch_sizes``.
"""

from __future__ import annotations

from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend.refusals import check_one_hot

_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dim() == 2 and b.dim() == 2:
        return torch.mm(a, b)
    if a.dim() == 1 and b.dim() == 2:
        return torch.mm(a.unsqueeze(0), b).squeeze(0)
    if (
        a.dim() >= 3 and b.dim() == 2
    ):  # ATen's fold (a linear layer on a batch): one mm, no Python decomposition
        out = torch.mm(a.reshape(-1, a.shape[-1]), b)
        return torch.ops.aten._unsafe_view.default(out, (*a.shape[:-1], b.shape[-1]))
    return torch.ops.aten.matmul.default.decompose(a, b)


def _quantile_impl(
    x: torch.Tensor,
    q: torch.Tensor,
    dim: int | None,
    keepdim: bool,
    interpolation: str,
    ignore_nan: bool,
    name: str,
) -> torch.Tensor:
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
        raise RuntimeError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
            f"Got {interpolation}"
        )
    if dim is not None and x.dim() > 0:
        d = dim % x.dim() if -x.dim() <= dim < x.dim() else None
        if d is None:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-x.dim()}, {x.dim() - 1}], "
                f"but got {dim})"
            )
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

    def kernel(
        x: torch.Tensor,
        q: Any,
        dim: int | None = None,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
    ) -> torch.Tensor:
        qt = _scalar_q(x, q, name) if scalar_q else q
        return _quantile_impl(x, qt, dim, keepdim, interpolation, ignore_nan, name)

    return kernel


def _tensor_split_tensor(x: torch.Tensor, indices_or_sections: torch.Tensor, dim: int = 0) -> Any:
    t = indices_or_sections
    if t.device.type != "cpu":
        t = t.detach().cpu()
    return torch.ops.aten.tensor_split.tensor_indices_or_sections.decompose(x, t, dim)


def _packed_rows(batch_sizes: torch.Tensor, time_steps: int) -> tuple[torch.Tensor, int]:
    """For a (time_steps, batch) grid: the packed-data row of each cell, or -1 where the step is padding."""
    if batch_sizes.device.type != "cpu" or batch_sizes.dtype != torch.int64 or batch_sizes.dim() != 1:
        raise RuntimeError(
            "batch_sizes should always be on CPU and a 1D int64 tensor. Instances of PackedSequence "
            "should never be created manually. They should be instantiated by functions like "
            "pack_sequence and pack_padded_sequences in nn.utils.rnn."
        )
    bs = batch_sizes.tolist()
    batch = bs[0] if bs else 0
    rows = torch.full((time_steps, batch), -1, dtype=torch.int64)
    offset = 0
    for t, b in enumerate(bs):
        rows[t, :b] = torch.arange(offset, offset + b)
        offset += b
    return rows, offset


def _pad_packed_sequence(
    data: torch.Tensor, batch_sizes: torch.Tensor, batch_first: bool, padding_value: Any, total_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    steps = batch_sizes.shape[0]
    if total_length > 0:
        if total_length < steps:
            raise RuntimeError(
                f"Expected total_length to be at least the length of the longest sequence in input, "
                f"but got total_length={total_length} and max sequence length being {steps}"
            )
        steps_out = total_length
    else:
        steps_out = steps
    rows, n = _packed_rows(batch_sizes, steps_out)
    rows = torch.where(rows < 0, n, rows)  # padding cells read the appended padding row
    pad = torch.full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    out = torch.cat([data, pad]).index_select(0, rows.reshape(-1).to(data.device))
    out = out.reshape(steps_out, rows.shape[1], *data.shape[1:])
    lengths = (batch_sizes.unsqueeze(0) > torch.arange(rows.shape[1]).unsqueeze(1)).sum(1)
    return (out.transpose(0, 1) if batch_first else out), lengths


def _pack_padded_sequence_backward(
    grad: torch.Tensor, input_size: Any, batch_sizes: torch.Tensor, batch_first: bool
) -> torch.Tensor:
    sizes = [int(s) for s in input_size]
    if batch_first:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    rows, _ = _packed_rows(batch_sizes, sizes[0])
    cells = (rows.reshape(-1) >= 0).nonzero().reshape(-1)
    order = rows.reshape(-1)[cells]
    flat = grad.new_zeros((sizes[0] * sizes[1], *sizes[2:]))
    flat = flat.index_copy(0, cells.to(grad.device), grad.index_select(0, order.to(grad.device)))
    out = flat.reshape(sizes)
    return out.transpose(0, 1) if batch_first else out


def _sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Attention as one fused op forward and one backward where that is the math path's computation
    (backend/ops/attention.py); otherwise PyTorch's own kernel, which takes the math path."""
    from tpu_workbench.backend.ops.attention import (
        fused_attention_applies,  # lazy: jax (the lowerings import it)
    )

    if fused_attention_applies(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        return torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default(
            query, key, value, attn_mask, dropout_p, is_causal, False, scale=scale
        )[0]
    return torch.ops.aten.scaled_dot_product_attention.default.decompose(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
    )


class _Types:
    tpu: Any = None  # backend.tensor.TpuTensor, resolved on first use


def _one_op_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> bool:
    """``linear`` runs as one op (``mkldnn_linear``, backend/ops/linear.py) for real TPU tensors of one dtype with
    a matrix weight and a 1-D bias, outside forward AD; anything else (fake or functional tensors of a compile
    trace, functorch wrappers, mixed dtypes) takes the composite, which raises or promotes as usual."""
    tpu = _Types.tpu
    if tpu is None:
        from tpu_workbench.backend.tensor import (
            TpuTensor,  # lazy: startup (installed before the tensor type loads)
        )

        tpu = _Types.tpu = TpuTensor
    if x.__class__ is not tpu or w.__class__ is not tpu or (b is not None and b.__class__ is not tpu):
        return False
    if w.dim() != 2 or x.dim() < 1 or x.dtype != w.dtype:
        return False
    if b is not None and (b.dim() != 1 or b.dtype != w.dtype or b.shape[0] != w.shape[0]):
        return False
    return private.forward_ad_level() < 0


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    if _one_op_linear(x, w, b):
        return torch.ops.aten.mkldnn_linear.default(x, w, b)
    return torch.ops.aten.linear.default.decompose(x, w, b)


def _linear_backward(x: torch.Tensor, grad: torch.Tensor, w: torch.Tensor, mask: list[bool]) -> tuple:
    """The one-op linear's backward: one op, or, where the backward itself is being differentiated
    (``create_graph=True``), the same formulas in differentiable torch ops."""
    if torch.is_grad_enabled() and (x.requires_grad or grad.requires_grad or w.requires_grad):
        n, k = w.shape
        g2 = grad.reshape(-1, n)
        return (
            grad.matmul(w) if mask[0] else None,
            g2.t().mm(x.reshape(-1, k)) if mask[1] else None,
            g2.sum(0) if mask[2] else None,
        )
    from tpu_workbench.backend.dispatch import dispatch  # lazy: jax

    return dispatch(torch.ops.aten.mkldnn_linear_backward.default, (), (x, grad, w, mask), {})


def _one_hot(self: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """``F.one_hot`` with the bounds check its composite leaves to CPU and CUDA kernels."""
    n = check_one_hot(self, num_classes)
    return (self.unsqueeze(-1) == torch.arange(n, dtype=self.dtype, device=self.device)).to(torch.int64)


def install() -> list[Any]:
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("one_hot", _one_hot, "AutogradPrivateUse1")
    lib.impl("matmul", _matmul, "AutogradPrivateUse1")
    lib.impl("linear", _linear, "AutogradPrivateUse1")
    lib.impl("mkldnn_linear_backward", _linear_backward, "AutogradPrivateUse1")
    lib.impl("scaled_dot_product_attention", _sdpa, "AutogradPrivateUse1")
    for name in ("quantile", "nanquantile"):
        lib.impl(name, _quantile_kernel(name, False), "AutogradPrivateUse1")
        lib.impl(f"{name}.scalar", _quantile_kernel(name, True), "AutogradPrivateUse1")
    lib.impl("tensor_split.tensor_indices_or_sections", _tensor_split_tensor, "AutogradPrivateUse1")
    lib.impl("_pad_packed_sequence", _pad_packed_sequence, "AutogradPrivateUse1")
    lib.impl("_pack_padded_sequence_backward", _pack_padded_sequence_backward, "AutogradPrivateUse1")
    return [lib]
