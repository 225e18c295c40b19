"""Distances, FFT and embedding_bag (the long tail of core ATen)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from backend.ops._util import aten, wrapdim
from backend.ops.registry import lower


def _pnorm(diff: Any, p: float, axis: int) -> Any:
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum(a != 0, axis=axis).astype(diff.dtype)
    if p == float("inf"):
        return jnp.max(a, axis=axis)
    if p == 1:
        return jnp.sum(a, axis=axis)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axis))
    return jnp.sum(a**p, axis=axis) ** (1.0 / p)


@lower(aten._cdist_forward.default)
def _cdist_forward(x1: Any, x2: Any, p: float, compute_mode: int | None = None) -> Any:
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    if x1.shape[-2] == 0 or x2.shape[-2] == 0:
        return jnp.zeros(diff.shape[:-1], x1.dtype)
    return _pnorm(diff, p, -1).astype(x1.dtype)


@lower(aten._pdist_forward.default)
def _pdist_forward(x: Any, p: float = 2) -> Any:
    n = x.shape[0]
    i, j = jnp.triu_indices(n, 1)
    return _pnorm(x[i] - x[j], p, -1).astype(x.dtype)


_NORM = {0: "backward", 1: "ortho", 2: "forward"}  # torch fft_norm_mode: none / by_root_n / by_n


def _fftn_scale(x: Any, dims: Any, norm: int, inverse: bool) -> Any:
    n = 1
    for d in dims:
        n *= x.shape[d]
    if norm == 0:
        return x
    s = jnp.sqrt(n) if norm == 1 else n
    return x / s


@lower(aten._fft_r2c.default)
def _fft_r2c(x: Any, dim: Any, normalization: int, onesided: bool) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    out = jnp.fft.fftn(x, axes=dims)
    out = _fftn_scale(out, dims, normalization, False)
    if onesided:
        last = dims[-1]
        out = jnp.take(out, jnp.arange(x.shape[last] // 2 + 1), axis=last)
    return out.astype(jnp.complex64 if x.dtype in (jnp.float32, jnp.float16, jnp.bfloat16) else jnp.complex128)


@lower(aten._fft_c2c.default)
def _fft_c2c(x: Any, dim: Any, normalization: int, forward: bool) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    out = jnp.fft.fftn(x, axes=dims) if forward else jnp.fft.ifftn(x, axes=dims) * _count(x, dims)
    return _fftn_scale(out, dims, normalization, not forward).astype(x.dtype)


def _count(x: Any, dims: Any) -> int:
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


@lower(aten._fft_c2r.default)
def _fft_c2r(x: Any, dim: Any, normalization: int, last_dim_size: int) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    shape = [x.shape[d] for d in dims]
    shape[-1] = last_dim_size
    out = jnp.fft.irfftn(x, s=shape, axes=dims) * _count_shape(shape)
    out = out / (jnp.sqrt(_count_shape(shape)) if normalization == 1 else _count_shape(shape) if normalization == 2
                 else 1)
    return out.astype(jnp.float32 if x.dtype == jnp.complex64 else jnp.float64)


def _count_shape(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@lower(aten._embedding_bag.default)
def _embedding_bag(weight: Any, indices: Any, offsets: Any, scale_grad_by_freq: bool = False, mode: int = 0,
                   sparse: bool = False, per_sample_weights: Any = None, include_last_offset: bool = False,
                   padding_idx: int = -1) -> Any:
    """mode 0 sum, 1 mean, 2 max; returns (output, offset2bag, bag_size, max_indices)."""
    n = indices.shape[0]
    nb = offsets.shape[0] - (1 if include_last_offset else 0)
    pos = jnp.arange(n)
    bag = jnp.searchsorted(offsets[: nb] if not include_last_offset else offsets[:nb], pos, side="right") - 1
    bag = jnp.clip(bag, 0, max(nb - 1, 0))
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones((n,), bool)
    rows = weight[indices]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None]
    rows = jnp.where(keep[:, None], rows, 0)
    counts = jnp.zeros((nb,), jnp.int64).at[bag].add(keep.astype(jnp.int64))
    if mode == 2:
        neg = jnp.full((nb, weight.shape[1]), -jnp.inf, weight.dtype)
        out = neg.at[bag].max(jnp.where(keep[:, None], rows, -jnp.inf))
        out = jnp.where(counts[:, None] > 0, out, 0)
        is_max = (rows == out[bag]) & keep[:, None]
        cand = jnp.where(is_max, indices[:, None], -1)
        max_idx = jnp.full((nb, weight.shape[1]), -1, jnp.int64).at[bag].max(cand)
    else:
        out = jnp.zeros((nb, weight.shape[1]), weight.dtype).at[bag].add(rows)
        if mode == 1:
            out = out / jnp.maximum(counts, 1)[:, None].astype(weight.dtype)
        max_idx = jnp.zeros((nb,), jnp.int64) if mode == 1 else jnp.zeros((0,), jnp.int64)
    return out.astype(weight.dtype), bag.astype(jnp.int64), counts, max_idx
