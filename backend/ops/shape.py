"""View and shape lowerings. View ops are pure functions of their input; the dispatcher records them so
writes through a view reach its base (see backend/tensor.py)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from tpu_workbench.backend.ops._util import as_dtype, aten, dims, jdt, result_dtype, wrapdim
from tpu_workbench.backend.ops.registry import lower


def _size(x: Any, size: Any) -> tuple[int, ...]:
    size = tuple(int(s) for s in size)
    if -1 in size:
        known = int(np.prod([s for s in size if s != -1]))
        missing = x.size // known if known else 0
        size = tuple(missing if s == -1 else s for s in size)
    if int(np.prod(size)) != x.size:
        raise RuntimeError(f"shape '{list(size)}' is invalid for input of size {x.size}")
    return size


@lower(aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default, aten.reshape.default)
def view(x: Any, size: Any, *stride: Any) -> Any:
    return jnp.reshape(x, _size(x, size))


@lower(aten.view.dtype)
def view_dtype(x: Any, dtype: Any) -> Any:
    dt = jdt(dtype)
    if jnp.dtype(dt).itemsize != x.dtype.itemsize:
        raise RuntimeError("view(dtype) between dtypes of different sizes is not supported on the TPU device")
    if dt == jnp.bool_ or x.dtype == jnp.bool_:
        return (x.astype(jnp.uint8) if x.dtype == jnp.bool_ else x).view(dt) if dt != jnp.bool_ else x != 0
    return jax.lax.bitcast_convert_type(x, dt)


@lower(aten.permute.default)
def permute(x: Any, d: Any) -> Any:
    return jnp.transpose(x, [wrapdim(i, x.ndim) for i in d])


@lower(aten.transpose.int)
def transpose(x: Any, d0: int, d1: int) -> Any:
    if x.ndim == 0:
        return x
    return jnp.swapaxes(x, wrapdim(d0, x.ndim), wrapdim(d1, x.ndim))


@lower(aten.t.default)
def t(x: Any) -> Any:
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


@lower(aten.expand.default)
def expand(x: Any, size: Any, *, implicit: bool = False) -> Any:
    size = list(size)
    lead = len(size) - x.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{list(x.shape)}}}, size={size}): the number of sizes provided "
            f"({len(size)}) must be greater or equal to the number of dimensions in the tensor ({x.ndim})"
        )
    shape = [x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(size)]
    return jnp.broadcast_to(x, tuple(shape))


@lower(aten.squeeze.default)
def squeeze(x: Any) -> Any:
    return jnp.squeeze(x)


@lower(aten.squeeze.dim, aten.squeeze.dims)
def squeeze_dim(x: Any, d: Any) -> Any:
    if x.ndim == 0:
        return x
    ds = dims(d, x.ndim) or ()
    return jnp.squeeze(x, tuple(i for i in ds if x.shape[i] == 1))


@lower(aten.unsqueeze.default)
def unsqueeze(x: Any, d: int) -> Any:
    return jnp.expand_dims(x, wrapdim(d, x.ndim + 1))


def _inverts(*views: Any) -> Any:
    """Marks a function as the inverse of these bijective views (each element of the input appears once in the
    output): writing ``y`` through such a view sets its base to ``inverse(y, base, *view_args)``, a transpose or
    a reshape XLA fuses, instead of a scatter (backend/tensor.py)."""

    def mark(inverse: Any) -> Any:
        for v in views:
            v.view_inverse = inverse
        return inverse

    return mark


@_inverts(view, squeeze, squeeze_dim, unsqueeze)
def _reshape_back(y: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return jnp.reshape(y, x.shape)


@_inverts(t)
def _t_back(y: Any, x: Any) -> Any:
    return y.T


@_inverts(transpose)
def _transpose_back(y: Any, x: Any, d0: int, d1: int) -> Any:
    return transpose(y, d0, d1)


@_inverts(permute)
def _permute_back(y: Any, x: Any, d: Any) -> Any:
    return jnp.transpose(y, np.argsort([wrapdim(i, x.ndim) for i in d]))


def _select_region(shape: tuple, d: int, index: int) -> tuple[int, int, None] | None:
    """(dim, start, None) of ``select(d, index)`` on ``shape``: one row of a block, the dim dropped (see
    backend.tensor: a write through it is one dynamic_update_slice)."""
    d = wrapdim(d, len(shape))
    n = shape[d]
    return (d, index % n, None) if -n <= index < n else None


def _slice_region(shape: tuple, d: int = 0, start: int | None = None, end: int | None = None, step: int = 1):
    """(dim, start, size) of a unit-step ``slice`` on ``shape`` (clamped as torch clamps), else None."""
    if step != 1:
        return None
    s = _slice_index(shape, d, start, end, step)[wrapdim(d, len(shape))]
    return (wrapdim(d, len(shape)), s.start, s.stop - s.start)


@lower(aten.select.int)
def select(x: Any, d: int, index: int) -> Any:
    d = wrapdim(d, x.ndim)
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {d}"
        )
    return jnp.take(x, index % n, axis=d)


def _slice_index(shape: tuple, d: int, start: int | None, end: int | None, step: int) -> tuple:
    """The index tuple of ``slice(d, start, end, step)`` on ``shape``, clamped as torch clamps it."""
    d = wrapdim(d, len(shape))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    n = shape[d]
    start = 0 if start is None else start
    end = n if end is None else end
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    idx = [slice(None)] * len(shape)
    idx[d] = slice(start, end, step)
    return tuple(idx)


@lower(aten.slice.Tensor)
def slice_(x: Any, d: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Any:
    return x[_slice_index(x.shape, d, start, end, step)]


select.view_region = _select_region  # type: ignore[attr-defined]
slice_.view_region = _slice_region  # type: ignore[attr-defined]


@lower(aten.alias.default, aten.detach.default, aten.lift_fresh.default)
def alias(x: Any) -> Any:
    return x


@lower(aten.as_strided.default)
def as_strided(x: Any, size: Any, stride: Any, storage_offset: int | None = None) -> Any:
    """Strides are read against ``x``'s contiguous layout: the dispatcher calls this on a view's root, whose array
    is its storage in that order (backend/dispatch.py ``_on_storage``), with the offset made explicit."""
    flat = x.reshape(-1)
    idx = np.asarray(storage_offset or 0, dtype=np.int64)
    for s, st in zip(size, stride, strict=True):
        idx = idx[..., None] + np.arange(s, dtype=np.int64) * st
    idx = idx.reshape(tuple(size))
    if idx.size and (idx.max() >= flat.size or idx.min() < 0):
        raise RuntimeError("as_strided: setStorage: sizes and strides are out of bounds for the tensor")
    return flat[jnp.asarray(idx)] if idx.size else jnp.zeros(tuple(size), x.dtype)


@lower(aten.diagonal.default)
def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    return jnp.diagonal(x, offset, wrapdim(dim1, x.ndim), wrapdim(dim2, x.ndim))


@lower(aten.unfold.default)
def unfold(x: Any, d: int, size: int, step: int) -> Any:
    if x.ndim == 0:
        return x.reshape(1)
    d = wrapdim(d, x.ndim)
    n = (x.shape[d] - size) // step + 1
    starts = np.arange(n) * step
    idx = starts[:, None] + np.arange(size)[None, :]
    out = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=d)
    out = out.reshape(x.shape[:d] + (n, size) + x.shape[d + 1 :])
    return jnp.moveaxis(out, d + 1, -1)


@lower(aten.split.Tensor)
def split(x: Any, split_size: int, d: int = 0) -> Any:
    d = wrapdim(d, x.ndim)
    n = x.shape[d]
    if split_size == 0 and n == 0:
        return [x]
    edges = list(range(split_size, n, split_size))
    return [slice_(x, d, s, s + split_size) for s in [0] + edges]


@lower(aten.split_with_sizes.default)
def split_with_sizes(x: Any, sizes: Any, d: int = 0) -> Any:
    d = wrapdim(d, x.ndim)
    if sum(sizes) != x.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {x.shape[d]}")
    out, s = [], 0
    for n in sizes:
        out.append(slice_(x, d, s, s + n))
        s += n
    return out


@lower(aten.unbind.int)
def unbind(x: Any, d: int = 0) -> Any:
    d = wrapdim(d, x.ndim)
    return [jnp.take(x, i, axis=d) for i in range(x.shape[d])]


# ----------------------------------------------------------------------------- non-view shape ops
@lower(aten.cat.default)
def cat(tensors: Any, d: int = 0) -> Any:
    ts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # legacy: skip empty 1-D
    if not ts:
        dt = result_dtype(*tensors) if tensors else jnp.float32
        return jnp.zeros((0,), dt)
    dt = result_dtype(*[t if t.ndim else t.reshape(1) for t in tensors])
    d = wrapdim(d, ts[0].ndim)
    return jnp.concatenate([as_dtype(t, dt) for t in ts], axis=d)


@lower(aten.stack.default)
def stack(tensors: Any, d: int = 0) -> Any:
    dt = result_dtype(*[t if t.ndim else t.reshape(1) for t in tensors])
    return jnp.stack([as_dtype(t, dt) for t in tensors], axis=wrapdim(d, tensors[0].ndim + 1))


@lower(aten.flip.default)
def flip(x: Any, d: Any) -> Any:
    return jnp.flip(x, dims(d, x.ndim) or ()) if x.ndim else x


@lower(aten.roll.default)
def roll(x: Any, shifts: Any, d: Any = ()) -> Any:
    if not d:
        return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return jnp.roll(x, tuple(shifts), tuple(wrapdim(i, x.ndim) for i in d))


@lower(aten.repeat.default)
def repeat(x: Any, repeats: Any) -> Any:
    repeats = tuple(repeats)
    if len(repeats) < x.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    return jnp.tile(x, repeats)


@lower(aten.constant_pad_nd.default)
def constant_pad_nd(x: Any, pad: Any, value: Any = 0) -> Any:
    pads = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pads[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    cfg = [(lo, hi, 0) for lo, hi in pads]  # lax.pad also crops on negative padding
    return jax.lax.pad(x, jnp.asarray(value, x.dtype), cfg)


@lower(aten.tril.default)
def tril(x: Any, diagonal: int = 0) -> Any:
    return jnp.tril(x, diagonal)


@lower(aten.triu.default)
def triu(x: Any, diagonal: int = 0) -> Any:
    return jnp.triu(x, diagonal)


# ----------------------------------------------------------------------------- *_scatter (functional view writes)
def _check_src_shape(name: str, src: Any, shape: tuple) -> None:
    if tuple(src.shape) != tuple(shape):
        raise RuntimeError(
            f"{name}: expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(shape)}"
        )


@lower(aten.slice_scatter.default)
def slice_scatter(
    x: Any, src: Any, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> Any:
    """One update-slice (the stock decomposition builds index tensors and a masked gather, op by op)."""
    idx = _slice_index(x.shape, dim, start, end, step)
    _check_src_shape("slice_scatter", src, np.empty(x.shape, np.bool_)[idx].shape)
    return x.at[idx].set(as_dtype(src, x.dtype))


@lower(aten.slice_backward.default)
def slice_backward(g: Any, input_sizes: Any, dim: int, start: int, end: int, step: int) -> Any:
    return slice_scatter(jnp.zeros(tuple(input_sizes), g.dtype), g, dim, start, end, step)


@lower(aten.select_scatter.default)
def select_scatter(x: Any, src: Any, dim: int, index: int) -> Any:
    d = wrapdim(dim, x.ndim)
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {d}"
        )
    _check_src_shape("select_scatter", src, x.shape[:d] + x.shape[d + 1 :])
    return x.at[(slice(None),) * d + (index % n,)].set(as_dtype(src, x.dtype))


@lower(aten.select_backward.default)
def select_backward(g: Any, input_sizes: Any, dim: int, index: int) -> Any:
    return select_scatter(jnp.zeros(tuple(input_sizes), g.dtype), g, dim, index)


@lower(aten.diagonal_backward.default)
def diagonal_backward(g: Any, input_sizes: Any, offset: int, dim1: int, dim2: int) -> Any:
    return diagonal_scatter(jnp.zeros(tuple(input_sizes), g.dtype), g, offset, dim1, dim2)


@lower(aten.diagonal_scatter.default)
def diagonal_scatter(x: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """A direct scatter: the stock decomposition goes through as_strided, which a view (e.g. an expanded
    gradient) cannot take here."""
    pos = np.diagonal(
        np.arange(x.size, dtype=np.int64).reshape(x.shape),
        offset,
        wrapdim(dim1, x.ndim),
        wrapdim(dim2, x.ndim),
    )
    _check_src_shape("diagonal_scatter", src, pos.shape)
    flat = x.reshape(-1)
    if pos.size:
        flat = flat.at[jnp.asarray(pos.reshape(-1))].set(as_dtype(src, x.dtype).reshape(-1))
    return flat.reshape(x.shape)


def _strided_positions(n: int, size: Any, stride: Any, storage_offset: int | None) -> np.ndarray:
    idx = np.asarray(storage_offset or 0, dtype=np.int64)
    for s, st in zip(size, stride, strict=True):
        idx = idx[..., None] + np.arange(s, dtype=np.int64) * st
    idx = idx.reshape(tuple(size))
    if idx.size and (idx.max() >= n or idx.min() < 0):
        raise RuntimeError("as_strided_scatter: sizes and strides are out of bounds for the tensor")
    return idx


@lower(aten.as_strided_scatter.default, torch.ops.prims.as_strided_scatter.default)
def as_strided_scatter(x: Any, src: Any, size: Any, stride: Any, storage_offset: int | None = None) -> Any:
    """Strides are read against ``x``'s own contiguous layout, as for as_strided. Where strided positions
    overlap, torch's CPU result depends on its copy order: refused rather than guessed."""
    pos = _strided_positions(x.size, size, stride, storage_offset)
    _check_src_shape("as_strided_scatter", src, pos.shape)
    if pos.size and np.unique(pos).size != pos.size:
        raise NotImplementedError(
            "aten::as_strided_scatter with overlapping positions is not supported on TPU"
        )
    flat = x.reshape(-1)
    if pos.size:
        flat = flat.at[jnp.asarray(pos.reshape(-1))].set(as_dtype(src, x.dtype).reshape(-1))
    return flat.reshape(x.shape)
