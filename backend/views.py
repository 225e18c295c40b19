"""Strict eager: a view op runs no program; its value is computed when something reads it.

A view (``view``, ``t``, ``transpose``, ``split`` ...) of a TPU tensor is its root plus a chain of view steps
(backend/tensor.py). Computing each view's array as it is made cost one XLA executable per view call (about
60 us on XLA:CPU, a quarter of a small GPT's train step: ``linear`` alone makes a ``t`` and two ``view``s).
Here the view gets its shape and dtype from the lowering run on abstract values (cached per signature), and
its array is left unset and marked stale: the first read replays the whole chain from the root in one cached
executable (``tensor.payload``), and a view that is only viewed again, or never read, costs no program at all.
Reading a view always sees the root's current value, which is what aliasing means.

A view whose arguments hold tensors, whose step cannot be keyed, or whose shape cannot be derived abstractly
(a bad size: the eager run raises the error) takes the eager path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from backend._jax import jax_module, t2j_dtype
from backend.lazy import Lazy
from backend.op_jit import PendingView
from backend.tensor import TpuTensor, ViewStep, make_view, payload, value

_SHAPES: dict[Any, Any] = {}  # (lowering, input shape, dtype, statics) -> [(shape, jax dtype)], or None (list)
_MAX_SHAPES = 65536
_STALE = -1  # a view's seen-generation that no root has: its array is computed on first read


class _Aval:
    """What ``TpuTensor.__new__`` reads of a payload: its shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: Any) -> None:
        self.shape, self.dtype = shape, dtype


def _static(x: Any) -> bool:
    c = x.__class__
    if c is int or c is bool or c is float or x is None or c is str:
        return True
    if c is list or c is tuple:
        return all(_static(v) for v in x)
    return isinstance(x, (torch.dtype, torch.memory_format, torch.SymInt)) and not isinstance(x, torch.Tensor)


def _shapes(step: ViewStep, src: TpuTensor) -> Any:
    """(several outputs?, [(shape, jax dtype)]) of ``step`` applied to ``src``, or None."""
    key = (step.key, tuple(src.shape), src.dtype)
    out = _SHAPES.get(key)
    if out is not None:
        return out
    jax = jax_module()
    struct = jax.ShapeDtypeStruct(tuple(src.shape), t2j_dtype(src.dtype))
    try:
        res = jax.eval_shape(lambda x: step.fn(x, *step.args, **step.kwargs), struct)
    except Exception:  # noqa: BLE001 - a bad size or an untraceable step: the eager path raises or runs it
        return None
    multi = isinstance(res, (list, tuple))
    out = (multi, [(tuple(r.shape), r.dtype) for r in (res if multi else (res,))])
    if len(_SHAPES) > _MAX_SHAPES:
        _SHAPES.clear()
    _SHAPES[key] = out
    return out


def deferred_view(func: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """The view ``func(*args)`` as tensors whose arrays are not computed yet, or None (take the eager path)."""
    src = args[0]
    if src.__class__ is not TpuTensor:
        return None
    rest = args[1:]
    if not _static(rest) or (kwargs and not _static(tuple(kwargs.values()))):
        return None
    step = ViewStep(fn, rest, kwargs)
    if step.key is None:
        return None
    shaped = _shapes(step, src)
    if shaped is None:
        return None
    multi, avals = shaped
    steps = [ViewStep(fn, rest, kwargs, i) for i in range(len(avals))] if multi else [step]
    outs = []
    with view_mode(src):
        for (shape, dtype), s in zip(avals, steps, strict=True):
            out = TpuTensor(_Aval(shape, dtype))
            make_view(out, src, s)
            out._elem = None
            out._seen = _STALE
            outs.append(out)
    return outs if multi else outs[0]


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
        out = TpuTensor(_Aval(tuple(src.shape), t2j_dtype(src.dtype)))
    make_view(out, src, None)
    out._elem = None
    out._seen = _STALE
    return out


def view_operand(t: TpuTensor) -> Any:
    """A stale view as an executable's operand: ``PendingView(root array, chain)``, or its array where the chain
    is empty (an alias) or cannot be keyed."""
    chain = t._chain
    root = t._root
    if not chain:
        return payload(t)
    key = tuple([step.key for step in chain])
    if None in key:
        return payload(t)
    base = payload(root)
    if base.__class__ is Lazy:
        base = value(root)
    return PendingView(base, chain, key)
