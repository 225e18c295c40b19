"""Matrix products (mm, bmm, addmm, dot, mv, cross, addr ...) and the float32 matmul precision they run at
(``torch.tpu.precision`` / ``torch.set_float32_matmul_precision``). Factorizations and solves are in
``linalg_solve``, decompositions in ``linalg_decomp``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tpu_workbench.backend import state
from tpu_workbench.backend.ops._util import as_dtype, aten, jdt, result_dtype
from tpu_workbench.backend.ops.registry import lower

_P = jax.lax.Precision


def precision() -> Any:
    """The jax.lax.Precision for the active torch.tpu precision setting."""
    return getattr(_P, state.current_precision().value)


# the C++ type names torch's dtype-mismatch messages print
_CPP_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def _check_same(a: Any, b: Any, name: str) -> None:
    if a.dtype != b.dtype:
        na, nb = (_CPP_NAMES.get(str(x.dtype), str(x.dtype)) for x in (a, b))
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {na} != {nb}")


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
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}]"
            f" but got: [{b.shape[0]}, {b.shape[1]}]."
        )
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


def _check_expands(x: Any, target: tuple) -> None:
    """``x`` broadcasts to ``target`` (the product's shape), or the error torch's ``expand`` raises."""
    lead = len(target) - x.ndim
    for i, s in enumerate(x.shape):
        t = target[lead + i] if lead + i >= 0 else None
        if t is None or (s != 1 and s != t):
            raise RuntimeError(
                f"The expanded size of the tensor ({t}) must match the existing size ({s}) at "
                f"non-singleton dimension {lead + i}.  Target sizes: {list(target)}.  Tensor sizes: "
                f"{list(x.shape)}"
            )


@lower(aten.addmm.default, jit=True)
def addmm(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = _scaled(mm(a, b), alpha)
    _check_expands(bias, prod.shape)
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


_LOW = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _round_as(x: Any, dt: Any) -> Any:
    """Round a float32 intermediate to ``dt``'s precision, keeping float32 (XLA may otherwise fuse a chain of
    bfloat16 ops in float32 and skip the per-op rounding torch does)."""
    fi = jnp.finfo(dt)
    return jax.lax.reduce_precision(x, exponent_bits=fi.nexp, mantissa_bits=fi.nmant)


@lower(aten.linalg_cross.default)
def linalg_cross(a: Any, b: Any, *, dim: int = -1) -> Any:
    """torch's cross kernel: a1*b2 - a2*b1 per component in the tensor dtype (bfloat16/float16 round each
    product and the difference, as the scalar_t arithmetic does)."""
    if a.ndim != b.ndim:
        raise RuntimeError(
            f"linalg.cross: inputs must have the same number of dimensions. Got {a.ndim} and {b.ndim}"
        )
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.cross: expected input and other to have the same dtype, got {a.dtype} and {b.dtype}"
        )
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
    d = dim % a.ndim if -a.ndim <= dim < a.ndim else None
    if d is None:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-a.ndim}, {a.ndim - 1}], but got {dim})"
        )
    if shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}"
        )
    dt = a.dtype
    low = dt in _LOW
    if low:
        a, b = a.astype(jnp.float32), b.astype(jnp.float32)

    def c(i: int) -> Any:
        return jnp.take(a, i, axis=d), jnp.take(b, i, axis=d)

    (a0, b0), (a1, b1), (a2, b2) = c(0), c(1), c(2)

    def diff(p: Any, q: Any, r: Any, s: Any) -> Any:
        if low:
            return _round_as(_round_as(p * q, dt) - _round_as(r * s, dt), dt)
        return p * q - r * s

    out = jnp.stack([diff(a1, b2, a2, b1), diff(a2, b0, a0, b2), diff(a0, b1, a1, b0)], axis=d)
    return out.astype(dt)


@lower(aten.addr.default)
def addr(x: Any, v1: Any, v2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """torch's addr kernel: beta * self + (alpha * vec1) * vec2 per element in the result dtype (alpha and beta
    converted to it first; bfloat16/float16 round after each operation); beta == 0 ignores self."""
    if v1.ndim != 1 or v2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {v1.ndim}-D")
    dt = result_dtype(x, v1, v2)
    shape = (v1.shape[0], v2.shape[0])
    if dt == jnp.bool_:
        o = jnp.logical_and(v1[:, None], v2[None, :]) & bool(alpha)
        if not beta:
            return jnp.broadcast_to(o, shape)
        return jnp.broadcast_to(o | (x & bool(beta)), jnp.broadcast_shapes(shape, x.shape))
    low = jnp.dtype(dt) in _LOW
    wdt = jnp.float32 if low else dt
    rnd = (lambda y: _round_as(y, dt)) if low else (lambda y: y)
    al, be = as_dtype(alpha, dt).astype(wdt), as_dtype(beta, dt).astype(wdt)
    a1, a2 = as_dtype(v1, dt).astype(wdt)[:, None], as_dtype(v2, dt).astype(wdt)[None, :]
    o = rnd(rnd(al * a1) * a2)
    if isinstance(beta, (bool, int, float)) and beta == 0:
        out = jnp.broadcast_to(o, jnp.broadcast_shapes(shape, x.shape))
    else:
        out = rnd(rnd(be * as_dtype(x, dt).astype(wdt)) + o)
    return out.astype(dt)


@lower(aten.addbmm.default)
def addbmm(x: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    if a.dtype in _LOW and a.ndim == 3 and b.ndim == 3 and a.shape[0] > 0:
        # torch: result.addmm_(batch1[i], batch2[i], beta (first only), alpha) per batch, each addmm computed
        # in float32 and rounded to the dtype
        f = jnp.float32
        out = jnp.broadcast_to(x, (a.shape[1], b.shape[2])).astype(f)
        be = beta
        for i in range(a.shape[0]):
            prod = jnp.matmul(a[i].astype(f), b[i].astype(f), precision=_P.HIGHEST) * jnp.asarray(alpha, f)
            out = prod if (isinstance(be, (int, float)) and be == 0) else prod + out * jnp.asarray(be, f)
            out = _round_as(out, a.dtype)
            be = 1
        return out.astype(a.dtype)
    prod = _scaled(jnp.sum(bmm(a, b), axis=0), alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(prod.shape, x.shape))
    return prod + _scaled(x, beta)


# ----------------------------------------------------------------------------- grouped (MoE) matmul
_GROUPED_DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _check_grouped(a: Any, b: Any, offs: Any, bias: Any, out_dtype: Any) -> None:
    """torch's shared _grouped_mm input checks (the CPU, CUDA and XPU kernels all run them)."""
    if a.ndim not in (2, 3) or b.ndim not in (2, 3):
        raise RuntimeError("mat_a and mat_b have to be 2 or 3d")
    for name, x in (("mat_a", a), ("mat_b", b)):
        if jnp.dtype(x.dtype) not in _GROUPED_DTYPES:
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got {x.dtype}")
    _check_same(a, b, "_grouped_mm")
    if (a.ndim == 3 or b.ndim == 3) and a.shape[-1] != b.shape[-2]:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    if (offs is not None) != (a.ndim == 2 or b.ndim == 2):
        raise RuntimeError(
            "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d"
        )
    if offs is not None and (offs.ndim != 1 or offs.dtype != jnp.int32):
        raise RuntimeError("Offsets have to be int32" if offs.ndim == 1 else "offs has to be 1D")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and jdt(out_dtype) != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")


def _group_sizes(offs: Any) -> Any:
    return jnp.diff(jnp.concatenate([jnp.zeros((1,), offs.dtype), offs]))


@lower(aten._grouped_mm.default, jit=True)
def _grouped_mm(a: Any, b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    """MoE grouped GEMM, as ``transformers`` calls it on "tpu" for every dtype. ``offs`` holds each group's
    end along the jagged dimension: 2d x 3d splits a's rows over b's groups (out (S, N)); 3d x 2d splits b's
    columns (out (M, N)); 2d x 2d splits the contraction (out (G, M, N), the weight gradient); 3d x 3d is a
    batched matmul. Rows or columns past ``offs[-1]`` are zero (torch leaves them uninitialised). Half
    precision accumulates in float32 and rounds once."""
    _check_grouped(a, b, offs, bias, out_dtype)
    acc = jnp.float32 if a.dtype != jnp.float64 else a.dtype
    prec = precision()
    if a.ndim == 3 and b.ndim == 3:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError("batched dimension has to match")
        return jnp.matmul(a, b, precision=prec, preferred_element_type=acc).astype(a.dtype)
    sizes = _group_sizes(offs)
    if a.ndim == 2 and b.ndim == 3:
        if offs.shape[0] != b.shape[0]:
            raise RuntimeError("matrix batch sizes have to match")
        out = jax.lax.ragged_dot(a, b, sizes, precision=prec, preferred_element_type=acc)
    elif a.ndim == 3:
        if offs.shape[0] != a.shape[0]:
            raise RuntimeError("matrix batch sizes have to match")
        out = jax.lax.ragged_dot(
            b.T, jnp.swapaxes(a, 1, 2), sizes, precision=prec, preferred_element_type=acc
        ).T
    else:
        if a.shape[1] != b.shape[0]:
            raise RuntimeError("contraction dimension of mat_a and mat_b must match")
        dn = jax.lax.RaggedDotDimensionNumbers(
            dot_dimension_numbers=(([1], [0]), ([], [])), lhs_ragged_dimensions=[1], rhs_group_dimensions=[]
        )
        out = jax.lax.ragged_dot_general(a, b, sizes, dn, precision=prec, preferred_element_type=acc)
    return out.astype(a.dtype)
