"""Matrix products. float32 precision follows ``torch.tpu.precision`` / ``torch.set_float32_matmul_precision``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from backend.ops._util import as_dtype, aten, result_dtype
from backend.ops.registry import lower

_P = jax.lax.Precision


def precision() -> Any:
    """The jax.lax.Precision for the active torch.tpu precision setting."""
    from backend.device import current_precision

    return getattr(_P, current_precision().value)


def _check_same(a: Any, b: Any, name: str) -> None:
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")


def _mm(a: Any, b: Any) -> Any:
    if jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == jnp.bool_:
        return jnp.matmul(a, b, preferred_element_type=a.dtype)
    return jnp.matmul(a, b, precision=precision()).astype(a.dtype)


@lower(aten.mm.default, jit=True)
def mm(a: Any, b: Any) -> Any:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})"
        )
    _check_same(a, b, "mm")
    return _mm(a, b)


@lower(aten.bmm.default, jit=True)
def bmm(a: Any, b: Any) -> Any:
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}]"
                           f" but got: [{b.shape[0]}, {b.shape[1]}].")
    _check_same(a, b, "bmm")
    return _mm(a, b)


@lower(aten.dot.default, aten.vdot.default)
def dot(a: Any, b: Any) -> Any:
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape != b.shape:
        raise RuntimeError("inconsistent tensor size")
    _check_same(a, b, "dot")
    return _mm(a, b)


@lower(aten.mv.default)
def mv(a: Any, v: Any) -> Any:
    _check_same(a, v, "mv")
    return _mm(a, v)


def _scaled(x: Any, s: Any) -> Any:
    return x if (isinstance(s, (int, float)) and s == 1) else x * as_dtype(s, x.dtype)


@lower(aten.addmm.default, jit=True)
def addmm(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = _scaled(mm(a, b), alpha)
    dt = result_dtype(prod, bias)
    if isinstance(beta, (int, float)) and beta == 0:
        return jnp.broadcast_to(prod, prod.shape)
    return (prod + _scaled(bias.astype(dt), beta)).astype(a.dtype)


@lower(aten.baddbmm.default, jit=True)
def baddbmm(x: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = _scaled(bmm(a, b), alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return prod
    return (prod + _scaled(x.astype(prod.dtype), beta)).astype(a.dtype)


@lower(aten.addmv.default)
def addmv(x: Any, a: Any, v: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = _scaled(mv(a, v), alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(prod.shape, x.shape))
    return prod + _scaled(x, beta)


@lower(aten.addbmm.default)
def addbmm(x: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = _scaled(jnp.sum(bmm(a, b), axis=0), alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(prod.shape, x.shape))
    return prod + _scaled(x, beta)
