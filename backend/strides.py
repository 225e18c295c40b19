"""The strides and storage offset a view of a TPU tensor reports: the ones PyTorch gives the same view on CUDA.

A TPU tensor's value is a JAX array (no storage), but PyTorch's own code reads strides to choose between a
copy and a view: ``contiguous()`` returns ``self`` when ``is_contiguous()``, ``reshape``/``flatten`` take a view
when the strides allow one, ``view`` refuses a shape the strides cannot express. Were every wrapper to report
the contiguous strides of its own shape, ``x.t().contiguous()`` would hand back the transposed view itself, and
writing into that "copy" would change ``x``. So a view reports the strides and offset PyTorch computes for it,
relative to its root laid out contiguously (a root always reports contiguous strides and offset 0: its JAX
array is its value in that order). They come from running the view op on a ``meta`` tensor with the source's
sizes, strides and offset, cached per signature; the meta kernel also raises PyTorch's own error for a view
the strides cannot express (``x.t().view(-1)``), as CUDA does.
"""

from __future__ import annotations

from typing import Any

import torch

NO_META = object()  # the op has no meta kernel: the caller keeps contiguous strides


def contiguous_strides(shape: tuple) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def meta_like(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``t``'s sizes, strides, storage offset and dtype."""
    shape, stride, offset = tuple(t.shape), t.stride(), t.storage_offset()
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride, strict=True) if s > 0) if all(shape) else 0
    storage = torch.empty((offset + extent,), dtype=t.dtype, device="meta")
    return storage.as_strided(shape, stride, offset)


def _to_meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return meta_like(a)
    if isinstance(a, (list, tuple)):
        return type(a)(_to_meta(v) for v in a)
    return a


def view_geometry(func: Any, args: tuple, kwargs: dict) -> Any:
    """[(strides, storage_offset), ...] (one per output) for the view ``func(*args, **kwargs)``, or ``NO_META``.
    Raises PyTorch's error where the view cannot be expressed over the source's strides."""
    try:
        res = func(*_to_meta(args), **_to_meta(kwargs))
    except NotImplementedError:
        return NO_META
    except Exception:
        if any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
            return NO_META  # (a tensor argument a meta kernel cannot read, narrow's start: not a refusal)
        raise
    leaves = res if isinstance(res, (list, tuple)) else (res,)
    return [(r.stride(), r.storage_offset()) for r in leaves]
