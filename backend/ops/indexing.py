"""Gather/scatter/advanced-indexing lowerings. Boolean masks are data-dependent: converted eagerly."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend.ops._util import as_dtype, aten, wrapdim
from tpu_workbench.backend.ops.registry import lower


def _index_tuple(x: Any, indices: Any) -> tuple:
    out: list = []
    for i in indices:
        if i is None:
            out.append(slice(None))
        elif i.dtype == jnp.bool_ or i.dtype == jnp.uint8:
            nz = jnp.nonzero(i.astype(jnp.bool_))
            out.extend(nz)
        else:
            out.append(i)
    return tuple(out)


def _check_bounds(x: Any, idx: tuple) -> None:
    d = 0
    for i in idx:
        if isinstance(i, slice):
            d += 1
            continue
        if not isinstance(i, jax.core.Tracer) and i.size:
            n = x.shape[d]
            lo, hi = int(i.min()), int(i.max())
            if lo < -n or hi >= n:
                bad = hi if hi >= n else lo
                raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {n}")
        d += 1


@lower(aten.index.Tensor)
def index(x: Any, indices: Any) -> Any:
    idx = _index_tuple(x, indices)
    _check_bounds(x, idx)
    return x[idx]


@lower(aten._unsafe_index.Tensor)
def _unsafe_index(x: Any, indices: Any) -> Any:
    return x[_index_tuple(x, indices)]


@lower(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(x: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
    idx = _index_tuple(x, indices)
    _check_bounds(x, idx)
    v = as_dtype(values, x.dtype)
    return x.at[idx].add(v) if accumulate else x.at[idx].set(v)


@lower(aten.index_select.default)
def index_select(x: Any, d: int, index: Any) -> Any:
    if x.ndim == 0:
        return jnp.take(x.reshape(1), index.reshape(-1), axis=0).reshape(())
    d = wrapdim(d, x.ndim)
    _check_bounds(x, (slice(None),) * d + (index,))
    return jnp.take(x, index.reshape(-1), axis=d)


def _gather_idx(x: Any, d: int, index: Any) -> tuple:
    grids = np.ix_(*[np.arange(s) for s in index.shape]) if index.ndim else ()
    idx = [jnp.asarray(g) for g in grids]
    idx[d] = index
    return tuple(idx)


def _checks_indices_on_host(fn: Any) -> Any:
    """Mark a lowering that bound-checks its index through a helper (``_check_gather_scatter_index``) (it must not run traced)."""
    fn.reads_host_values = True
    return fn


@lower(aten.gather.default)
@_checks_indices_on_host
def gather(x: Any, d: int, index: Any, *, sparse_grad: bool = False) -> Any:
    d = wrapdim(d, x.ndim)  # (checked first, as PyTorch checks it, even for an empty index)
    if x.ndim == 0:
        return jnp.broadcast_to(x, index.shape)
    if index.size == 0:
        return jnp.zeros(index.shape, x.dtype)  # torch accepts an empty index of any rank here
    _check_gather_scatter_index(x, d, index)
    return x[_gather_idx(x, d, index)]


def _check_gather_scatter_index(x: Any, d: int, index: Any) -> None:
    """gather/scatter take indices in [0, size) only (no wrap-around, unlike indexing), as CPU and CUDA check;
    JAX would wrap a negative index and drop a large one, silently."""
    if index.size and not isinstance(index, jax.core.Tracer):
        n = x.shape[d]
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(
                f"index {lo if lo < 0 else hi} is out of bounds for dimension {d} with size {n}"
            )


def _scatter(x: Any, d: int, index: Any, src: Any, mode: str) -> Any:
    if x.ndim == 0:
        x2 = x.reshape(1)
        return _scatter(
            x2,
            0,
            index.reshape(-1),
            jnp.reshape(src, (-1,)) if hasattr(src, "shape") and src.ndim else src,
            mode,
        ).reshape(())
    if index.size == 0:
        return x  # nothing to write (torch accepts an empty index of any rank)
    d = wrapdim(d, x.ndim)
    _check_gather_scatter_index(x, d, index)
    idx = _gather_idx(x, d, index)
    if hasattr(src, "shape") and src.ndim:
        src = src[tuple(slice(0, s) for s in index.shape)]
    src = as_dtype(src, x.dtype)
    at = x.at[idx]
    return {
        "set": at.set,
        "add": at.add,
        "multiply": at.multiply,
        "mul": at.multiply,
        "sum": at.add,
        "prod": at.multiply,
        "amax": at.max,
        "amin": at.min,
    }[mode](src)


@lower(aten.scatter.src, aten.scatter.value)
@_checks_indices_on_host
def scatter(x: Any, d: int, index: Any, src: Any) -> Any:
    return _scatter(x, d, index, src, "set")


@lower(aten.scatter.reduce, aten.scatter.value_reduce)
@_checks_indices_on_host
def scatter_reduce_legacy(x: Any, d: int, index: Any, src: Any, *, reduce: str) -> Any:
    return _scatter(x, d, index, src, reduce)


@lower(aten.scatter_add.default)
@_checks_indices_on_host
def scatter_add(x: Any, d: int, index: Any, src: Any) -> Any:
    return _scatter(x, d, index, src, "add")


@lower(aten.scatter_reduce.two)
@_checks_indices_on_host
def scatter_reduce(x: Any, d: int, index: Any, src: Any, reduce: str, *, include_self: bool = True) -> Any:
    if reduce == "mean":
        ones = jnp.ones(index.shape, x.dtype)
        cnt = _scatter(jnp.full(x.shape, 1 if include_self else 0, x.dtype), d, index, ones, "add")
        s = _scatter(x if include_self else jnp.zeros_like(x), d, index, src, "add")
        out = s / jnp.maximum(cnt, 1) if jnp.issubdtype(x.dtype, jnp.floating) else s // jnp.maximum(cnt, 1)
        return jnp.where(cnt == 0, x, out).astype(x.dtype)
    if not include_self:
        ident = {
            "sum": 0,
            "prod": 1,
            "amax": -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min,
            "amin": jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).max,
        }[reduce]
        base = _scatter(x, d, index, jnp.asarray(ident, x.dtype), "set")
        touched = _scatter(jnp.zeros(x.shape, jnp.bool_), d, index, jnp.asarray(True), "set")
        out = _scatter(base, d, index, src, reduce)
        return jnp.where(touched, out, x)
    return _scatter(x, d, index, src, reduce)


@lower(aten.index_add.default)
def index_add(x: Any, d: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    d = wrapdim(d, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return x + jnp.sum(source) * alpha
    idx = [slice(None)] * x.ndim
    idx[d] = index
    src = source * alpha if alpha != 1 else source
    return x.at[tuple(idx)].add(as_dtype(src, x.dtype))


@lower(aten.index_copy.default)
def index_copy(x: Any, d: int, index: Any, source: Any) -> Any:
    if x.ndim == 0:
        return as_dtype(source, x.dtype).reshape(())
    d = wrapdim(d, x.ndim)
    idx = [slice(None)] * x.ndim
    idx[d] = index
    return x.at[tuple(idx)].set(as_dtype(source, x.dtype))


@lower(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(x: Any, d: int, index: Any, value: Any) -> Any:
    if x.ndim == 0:
        return jnp.asarray(value, x.dtype).reshape(())
    d = wrapdim(d, x.ndim)
    idx = [slice(None)] * x.ndim
    idx[d] = index
    return x.at[tuple(idx)].set(as_dtype(value, x.dtype))


@lower(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x: Any, mask: Any, value: Any) -> Any:
    if hasattr(value, "ndim") and value.ndim != 0:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor")
    if mask.dtype != jnp.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    return jnp.where(mask, as_dtype(value, x.dtype), x)


@lower(aten.masked_select.default)
def masked_select(x: Any, mask: Any) -> Any:
    x, mask = jnp.broadcast_arrays(x, mask)
    return x[mask]


@lower(aten.masked_scatter.default)
def masked_scatter(x: Any, mask: Any, source: Any) -> Any:
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    x, mask = jnp.broadcast_to(x, shape), jnp.broadcast_to(mask, shape)
    n = int(mask.sum())
    flat = x.reshape(-1).at[jnp.nonzero(mask.reshape(-1))[0]].set(source.reshape(-1)[:n].astype(x.dtype))
    return flat.reshape(x.shape)


@lower(aten.nonzero.default)
def nonzero(x: Any) -> Any:
    if x.ndim == 0:
        return jnp.zeros((1 if bool(x) else 0, 0), jnp.int64)
    return jnp.stack(jnp.nonzero(x), axis=1).astype(jnp.int64)


@lower(aten.take.default)
def take(x: Any, index: Any) -> Any:
    return x.reshape(-1)[index]


@lower(aten.repeat_interleave.Tensor)
def repeat_interleave(repeats: Any, *, output_size: int | None = None) -> Any:
    return jnp.repeat(jnp.arange(repeats.shape[0]), repeats, total_repeat_length=output_size).astype(
        jnp.int64
    )


@lower(aten.embedding.default)
def embedding(
    weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False
) -> Any:
    return jnp.take(weight, indices, axis=0)


@lower(aten.embedding_renorm_.default)
def embedding_renorm_(weight: Any, indices: Any, max_norm: float, norm_type: float) -> Any:
    """Rows of ``weight`` named by ``indices`` whose ``norm_type``-norm exceeds ``max_norm`` are scaled by
    ``max_norm / (norm + 1e-7)`` (the norm computed in float32 and rounded to the weight dtype, as torch CPU)."""
    hit = jnp.zeros((weight.shape[0],), bool).at[indices.reshape(-1)].set(True)
    acc = jnp.float32 if weight.dtype in (jnp.bfloat16, jnp.float16) else weight.dtype
    wf = weight.astype(acc)
    norm = jnp.linalg.norm(wf, ord=norm_type, axis=-1).astype(weight.dtype).astype(acc)
    scale = (max_norm / (norm.astype(jnp.float64) + 1e-7)).astype(acc)  # double on CPU, cast for the mul
    out = jnp.where((hit & (norm > max_norm))[:, None], wf * scale[:, None], wf)
    return out.astype(weight.dtype)


@lower(aten.embedding_dense_backward.default)
def embedding_dense_backward(
    grad: Any, indices: Any, num_weights: int, padding_idx: int, scale_grad_by_freq: bool
) -> Any:
    g = grad.reshape(-1, grad.shape[-1])
    idx = indices.reshape(-1)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), g.dtype).at[idx].add(1)
        g = g / counts[idx][:, None]
    if padding_idx >= 0:
        g = jnp.where((idx == padding_idx)[:, None], 0, g)
    return jnp.zeros((num_weights, g.shape[-1]), g.dtype).at[idx].add(g)


@lower(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad: Any, mask: Any, sizes: Any) -> Any:
    n = int(np.prod(sizes))
    mask = jnp.broadcast_to(mask, grad.shape)
    vals = grad[mask]
    out = jnp.zeros((n,), grad.dtype).at[: vals.shape[0]].set(vals[:n])
    return out.reshape(tuple(sizes))


@lower(aten.nonzero_static.default)
def nonzero_static(x: Any, *, size: int, fill_value: int = -1) -> Any:
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got size = {size}")
    if x.ndim == 0:
        return jnp.zeros((size, 0), jnp.int64)
    idx = jnp.nonzero(x.astype(jnp.bool_), size=size, fill_value=fill_value)
    return jnp.stack(idx, axis=-1).astype(jnp.int64).reshape(size, x.ndim)


@lower(aten.bincount.default)
def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    if x.ndim != 1 or not jnp.issubdtype(x.dtype, jnp.integer):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights.shape != x.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if x.size and int(jnp.min(x)) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    n = max(int(jnp.max(x)) + 1 if x.size else 0, minlength)
    if weights is None:
        return jnp.bincount(x, length=n).astype(jnp.int64)
    dt = weights.dtype if jnp.issubdtype(weights.dtype, jnp.floating) else jnp.float64
    return jnp.zeros((n,), dt).at[x].add(weights.astype(dt))


@lower(aten.put.default)
def put(x: Any, index: Any, source: Any, accumulate: bool = False) -> Any:
    if index.size != source.size:
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.size}, index.numel() = {index.size}"
        )
    if index.size == 0:
        return x
    n = x.size
    idx = index.reshape(-1).astype(jnp.int64)
    if n == 0 or (not isinstance(idx, jax.core.Tracer) and bool(jnp.any((idx < -n) | (idx >= n)))):
        raise IndexError(f"out of range: tried to access index {int(idx[0])} on a tensor of {n} elements.")
    idx = jnp.where(idx < 0, idx + n, idx)
    src = source.reshape(-1).astype(x.dtype)
    flat = x.reshape(-1)
    flat = flat.at[idx].add(src) if accumulate else flat.at[idx].set(src)
    return flat.reshape(x.shape)


# ----------------------------------------------------------------------------- index_reduce
def _reduce_identity(dt: Any, reduce: str) -> Any:
    """The value a reduction starts from when ``include_self=False`` drops ``self``'s own entries."""
    if reduce in ("prod",):
        return 1
    if reduce == "mean":
        return 0
    floating = jnp.issubdtype(dt, jnp.floating)
    if reduce == "amax":
        return -jnp.inf if floating else jnp.iinfo(dt).min
    return jnp.inf if floating else jnp.iinfo(dt).max


@lower(aten.index_reduce.default)
def index_reduce(x: Any, d: int, index: Any, source: Any, reduce: str, *, include_self: bool = True) -> Any:
    """torch's index_reduce: like index_add along ``d`` but with prod/mean/amax/amin; ``mean`` divides by the
    number of contributions (plus one for ``self`` when included), flooring for integers."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(
            f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
        )
    if x.ndim == 0:
        return index_reduce(
            x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce, include_self=include_self
        ).reshape(())
    d = wrapdim(d, x.ndim)
    index = index.reshape(-1)
    _check_bounds(x, (slice(None),) * d + (index,))
    return _index_reduce_core(x, d, index, source, reduce, include_self)


@functools.partial(jax.jit, static_argnums=(1, 4, 5))
def _index_reduce_core(x: Any, d: int, index: Any, source: Any, reduce: str, include_self: bool) -> Any:
    """One compiled program for the reduction (bounds were checked eagerly by the caller)."""
    src = as_dtype(source, x.dtype)
    if src.ndim == 0:
        src = src.reshape(1)
    idx = (slice(None),) * d + (index,)
    base = x if include_self else x.at[idx].set(jnp.asarray(_reduce_identity(x.dtype, reduce), x.dtype))
    at = base.at[idx]
    if reduce == "prod":
        return at.multiply(src)
    if reduce == "amax":
        return at.max(src)
    if reduce == "amin":
        return at.min(src)
    total = at.add(src)
    cnt = jnp.full(x.shape, 1 if include_self else 0, jnp.int64).at[idx].add(jnp.ones(src.shape, jnp.int64))
    cnt = jnp.maximum(cnt, 1)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return (total / cnt.astype(x.dtype)).astype(x.dtype)
    return jnp.floor_divide(total, cnt.astype(x.dtype))


# ----------------------------------------------------------------------------- unique (data-dependent sizes)
def _concrete(name: str, *xs: Any) -> None:
    """Output sizes depend on values: only eager (concrete) arrays can be answered."""
    if any(isinstance(x, jax.core.Tracer) for x in xs):
        raise NotImplementedError(f"{name} has a data-dependent output shape and cannot be traced on TPU")


def _unique_flat(x: Any, return_inverse: bool, return_counts: bool) -> tuple[Any, Any, Any]:
    """Sorted unique values of the flattened ``x``; NaNs stay distinct, as torch's sort-based CPU unique."""
    flat = np.asarray(x).reshape(-1)
    empty = jnp.zeros((0,), jnp.int64)
    if flat.size == 0:
        inv = jnp.zeros(x.shape, jnp.int64) if return_inverse else empty
        return jnp.zeros((0,), x.dtype), inv, empty
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    new = np.ones(s.shape, bool)
    new[1:] = s[1:] != s[:-1]  # NaN != NaN: every NaN is its own value
    vals = s[new]
    ids = np.cumsum(new) - 1
    inv = empty
    if return_inverse:
        inv_flat = np.empty(flat.shape, np.int64)
        inv_flat[order] = ids
        inv = jnp.asarray(inv_flat.reshape(x.shape))
    cnt = jnp.asarray(np.bincount(ids, minlength=vals.size).astype(np.int64)) if return_counts else empty
    return jnp.asarray(vals), inv, cnt


@lower(aten._unique2.default)
def _unique2(x: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False) -> Any:
    """torch's CPU unique sorts even when ``sorted=False``; so does this one."""
    _concrete("aten::_unique2", x)
    return _unique_flat(x, return_inverse, return_counts)


@lower(aten._unique.default)
def _unique(x: Any, sorted: bool = True, return_inverse: bool = False) -> Any:
    _concrete("aten::_unique", x)
    v, inv, _ = _unique_flat(x, return_inverse, False)
    return v, inv


def _rows_along(x: Any, d: int) -> np.ndarray:
    """``x`` with ``d`` first and the rest flattened: one row per slice along ``d``."""
    rest = int(np.prod([s for i, s in enumerate(x.shape) if i != d], dtype=np.int64))
    return np.moveaxis(np.asarray(x), d, 0).reshape(x.shape[d], rest)


def _from_rows(rows: np.ndarray, x: Any, d: int) -> Any:
    shape = list(np.moveaxis(np.asarray(x), d, 0).shape)
    shape[0] = rows.shape[0]
    return jnp.asarray(np.moveaxis(rows.reshape(shape), 0, d))


def _lex_order(rows: np.ndarray) -> np.ndarray:
    """Stable lexicographic order of the rows (first column most significant)."""
    if rows.shape[1] == 0:
        return np.arange(rows.shape[0])
    return np.lexsort(rows.T[::-1])


@lower(aten.unique_dim.default)
def unique_dim(
    x: Any, dim: int, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> Any:
    """Unique slices along ``dim``, in lexicographic order (torch sorts them on every device)."""
    _concrete("aten::unique_dim", x)
    d = wrapdim(dim, x.ndim)
    rows = _rows_along(x, d)
    n = rows.shape[0]
    order = _lex_order(rows)
    s = rows[order]
    new = np.ones((n,), bool)
    if n > 1:
        new[1:] = np.any(s[1:] != s[:-1], axis=1)
    ids = np.cumsum(new) - 1
    inv = np.empty((n,), np.int64)
    inv[order] = ids
    cnt = np.bincount(ids, minlength=int(new.sum())).astype(np.int64)
    return _from_rows(s[new], x, d), jnp.asarray(inv), jnp.asarray(cnt)


def _consecutive(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = rows.shape[0]
    new = np.ones((n,), bool)
    if n > 1:
        new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    ids = np.cumsum(new) - 1
    return new, ids.astype(np.int64), np.bincount(ids, minlength=int(new.sum())).astype(np.int64)


@lower(aten.unique_consecutive.default)
def unique_consecutive(
    x: Any, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Any:
    """Collapse runs of equal values (or equal slices along ``dim``); NaNs never compare equal."""
    _concrete("aten::unique_consecutive", x)
    if dim is not None:
        return unique_dim_consecutive(x, dim, return_inverse, return_counts)
    flat = np.asarray(x).reshape(-1, 1)
    new, ids, cnt = _consecutive(flat)
    empty = jnp.zeros((0,), jnp.int64)
    inv = jnp.asarray(ids.reshape(x.shape)) if return_inverse else empty
    return jnp.asarray(flat[new, 0]), inv, jnp.asarray(cnt) if return_counts else empty


@lower(aten.unique_dim_consecutive.default)
def unique_dim_consecutive(
    x: Any, dim: int, return_inverse: bool = False, return_counts: bool = False
) -> Any:
    _concrete("aten::unique_dim_consecutive", x)
    d = wrapdim(dim, x.ndim)
    rows = _rows_along(x, d)
    new, ids, cnt = _consecutive(rows)
    return _from_rows(rows[new], x, d), jnp.asarray(ids), jnp.asarray(cnt)
