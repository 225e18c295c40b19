"""Elementwise lowerings (unary, binary, comparison, activation). Torch type promotion throughout."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend import lazy
from tpu_workbench.backend._jax import cpu_to_jax, jax_to_cpu
from tpu_workbench.backend.ops import complex_math as cm
from tpu_workbench.backend.ops._util import as_dtype, aten, float_of, is_float, jdt, result_dtype
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload, value


def _binary(fn: Any, *ops: Any, int_to_float: bool = False) -> None:
    def impl(a: Any, b: Any) -> Any:
        dt = result_dtype(a, b)
        if int_to_float and not jnp.issubdtype(dt, jnp.inexact):
            dt = jdt(None)
        return fn(as_dtype(a, dt), as_dtype(b, dt))

    lower(*ops)(impl)


def _compare(fn: Any, *ops: Any) -> None:
    def impl(a: Any, b: Any) -> Any:
        dt = result_dtype(a, b)
        return fn(as_dtype(a, dt), as_dtype(b, dt))

    lower(*ops)(impl)


def _unary_float(fn: Any, *ops: Any) -> None:
    """Ops that turn integer inputs into the default float dtype (exp, sin, sqrt, ...). float16/bfloat16 compute
    in float32 and round once, as the CPU's kernels do (XLA's low-precision exp2 is off by several ulps)."""

    def impl(x: Any) -> Any:
        x = float_of(x)
        if x.dtype in _LOW:
            return fn(x.astype(jnp.float32)).astype(x.dtype)
        return fn(x)

    lower(*ops)(impl)


def _complex_or(real_fn: Any, complex_fn: Any) -> Any:
    """``real_fn`` for real inputs, ``complex_fn`` (the CPU's edge values) for complex ones."""
    return lambda x: complex_fn(x) if jnp.iscomplexobj(x) else real_fn(x)


def _cexp(z: Any) -> Any:
    return cm.make(*cm.exp(*cm.parts(z)), z.dtype)


def _cexp2(z: Any) -> Any:
    """ATen's exp2_impl for complex: exp(ln 2 * z), the real factor applied part by part."""
    re, im = cm.parts(z)
    ln2 = math.log(2.0)
    return cm.make(*cm.exp(re * ln2, im * ln2), z.dtype)


def _csqrt(z: Any) -> Any:
    return cm.make(*cm.sqrt(*cm.parts(z)), z.dtype)


def _cexpm1(z: Any) -> Any:
    """c10's complex expm1: (expm1(x) cos y - 2 sin(y/2)^2) + i e^x sin y (so expm1(inf + 0j) = inf + NaN j)."""
    x, y = cm.parts(z)
    a = jnp.sin(y / 2)
    return cm.make(jnp.expm1(x) * jnp.cos(y) - 2 * a * a, jnp.exp(x) * jnp.sin(y), z.dtype)


def _crsqrt(z: Any) -> Any:
    """c10's complex rsqrt: 1 / sqrt(z) with its division."""
    return _crecip(_csqrt(z))


def _crecip(z: Any) -> Any:
    re, im = cm.parts(z)
    return cm.make(*cm.div(jnp.ones_like(re), jnp.zeros_like(im), re, im), z.dtype)


def _csigmoid(z: Any) -> Any:
    """ATen: 1 / (1 + exp(-z)) with glibc's cexp and c10's division."""
    re, im = cm.parts(z)
    er, ei = cm.exp(-re, -im)
    return cm.make(*cm.div(jnp.ones_like(re), jnp.zeros_like(im), 1 + er, ei), z.dtype)


def _complex_axpy(a: Any, b: Any, alpha: Any) -> Any:
    """ATen's complex add/sub kernel: ``a + alpha * b`` with alpha a complex number even when it is 1, so an
    infinite part of ``b`` makes the other part NaN (0 * inf), as on the CPU."""
    dt = a.dtype
    al = complex(alpha)
    br, bi = cm.parts(b)
    mr, mi = cm.mul_naive(jnp.asarray(al.real, br.dtype), jnp.asarray(al.imag, br.dtype), br, bi)
    ar, ai = cm.parts(a)
    return cm.make(ar + mr, ai + mi, dt)


def _unary(fn: Any, *ops: Any) -> None:
    lower(*ops)(fn)


# ----------------------------------------------------------------------------- arithmetic
_Array = jax.Array
_NO_FAST = (jnp.dtype(jnp.bool_), jnp.dtype(jnp.complex64), jnp.dtype(jnp.complex128))
_JIT_ADD, _JIT_SUB, _JIT_MUL = jax.jit(jax.lax.add), jax.jit(jax.lax.sub), jax.jit(jax.lax.mul)


def _same_numeric(a: Any, b: Any) -> bool:
    """Two arrays of one non-bool dtype and one shape: no promotion or broadcasting to work out, so a
    jitted lax primitive can be called directly: its C++ dispatch path skips the jnp operator's Python
    checks, which cost more than the op itself on a small tensor (5 vs 8 µs; an un-jitted lax call is 15)."""
    return (
        isinstance(a, _Array)
        and isinstance(b, _Array)
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.dtype not in _NO_FAST
    )


@lower(aten.add.Tensor, aten.add.Scalar)
def add(a: Any, b: Any, alpha: Any = 1) -> Any:
    if alpha == 1 and _same_numeric(a, b):
        return _JIT_ADD(a, b)
    dt = result_dtype(a, b)
    if jnp.issubdtype(dt, jnp.complexfloating):
        return _complex_axpy(as_dtype(a, dt), as_dtype(b, dt), alpha)
    b = as_dtype(b, dt)
    if alpha != 1:
        b = b * as_dtype(alpha, dt)
    return as_dtype(a, dt) + b


@lower(aten.sub.Tensor, aten.sub.Scalar)
def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    if alpha == 1 and _same_numeric(a, b):
        return _JIT_SUB(a, b)
    dt = result_dtype(a, b)
    if dt == jnp.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported.")
    if jnp.issubdtype(dt, jnp.complexfloating):
        return _complex_axpy(as_dtype(a, dt), as_dtype(b, dt), -alpha)
    b = as_dtype(b, dt)
    if alpha != 1:
        b = b * as_dtype(alpha, dt)
    return as_dtype(a, dt) - b


@lower(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return sub(b, a, alpha)


@lower(aten.mul.Tensor, aten.mul.Scalar)
def mul(a: Any, b: Any) -> Any:
    if _same_numeric(a, b):
        return _JIT_MUL(a, b)
    dt = result_dtype(a, b)
    if dt == jnp.bool_:
        return jnp.logical_and(as_dtype(a, dt), as_dtype(b, dt))
    return as_dtype(a, dt) * as_dtype(b, dt)


@lower(aten.div.Tensor, aten.div.Scalar)
def div(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = jdt(None)
    if jnp.issubdtype(dt, jnp.complexfloating):
        a, b = as_dtype(a, dt), as_dtype(b, dt)
        return cm.make(*cm.div(*cm.parts(a), *cm.parts(b)), dt)
    return _from_bool(a, dt) / _from_bool(b, dt)


def _from_bool(x: Any, dt: Any) -> Any:
    """``x`` as ``dt``; a boolean array behind an optimization barrier: XLA rewrites convert(pred) / c into
    select(pred, 1 / c, 0 / c) and folds 0 / 0 to 0 (the CPU gives NaN for False / False)."""
    y = as_dtype(x, dt)
    if getattr(x, "dtype", None) == jnp.bool_:
        return jax.lax.optimization_barrier(y)
    return y


@lower(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return div(a, b)
    dt = result_dtype(a, b)
    a, b = as_dtype(a, dt), as_dtype(b, dt)
    if rounding_mode == "trunc":
        if jnp.issubdtype(dt, jnp.integer):
            q = jnp.abs(a) // jnp.abs(b)
            return jnp.where((a < 0) != (b < 0), -q, q).astype(dt)
        return jnp.trunc(a / b)
    if rounding_mode == "floor":
        if jnp.issubdtype(dt, jnp.integer):
            return jnp.floor_divide(a, b)
        if jnp.issubdtype(dt, jnp.floating):
            return _div_floor_floating(a, b)
        return jnp.floor(a / b)
    raise ValueError(
        f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
    )


_LOW = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _opmath(dt: Any) -> Any:
    """torch's CPU opmath type: bfloat16/float16 compute in float32 and round once."""
    return jnp.float32 if jnp.dtype(dt) in _LOW else dt


def _div_floor_floating(a: Any, b: Any) -> Any:
    """ATen's c10::div_floor_floating: fmod-corrected quotient. bfloat16/float16 run it on scalar_t, i.e. every
    operation in float32 rounded back to the dtype (done here with reduce_precision, which XLA keeps)."""
    dt = a.dtype
    low = jnp.dtype(dt) in _LOW
    a, b = jnp.broadcast_arrays(a.astype(_opmath(dt)), b.astype(_opmath(dt)))
    if low:
        fi = jnp.finfo(dt)

        def rnd(y: Any) -> Any:
            return jax.lax.reduce_precision(y, exponent_bits=fi.nexp, mantissa_bits=fi.nmant)
    else:

        def rnd(y: Any) -> Any:
            return y

    mod = jnp.fmod(a, b)
    div = rnd(rnd(a - mod) / b)
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), rnd(div - 1), div)
    fl = jnp.floor(div)
    fl = jnp.where(rnd(div - fl) > 0.5, rnd(fl + 1), fl)
    q = jnp.where(div != 0, fl, jnp.copysign(jnp.zeros_like(div), a / b))
    return jnp.where(b == 0, rnd(a / b), q).astype(dt)


@lower(aten.floor_divide.default, aten.floor_divide.Scalar, aten.floor_divide_.Tensor)
def floor_divide(a: Any, b: Any) -> Any:
    return div_mode(a, b, rounding_mode="floor")


@lower(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def remainder(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    a, b = as_dtype(a, dt), as_dtype(b, dt)
    if jnp.issubdtype(dt, jnp.integer):
        return jnp.remainder(a, b)
    r = jnp.fmod(a, b)
    return jnp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


_binary(jnp.fmod, aten.fmod.Tensor, aten.fmod.Scalar)


@lower(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar, aten.pow_.Tensor)
def pow_(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    a2, b2 = as_dtype(a, dt), as_dtype(b, dt)
    if jnp.issubdtype(dt, jnp.integer):
        if isinstance(b, int) and b < 0 and not isinstance(a, int):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if isinstance(b, int):
            return jax.lax.integer_pow(a2, b)
        # torch truncates: x ** negative is 0 except for bases 1 and -1
        pos = _int_pow_wrapping(a2, jnp.maximum(b2, 0))
        neg = jnp.where(a2 == 1, 1, jnp.where(a2 == -1, jnp.where(b2 % 2 == 0, 1, -1), 0)).astype(dt)
        return jnp.where(b2 < 0, neg, pos)
    if dt == jnp.bool_:  # x ** y of booleans: 0 ** 0 = 1, 0 ** 1 = 0, 1 ** y = 1
        return jnp.logical_or(a2, jnp.logical_not(b2))
    if jnp.issubdtype(dt, jnp.complexfloating):
        return _complex_pow(a2, b2, b)
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            return a2 * a2
        if b == 0.5:
            return jnp.sqrt(a2)
        if float(b).is_integer() and abs(b) <= 64:
            return jax.lax.integer_pow(a2, int(b))
    return jnp.power(a2, b2)


def _int_pow_wrapping(a: Any, b: Any) -> Any:
    """Square-and-multiply over every bit of the exponent, wrapping like the CPU's powi (jnp.power stops after
    6 bits, so an exponent of 64 or more gave another number)."""
    acc = jnp.ones_like(a)
    for _ in range(jnp.iinfo(b.dtype).bits - 1):
        acc = jnp.where((b & 1) == 1, acc * a, acc)
        a = a * a
        b = b >> 1
    return acc


def _complex_pow(a: Any, b: Any, scalar: Any) -> Any:
    """ATen's complex pow: the exponents 2, 3, 0.5, -1, -2 take products, sqrt and c10's division (as
    pow_tensor_scalar_optimized_kernel does); the rest glibc's cpow."""
    dt = a.dtype
    if isinstance(scalar, (int, float, complex)) and not isinstance(scalar, bool):
        if scalar == 0:  # ATen fills ones (cpow(inf, 0) would be NaN)
            return jnp.ones_like(a)
        if scalar == 1:  # ATen copies the base
            return a
        if scalar == 2:
            return a * a
        if scalar == 3:
            return a * a * a
        if scalar == 0.5:
            return _csqrt(a)
        if scalar == -1:
            return _crecip(a)
        if scalar == -2:
            return _crecip(a * a)
    b = jnp.broadcast_to(b, jnp.broadcast_shapes(a.shape, b.shape)).astype(dt)
    a = jnp.broadcast_to(a, b.shape)
    return cm.make(*cm.pow_(*cm.parts(a), *cm.parts(b)), dt)


_binary(jnp.arctan2, aten.atan2.default, int_to_float=True)
_binary(jnp.hypot, aten.hypot.default)
_binary(jnp.copysign, aten.copysign.Tensor, aten.copysign.Scalar, int_to_float=True)
_binary(jnp.logaddexp, aten.logaddexp.default)
_binary(jnp.nextafter, aten.nextafter.default)


@lower(aten.maximum.default)
def maximum(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    return jnp.maximum(as_dtype(a, dt), as_dtype(b, dt))


@lower(aten.minimum.default)
def minimum(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    return jnp.minimum(as_dtype(a, dt), as_dtype(b, dt))


_binary(jnp.fmax, aten.fmax.default)
_binary(jnp.fmin, aten.fmin.default)
_binary(jnp.bitwise_and, aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)
_binary(jnp.bitwise_or, aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)
_binary(jnp.bitwise_xor, aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)
_binary(
    jnp.left_shift,
    aten.bitwise_left_shift.Tensor,
    aten.bitwise_left_shift.Tensor_Scalar,
    aten.bitwise_left_shift.Scalar_Tensor,
    aten.__lshift__.Scalar,
    aten.__lshift__.Tensor,
)
_binary(
    jnp.right_shift,
    aten.bitwise_right_shift.Tensor,
    aten.bitwise_right_shift.Tensor_Scalar,
    aten.bitwise_right_shift.Scalar_Tensor,
    aten.__rshift__.Scalar,
    aten.__rshift__.Tensor,
)
_unary(lambda x: jnp.logical_not(x) if x.dtype == jnp.bool_ else jnp.invert(x), aten.bitwise_not.default)

for _n, _f in [("eq", jnp.equal), ("ne", jnp.not_equal), ("lt", jnp.less), ("le", jnp.less_equal),
               ("gt", jnp.greater), ("ge", jnp.greater_equal)]:  # fmt: skip
    _compare(_f, getattr(aten, _n).Tensor, getattr(aten, _n).Scalar)


def _logical(fn: Any, op: Any) -> None:
    lower(op)(lambda a, b: fn(as_dtype(a, jnp.bool_), as_dtype(b, jnp.bool_)))


_logical(jnp.logical_and, aten.logical_and.default)
_logical(jnp.logical_or, aten.logical_or.default)
_logical(jnp.logical_xor, aten.logical_xor.default)
_unary(lambda x: jnp.logical_not(x.astype(jnp.bool_)), aten.logical_not.default)


# ----------------------------------------------------------------------------- unary
_unary(lambda x: -x if x.dtype != jnp.bool_ else _bool_neg(), aten.neg.default)


def _bool_neg() -> Any:
    raise RuntimeError(
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
        "use the `~` or `logical_not()` operator instead."
    )


_unary(
    lambda x: x if x.dtype == jnp.bool_ else cm.abs_(*cm.parts(x)) if jnp.iscomplexobj(x) else jnp.abs(x),
    aten.abs.default,
)
for _name, _fn in [
    ("exp", _complex_or(jnp.exp, _cexp)), ("exp2", _complex_or(jnp.exp2, _cexp2)), ("expm1", _complex_or(jnp.expm1, _cexpm1)), ("log", jnp.log), ("log2", jnp.log2),
    ("log10", jnp.log10), ("log1p", jnp.log1p), ("sqrt", _complex_or(jnp.sqrt, _csqrt)), ("rsqrt", _complex_or(jax.lax.rsqrt, _crsqrt)),
    ("sin", jnp.sin), ("cos", jnp.cos), ("tan", jnp.tan), ("asin", jnp.arcsin), ("acos", jnp.arccos),
    ("atan", jnp.arctan), ("sinh", jnp.sinh), ("cosh", jnp.cosh), ("tanh", jnp.tanh), ("asinh", jnp.arcsinh),
    ("acosh", jnp.arccosh), ("atanh", jnp.arctanh), ("sigmoid", _complex_or(jax.nn.sigmoid, _csigmoid)), ("erf", jax.scipy.special.erf),
    ("erfc", jax.scipy.special.erfc), ("erfinv", jax.scipy.special.erfinv), ("reciprocal", _complex_or(lambda x: 1 / x, _crecip)),
    ("lgamma", jax.scipy.special.gammaln), ("i0", jax.scipy.special.i0),
    ("sinc", jnp.sinc), ("deg2rad", jnp.deg2rad), ("rad2deg", jnp.rad2deg),
]:  # fmt: skip
    _unary_float(_fn, getattr(aten, _name).default)


def _int_identity(fn: Any) -> Any:
    return lambda x: fn(x) if is_float(x) else x


_unary(_int_identity(jnp.floor), aten.floor.default)
_unary(_int_identity(jnp.ceil), aten.ceil.default)
_unary(_int_identity(jnp.trunc), aten.trunc.default, aten.fix.default)
_unary(_int_identity(jnp.round), aten.round.default)
_unary(lambda x: x - jnp.trunc(x), aten.frac.default)


@lower(aten.round.decimals)
def round_decimals(x: Any, *, decimals: int = 0) -> Any:
    return jnp.round(x, decimals)


@lower(aten.sign.default, aten.sgn.default)
def sign(x: Any) -> Any:
    if x.dtype == jnp.bool_:
        return x
    if jnp.issubdtype(x.dtype, jnp.floating):  # ATen: (0 < x) - (x < 0), so NaN gives 0
        return jnp.where(jnp.isnan(x), jnp.zeros_like(x), jnp.sign(x))
    return jnp.sign(x)


_unary(jnp.signbit, aten.signbit.default)
_unary(jnp.isnan, aten.isnan.default)
_unary(lambda x: jnp.isinf(x) if is_float(x) else jnp.zeros(x.shape, jnp.bool_), aten.isinf.default)
_unary(lambda x: jnp.isposinf(x) if is_float(x) else jnp.zeros(x.shape, jnp.bool_), aten.isposinf.default)
_unary(lambda x: jnp.isneginf(x) if is_float(x) else jnp.zeros(x.shape, jnp.bool_), aten.isneginf.default)
_unary(lambda x: jnp.isfinite(x) if is_float(x) else jnp.ones(x.shape, jnp.bool_), aten.isfinite.default)


@lower(aten.nan_to_num.default)
def nan_to_num(
    x: Any, nan: float | None = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Any:
    if not is_float(x):
        return x
    return jnp.nan_to_num(x, nan=0.0 if nan is None else nan, posinf=posinf, neginf=neginf)


# ----------------------------------------------------------------------------- ternary
@lower(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cond: Any, a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    return jnp.where(cond.astype(jnp.bool_), as_dtype(a, dt), as_dtype(b, dt))


@lower(aten.clamp.default, aten.clamp.Tensor)
def clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    dt = result_dtype(x, min, max)
    x = as_dtype(x, dt)
    if min is not None:
        x = jnp.maximum(x, as_dtype(min, dt))
    if max is not None:
        x = jnp.minimum(x, as_dtype(max, dt))
    return x


@lower(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x: Any, m: Any) -> Any:
    return clamp(x, m, None)


@lower(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x: Any, m: Any) -> Any:
    return clamp(x, None, m)


@lower(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(a: Any, b: Any, w: Any) -> Any:
    dt = result_dtype(a, b)
    a, b = as_dtype(a, dt), as_dtype(b, dt)
    w = as_dtype(w, dt)
    return jnp.where(jnp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@lower(aten.addcmul.default)
def addcmul(x: Any, t1: Any, t2: Any, *, value: Any = 1) -> Any:
    dt = result_dtype(x, t1, t2)
    if jnp.dtype(dt) in _LOW:  # torch: float(self) + float(value) * float(t1) * float(t2), rounded once
        f = jnp.float32
        return (as_dtype(x, f) + as_dtype(value, f) * as_dtype(t1, f) * as_dtype(t2, f)).astype(dt)
    return as_dtype(x, dt) + as_dtype(value, dt) * as_dtype(t1, dt) * as_dtype(t2, dt)


@lower(aten.addcdiv.default)
def addcdiv(x: Any, t1: Any, t2: Any, *, value: Any = 1) -> Any:
    dt = result_dtype(x, t1, t2)
    if not jnp.issubdtype(dt, jnp.inexact):
        raise RuntimeError("Integer division with addcdiv is no longer supported")
    if jnp.dtype(dt) in _LOW:  # torch: float(self) + float(value) * float(t1) / float(t2), rounded once
        f = jnp.float32
        return (as_dtype(x, f) + as_dtype(value, f) * as_dtype(t1, f) / as_dtype(t2, f)).astype(dt)
    return as_dtype(x, dt) + as_dtype(value, dt) * (as_dtype(t1, dt) / as_dtype(t2, dt))


# ----------------------------------------------------------------------------- activations
_unary(lambda x: jnp.maximum(x, 0).astype(x.dtype) if x.dtype != jnp.bool_ else x, aten.relu.default)


@lower(aten.gelu.default, jit=True)
def gelu(x: Any, *, approximate: str = "none") -> Any:
    return jax.nn.gelu(x, approximate=approximate == "tanh")


@lower(aten.gelu_backward.default, jit=True)
def gelu_backward(g: Any, x: Any, *, approximate: str = "none") -> Any:
    _, vjp = jax.vjp(lambda t: jax.nn.gelu(t, approximate=approximate == "tanh"), x)
    return vjp(g)[0]


_unary(jax.nn.silu, aten.silu.default)


@lower(aten.silu_backward.default, jit=True)
def silu_backward(g: Any, x: Any) -> Any:
    s = jax.nn.sigmoid(x)
    return g * s * (1 + x * (1 - s))


@lower(aten.sigmoid_backward.default)
def sigmoid_backward(g: Any, y: Any) -> Any:
    return g * y * (1 - y)


@lower(aten.tanh_backward.default)
def tanh_backward(g: Any, y: Any) -> Any:
    return g * (1 - y * y)


@lower(aten.threshold_backward.default)
def threshold_backward(g: Any, x: Any, threshold: Any) -> Any:
    return jnp.where(x <= threshold, jnp.zeros((), g.dtype), g)


@lower(aten.threshold.default)
def threshold(x: Any, threshold: Any, value: Any) -> Any:
    return jnp.where(x <= threshold, as_dtype(value, x.dtype), x)


@lower(aten.hardtanh.default)
def hardtanh(x: Any, min_val: Any = -1.0, max_val: Any = 1.0) -> Any:
    return jnp.clip(x, as_dtype(min_val, x.dtype), as_dtype(max_val, x.dtype))


@lower(aten.leaky_relu.default)
def leaky_relu(x: Any, negative_slope: Any = 0.01) -> Any:
    return jnp.where(x > 0, x, x * as_dtype(negative_slope, x.dtype))


@lower(aten.elu.default, jit=True)
def elu(x: Any, alpha: Any = 1.0, scale: Any = 1.0, input_scale: Any = 1.0) -> Any:
    neg = alpha * jnp.expm1(x * input_scale)
    return jnp.where(x > 0, x, neg).astype(x.dtype) * jnp.asarray(scale, x.dtype)


@lower(aten.softplus.default, jit=True)
def softplus(x: Any, beta: Any = 1.0, threshold: Any = 20.0) -> Any:
    bx = x * beta
    return jnp.where(bx > threshold, x, jnp.log1p(jnp.exp(bx)) / beta).astype(x.dtype)


_unary(lambda x: jnp.clip(x / 6 + 0.5, 0, 1).astype(x.dtype), aten.hardsigmoid.default)
_unary(lambda x: (x * jnp.clip(x / 6 + 0.5, 0, 1)).astype(x.dtype), aten.hardswish.default)
_unary(lambda x: (x * jnp.tanh(jax.nn.softplus(x))).astype(x.dtype), aten.mish.default)


@lower(aten.logit.default)
def logit(x: Any, eps: float | None = None) -> Any:
    x = float_of(x)
    if eps is not None:
        x = jnp.clip(x, eps, 1 - eps)
    return jnp.log(x / (1 - x))


@lower(aten.xlogy.Tensor, aten.xlogy.Scalar_Self, aten.xlogy.Scalar_Other)
def xlogy(a: Any, b: Any) -> Any:
    dt = result_dtype(a, b)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = jdt(None)
    return jax.scipy.special.xlogy(as_dtype(a, dt), as_dtype(b, dt))


@lower(aten.heaviside.default)
def heaviside(x: Any, v: Any) -> Any:
    dt = result_dtype(x, v)
    x, v = as_dtype(x, dt), as_dtype(v, dt)
    return jnp.where(x == 0, v, (x > 0).astype(dt))


@lower(aten._to_copy.default, raw=True)
def _to_copy(
    x: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    memory_format: Any = None,
) -> torch.Tensor:
    """Device transfers and dtype casts (raw: sees CPU tensors)."""

    target = torch.device(device) if device is not None else x.device
    if isinstance(x, TpuTensor):
        if target.type == "cpu":
            v = value(x)
            return jax_to_cpu(v if dtype is None or dtype == x.dtype else _cast_like_torch(v, jdt(dtype)))
        v = payload(x)  # stays deferred in fused eager
        if dtype is not None and dtype != x.dtype:
            v = lazy.call(_cast_like_torch, (v, jdt(dtype)))
        return TpuTensor(v)  # jax arrays are immutable: sharing the payload is a copy
    # a CPU tensor going to the device
    src = x if dtype is None else x.to(dtype)
    return TpuTensor(cpu_to_jax(src))


def _cast_like_torch(v: Any, dt: Any) -> Any:
    """Casts follow torch: float->int truncates toward zero; to bool tests != 0."""
    if dt == jnp.bool_:
        return v != 0
    return v.astype(dt)


# digamma / polygamma / zeta and the other special functions live in backend/ops/special.py


def _spherical_bessel_j0(x: Any) -> Any:
    small = jnp.abs(x) < 0.5
    xs = jnp.where(small, jnp.ones_like(x), x)
    x2 = x * x
    series = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110))))
    return jnp.where(jnp.isinf(x), jnp.zeros_like(x), jnp.where(small, series, jnp.sin(xs) / xs))


_unary_float(jax.scipy.special.i0, aten.special_modified_bessel_i0.default)
_unary_float(jax.scipy.special.i1, aten.special_modified_bessel_i1.default)
_unary_float(_spherical_bessel_j0, aten.special_spherical_bessel_j0.default)


@lower(aten.angle.default)
def angle(x: Any) -> Any:
    if jnp.iscomplexobj(x):
        return jnp.angle(x)
    xf = float_of(x)
    pi = jnp.asarray(3.141592653589793, xf.dtype)
    return jnp.where(jnp.isnan(xf), xf, jnp.where(xf < 0, pi, jnp.zeros((), xf.dtype)))


@lower(aten.frexp.Tensor)
def frexp(x: Any) -> Any:
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = jnp.frexp(x)
    return m, e.astype(jnp.int32)


def _binary_float(a: Any, b: Any) -> tuple[Any, Any]:
    dt = result_dtype(a, b)
    if not jnp.issubdtype(dt, jnp.floating):
        dt = jdt(torch.get_default_dtype())
    return as_dtype(a, dt), as_dtype(b, dt)


def _igamma_edges(a: Any, x: Any, body: Any, complement: bool) -> Any:
    """torch's (cephes) special cases for igamma/igammac, applied in its order."""
    nan = jnp.full((), jnp.nan, a.dtype)
    # igamma: a == 0 -> 1, x == 0 -> 0, a == inf -> 0, x == inf -> 1; igammac: the complements
    at_a0, at_x0, at_ainf, at_xinf = (
        jnp.asarray(v, a.dtype) for v in ((0, 1, 1, 0) if complement else (1, 0, 0, 1))
    )
    r = jnp.where(jnp.isinf(x), at_xinf, body)
    r = jnp.where(jnp.isinf(a), jnp.where(jnp.isinf(x), nan, at_ainf), r)
    r = jnp.where(x == 0, at_x0, r)
    r = jnp.where(a == 0, jnp.where(x > 0, at_a0, nan), r)
    return jnp.where((x < 0) | (a < 0), nan, r)


@lower(aten.igamma.default)
def igamma(a: Any, x: Any) -> Any:
    a, x = _binary_float(a, x)
    a, x = jnp.broadcast_arrays(a, x)
    return _igamma_edges(a, x, jax.scipy.special.gammainc(a, x), False)


@lower(aten.igammac.default)
def igammac(a: Any, x: Any) -> Any:
    a, x = _binary_float(a, x)
    a, x = jnp.broadcast_arrays(a, x)
    return _igamma_edges(a, x, jax.scipy.special.gammaincc(a, x), True)
