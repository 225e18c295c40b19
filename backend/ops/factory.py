"""Factories, fills, copies and scalar extraction."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import lazy
from tpu_workbench.backend._jax import cpu_to_jax, jax_to_cpu
from tpu_workbench.backend.ops._util import aten, jdt, result_dtype
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload, set_value, value


@lower(aten.empty.memory_format)
def empty(
    size: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    """Uninitialised memory does not exist in JAX: zeros."""
    return jnp.zeros(tuple(size), jdt(dtype))


@lower(aten.empty_strided.default)
def empty_strided(
    size: Any,
    stride: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.zeros(tuple(size), jdt(dtype))


@lower(aten.full.default)
def full(
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    if dtype is None:
        dtype = result_dtype(fill_value)
        return jnp.full(tuple(size), fill_value, dtype)
    return jnp.full(tuple(size), fill_value, jdt(dtype))


@lower(aten.scalar_tensor.default)
def scalar_tensor(
    s: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.asarray(s, jdt(dtype))


@lower(aten.arange.start_step)
def arange(
    start: Any,
    end: Any,
    step: Any = 1,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        dt = result_dtype(start, end, step)
    else:
        dt = jdt(dtype)
    n = math.ceil((end - start) / step)
    if n < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    if jnp.issubdtype(dt, jnp.integer):
        return (
            (jnp.arange(n, dtype=jnp.int64) * int(step) + int(start)).astype(dt)
            if float(step).is_integer() and float(start).is_integer()
            else (start + jnp.arange(n, dtype=jnp.float64) * step).astype(dt)
        )
    return (start + jnp.arange(n, dtype=jnp.float64) * step).astype(dt)


@lower(aten.arange.default)
def arange_end(
    end: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return arange(0, end, 1, dtype=dtype)


@lower(aten.arange.start)
def arange_start(
    start: Any, end: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return arange(start, end, 1, dtype=dtype)


@lower(aten.linspace.default)
def linspace(
    start: Any,
    end: Any,
    steps: int,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    dt = jdt(dtype)
    if steps == 1:
        return jnp.full((1,), start, dt)
    step = (end - start) / (steps - 1)
    i = jnp.arange(steps, dtype=jnp.float64)
    halfway = steps // 2
    out = jnp.where(i < halfway, start + step * i, end - step * (steps - 1 - i))
    if jnp.issubdtype(dt, jnp.integer):
        return jnp.trunc(out).astype(dt)
    return out.astype(dt)


@lower(aten.fill.Scalar, aten.fill.Tensor)
def fill(x: Any, v: Any) -> Any:
    if not isinstance(v, (int, float, bool, complex)) and v.ndim != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {v.ndim} dimensions."
        )
    return jnp.full(x.shape, v, x.dtype)


@lower(aten.zero.default)
def zero(x: Any) -> Any:
    return jnp.zeros(x.shape, x.dtype)


@lower(aten.clone.default)
def clone(x: Any, *, memory_format: Any = None) -> Any:
    return x  # immutable payload: the new wrapper is an independent copy


@lower(aten.lift_fresh_copy.default)
def lift_fresh_copy(x: Any) -> Any:
    return x


@lower(aten.copy_.default, raw=True)
def copy_(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """Copy into ``self`` with broadcasting and casting; either side may be on the CPU."""
    if not isinstance(self, TpuTensor):
        return self.copy_(jax_to_cpu(value(src)))
    if not isinstance(src, torch.Tensor):  # a Python number, as the CPU accepts (x.copy_(0))
        src = torch.tensor(src)
    v = payload(src) if isinstance(src, TpuTensor) else cpu_to_jax(src)  # deferred in fused eager
    dt = jdt(self.dtype)
    if v.dtype != dt or tuple(v.shape) != tuple(self.shape):
        v = lazy.call(_cast_broadcast, (v, dt, tuple(self.shape)))
    set_value(self, v)
    return self


def _cast_broadcast(v: Any, dt: Any, shape: tuple) -> Any:
    if v.dtype != dt:
        v = (v != 0) if dt == jnp.bool_ else v.astype(dt)
    return v if tuple(v.shape) == shape else jnp.broadcast_to(v, shape)


@lower(aten.copy.default)
def copy(self: Any, src: Any, non_blocking: bool = False) -> Any:
    v = src.astype(self.dtype) if src.dtype != self.dtype else src
    return jnp.broadcast_to(v, self.shape)


@lower(aten._local_scalar_dense.default, raw=True)
def _local_scalar_dense(x: torch.Tensor) -> Any:
    """``.item()``: materialises the value on the host."""
    return jax_to_cpu(value(x)).item()


@lower(aten._copy_from.default, raw=True)
def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    return copy_(dst, src)


@lower(aten._copy_from_and_resize.default, raw=True)
def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    return copy_(dst, src)


@lower(aten.resize_.default, aten.set_.source_Tensor, aten.set_.default, raw=True)
def _no_resize(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    if args and isinstance(args[0], (list, tuple, torch.Size)) and tuple(args[0]) == tuple(self.shape):
        return self
    raise RuntimeError(
        "resize_/set_ cannot change the shape of a tensor on the TPU device (a Python wrapper's sizes are fixed "
        "after creation); create a new tensor instead"
    )


@lower(aten.is_pinned.default, raw=True)
def is_pinned(x: torch.Tensor, device: Any = None) -> bool:
    return False


@lower(aten._has_compatible_shallow_copy_type.default, raw=True)
def _compat(a: torch.Tensor, b: torch.Tensor) -> bool:
    return type(a) is type(b)


def _like_dt(x: Any, dtype: Any) -> Any:
    return x.dtype if dtype is None else jdt(dtype)


def _check_like_device(device: Any) -> None:
    if device is not None and torch.device(device).type != private.privateuse1_name():
        raise NotImplementedError("a *_like factory to another device from a TPU tensor is not supported")


@lower(aten.full_like.default)
def full_like(
    x: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    _check_like_device(device)
    return jnp.full(x.shape, fill_value, _like_dt(x, dtype))


@lower(aten.empty_like.default, aten.zeros_like.default)
def zeros_like(
    x: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    _check_like_device(device)
    return jnp.zeros(x.shape, _like_dt(x, dtype))


@lower(aten.ones_like.default)
def ones_like(
    x: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    _check_like_device(device)
    return jnp.ones(x.shape, _like_dt(x, dtype))


@lower(aten.new_empty.default, aten.new_zeros.default)
def new_zeros(
    x: Any, size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.zeros(tuple(size), _like_dt(x, dtype))


@lower(aten.new_ones.default)
def new_ones(
    x: Any, size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.ones(tuple(size), _like_dt(x, dtype))


@lower(aten.new_full.default)
def new_full(
    x: Any,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.full(tuple(size), fill_value, _like_dt(x, dtype))


@lower(aten.new_empty_strided.default)
def new_empty_strided(
    x: Any,
    size: Any,
    stride: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.zeros(tuple(size), _like_dt(x, dtype))


@lower(aten.empty_permuted.default)
def empty_permuted(
    size: Any,
    physical_layout: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.zeros(tuple(size), jdt(dtype))


@lower(aten.zeros.default)
def zeros(
    size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.zeros(tuple(size), jdt(dtype))


@lower(aten.ones.default)
def ones(
    size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.ones(tuple(size), jdt(dtype))


@lower(aten.eye.default)
def eye(n: int, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return jnp.eye(n, dtype=jdt(dtype))


@lower(aten.eye.m)
def eye_m(
    n: int, m: int, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    return jnp.eye(n, m, dtype=jdt(dtype))


@lower(aten.logspace.default)
def logspace(
    start: Any,
    end: Any,
    steps: int,
    base: float = 10.0,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    dt = jdt(dtype)
    return jnp.power(base, linspace(start, end, steps, dtype=torch.float64)).astype(dt)


@lower(aten.tril_indices.default)
def tril_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.stack(jnp.tril_indices(row, offset, col)).astype(jdt(dtype, jnp.int64))


@lower(aten.triu_indices.default)
def triu_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jnp.stack(jnp.triu_indices(row, offset, col)).astype(jdt(dtype, jnp.int64))


@lower(torch.ops.prims.copy_to.default, raw=True)
def prims_copy_to(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """prims.copy_to (used by PyTorch's reference decompositions): copy ``b`` into ``a``."""
    return copy_(a, b)
