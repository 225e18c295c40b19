"""Distances, FFT and embedding_bag (the long tail of core ATen)."""

from __future__ import annotations

from typing import Any

import jax
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


# ----------------------------------------------------------------------------- data-dependent predicates
@lower(aten.equal.default)
def equal(a: Any, b: Any) -> bool:
    """Returns a Python bool (materialises, as on every device)."""
    return a.shape == b.shape and bool(jnp.all(a == b))


@lower(aten.is_nonzero.default)
def is_nonzero(x: Any) -> bool:
    if x.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(x.reshape(()) != 0)


@lower(aten.allclose.default)
def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    if a.dtype != b.dtype:
        raise RuntimeError("allclose: the two tensors have different dtypes")
    return bool(jnp.all(isclose(a, b, rtol, atol, equal_nan)))


@lower(aten.isclose.default)
def isclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Any:
    if a.dtype == jnp.bool_:
        return a == b
    close = a == b
    if jnp.issubdtype(a.dtype, jnp.inexact):
        diff = jnp.abs(a - b)
        close = close | (jnp.isfinite(diff) & (diff <= atol + rtol * jnp.abs(b)))
        if equal_nan:
            close = close | (jnp.isnan(a) & jnp.isnan(b))
    else:
        af, bf = a.astype(jnp.float64), b.astype(jnp.float64)
        close = close | (jnp.abs(af - bf) <= atol + rtol * jnp.abs(bf))
    return close


@lower(aten.searchsorted.Tensor)
def searchsorted(sorted_seq: Any, x: Any, *, out_int32: bool = False, right: bool = False, side: str | None = None,
                 sorter: Any = None) -> Any:
    side = side or ("right" if right else "left")
    if sorter is not None:
        sorted_seq = jnp.take_along_axis(sorted_seq, sorter, -1)
    if sorted_seq.ndim == 1:
        out = jnp.searchsorted(sorted_seq, x, side=side)
    else:
        import jax

        out = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side))(
            sorted_seq.reshape(-1, sorted_seq.shape[-1]), x.reshape(-1, x.shape[-1])).reshape(x.shape)
    return out.astype(jnp.int32 if out_int32 else jnp.int64)


@lower(aten.searchsorted.Scalar)
def searchsorted_scalar(sorted_seq: Any, x: Any, *, out_int32: bool = False, right: bool = False,
                        side: str | None = None, sorter: Any = None) -> Any:
    return searchsorted(sorted_seq, jnp.asarray(x, sorted_seq.dtype), out_int32=out_int32, right=right, side=side,
                        sorter=sorter).reshape(())


@lower(aten.kthvalue.default)
def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    from backend.ops.reduction import _sort

    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if not 1 <= k <= x.shape[d]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = _sort(x, d, False)
    v, i = jnp.take(v, k - 1, axis=d), jnp.take(i, k - 1, axis=d)
    if keepdim:
        v, i = jnp.expand_dims(v, d), jnp.expand_dims(i, d)
    return v, i


# ----------------------------------------------------------------------------- special functions (prims)
def _special(fn: Any) -> Any:
    def impl(x: Any) -> Any:
        xf = x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)
        return fn(xf).astype(xf.dtype)

    return impl


_prims = __import__("torch").ops.prims
for _name, _fn in [("erfcx", jax.scipy.special.erfcx), ("ndtri", jax.scipy.special.ndtri),
                   ("bessel_i0e", jax.scipy.special.i0e), ("bessel_i1", jax.scipy.special.i1),
                   ("bessel_i1e", jax.scipy.special.i1e), ("bessel_i0", jax.scipy.special.i0)]:
    if hasattr(_prims, _name):
        lower(getattr(_prims, _name).default)(_special(_fn))


@lower(_prims.gcd.default, aten.gcd.default)
def gcd(a: Any, b: Any) -> Any:
    return jnp.gcd(a, b)


@lower(aten.lcm.default)
def lcm(a: Any, b: Any) -> Any:
    return jnp.lcm(a, b)


@lower(aten.median.default)
def median(x: Any) -> Any:
    flat = x.reshape(-1)
    if flat.size == 0:
        return jnp.asarray(jnp.nan, x.dtype)
    s = jnp.sort(flat)
    if jnp.issubdtype(x.dtype, jnp.floating):
        s = jnp.where(jnp.any(jnp.isnan(flat)), jnp.nan, s)
    return s[(flat.size - 1) // 2]


# ----------------------------------------------------------------------------- complex views
@lower(aten.view_as_real.default)
def view_as_real(x: Any) -> Any:
    if not jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@lower(aten.view_as_complex.default)
def view_as_complex(x: Any) -> Any:
    if x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return jax.lax.complex(x[..., 0], x[..., 1])


@lower(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default)
def conj(x: Any) -> Any:
    return jnp.conj(x)


@lower(aten.real.default)
def real(x: Any) -> Any:
    return jnp.real(x)


@lower(aten.imag.default)
def imag(x: Any) -> Any:
    return jnp.imag(x)
