"""Shared helpers for lowerings: torch type promotion on jax values, dtype conversion."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend._jax import j2t_dtype, jax_module, t2j_dtype

jax_module()  # x64 on before any array is made
aten = torch.ops.aten
Array = jax.Array


def _cat(td: torch.dtype) -> int:
    if td is torch.bool:
        return 0
    if td.is_complex:
        return 3
    if td.is_floating_point:
        return 2
    return 1


def _scalar_tdtype(s: Any) -> torch.dtype:
    if isinstance(s, bool):
        return torch.bool
    if isinstance(s, int):
        return torch.int64
    if isinstance(s, complex):
        return torch.complex64 if torch.get_default_dtype() == torch.float32 else torch.complex128
    return torch.get_default_dtype()


def _combine(hi: torch.dtype | None, lo: torch.dtype | None) -> torch.dtype | None:
    if hi is None:
        return lo
    if lo is None:
        return hi
    if _cat(lo) > _cat(hi):
        if lo.is_complex and hi.is_floating_point:  # c10's combine_categories keeps the float's width
            return _COMPLEX_OF[hi]
        return torch.promote_types(hi, lo)
    return hi


# torch's toComplexType as combine_categories uses it: float16 x complex gives complex32 (which the device does
# not hold: t2j_dtype refuses it), bfloat16 x complex gives complex64
_COMPLEX_OF = {
    torch.float16: torch.complex32,
    torch.bfloat16: torch.complex64,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}


def _weak_tdtype(dt: Any) -> torch.dtype:
    if dt == jnp.bool_:
        return torch.bool
    if jnp.issubdtype(dt, jnp.complexfloating):
        return _scalar_tdtype(1j)
    if jnp.issubdtype(dt, jnp.floating):
        return torch.get_default_dtype()
    return torch.int64


def result_tdtype(*xs: Any) -> torch.dtype:
    """torch's result_type over jax arrays (0-dim arrays are 'zero-dim tensors') and Python scalars."""
    dim = zero = wrapped = None
    for x in xs:
        if x is None:
            continue
        if isinstance(x, (bool, int, float, complex)):
            td = _scalar_tdtype(x)
            wrapped = td if wrapped is None else torch.promote_types(wrapped, td)
        elif x.ndim == 0 and getattr(x, "weak_type", False):
            # a weakly typed 0-dim value is a Python scalar that JAX carries as an array (fused eager passes the
            # float arguments of a recorded op this way): it promotes like a wrapped number
            td = _weak_tdtype(x.dtype)
            wrapped = td if wrapped is None else torch.promote_types(wrapped, td)
        else:
            td = j2t_dtype(x.dtype)
            if x.ndim == 0:
                zero = td if zero is None else torch.promote_types(zero, td)
            else:
                dim = td if dim is None else torch.promote_types(dim, td)
    return _combine(_combine(dim, zero), wrapped)


def result_dtype(*xs: Any) -> Any:
    """JAX dtype of torch's result_type."""
    td = result_tdtype(*xs)
    if td == torch.complex32:
        raise RuntimeError(
            "float16 with a complex operand promotes to complex32 (ComplexHalf), which the TPU device does not "
            "hold; cast the float16 operand to float32 (or the result to complex64) first"
        )
    return t2j_dtype(td)


def as_dtype(x: Any, dt: Any) -> Any:
    """``x`` (array or scalar) as an array of dtype ``dt``."""
    if isinstance(x, (bool, int, float, complex)):
        return jnp.asarray(x, dtype=dt)
    return x if x.dtype == dt else x.astype(dt)


def jdt(dtype: torch.dtype | None, default: Any = None) -> Any:
    """JAX dtype for an optional torch dtype argument."""
    if dtype is None:
        return default if default is not None else t2j_dtype(torch.get_default_dtype())
    return t2j_dtype(dtype)


def is_float(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.complexfloating)


def float_of(x: Any) -> Any:
    """Promote integer/bool arrays to the default float dtype (torch's int->float ops)."""
    if is_float(x):
        return x
    return x.astype(t2j_dtype(torch.get_default_dtype()))


def dims(d: Any, ndim: int) -> tuple[int, ...] | None:
    """Normalise a dim argument (int, list, None/empty = all) to a tuple of non-negative dims."""
    if d is None:
        return None
    if isinstance(d, int):
        d = [d]
    if len(d) == 0:
        return None
    out = [wrapdim(i, ndim) for i in d]  # (PyTorch's range check: a bad dim raises, never wraps)
    if len(set(out)) != len(out):
        dup = next(i for i in out if out.count(i) > 1)
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return tuple(sorted(out)) if ndim > 0 else (0,)


def axes(d: Any, ndim: int) -> tuple[int, ...] | None:
    """``dims`` for a jnp reduction: checked as PyTorch checks them (a 0-dim tensor takes 0 and -1), None
    (every axis) for a 0-dim array."""
    out = dims(d, ndim)
    return out if ndim else None


def wrapdim(d: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n
