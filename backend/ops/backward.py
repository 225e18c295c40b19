"""Backward kernels computed as ``jax.vjp`` of the forward op.

For forward ops that run through a PyTorch decomposition (upsampling, replication/reflection padding), the
forward is evaluated on ``TpuTensor`` wrappers around jax tracers (as the compile path does), so the
backward is exactly the adjoint of what the device computes forward.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from tpu_workbench.backend import state
from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.losses import _multi_margin, _multilabel_margin
from tpu_workbench.backend.ops.nn import _avg_pool
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, value


def _vjp_torch(fwd: Any, primal: Any, g: Any, *args: Any) -> Any:
    """The vjp of ``fwd(primal_tensor, *args)`` (a torch-level op run on the device) at ``primal``, applied to ``g``."""

    def f(x: Any) -> Any:
        with torch.no_grad(), state.jax_trace():  # (TPU ops on tracers: see backend.state.in_jax_trace)
            return value(fwd(TpuTensor(x), *args))

    out, pull = jax.vjp(f, primal)
    if out.shape != g.shape:
        raise RuntimeError(
            f"grad_output shape {tuple(g.shape)} does not match the forward output {tuple(out.shape)}"
        )
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
def avg_pool3d_backward(
    g: Any,
    x: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Any:
    _, vjp = jax.vjp(
        lambda t: _avg_pool(
            t, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3
        ),
        x,
    )
    return vjp(g.astype(x.dtype))[0]


@lower(aten.hardshrink_backward.default, aten.softshrink_backward.default)
def shrink_backward(g: Any, x: Any, lambd: Any) -> Any:
    """torch: the gradient is zero where -lambd <= x <= lambd, ``g`` elsewhere."""
    lam = jnp.asarray(lambd, x.dtype)
    return jnp.where((x >= -lam) & (x <= lam), jnp.zeros((), g.dtype), g)


# ----------------------------------------------------------------------------- distances
def _dist_grad(diff: Any, dist: Any, p: float) -> Any:
    """d||diff||_p / d diff with torch's conventions (Distance.cpp): zero where the distance is 0 (and, for
    p < 1, where a component is 0); p = inf picks the components equal to the max."""
    d = dist[..., None]
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return jnp.sign(diff)
    if p == 2:
        return jnp.where(d == 0, zero, diff / jnp.where(d == 0, 1, d))
    if p == float("inf"):
        return jnp.sign(diff) * (jnp.abs(diff) == d).astype(diff.dtype)
    safe_d = jnp.where(d == 0, 1, d)
    if p < 2:
        bad = (d == 0) | ((diff == 0) & (p < 1))
        safe_a = jnp.where(diff == 0, 1, jnp.abs(diff))
        val = jnp.sign(diff) * safe_a ** (p - 1) / safe_d ** (p - 1)
        return jnp.where(bad, zero, val)
    return jnp.where(d == 0, zero, diff * jnp.abs(diff) ** (p - 2) / safe_d ** (p - 1))


@lower(aten._cdist_backward.default, jit=True)
def _cdist_backward(g: Any, x1: Any, x2: Any, p: float, cdist: Any) -> Any:
    """Gradient for ``x1`` at the broadcast batch shape (autograd sums it down to ``x1``'s shape)."""
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    a = jnp.broadcast_to(x1, batch + x1.shape[-2:])
    if a.shape[-2] == 0 or x2.shape[-2] == 0 or a.shape[-1] == 0:
        return jnp.zeros(a.shape, x1.dtype)
    diff = a[..., :, None, :] - x2[..., None, :, :]
    return jnp.sum(_dist_grad(diff, cdist, p) * g[..., None], axis=-2).astype(x1.dtype)


@lower(aten._pdist_backward.default, jit=True)
def _pdist_backward(g: Any, x: Any, p: float, pdist: Any) -> Any:
    n = x.shape[0]
    if n <= 1 or x.shape[1] == 0:
        return jnp.zeros_like(x)
    i, j = np.triu_indices(n, 1)
    contrib = _dist_grad(x[i] - x[j], pdist, p) * g[:, None]
    return jnp.zeros_like(x).at[i].add(contrib).at[j].add(-contrib)


# ----------------------------------------------------------------------------- margin losses
@lower(aten.multi_margin_loss_backward.default, jit=True)
def multi_margin_loss_backward(
    g: Any, x: Any, target: Any, p: int, margin: float, weight: Any = None, reduction: int = 1
) -> Any:
    _, pull = jax.vjp(lambda t: _multi_margin(t, target, p, margin, weight, reduction), x)
    return pull(jnp.broadcast_to(g, _.shape).astype(x.dtype))[0]


@lower(aten.multilabel_margin_loss_backward.default, jit=True)
def multilabel_margin_loss_backward(g: Any, x: Any, target: Any, reduction: int, is_target: Any) -> Any:
    _, pull = jax.vjp(lambda t: _multilabel_margin(t, target, reduction, is_target), x)
    return pull(jnp.broadcast_to(g, _.shape).astype(x.dtype))[0]


# ----------------------------------------------------------------------------- embedding_bag
@lower(aten._embedding_bag_dense_backward.default)
def _embedding_bag_dense_backward(
    g: Any,
    indices: Any,
    offset2bag: Any,
    bag_size: Any,
    maximum_indices: Any,
    num_weights: int,
    scale_grad_by_freq: bool,
    mode: int,
    per_sample_weights: Any,
    padding_idx: int = -1,
) -> Any:
    """torch's dense CPU backward: sum/mean scatter each bag's gradient to its rows (scaled by the per-sample
    weight, 1/bag_size for mean, a frequency for scale_grad_by_freq; padding_idx rows get none); max sends
    it to the arg-max row of each non-empty bag."""
    d = g.shape[1]
    out = jnp.zeros((num_weights, d), g.dtype)
    if mode == 2:
        nonempty = (bag_size != 0)[:, None]
        rows = jnp.where(nonempty, maximum_indices, 0)
        cols = jnp.broadcast_to(jnp.arange(d)[None, :], rows.shape)
        return out.at[rows, cols].add(jnp.where(nonempty, g, jnp.zeros((), g.dtype)))
    idx = indices.reshape(-1).astype(jnp.int64)
    scale = jnp.ones(idx.shape, g.dtype)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights.astype(g.dtype)
    if scale_grad_by_freq:
        # torch's CPU kernel divides the g-th distinct index's gradient by the count of the g-th *sorted*
        # index (counts[indices_sorted[g]], EmbeddingBag.cpp), not by its own count; reproduced exactly.
        counts = jnp.zeros((num_weights,), g.dtype).at[idx].add(1)
        srt = jnp.sort(idx)
        first = (
            jnp.concatenate([jnp.ones((1,), bool), srt[1:] != srt[:-1]]) if idx.size else jnp.ones((0,), bool)
        )
        rank = jnp.zeros((num_weights,), jnp.int64).at[srt].set(jnp.cumsum(first) - 1)
        scale = scale / counts[srt[rank[idx]]]
    bag = offset2bag.astype(jnp.int64)
    if mode == 1:
        bs = bag_size[bag].astype(g.dtype)
        scale = jnp.where(bs != 0, scale / jnp.where(bs != 0, bs, 1), scale)
    if padding_idx >= 0:
        scale = jnp.where(idx == padding_idx, jnp.zeros((), g.dtype), scale)
    return out.at[idx].add(g[bag] * scale[:, None])


@lower(aten._embedding_bag_backward.default)
def _embedding_bag_backward(
    g: Any,
    indices: Any,
    offsets: Any,
    offset2bag: Any,
    bag_size: Any,
    maximum_indices: Any,
    num_weights: int,
    scale_grad_by_freq: bool,
    mode: int,
    sparse: bool,
    per_sample_weights: Any,
    padding_idx: int = -1,
) -> Any:
    if sparse:
        raise NotImplementedError(
            "_embedding_bag_backward: sparse=True (sparse gradients) is not supported on TPU"
        )
    return _embedding_bag_dense_backward(
        g,
        indices,
        offset2bag,
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        padding_idx,
    )


@lower(aten._embedding_bag_per_sample_weights_backward.default)
def _embedding_bag_per_sample_weights_backward(
    g: Any, weight: Any, indices: Any, offsets: Any, offset2bag: Any, mode: int, padding_idx: int = -1
) -> Any:
    if mode != 0:
        raise NotImplementedError("embedding_bag: per_sample_weights are only supported for mode='sum'")
    idx = indices.reshape(-1).astype(jnp.int64)
    out = jnp.sum(g[offset2bag.astype(jnp.int64)] * weight[idx], axis=1)
    if padding_idx >= 0:
        out = jnp.where(idx == padding_idx, jnp.zeros((), out.dtype), out)
    return out.astype(g.dtype)
