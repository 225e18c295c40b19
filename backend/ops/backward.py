"""Backward kernels computed as ``jax.vjp`` of the forward op.

For forward ops that run through a PyTorch decomposition (upsampling, replication/reflection padding), the
forward is evaluated on ``TpuTensor`` wrappers around jax tracers (as the compile path does), so the
backward is exactly the adjoint of what the device computes forward.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from backend.ops._util import aten
from backend.ops.nn import _avg_pool
from backend.ops.registry import lower


def _vjp_torch(fwd: Any, primal: Any, g: Any, *args: Any) -> Any:
    """The vjp of ``fwd(primal_tensor, *args)`` (a torch-level op run on the device) at ``primal``, applied to ``g``."""
    from backend.tensor import TpuTensor, value

    def f(x: Any) -> Any:
        with torch.no_grad():
            return value(fwd(TpuTensor(x), *args))

    out, pull = jax.vjp(f, primal)
    if out.shape != g.shape:
        raise RuntimeError(f"grad_output shape {tuple(g.shape)} does not match the forward output {tuple(out.shape)}")
    return pull(g.astype(out.dtype))[0]


def _upsample_backward(fwd: Any) -> Any:
    def backward(g: Any, output_size: Any, input_size: Any, *rest: Any) -> Any:
        x = jnp.zeros(tuple(input_size), g.dtype)
        return _vjp_torch(fwd, x, g, output_size, *rest)

    return backward


for _fwd, _bwd in [
    (aten.upsample_nearest1d.default, aten.upsample_nearest1d_backward.default),
    (aten.upsample_nearest2d.default, aten.upsample_nearest2d_backward.default),
    (aten.upsample_nearest3d.default, aten.upsample_nearest3d_backward.default),
    (aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact1d_backward.default),
    (aten._upsample_nearest_exact2d.default, aten._upsample_nearest_exact2d_backward.default),
    (aten._upsample_nearest_exact3d.default, aten._upsample_nearest_exact3d_backward.default),
    (aten.upsample_linear1d.default, aten.upsample_linear1d_backward.default),
    (aten.upsample_bilinear2d.default, aten.upsample_bilinear2d_backward.default),
    (aten.upsample_bicubic2d.default, aten.upsample_bicubic2d_backward.default),
    (aten.upsample_trilinear3d.default, aten.upsample_trilinear3d_backward.default),
]:
    lower(_bwd)(_upsample_backward(_fwd))


def _pad_backward(fwd: Any) -> Any:
    def backward(g: Any, x: Any, padding: Any) -> Any:
        return _vjp_torch(fwd, x, g, padding)

    return backward


for _fwd, _bwd in [
    (aten.replication_pad1d.default, aten.replication_pad1d_backward.default),
    (aten.replication_pad2d.default, aten.replication_pad2d_backward.default),
    (aten.replication_pad3d.default, aten.replication_pad3d_backward.default),
    (aten.reflection_pad1d.default, aten.reflection_pad1d_backward.default),
    (aten.reflection_pad2d.default, aten.reflection_pad2d_backward.default),
    (aten.reflection_pad3d.default, aten.reflection_pad3d_backward.default),
]:
    lower(_bwd)(_pad_backward(_fwd))


@lower(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                        count_include_pad: bool, divisor_override: Any) -> Any:
    _, vjp = jax.vjp(lambda t: _avg_pool(t, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                         divisor_override, 3), x)
    return vjp(g.astype(x.dtype))[0]


@lower(aten.hardshrink_backward.default, aten.softshrink_backward.default)
def shrink_backward(g: Any, x: Any, lambd: Any) -> Any:
    """torch: the gradient is zero where -lambd <= x <= lambd, ``g`` elsewhere."""
    lam = jnp.asarray(lambd, x.dtype)
    return jnp.where((x >= -lam) & (x <= lam), jnp.zeros((), g.dtype), g)
