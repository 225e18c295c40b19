"""Elementwise ``prims::`` ops: where PyTorch's reference decompositions end up.

An op without a lowering of its own runs through PyTorch's decomposition, and many of those (the refs for
in-place variants such as ``pow_.Tensor`` or ``floor_divide_.Tensor``) bottom out in primitives. Prims do no
type promotion: their tensor inputs share one dtype, except CPU scalar tensors, which take the others'
dtype; the result has that dtype (bool for comparisons and predicates). Integer ``div`` truncates, ``remainder``
takes the divisor's sign, ``round`` rounds half to even, as the CPU prims do.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend.ops._util import jdt
from tpu_workbench.backend.ops.registry import lower

prims = torch.ops.prims


def _dtype(*xs: Any) -> Any:
    """The operation's dtype: that of the first input with dimensions (CPU scalars adapt), else the first."""
    arrays = [x for x in xs if hasattr(x, "dtype")]
    for x in arrays:
        if x.ndim:
            return x.dtype
    return arrays[0].dtype if arrays else jnp.result_type(*xs)


def _cast(dt: Any, *xs: Any) -> list:
    return [x.astype(dt) if hasattr(x, "astype") and x.dtype != dt else jnp.asarray(x, dt) for x in xs]


def _is_int(dt: Any) -> bool:
    return jnp.issubdtype(dt, jnp.integer) or dt == jnp.bool_


def _div(a: Any, b: Any) -> Any:
    if _is_int(a.dtype):
        q = jnp.abs(a) // jnp.abs(b)
        return jnp.where((a < 0) != (b < 0), -q, q)
    return a / b


def _remainder(a: Any, b: Any) -> Any:
    if _is_int(a.dtype):
        return jnp.remainder(a, b)
    r = jnp.fmod(a, b)
    return jnp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def _round(x: Any) -> Any:
    return x if _is_int(x.dtype) else jnp.round(x)


def _sign(x: Any) -> Any:
    return jnp.sign(x)


_UNARY = {
    "abs": jnp.abs, "acos": jnp.arccos, "acosh": jnp.arccosh, "asin": jnp.arcsin, "asinh": jnp.arcsinh,
    "atan": jnp.arctan, "atanh": jnp.arctanh, "cos": jnp.cos, "cosh": jnp.cosh, "sin": jnp.sin, "sinh": jnp.sinh,
    "tan": jnp.tan, "tanh": jnp.tanh, "exp": jnp.exp, "exp2": jnp.exp2, "expm1": jnp.expm1, "log": jnp.log,
    "log10": jnp.log10, "log1p": jnp.log1p, "log2": jnp.log2, "sqrt": jnp.sqrt, "rsqrt": jax.lax.rsqrt,
    "reciprocal": jnp.reciprocal, "neg": jnp.negative, "floor": jnp.floor, "ceil": jnp.ceil, "trunc": jnp.trunc,
    "round": _round, "sign": _sign, "erf": jax.scipy.special.erf, "erfc": jax.scipy.special.erfc,
    "erf_inv": jax.scipy.special.erfinv, "lgamma": jax.scipy.special.gammaln, "cbrt": jnp.cbrt,
    "bitwise_not": jnp.invert,
}  # fmt: skip
_PREDICATE = {"isfinite": jnp.isfinite, "signbit": jnp.signbit}
_BINARY = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": _div, "fmod": jnp.fmod,
    "remainder": _remainder, "pow": jnp.power, "atan2": jnp.arctan2, "hypot": jnp.hypot, "maximum": jnp.maximum,
    "minimum": jnp.minimum, "fmax": jnp.fmax, "fmin": jnp.fmin, "bitwise_and": jnp.bitwise_and,
    "bitwise_or": jnp.bitwise_or, "bitwise_xor": jnp.bitwise_xor, "shift_left": jnp.left_shift,
    "shift_right_arithmetic": jnp.right_shift, "nextafter": jnp.nextafter,
}  # fmt: skip
_COMPARE = {"eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater,
            "ge": jnp.greater_equal}  # fmt: skip


def _unary(fn: Any) -> Any:
    def impl(x: Any) -> Any:
        return fn(x).astype(x.dtype)

    return impl


def _predicate(fn: Any) -> Any:
    def impl(x: Any) -> Any:
        return fn(x)

    return impl


def _binary(fn: Any) -> Any:
    def impl(a: Any, b: Any) -> Any:
        dt = _dtype(a, b)
        a, b = _cast(dt, a, b)
        return fn(a, b).astype(dt)

    return impl


def _compare(fn: Any) -> Any:
    def impl(a: Any, b: Any) -> Any:
        a, b = _cast(_dtype(a, b), a, b)
        return fn(a, b)

    return impl


for _table, _make in ((_UNARY, _unary), (_PREDICATE, _predicate), (_BINARY, _binary), (_COMPARE, _compare)):
    for _name, _fn in _table.items():
        lower(getattr(prims, _name).default)(_make(_fn))


@lower(prims.where.default)
def where(pred: Any, a: Any, b: Any) -> Any:
    dt = _dtype(a, b)
    a, b = _cast(dt, a, b)
    return jnp.where(pred.astype(jnp.bool_), a, b)


@lower(prims.convert_element_type.default)
def convert_element_type(x: Any, dtype: torch.dtype) -> Any:
    return x.astype(jdt(dtype))


@lower("prims.fma.default")  # defined by torch._inductor.inductor_prims, which Dynamo imports when it uses it
def fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c``: Dynamo's decomposition of ``add_(x, alpha=<tensor>)`` and ``addcmul_(..., value=)``;
    XLA fuses the multiply-add where the hardware has one."""
    dt = _dtype(a, b, c)
    a, b, c = _cast(dt, a, b, c)
    return (a * b + c).astype(dt)
