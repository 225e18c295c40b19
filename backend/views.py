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

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import lazy, state
from tpu_workbench.backend._jax import j2t_dtype, jax_module, t2j_dtype
from tpu_workbench.backend.jit import freeze
from tpu_workbench.backend.operands import unwrap, unwrap_args, unwrap_kwargs
from tpu_workbench.backend.strides import NO_META, view_geometry
from tpu_workbench.backend.tensor import TpuTensor, ViewStep, make_view, stale_view, value

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


# ----------------------------------------------------------------------------- view plans (backend/dispatch.py)
def alias_plan() -> Callable[[Any, tuple, dict], Any]:
    """``detach``/``alias``/``lift_fresh``: the result holds the source's own value (JAX arrays and pending fused
    values are immutable), so neither eager mode runs or records anything for them."""

    def plan_alias(f, a, k):
        src = a[0]
        out = deferred_alias(src)
        if out is not None:
            return out
        value = unwrap_args(a)[0]  # (arrays and pending fused values are immutable: the alias shares it)
        with view_mode(src):
            if _saved_output_cycle(src):
                _unhook(src)
            out = TpuTensor(value, False, None if src._root is None else (src.stride(), src.storage_offset()))
        make_view(out, src, None)
        return out

    return plan_alias


def view_plan(fn: Callable[..., Any], fast: Callable[..., Any] | None) -> Callable[[Any, tuple, dict], Any]:
    """A view op: deferred where its outputs can be described abstractly, else run now (``fast``: its cached
    executable in strict eager) and tied to its source by a view step."""
    process = state._Process
    fused = state.EagerMode.DEFER_AND_FUSE

    def plan_view(f, a, k):
        out = deferred_view(f, fn, a, k)
        if out is not None:
            return out
        geometry = view_geometry(f, a, k)  # (raises PyTorch's error for a view these strides cannot express)
        ua = unwrap_args(a)
        uk = unwrap_kwargs(k)
        res = (
            fast(*ua, **uk)
            if fast is not None and process.eager_mode is not fused
            else lazy.call(fn, ua, uk, fast)
        )
        rest = tuple(ua[1:])
        src = a[0]
        with view_mode(src):
            if isinstance(res, (list, tuple)):
                geos = (
                    geometry if geometry is not NO_META and len(geometry) == len(res) else [None] * len(res)
                )
                out = [TpuTensor(r, False, g) for r, g in zip(res, geos, strict=True)]
                for i, o in enumerate(out):
                    make_view(o, src, ViewStep(fn, rest, uk, i))
                return out
            out = TpuTensor(res, False, None if geometry is NO_META else geometry[0])
        make_view(out, src, ViewStep(fn, rest, uk))
        return out

    return plan_view


_AS_STRIDED_ = torch.ops.aten.as_strided_.default


def metadata_inplace_plan(fn: Callable[..., Any]) -> Callable[[Any, tuple, dict], Any]:
    """In-place shape ops (``unsqueeze_``, ``squeeze_``, ``transpose_``, ``t_``), as autograd formulas use on
    temporaries: the new value comes from the functional lowering ``fn``, and the wrapper's C++ sizes/strides are
    changed by the stock metadata kernel run with Python dispatch off. A view extends its chain; a root that
    other tensors view cannot change shape under them, so that raises as before."""

    def plan(f: Any, a: tuple, k: dict) -> Any:
        self = a[0]
        if self._root is None and getattr(self, "_viewed", False):
            raise RuntimeError(
                f"{f.name()}: cannot change the shape of a TPU tensor that other tensors view "
                "(a Python wrapper's sizes are shared); use the out-of-place op"
            )
        rest, uk = unwrap(a[1:]), unwrap_kwargs(k)
        root = self._root
        rebase = f is _AS_STRIDED_ and root is not None  # its strides count in the storage: from the root
        if rebase:
            rest = _storage_strided_args(self, rest, uk)
            uk = {}
            new = fn(value(root), *rest)
        else:
            old = value(self)
            new = fn(old, *rest, **uk)
        with private.no_dispatch():
            f(self, *a[1:], **k)
        if tuple(self.shape) != tuple(new.shape):
            raise RuntimeError(f"{f.name()}: internal shape mismatch {list(self.shape)} vs {list(new.shape)}")
        step = ViewStep(fn, tuple(rest), uk)
        if rebase:
            self._chain = (step,)
        elif root is not None:
            self._chain = self._chain + (step,)
        elif not self.is_contiguous() or self.storage_offset() != 0:
            _reroot(self, old, step)
        self._elem = new
        return self

    return plan


def _saved_output_cycle(src: TpuTensor) -> bool:
    """Whether an alias of ``src`` would close a reference cycle Python's gc cannot see: autograd saves an op's
    output (``tanh``, ``sigmoid``, ``relu``, ``exp`` ...) as a detached alias held by the output's own grad_fn
    (C++), so an alias pointing back at that output keeps it, its graph and every array the graph saved alive
    for ever when no backward runs (an evaluation loop that forgot ``no_grad`` grew by each step's activations;
    CUDA frees them). Only a fresh output qualifies: nothing views it yet and it is a plain contiguous root."""
    return (
        src._root is None
        and src.requires_grad
        and not src.is_leaf
        and not getattr(src, "_viewed", False)
        and src.storage_offset() == 0
        and src.is_contiguous()
    )


def _unhook(t: TpuTensor) -> None:
    """Give ``t``'s array to a hidden root that ``t`` and its aliases then share, so no alias refers to ``t``
    (see ``_saved_output_cycle``); writes through either still reach the other, as on one CUDA storage."""
    storage = TpuTensor(t._elem)
    storage._gen = t._gen  # (its saved-storage cache is keyed by the generation)
    for name in ("_address", "_saved_storage"):  # (same storage: same data_ptr, same saved bytes)
        if name in t.__dict__:
            setattr(storage, name, t.__dict__.pop(name))
    t._root, t._chain, t._seen = storage, (), storage._gen


def _reroot(t: TpuTensor, old: Any, step: ViewStep) -> None:
    """A root restrided in place (``t_``, ``transpose_``, ``as_strided_``) reports the strides PyTorch gives it
    over its unchanged storage, as on CUDA: its old array becomes a hidden root (the storage, in order) and the
    tensor a view of it by ``step``. (A root's own array must be its value in contiguous order.)"""
    storage = TpuTensor(old)
    storage._viewed = True
    address = t.__dict__.pop("_address", None)
    if address is not None:
        storage._address = address  # (same storage, same data_ptr)
    t._root, t._chain, t._seen = storage, (step,), storage._gen


def on_storage(plan: Callable[[Any, tuple, dict], Any]) -> Callable[[Any, tuple, dict], Any]:
    """``as_strided`` of a view reads its strides and offset in the storage, as PyTorch does: the call goes to the
    view's root (whose array is the storage in contiguous order), so the result is a view of the root."""

    def plan_on_storage(f: Any, a: tuple, k: dict) -> Any:
        src = a[0]
        if src.__class__ is TpuTensor and src._root is not None:
            return plan(f, (src._root, *_storage_strided_args(src, a[1:], k)), {})
        return plan(f, a, k)

    return plan_on_storage


def _storage_strided_args(src: TpuTensor, rest: Any, kwargs: dict) -> tuple:
    """``as_strided``'s (size, stride, offset) with the offset made explicit (None: the source's own), for a
    call on ``src``'s root: its strides and offset count in the storage, which is the root's contiguous layout."""
    size, stride, *more = list(rest)
    offset = more[0] if more else kwargs.get("storage_offset")
    if src.dtype != src._root.dtype or src._root.is_complex():
        raise NotImplementedError(
            "as_strided on a view of a TPU tensor whose dtype differs from its storage's "
            "(view(dtype), view_as_real, real/imag) is not supported; call .clone() first"
        )
    return (tuple(size), tuple(stride), src.storage_offset() if offset is None else offset)
