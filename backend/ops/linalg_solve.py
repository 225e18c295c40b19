"""Factorizations and solves: LU, Cholesky, inverse, solve, triangular solve, determinants.

LAPACK conventions: 1-based int32 pivots, int32 info per matrix."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import value


def _concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _zero_diag_info(lu: Any) -> Any:
    """LAPACK getrf's info: 1 + the index of the first zero on U's diagonal, 0 if none."""
    k = min(lu.shape[-2], lu.shape[-1])
    if k == 0:
        return jnp.zeros(lu.shape[:-2], jnp.int32)
    d = jnp.diagonal(lu, axis1=-2, axis2=-1)[..., :k]
    zero = d == 0
    first = jnp.argmax(zero, axis=-1).astype(jnp.int32) + 1
    return jnp.where(jnp.any(zero, axis=-1), first, jnp.zeros((), jnp.int32)).astype(jnp.int32)


def _check_float(a: Any, name: str) -> None:
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {a.dtype}")


def _check_square(a: Any, name: str) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(
            f"{name}: A must be batches of square matrices, but they are "
            f"{a.shape[-2]} by {a.shape[-1]} matrices"
        )


@lower(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a: Any, *, pivot: bool = True, check_errors: bool = False) -> Any:
    _check_float(a, "torch.linalg.lu_factor_ex")
    if a.ndim < 2:
        raise RuntimeError(
            "torch.linalg.lu_factor_ex: Expected tensor with 2 or more dimensions. Got size: "
            f"{list(a.shape)} instead"
        )
    if not pivot:
        raise NotImplementedError("linalg.lu_factor_ex(pivot=False) is not implemented for TPU")
    lu, piv, _ = jax.lax.linalg.lu(a)
    info = _zero_diag_info(lu)
    if check_errors and _concrete(info) and bool(jnp.any(info > 0)):
        raise RuntimeError(
            f"torch.linalg.lu_factor_ex: U[{int(jnp.max(info))},{int(jnp.max(info))}] is zero and "
            "using it on lu_solve would result in a division by zero."
        )
    return lu, (piv + 1).astype(jnp.int32), info


def _bcast_batch(a: Any, b: Any) -> tuple[Any, Any]:
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


def _lu_solve_left(lu: Any, piv: Any, b: Any, adjoint: bool) -> Any:
    """Solve A X = B (or A^H X = B) for A = P L U given LU and 1-based pivots; batch dims already equal."""
    n = lu.shape[-1]
    perm = jax.lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, n)  # A[perm] = L U
    ts = jax.lax.linalg.triangular_solve
    if not adjoint:
        pb = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = ts(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return ts(lu, y, left_side=True, lower=False)
    # A^H = U^H L^H P^T:  P^T X = L^-H U^-H B
    y = ts(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    y = ts(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True, conjugate_a=True)
    inv = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(y, inv[..., :, None], axis=-2)


def _lu_solve(lu: Any, piv: Any, b: Any, left: bool, adjoint: bool) -> Any:
    if left:
        lu_, b_ = _bcast_batch(lu, b)
        piv_ = jnp.broadcast_to(piv, lu_.shape[:-2] + piv.shape[-1:])
        return _lu_solve_left(lu_, piv_, b_, adjoint)
    # X A = B  <=>  A^H X^H = B^H ;  X A^H = B  <=>  A X^H = B^H
    bh = jnp.conj(jnp.swapaxes(b, -1, -2))
    return jnp.conj(jnp.swapaxes(_lu_solve(lu, piv, bh, True, not adjoint), -1, -2))


@lower(aten.linalg_lu_solve.default)
def linalg_lu_solve(lu: Any, piv: Any, b: Any, *, left: bool = True, adjoint: bool = False) -> Any:
    _check_square(lu, "linalg.lu_solve")
    if b.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    if lu.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
            f"{lu.dtype} and B of type {b.dtype} instead"
        )
    n = lu.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(
            "linalg.lu_solve: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b.shape[-2]}x{b.shape[-1]})"
        )
    return _lu_solve(lu, piv, b, left, adjoint)


@lower(aten.linalg_inv_ex.default)
def linalg_inv_ex(a: Any, *, check_errors: bool = False) -> Any:
    _check_square(a, "linalg.inv")
    _check_float(a, "linalg.inv")
    lu, piv, info = linalg_lu_factor_ex(a)
    if check_errors and _concrete(info) and bool(jnp.any(info > 0)):
        raise RuntimeError(
            f"linalg.inv: The diagonal element {int(jnp.max(info))} is zero, the inversion could not "
            "be completed because the input matrix is singular."
        )
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return _lu_solve_left(lu, piv, eye, False), info


def _solve_is_vector_rhs(a: Any, b: Any) -> bool:
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


@lower(aten._linalg_solve_ex.default)
def _linalg_solve_ex(a: Any, b: Any, *, left: bool = True, check_errors: bool = False) -> Any:
    _check_square(a, "linalg.solve")
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type {a.dtype} "
            f"and B of type {b.dtype} instead"
        )
    vector = _solve_is_vector_rhs(a, b)
    if vector and not left:
        raise RuntimeError(
            "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. "
            "In this case linalg.solve is equivalent to B / A.squeeze(-1)"
        )
    bm = b[..., None] if vector else b
    n = a.shape[-1]
    if (bm.shape[-2] if left else bm.shape[-1]) != n:
        raise RuntimeError(
            "linalg.solve: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {bm.shape[-2]}x{bm.shape[-1]})"
        )
    lu, piv, info = linalg_lu_factor_ex(a)
    if check_errors and _concrete(info) and bool(jnp.any(info > 0)):
        raise RuntimeError("torch.linalg.solve: The solver failed because the input matrix is singular.")
    x = _lu_solve(lu, piv, bm, left, False)
    return (x[..., 0] if vector else x), lu, piv, info


@lower(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(
    a: Any, b: Any, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Any:
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor must have at least 2 dimensions.")
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
            f"{a.dtype} and B of type {b.dtype} instead"
        )
    _check_float(a, "linalg.solve_triangular")
    _check_square(a, "linalg.solve_triangular")
    n = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(
            "linalg.solve_triangular: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b.shape[-2]}x{b.shape[-1]})"
        )
    a_, b_ = _bcast_batch(a, b)
    tri = jnp.triu(a_) if upper else jnp.tril(a_)
    return jax.lax.linalg.triangular_solve(
        tri, b_, left_side=left, lower=not upper, unit_diagonal=unitriangular
    )


@lower(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a: Any, *, upper: bool = False, check_errors: bool = False) -> Any:
    _check_square(a, "linalg.cholesky")
    _check_float(a, "linalg.cholesky")
    # torch reads only the lower (upper=False) or upper (upper=True) triangle of A
    src = jnp.conj(jnp.swapaxes(a, -1, -2)) if upper else a
    low = jnp.tril(src)
    herm = low + jnp.conj(jnp.swapaxes(jnp.tril(src, -1), -1, -2))
    l_ = jax.lax.linalg.cholesky(herm, symmetrize_input=False)
    l_ = jnp.tril(l_)
    bad = jnp.any(jnp.isnan(l_), axis=(-1, -2)) if a.shape[-1] else jnp.zeros(a.shape[:-2], bool)
    if _concrete(bad) and bool(jnp.any(bad)):
        if check_errors:
            raise RuntimeError(
                "linalg.cholesky: The factorization could not be completed because the input is not "
                "positive-definite."
            )
        raise NotImplementedError(
            "linalg.cholesky_ex on a non positive-definite input (LAPACK's partial factor and "
            "info) is not implemented for TPU"
        )
    info = jnp.zeros(a.shape[:-2], jnp.int32)
    return (jnp.conj(jnp.swapaxes(l_, -1, -2)) if upper else l_), info


@lower(aten._linalg_check_errors.default, raw=True)
def _linalg_check_errors(info: Any, api_name: str, *, is_matrix: bool) -> None:
    v = value(info) if hasattr(info, "_elem") else jnp.asarray(info.numpy())
    if not _concrete(v) or v.size == 0 or not bool(jnp.any(v != 0)):
        return None
    k = int(v[v != 0].reshape(-1)[0])
    if k < 0:
        raise RuntimeError(
            f"{api_name}: Argument {-k} has illegal value. Most certainly there is a bug in the "
            "implementation calling the backend library."
        )
    raise RuntimeError(
        f"{api_name}: The factorization or inversion could not be completed (info = {k}): the input "
        "matrix is singular or not positive-definite."
    )


@lower(aten.cholesky.default)
def cholesky(a: Any, upper: bool = False) -> Any:
    return linalg_cholesky_ex(a, upper=upper, check_errors=True)[0]


@lower(aten.lu_unpack.default)
def lu_unpack(lu: Any, piv: Any, unpack_data: bool = True, unpack_pivots: bool = True) -> Any:
    if lu.ndim < 2:
        raise RuntimeError(
            f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: {list(lu.shape)} instead"
        )
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    lower_ = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    upper_ = jnp.triu(lu[..., :k, :])
    perm = jax.lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, m)  # A[perm] = L U
    p = jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=lu.dtype), -1, -2)
    empty = jnp.zeros((0,), lu.dtype)  # torch returns empty tensors for the parts not unpacked
    return (
        (p if unpack_pivots else empty),
        (lower_ if unpack_data else empty),
        (upper_ if unpack_data else empty),
    )


@lower(aten.linalg_lu.default)
def linalg_lu(a: Any, *, pivot: bool = True) -> Any:
    lu, piv, _ = linalg_lu_factor_ex(a, pivot=pivot)
    return lu_unpack(lu, piv)


def _chol_solve(b: Any, l_: Any, upper: bool) -> Any:
    l_, b = _bcast_batch(l_, b)
    ts = jax.lax.linalg.triangular_solve
    if upper:  # A = U^H U
        y = ts(l_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
        return ts(l_, y, left_side=True, lower=False)
    y = ts(l_, b, left_side=True, lower=True)  # A = L L^H
    return ts(l_, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)


def _check_solve_args(b: Any, a: Any, name: str, square_name: str, ndim_message: str) -> None:
    """torch's argument errors for ``solve(b, A)``-style ops, in torch's order."""
    if b.ndim < 2 or a.ndim < 2:
        raise RuntimeError(ndim_message)
    if b.dtype != a.dtype:
        raise RuntimeError(
            f"Expected b and A to have the same dtype, but found b of type {b.dtype} and A of type "
            f"{a.dtype} instead."
        )
    _check_square(a, square_name)
    if b.shape[-2] != a.shape[-1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for {name}: each A matrix is {a.shape[-1]} by "
            f"{a.shape[-1]} but each b matrix is {b.shape[-2]} by {b.shape[-1]}"
        )


@lower(aten.cholesky_solve.default)
def cholesky_solve(b: Any, l_: Any, upper: bool = False) -> Any:
    _check_solve_args(
        b, l_, "cholesky_solve", "cholesky_solve", "b should have at least 2 dimensions, but has fewer"
    )
    tri = jnp.triu(l_) if upper else jnp.tril(l_)
    return _chol_solve(b, tri, upper)


@lower(aten.cholesky_inverse.default)
def cholesky_inverse(l_: Any, upper: bool = False) -> Any:
    _check_square(l_, "cholesky_inverse")
    _check_float(l_, "cholesky_inverse")
    tri = jnp.triu(l_) if upper else jnp.tril(l_)
    eye = jnp.broadcast_to(jnp.eye(l_.shape[-1], dtype=l_.dtype), l_.shape)
    return _chol_solve(eye, tri, upper)


def _lu_det_parts(a: Any, name: str) -> Any:
    _check_square(a, name)
    _check_float(a, name)
    # torch factors A^T (det(A^T) = det(A)); its backward relies on that LU and pivots
    lu, piv, _ = linalg_lu_factor_ex(jnp.swapaxes(a, -1, -2))
    n = a.shape[-1]
    swaps = jnp.sum(piv != jnp.arange(1, n + 1, dtype=jnp.int32), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return lu, piv, jnp.diagonal(lu, axis1=-2, axis2=-1), parity


@lower(aten._linalg_det.default)
def _linalg_det(a: Any) -> Any:
    if jnp.iscomplexobj(a):
        raise NotImplementedError("linalg.det of a complex matrix is not implemented for TPU")
    lu, piv, d, parity = _lu_det_parts(a, "linalg.det")
    return parity * jnp.prod(d, axis=-1), lu, piv


@lower(aten._linalg_slogdet.default)
def _linalg_slogdet(a: Any) -> Any:
    if jnp.iscomplexobj(a):
        raise NotImplementedError("linalg.slogdet of a complex matrix is not implemented for TPU")
    lu, piv, d, parity = _lu_det_parts(a, "linalg.slogdet")
    sign = parity * jnp.prod(jnp.sign(d), axis=-1)
    logabs = jnp.sum(jnp.log(jnp.abs(d)), axis=-1)
    return sign, logabs, lu, piv


@lower(aten.triangular_solve.default)
def triangular_solve(
    b: Any, a: Any, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> Any:
    _check_solve_args(
        b,
        a,
        "triangular_solve",
        "torch.triangular_solve",
        "torch.triangular_solve: The input tensor must have at least 2 dimensions.",
    )
    a_, b_ = _bcast_batch(a, b)
    tri = jnp.triu(a_) if upper else jnp.tril(a_)
    x = jax.lax.linalg.triangular_solve(
        tri, b_, left_side=True, lower=not upper, transpose_a=transpose, unit_diagonal=unitriangular
    )
    return x, a_
