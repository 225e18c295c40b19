"""Operands in and results out: a TPU tensor's jax value for a lowering (``unwrap``), a lowering's jax result as
TPU tensors (``wrap``). The one place outside backend/tensor.py and backend/views.py that reads a tensor's
private fields on the hot path, so backend/dispatch.py only chooses and runs plans."""

from __future__ import annotations

from typing import Any

import torch

from tpu_workbench.backend._jax import cpu_to_jax, jax_module
from tpu_workbench.backend.lazy import Lazy
from tpu_workbench.backend.op_jit import PendingView
from tpu_workbench.backend.tensor import TpuTensor, payload, value

_JaxArray: Any = None
_ArrayImpl: Any = (
    None  # the concrete jax.Array class: an identity test where isinstance(x, jax.Array) is slow
)


def init() -> None:
    """Learn jax's array classes (once, when the first plan is made: JAX stays out of ``import torch``)."""
    global _JaxArray, _ArrayImpl
    if _JaxArray is None:
        jax = jax_module()
        _JaxArray, _ArrayImpl = jax.Array, type(jax.numpy.zeros(()))


def unwrap(a: Any) -> Any:
    """A TPU tensor's current jax value (lists/tuples element-wise); CPU 0-dim tensors become arrays, as CUDA
    accepts CPU scalars; other values pass through."""
    if type(a) is TpuTensor:
        e = a._elem
        return e if a._root is None and e.__class__ is not Lazy else payload(a)
    if isinstance(a, (list, tuple)):
        return type(a)([unwrap(x) for x in a])
    if isinstance(a, torch.Tensor):
        if isinstance(a, TpuTensor):
            return payload(a)
        if a.dim() == 0 and a.device.type == "cpu":
            return cpu_to_jax(a)  # CPU scalars mix with device tensors, as on CUDA
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, tpu:0 and {a.device}!"
        )
    return a


def unwrap_kwargs(kwargs: dict) -> dict:
    return {k: unwrap(v) for k, v in kwargs.items()} if kwargs else kwargs


def unwrap_args(args: tuple) -> list:
    """``unwrap`` of a call's positional arguments, with the common case (a root TPU tensor holding a concrete
    array) inline: this runs once per op."""
    out = []
    for a in args:
        if a.__class__ is TpuTensor and a._root is None:
            e = a._elem
            if e.__class__ is _ArrayImpl:
                out.append(e)
                continue
        out.append(unwrap(a))
    return out


def operands(args: tuple, pending_root: bool = False) -> list:
    """``unwrap_args`` for a lowering that runs as a cached executable (``op_jit``) or a recorded node (fused
    eager, ``pending_root``), where a view whose array is not computed yet travels as its root's array and its
    chain (``PendingView``), so the view is computed inside the op's own program."""
    out = []
    for a in args:
        c = a.__class__
        if c is TpuTensor:
            root = a._root
            if root is None:
                e = a._elem
                if e.__class__ is _ArrayImpl:
                    out.append(e)
                    continue
            elif root._gen != a._seen:
                out.append(view_operand(a, pending_root))
                continue
        elif c is list or c is tuple:
            out.append(c(operands(a, pending_root)))
            continue
        out.append(unwrap(a))
    return out


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


def wrap(r: Any) -> Any:
    """jax arrays (also inside lists/tuples) as new TPU tensors."""
    c = r.__class__
    if c is _ArrayImpl or c is Lazy or isinstance(r, _JaxArray):
        return TpuTensor(r)
    if c is tuple or c is list or isinstance(r, (tuple, list)):
        return type(r)([wrap(x) for x in r])
    return r
