"""Reductions, scans, sorting."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from backend.ops._util import aten, dims, jdt, wrapdim
from backend.ops.registry import lower


def _acc_dtype(x: Any, dtype: Any) -> Any:
    if dtype is not None:
        return jdt(dtype)
    if x.dtype == jnp.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.int64
    return x.dtype


def _wide(dt: Any) -> Any:
    return jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt


@lower(aten.sum.dim_IntList, aten.sum.default)
def sum_(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    ax = dims(dim, x.ndim) if x.ndim else None
    return jnp.sum(x.astype(_wide(dt)), axis=ax, keepdims=keepdim).astype(dt)


@lower(aten.mean.dim, aten.mean.default)
def mean(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    dt = jdt(dtype) if dtype is not None else x.dtype
    if not jnp.issubdtype(dt, jnp.inexact):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {x.dtype}"
        )
    ax = dims(dim, x.ndim) if x.ndim else None
    return jnp.mean(x.astype(_wide(dt)), axis=ax, keepdims=keepdim).astype(dt)


@lower(aten.prod.default)
def prod(x: Any, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    return jnp.prod(x.astype(dt))


@lower(aten.prod.dim_int)
def prod_dim(x: Any, dim: int, keepdim: bool = False, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    return jnp.prod(x.astype(dt), axis=wrapdim(dim, x.ndim) if x.ndim else None, keepdims=keepdim)


def _check_nonempty(x: Any, ax: Any, name: str) -> None:
    if x.size == 0:
        if ax is None or any(x.shape[a] == 0 for a in ax):
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")


@lower(aten.amax.default)
def amax(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    ax = dims(dim, x.ndim) if x.ndim else None
    _check_nonempty(x, ax, "amax")
    return jnp.max(x, axis=ax, keepdims=keepdim)


@lower(aten.amin.default)
def amin(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    ax = dims(dim, x.ndim) if x.ndim else None
    _check_nonempty(x, ax, "amin")
    return jnp.min(x, axis=ax, keepdims=keepdim)


@lower(aten.max.default)
def max_all(x: Any) -> Any:
    if x.size == 0:
        raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    return jnp.max(x)


@lower(aten.min.default)
def min_all(x: Any) -> Any:
    if x.size == 0:
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    return jnp.min(x)


def _arg(x: Any, dim: int | None, keepdim: bool, largest: bool) -> Any:
    fn = jnp.argmax if largest else jnp.argmin
    if dim is None:
        r = fn(x.reshape(-1))
        return r.reshape((1,) * x.ndim) if keepdim else r
    if x.ndim == 0:
        return jnp.zeros((), jnp.int64)
    return fn(x, axis=wrapdim(dim, x.ndim), keepdims=keepdim).astype(jnp.int64)


@lower(aten.argmax.default)
def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    return _arg(x, dim, keepdim, True).astype(jnp.int64)


@lower(aten.argmin.default)
def argmin(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    return _arg(x, dim, keepdim, False).astype(jnp.int64)


def _extremum_dim(name: str, arg_fn: Any, x: Any, dim: int, keepdim: bool) -> Any:
    """max.dim / min.dim: values and int64 indices along one dim (torch refuses an empty dim)."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim 0 to have non-zero size.")
    i = arg_fn(x, axis=d, keepdims=True)
    v = jnp.take_along_axis(x, i, axis=d)
    if not keepdim:
        v, i = jnp.squeeze(v, d), jnp.squeeze(i, d)
    return v, i.astype(jnp.int64)


@lower(aten.max.dim)
def max_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    return _extremum_dim("max", jnp.argmax, x, dim, keepdim)


@lower(aten.min.dim)
def min_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    return _extremum_dim("min", jnp.argmin, x, dim, keepdim)


@lower(aten.var.correction)
def var(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    ax = dims(dim, x.ndim) if x.ndim else None
    c = 1 if correction is None else correction
    return jnp.var(x.astype(_wide(x.dtype)), axis=ax, ddof=c, keepdims=keepdim).astype(x.dtype)


@lower(aten.std.correction)
def std(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    return jnp.sqrt(var(x, dim, correction=correction, keepdim=keepdim))


@lower(aten.var_mean.correction)
def var_mean(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction=correction, keepdim=keepdim), mean(x, dim, keepdim)


@lower(aten.any.default, aten.any.dim, aten.any.dims)
def any_(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    ax = dims(dim, x.ndim) if x.ndim else None
    r = jnp.any(x, axis=ax, keepdims=keepdim)
    return r.astype(jnp.uint8) if x.dtype == jnp.uint8 else r


@lower(aten.all.default, aten.all.dim, aten.all.dims)
def all_(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    ax = dims(dim, x.ndim) if x.ndim else None
    r = jnp.all(x, axis=ax, keepdims=keepdim)
    return r.astype(jnp.uint8) if x.dtype == jnp.uint8 else r


@lower(aten.cumsum.default)
def cumsum(x: Any, dim: int, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    if x.ndim == 0:
        return x.astype(dt)
    return jnp.cumsum(x.astype(dt), axis=wrapdim(dim, x.ndim))


@lower(aten.cumprod.default)
def cumprod(x: Any, dim: int, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    if x.ndim == 0:
        return x.astype(dt)
    return jnp.cumprod(x.astype(dt), axis=wrapdim(dim, x.ndim))


def _cum_ext(x: Any, dim: int, largest: bool) -> Any:
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    n = x.shape[d]
    idx = jnp.broadcast_to(jnp.arange(n).reshape((-1,) + (1,) * (x.ndim - d - 1)), x.shape)

    def comb(a: Any, b: Any) -> Any:
        va, ia = a
        vb, ib = b
        better = (vb >= va) if largest else (vb <= va)
        if jnp.issubdtype(va.dtype, jnp.floating):
            better = better | jnp.isnan(vb)
            better = better & ~(jnp.isnan(va) & ~jnp.isnan(vb))
        return jnp.where(better, vb, va), jnp.where(better, ib, ia)

    v, i = jax.lax.associative_scan(comb, (x, idx), axis=d)
    return v, i.astype(jnp.int64)


@lower(aten.cummax.default)
def cummax(x: Any, dim: int) -> Any:
    return _cum_ext(x, dim, True)


@lower(aten.cummin.default)
def cummin(x: Any, dim: int) -> Any:
    return _cum_ext(x, dim, False)


@lower(aten.logsumexp.default)
def logsumexp(x: Any, dim: Any, keepdim: bool = False) -> Any:
    x = x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.float32)
    ax = dims(dim, x.ndim) if x.ndim else None
    return jax.nn.logsumexp(x, axis=ax, keepdims=keepdim)


@lower(aten.linalg_vector_norm.default)
def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(jdt(dtype))
    ax = dims(dim, x.ndim) if x.ndim else None
    a = jnp.abs(x)
    if ord == float("inf"):
        return jnp.max(a, axis=ax, keepdims=keepdim)
    if ord == float("-inf"):
        return jnp.min(a, axis=ax, keepdims=keepdim)
    if ord == 0:
        return jnp.sum(a != 0, axis=ax, keepdims=keepdim).astype(a.dtype)
    if ord == 1:
        return jnp.sum(a, axis=ax, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=ax, keepdims=keepdim))
    return jnp.sum(a**ord, axis=ax, keepdims=keepdim) ** (1.0 / ord)


def _sort(x: Any, dim: int, descending: bool) -> Any:
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    key = x
    if descending:
        if x.dtype == jnp.bool_:
            key = ~x
        elif jnp.issubdtype(x.dtype, jnp.floating):
            key = jnp.where(jnp.isnan(x), -jnp.inf, -x)
            i = jnp.argsort(key, axis=d, stable=True)
            # NaN sorts first when descending (it is the largest in torch)
            nan_first = jnp.argsort(~jnp.isnan(jnp.take_along_axis(x, i, d)), axis=d, stable=True)
            i = jnp.take_along_axis(i, nan_first, d)
            return jnp.take_along_axis(x, i, d), i.astype(jnp.int64)
        elif jnp.issubdtype(x.dtype, jnp.unsignedinteger):
            key = jnp.iinfo(x.dtype).max - x
        else:
            key = -x.astype(jnp.int64) if x.dtype != jnp.int64 else ~x
    i = jnp.argsort(key, axis=d, stable=True)
    return jnp.take_along_axis(x, i, d), i.astype(jnp.int64)


@lower(aten.sort.default)
def sort(x: Any, dim: int = -1, descending: bool = False) -> Any:
    return _sort(x, dim, descending)


@lower(aten.sort.stable)
def sort_stable(x: Any, *, stable: bool | None = None, dim: int = -1, descending: bool = False) -> Any:
    return _sort(x, dim, descending)


@lower(aten.topk.default)
def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if k > x.shape[d] or k < 0:
        raise RuntimeError("selected index k out of range")
    v, i = _sort(x, d, largest)
    sl = [slice(None)] * x.ndim
    sl[d] = slice(0, k)
    return v[tuple(sl)], i[tuple(sl)]


def _median_along(x: Any, d: int, ignore_nan: bool) -> tuple[Any, Any]:
    """torch's (lower) median along ``d``: values and an index of that value (NaN propagates unless ignored)."""
    i = jnp.argsort(x, axis=d, stable=True)  # NaNs sort last
    s = jnp.take_along_axis(x, i, d)
    n = x.shape[d]
    if jnp.issubdtype(x.dtype, jnp.floating):
        nan = jnp.isnan(x)
        cnt = n - jnp.sum(nan, axis=d, keepdims=True) if ignore_nan else jnp.full_like(
            jnp.sum(nan, axis=d, keepdims=True), n)
        pos = jnp.maximum((cnt - 1) // 2, 0)
        v = jnp.take_along_axis(s, pos, d)
        idx = jnp.take_along_axis(i, pos, d)
        if not ignore_nan:
            anynan = jnp.any(nan, axis=d, keepdims=True)
            v = jnp.where(anynan, jnp.nan, v)
            idx = jnp.where(anynan, jnp.argmax(nan, axis=d, keepdims=True), idx)
        else:
            v = jnp.where(cnt == 0, jnp.nan, v)
            idx = jnp.where(cnt == 0, 0, idx)
        return v, idx.astype(jnp.int64)
    pos = jnp.full_like(jnp.take(i, jnp.array([0]), axis=d), (n - 1) // 2)
    return jnp.take_along_axis(s, pos, d), jnp.take_along_axis(i, pos, d).astype(jnp.int64)


def _median_dim(x: Any, dim: int, keepdim: bool, ignore_nan: bool, name: str) -> Any:
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    v, i = _median_along(x, d, ignore_nan)
    if not keepdim:
        v, i = jnp.squeeze(v, d), jnp.squeeze(i, d)
    return v, i


def _median_all(x: Any, ignore_nan: bool) -> Any:
    if x.size == 0:
        return jnp.array(jnp.nan, x.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else None
    return _median_along(x.reshape(-1), 0, ignore_nan)[0].reshape(())


@lower(aten.median.default)
def median(x: Any) -> Any:
    out = _median_all(x, False)
    if out is None:
        raise RuntimeError("median() input tensor cannot be empty")
    return out


@lower(aten.nanmedian.default)
def nanmedian(x: Any) -> Any:
    out = _median_all(x, True)
    if out is None:
        raise RuntimeError("nanmedian() input tensor cannot be empty")
    return out


@lower(aten.median.dim)
def median_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    return _median_dim(x, dim, keepdim, False, "median")


@lower(aten.nanmedian.dim)
def nanmedian_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    return _median_dim(x, dim, keepdim, True, "nanmedian")


@lower(aten.logcumsumexp.default)
def logcumsumexp(x: Any, dim: int) -> Any:
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise NotImplementedError(f"logcumsumexp of {x.dtype} is not implemented for TPU")
    if x.ndim == 0:
        wrapdim(dim, 0)
        return x
    d = wrapdim(dim, x.ndim)
    if x.shape[d] == 0:
        return x
    return jax.lax.cumlogsumexp(x, axis=d)
