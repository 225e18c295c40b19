"""Strict eager: a view op runs no program; its value is computed when something reads it.

A view (``view``, ``t``, ``transpose``, ``split`` ...) of a TPU tensor is its root plus a chain of view steps
(backend/tensor.py). Computing each view's array as it is made cost one XLA executable per view call (about
60 us on XLA:CPU, a quarter of a small GPT's train step: ``linear`` alone makes a ``t`` and two ``view``s).
Here the view gets its shape and dtype from the lowering run on abstract values, and its strides and offset
from PyTorch's meta kernel (backend/strides.py), cached per signature; its array is left unset and marked
stale: the first read replays the whole chain from the root in one cached executable (``tensor.payload``), and
a view that is only viewed again, or never read, costs no program at all.
Reading a view always sees the root's current value, which is what aliasing means.

A view whose arguments hold tensors, whose step cannot be keyed, or whose shape cannot be derived abstractly
(a bad size: the eager run raises the error) takes the eager path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend._jax import j2t_dtype, jax_module, t2j_dtype
from tpu_workbench.backend.jit import freeze
from tpu_workbench.backend.lazy import Lazy
from tpu_workbench.backend.op_jit import PendingView
from tpu_workbench.backend.strides import NO_META, view_geometry
from tpu_workbench.backend.tensor import TpuTensor, ViewStep, payload, stale_view, value

_MAX_DESCRIPTIONS = 65536
_DESCRIPTIONS: dict[Any, Any] = {}  # (op, arguments, input shape, strides, offset, dtype) -> _Described
_NO = object()  # the view cannot be described abstractly: the eager path runs (and raises) it


class _Described:
    """What a view call makes, worked out once per signature: several outputs or one, each output's shape and
    torch dtype, and its view step (immutable, shared by every view this call signature makes)."""

    __slots__ = ("multi", "outs")

    def __init__(self, multi: bool, outs: list) -> None:
        self.multi, self.outs = multi, outs


def _static(x: Any) -> bool:
    c = x.__class__
    if c is int or c is bool or c is float or x is None or c is str:
        return True
    if c is list or c is tuple:
        return all(_static(v) for v in x)
    return isinstance(x, (torch.dtype, torch.memory_format, torch.SymInt)) and not isinstance(x, torch.Tensor)


def _int_key(rest: tuple) -> tuple | None:
    """A cache key for view arguments that are all ints or sequences of ints (nearly every view call), cheaper
    than ``freeze``; None for anything else. (Plain ints cannot collide with ``freeze``'s tuples.)"""
    out = []
    for a in rest:
        c = a.__class__
        if c is int:
            out.append(a)
        elif c is list or c is tuple:
            for v in a:
                if v.__class__ is not int:
                    return None
            out.append(("L", tuple(a)))
        else:
            return None
    return tuple(out)


def _describe(func: Any, fn: Callable[..., Any], rest: tuple, kwargs: dict, src: TpuTensor) -> Any:
    """The view's outputs from the lowering run on abstract values (their strides and offsets from PyTorch's
    meta kernel: backend/strides.py), or ``_NO``."""
    frozen = tuple(tuple(a) if a.__class__ is list else a for a in rest)  # (a caller's list may change later)
    step = ViewStep(fn, frozen, dict(kwargs))
    if step.key is None:
        return _NO
    jax = jax_module()
    struct = jax.ShapeDtypeStruct(tuple(src.shape), t2j_dtype(src.dtype))
    try:
        res = jax.eval_shape(lambda x: fn(x, *frozen, **kwargs), struct)
    except Exception:  # noqa: BLE001 - a bad size or an untraceable step: the eager path raises or runs it
        return _NO
    multi = isinstance(res, (list, tuple))
    leaves = list(res) if multi else [res]
    try:
        geometry = view_geometry(func, (src, *frozen), kwargs)
    except Exception:  # noqa: BLE001 - PyTorch refuses this view over these strides: the eager path raises it
        return _NO
    if geometry is NO_META or len(geometry) != len(leaves):
        geometry = [None] * len(leaves)
    steps = [ViewStep(fn, frozen, dict(kwargs), i) for i in range(len(leaves))] if multi else [step]
    return _Described(
        multi,
        [
            (tuple(r.shape), j2t_dtype(r.dtype), st, g)
            for r, st, g in zip(leaves, steps, geometry, strict=True)
        ],
    )


def _described(func: Any, fn: Callable[..., Any], rest: tuple, kwargs: dict, src: TpuTensor) -> Any:
    ik = None if kwargs else _int_key(rest)
    if ik is not None:
        key: Any = (func, ik, src.shape, src.stride(), src.storage_offset(), src.dtype)
    else:
        if not _static(rest) or (kwargs and not _static(tuple(kwargs.values()))):
            return _NO
        try:
            key = (
                func,
                freeze(rest),
                freeze(tuple(kwargs.items())),
                src.shape,
                src.stride(),
                src.storage_offset(),
                src.dtype,
            )
            hash(key)
        except TypeError:
            return _NO
    hit = _DESCRIPTIONS.get(key)
    if hit is None:
        hit = _describe(func, fn, rest, kwargs, src)
        if hit is not _NO:  # (a failing call is not cached: its error comes from the eager path every time)
            if len(_DESCRIPTIONS) > _MAX_DESCRIPTIONS:
                _DESCRIPTIONS.clear()
            _DESCRIPTIONS[key] = hit
    return hit


def deferred_view(func: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """The view ``func(*args)`` as tensors whose arrays are not computed yet, or None (take the eager path)."""
    src = args[0]
    if src.__class__ is not TpuTensor:
        return None
    d = _described(func, fn, args[1:], kwargs, src)
    if d is _NO:
        return None
    with view_mode(src):
        outs = [stale_view(src, step, shape, dtype, geometry) for shape, dtype, step, geometry in d.outs]
    return outs if d.multi else outs[0]


_NO_MODE = contextlib.nullcontext()


def view_mode(src: torch.Tensor) -> Any:
    """A view of an ordinary tensor taken inside ``inference_mode`` is an ordinary tensor (autograd gives it
    its base's version counter, which an inference tensor cannot hold): build its wrapper outside the mode."""
    if torch.is_inference_mode_enabled() and not src.is_inference():
        return torch.inference_mode(False)
    return _NO_MODE


def deferred_alias(src: TpuTensor) -> TpuTensor | None:
    """``detach``/``alias`` of a view not computed yet: a view not computed yet either (None: take the eager
    path, which shares the source's array)."""
    root = src._root
    if root is None or root._gen == src._seen:
        return None
    with view_mode(src):
        return stale_view(src, None, tuple(src.shape), src.dtype, (src.stride(), src.storage_offset()))


def view_operand(t: TpuTensor, pending_root: bool = False) -> Any:
    """A stale view as an executable's operand: ``PendingView(root array, chain)``, or its array where the chain
    is empty (an alias) or cannot be keyed. ``pending_root``: fused eager records the op, so the root may be a
    pending value (strict eager computes it first)."""
    chain = t._chain
    root = t._root
    if not chain:
        return payload(t)
    key = tuple([step.key for step in chain])
    if None in key:
        return payload(t)
    base = payload(root)
    if base.__class__ is Lazy and not pending_root:
        base = value(root)
    return PendingView(base, chain, key)
