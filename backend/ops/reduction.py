"""Reductions, scans, sorting."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend.ops import complex_math as cm
from tpu_workbench.backend.ops._util import aten, axes, jdt, wrapdim
from tpu_workbench.backend.ops.registry import lower


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
    ax = axes(dim, x.ndim)
    return jnp.sum(x.astype(_wide(dt)), axis=ax, keepdims=keepdim).astype(dt)


@lower(aten.mean.dim, aten.mean.default)
def mean(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    dt = jdt(dtype) if dtype is not None else x.dtype
    if not jnp.issubdtype(dt, jnp.inexact):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {x.dtype}"
        )
    ax = axes(dim, x.ndim)
    return jnp.mean(x.astype(_wide(dt)), axis=ax, keepdims=keepdim).astype(dt)


@lower(aten.prod.default)
def prod(x: Any, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    return _single_factor(jnp.prod(x.astype(dt)), x.size)


@lower(aten.prod.dim_int)
def prod_dim(x: Any, dim: int, keepdim: bool = False, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    d = wrapdim(dim, x.ndim)  # (checked on a 0-dim tensor too)
    out = jnp.prod(x.astype(dt), axis=d if x.ndim else None, keepdims=keepdim)
    return _single_factor(out, x.shape[d] if x.ndim else 1)


def _single_factor(out: Any, count: int) -> Any:
    """A complex product of one factor as the CPU computes it: 1 * z with the naive complex product, so an
    infinite part makes the other NaN (XLA drops the multiplication by the initial 1)."""
    if count != 1 or not jnp.iscomplexobj(out):
        return out
    re, im = cm.parts(out)
    return cm.make(*cm.mul_naive(jnp.ones_like(re), jnp.zeros_like(im), re, im), out.dtype)


def _check_nonempty(x: Any, ax: Any, name: str) -> None:
    if x.size == 0:
        if ax is None or any(x.shape[a] == 0 for a in ax):
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")


@lower(aten.amax.default)
def amax(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    ax = axes(dim, x.ndim)
    _check_nonempty(x, ax, "amax")
    return jnp.max(x, axis=ax, keepdims=keepdim)


@lower(aten.amin.default)
def amin(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    ax = axes(dim, x.ndim)
    _check_nonempty(x, ax, "amin")
    return jnp.min(x, axis=ax, keepdims=keepdim)


@lower(aten.max.default)
def max_all(x: Any) -> Any:
    if x.size == 0:
        raise RuntimeError(
            "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    return jnp.max(x)


@lower(aten.min.default)
def min_all(x: Any) -> Any:
    if x.size == 0:
        raise RuntimeError(
            "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
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
    d = wrapdim(dim, x.ndim)  # (a 0-dim tensor takes dim 0 or -1 only)
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
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
    out = jnp.finfo(x.dtype).dtype if jnp.issubdtype(x.dtype, jnp.complexfloating) else x.dtype
    # (complex input: a real variance, typed as PyTorch types it: complex64 -> float32)
    return _var_wide(x, dim, correction, keepdim).astype(out)


def _var_wide(x: Any, dim: Any, correction: Any, keepdim: bool) -> Any:
    c = 1 if correction is None else correction
    return jnp.var(x.astype(_wide(x.dtype)), axis=axes(dim, x.ndim), ddof=c, keepdims=keepdim)


@lower(aten.std.correction)
def std(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    out = jnp.finfo(x.dtype).dtype if jnp.issubdtype(x.dtype, jnp.complexfloating) else x.dtype
    # the root taken before rounding to float16/bfloat16 (a float16 variance of ~1e8 overflows; its root does not)
    return jnp.sqrt(_var_wide(x, dim, correction, keepdim)).astype(out)


@lower(aten.var_mean.correction)
def var_mean(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction=correction, keepdim=keepdim), mean(x, dim, keepdim)


@lower(aten.any.default, aten.any.dim, aten.any.dims)
def any_(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    ax = axes(dim, x.ndim)
    r = jnp.any(x, axis=ax, keepdims=keepdim)
    return r.astype(jnp.uint8) if x.dtype == jnp.uint8 else r


@lower(aten.all.default, aten.all.dim, aten.all.dims)
def all_(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    ax = axes(dim, x.ndim)
    r = jnp.all(x, axis=ax, keepdims=keepdim)
    return r.astype(jnp.uint8) if x.dtype == jnp.uint8 else r


@lower(aten.cumsum.default)
def cumsum(x: Any, dim: int, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    if x.ndim == 0:
        wrapdim(dim, 0)  # (a 0-dim tensor takes dim 0 or -1 only)
        return x.astype(dt)
    # torch accumulates bfloat16/float16 in float32 (acc_type) and rounds each prefix once
    return jnp.cumsum(x.astype(_wide(dt)), axis=wrapdim(dim, x.ndim)).astype(dt)


@lower(aten.cumprod.default)
def cumprod(x: Any, dim: int, *, dtype: Any = None) -> Any:
    dt = _acc_dtype(x, dtype)
    if x.ndim == 0:
        wrapdim(dim, 0)  # (a 0-dim tensor takes dim 0 or -1 only)
        return x.astype(dt)
    return jnp.cumprod(x.astype(_wide(dt)), axis=wrapdim(dim, x.ndim)).astype(dt)


def _cum_ext(x: Any, dim: int, largest: bool) -> Any:
    if x.ndim == 0:
        wrapdim(dim, 0)
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
    ax = axes(dim, x.ndim)
    return jax.nn.logsumexp(x, axis=ax, keepdims=keepdim)


@lower(aten.linalg_vector_norm.default)
def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(jdt(dtype))
    if x.dtype in _HALF:  # accumulate in float32 as CUDA does (a float16 sum of squares overflows at ~256)
        return _vector_norm(x.astype(jnp.float32), ord, dim, keepdim).astype(x.dtype)
    return _vector_norm(x, ord, dim, keepdim)


_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def _vector_norm(x: Any, ord: Any, dim: Any, keepdim: bool) -> Any:
    ax = axes(dim, x.ndim)
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


@lower(aten.linalg__powsum.default)
def powsum(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    """sum(|x| ** ord): vector_norm without the root (``_foreach_powsum`` is a loop over it)."""
    if not (jnp.issubdtype(x.dtype, jnp.inexact)):
        raise RuntimeError(
            f"linalg._powsum: Expected a floating point or complex tensor as input. Got {x.dtype}"
        )
    if dtype is not None:
        x = x.astype(jdt(dtype))
    ax = axes(dim, x.ndim)
    a = jnp.abs(x)
    if ord == 2:
        return jnp.sum(a * a, axis=ax, keepdims=keepdim)
    if ord == 1:
        return jnp.sum(a, axis=ax, keepdims=keepdim)
    return jnp.sum(a ** jnp.asarray(ord, a.dtype), axis=ax, keepdims=keepdim)


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
        cnt = (
            n - jnp.sum(nan, axis=d, keepdims=True)
            if ignore_nan
            else jnp.full_like(jnp.sum(nan, axis=d, keepdims=True), n)
        )
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
    d = wrapdim(dim, x.ndim)  # (a 0-dim tensor takes dim 0 or -1 only)
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    if x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    v, i = _median_along(x, d, ignore_nan)
    if not keepdim:
        v, i = jnp.squeeze(v, d), jnp.squeeze(i, d)
    return v, i


def _median_all(x: Any, ignore_nan: bool, name: str) -> Any:
    if x.size == 0:
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise RuntimeError(f"{name}() input tensor cannot be empty")
        return jnp.array(jnp.nan, x.dtype)
    return _median_along(x.reshape(-1), 0, ignore_nan)[0].reshape(())


@lower(aten.median.default)
def median(x: Any) -> Any:
    return _median_all(x, False, "median")


@lower(aten.nanmedian.default)
def nanmedian(x: Any) -> Any:
    return _median_all(x, True, "nanmedian")


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


# ----------------------------------------------------------------------------- mode
@jax.jit
def _mode_last(x: Any) -> tuple[Any, Any]:
    """Mode along the last axis: the smallest of the most frequent values, and the index of its last
    occurrence."""
    n = x.shape[-1]
    p = jnp.argsort(x, axis=-1, stable=True)  # equal values keep their order: a run ends at its last index
    s = jnp.take_along_axis(x, p, -1)
    pos = jnp.broadcast_to(jnp.arange(n), s.shape)
    differs = s[..., 1:] != s[..., :-1]  # NaN != NaN, as in torch's run counting
    first = jnp.concatenate([jnp.ones(s.shape[:-1] + (1,), bool), differs], -1)
    last = jnp.concatenate([differs, jnp.ones(s.shape[:-1] + (1,), bool)], -1)
    start = jax.lax.cummax(jnp.where(first, pos, 0), axis=s.ndim - 1)
    length = jnp.where(last, pos - start + 1, 0)
    j = jnp.argmax(length, axis=-1, keepdims=True)  # first maximum: the smallest value among ties
    return jnp.take_along_axis(s, j, -1)[..., 0], jnp.take_along_axis(p, j, -1)[..., 0].astype(jnp.int64)


@lower(aten.mode.default)
def mode(x: Any, dim: int = -1, keepdim: bool = False) -> Any:
    """torch.mode. Value: the smallest most frequent value (as torch). Index: the last occurrence of that value,
    which is what torch's CPU kernel returns for rows of up to 16 elements (its std::sort is an insertion sort
    there); for longer rows torch's own choice among equal values is unspecified (unstable introsort).
    Rows containing NaN follow no defined order in torch (NaN breaks std::sort's ordering): refused."""
    if x.ndim == 0:
        wrapdim(dim, 0)
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if x.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    if (
        jnp.issubdtype(x.dtype, jnp.inexact)
        and not isinstance(x, jax.core.Tracer)
        and bool(jnp.any(jnp.isnan(x)))
    ):
        raise NotImplementedError(
            "aten::mode on TPU: inputs containing NaN are not supported (torch's CPU answer "
            "depends on its unstable sort's handling of NaN)"
        )
    v, i = _mode_last(jnp.moveaxis(x, d, -1))
    if keepdim:
        v, i = jnp.expand_dims(v, d), jnp.expand_dims(i, d)
    return v, i


# ----------------------------------------------------------------------------- hash_tensor
@lower(aten.hash_tensor.default)
def hash_tensor(x: Any, dim: Any = (), *, keepdim: bool = False, mode: int = 0) -> Any:
    """torch.hash_tensor mode 0: xor of every element's 64-bit pattern (floats widened to float64, integers
    and bools to int64), as uint64."""
    if mode != 0:
        raise RuntimeError(f"hash_tensor: Unsupported hash mode: {mode}")
    ax = axes(dim, x.ndim)
    _check_nonempty(x, ax, "hash_tensor")
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise NotImplementedError("aten::hash_tensor of complex tensors is not implemented for TPU")
    wide = x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.int64)
    bits = jax.lax.bitcast_convert_type(wide, jnp.uint64)
    all_ax = ax if ax is not None else tuple(range(x.ndim))
    out = jax.lax.reduce(bits, jnp.uint64(0), jax.lax.bitwise_xor, all_ax)
    return jnp.expand_dims(out, all_ax) if keepdim else out


# ----------------------------------------------------------------------------- segment_reduce
_SEG_INIT = {"max": -jnp.inf, "min": jnp.inf, "sum": 0.0, "mean": 0.0, "prod": 1.0}


def _check_lengths(n: int, lengths: Any, unsafe: bool) -> None:
    if not unsafe and lengths is not None and not isinstance(lengths, jax.core.Tracer):
        if bool(jnp.any(lengths < 0)):
            raise RuntimeError("lengths contains negative value!")
        if bool(jnp.any(jnp.sum(lengths, axis=-1) != n)):
            raise RuntimeError(
                "segment_reduce(): Expected all rows of lengths along axis to sum to "
                "data.size(lengths.dim()-1) when !unsafe."
            )


def _segments(shape: tuple, lengths: Any, offsets: Any) -> tuple:
    """Contiguous segments along the reduced axis (the last axis of lengths/offsets): returns
    (axis, outer, n, inner, S, per-element segment id (outer, n) with S for unused positions, lengths (outer, S))."""
    if offsets is not None:
        ax = offsets.ndim - 1
        starts, ends = offsets[..., :-1], offsets[..., 1:]
    elif lengths is not None:
        ax = lengths.ndim - 1
        ends = jnp.cumsum(lengths, axis=-1)
        starts = ends - lengths
    else:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    n = shape[ax]
    inner = int(np.prod(shape[ax + 1 :], dtype=np.int64))
    s = starts.shape[-1]
    starts, ends = starts.reshape(outer, s).astype(jnp.int64), ends.reshape(outer, s).astype(jnp.int64)
    seglen = ends - starts
    j = jnp.arange(n)
    if s == 0:
        return ax, outer, n, inner, s, jnp.zeros((outer, n), jnp.int64), seglen
    seg = jnp.sum(ends[:, None, :] <= j[None, :, None], axis=-1)
    used = (j[None, :] >= starts[:, :1]) & (j[None, :] < ends[:, -1:])
    return ax, outer, n, inner, s, jnp.where(used, seg, s), seglen


@lower(aten.segment_reduce.default)
def segment_reduce(
    data: Any,
    reduce: str,
    *,
    lengths: Any = None,
    indices: Any = None,
    offsets: Any = None,
    axis: int = 0,
    unsafe: bool = False,
    initial: Any = None,
) -> Any:
    """torch's segment_reduce over contiguous segments: NaN propagates through max/min, an empty segment is
    ``initial`` (or the reduction's identity; NaN for mean)."""
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if reduce not in _SEG_INIT:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    ax = (offsets if offsets is not None else lengths).ndim - 1
    _check_lengths(data.shape[ax], lengths, unsafe)
    return _segment_reduce_core(data, lengths, offsets, reduce, initial)


@functools.partial(jax.jit, static_argnames=("reduce", "initial"))
def _segment_reduce_core(data: Any, lengths: Any, offsets: Any, reduce: str, initial: Any) -> Any:
    """One compiled program (eagerly this is dozens of small ops)."""
    ax, outer, n, inner, s, seg, seglen = _segments(data.shape, lengths, offsets)
    out_shape = data.shape[:ax] + (s,) + data.shape[ax + 1 :]
    if s == 0:
        return jnp.zeros(out_shape, data.dtype)
    gid = (jnp.arange(outer)[:, None] * s + seg).reshape(-1)
    gid = jnp.where(seg.reshape(-1) == s, outer * s, gid)  # unused positions land in a dropped extra row
    vals = data.reshape(outer * n, inner)
    init = _SEG_INIT[reduce] if initial is None else initial
    acc = jnp.full((outer * s + 1, inner), init, data.dtype).at[gid]
    if reduce in ("sum", "mean"):
        acc = acc.add(vals)
    elif reduce == "prod":
        acc = acc.multiply(vals)
    else:
        # scatter max/min may drop NaN: mark rows that saw one and restore it
        acc = acc.max(vals) if reduce == "max" else acc.min(vals)
        nan = jnp.zeros((outer * s + 1, inner), bool).at[gid].max(jnp.isnan(vals))
        acc = jnp.where(nan, jnp.nan, acc)
    acc = acc[: outer * s].reshape(outer, s, inner)
    if reduce == "mean":
        cnt = seglen[:, :, None].astype(data.dtype)
        acc = jnp.where((seglen[:, :, None] > 0) & ~jnp.isnan(acc), acc / jnp.maximum(cnt, 1), acc)
        if initial is None:
            acc = jnp.where(seglen[:, :, None] == 0, jnp.nan, acc)
    return acc.reshape(out_shape)


def _segmented_cumprod(v: Any, first: Any, reverse: bool) -> Any:
    """Inclusive product along axis 1 restarting wherever ``first`` is set (scan direction aware)."""

    def comb(a: Any, b: Any) -> Any:
        pa, fa = a
        pb, fb = b
        return jnp.where(fb, pb, pa * pb), fa | fb

    return jax.lax.associative_scan(comb, (v, first), reverse=reverse, axis=1)[0]


@lower(aten._segment_reduce_backward.default, jit=True)
def segment_reduce_backward(
    grad: Any,
    output: Any,
    data: Any,
    reduce: str,
    *,
    lengths: Any = None,
    offsets: Any = None,
    axis: int = 0,
    initial: Any = None,
) -> Any:
    """Mirror of torch's CPU backward, including its quirks: max/min share the gradient among tied (or NaN)
    elements only where it is positive; prod recomputes the exclusive product for zero/NaN elements."""
    ax, outer, n, inner, s, seg, seglen = _segments(data.shape, lengths, offsets)
    if s == 0 or n == 0:
        return jnp.zeros(data.shape, data.dtype)
    d3 = data.reshape(outer, n, inner)
    g3 = grad.reshape(outer, s, inner)
    o3 = output.reshape(outer, s, inner)
    used = (seg < s)[:, :, None]
    segc = jnp.minimum(seg, s - 1)
    take = lambda t: jnp.take_along_axis(t, segc[:, :, None], axis=1)  # noqa: E731 - per-element segment value
    g_e, o_e = take(g3), take(o3)
    len_e = jnp.take_along_axis(seglen, segc, axis=1)[:, :, None]
    if reduce == "sum":
        gi = g_e
    elif reduce == "mean":
        gi = g_e / len_e.astype(data.dtype)
    elif reduce in ("max", "min"):
        hit = (jnp.isnan(d3) | (d3 == o_e)) & used
        cnt = (
            jnp.zeros((outer, s + 1, inner), jnp.int64)
            .at[jnp.arange(outer)[:, None], seg]
            .add(hit.astype(jnp.int64))[:, :s]
        )
        cnt_e = jnp.take_along_axis(cnt, segc[:, :, None], axis=1)
        gi = jnp.where(hit, g_e, 0)
        gi = jnp.where((cnt_e >= 2) & (gi > 0), gi / cnt_e.astype(data.dtype), gi)
    elif reduce == "prod":
        prev = jnp.concatenate([jnp.full((outer, 1), -1, seg.dtype), seg[:, :-1]], axis=1)
        nxt = jnp.concatenate([seg[:, 1:], jnp.full((outer, 1), -1, seg.dtype)], axis=1)
        first = jnp.broadcast_to((seg != prev)[:, :, None], d3.shape)
        last = jnp.broadcast_to((seg != nxt)[:, :, None], d3.shape)
        ones = jnp.ones((outer, 1, inner), data.dtype)
        pre = _segmented_cumprod(d3, first, False)
        pre_ex = jnp.where(first, 1, jnp.concatenate([ones, pre[:, :-1]], axis=1))
        suf = _segmented_cumprod(d3, last, True)
        suf_ex = jnp.where(last, 1, jnp.concatenate([suf[:, 1:], ones], axis=1))
        init = 1.0 if initial is None else initial
        excl = jnp.asarray(init, data.dtype) * pre_ex * suf_ex
        special = jnp.isnan(d3) | (d3 == 0)
        gi = jnp.where(special, g_e * excl, (g_e * o_e) / jnp.where(special, 1, d3))
    else:
        raise RuntimeError(f"unsupported reduction {reduce}")
    return jnp.where(used & (len_e > 0), gi, 0).astype(data.dtype).reshape(data.shape)
