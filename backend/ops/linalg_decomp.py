"""Decompositions: SVD, QR, eigh, Householder products, least squares, pinv, matrix_exp, LDL."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.lax.linalg import geqrf as _geqrf  # private: LAPACK geqrf is not re-exported by jax.lax.linalg

from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.linalg import _LOW, _P
from tpu_workbench.backend.ops.linalg_solve import (
    _bcast_batch,
    _check_float,
    _check_square,
    _concrete,
    _solve_is_vector_rhs,
)
from tpu_workbench.backend.ops.registry import lower

# Decompositions: SVD, QR, eigh, Householder products, least squares, pinv, matrix_exp, LDL.
# On XLA:CPU jax.lax.linalg calls the same LAPACK routines torch's CPU kernels call (gesdd, geqrf + orgqr,
# syevd), so signs and orders agree with torch; no sign normalisation is applied.


def _empty(dtype: Any) -> Any:
    """torch's placeholder for an output that was not computed: a 1-D tensor of size 0."""
    return jnp.zeros((0,), dtype)


def _real_dtype(dtype: Any) -> Any:
    return jnp.finfo(dtype).dtype


def _mh(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _eye_like(batch: tuple, n: int, dtype: Any) -> Any:
    return jnp.broadcast_to(jnp.eye(n, dtype=dtype), (*batch, n, n))


def _check_matrix(a: Any, name: str, what: str = "A") -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {what} must have at least 2 dimensions.")


@lower(aten._linalg_svd.default)
def _linalg_svd(
    a: Any, full_matrices: bool = False, compute_uv: bool = True, *, driver: str | None = None
) -> Any:
    """gesdd through jax.lax.linalg.svd (also gesdd on CPU); ``driver=`` is a cuSOLVER-only option in torch."""
    _check_matrix(a, "linalg.svd")
    _check_float(a, "linalg.svd")
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
            "cuSOLVER backend."
        )
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    rdt = _real_dtype(a.dtype)
    if k == 0:  # torch: identity factors are a valid SVD of an empty matrix
        s = jnp.zeros((*batch, 0), rdt)
        if not compute_uv:
            return _empty(a.dtype), s, _empty(a.dtype)
        u = _eye_like(batch, m, a.dtype)[..., : (m if full_matrices else k)]
        vh = _eye_like(batch, n, a.dtype)[..., : (n if full_matrices else k), :]
        return u, s, vh
    if not compute_uv:
        s = jax.lax.linalg.svd(a, full_matrices=False, compute_uv=False)
        return _empty(a.dtype), s.astype(rdt), _empty(a.dtype)
    u, s, vh = jax.lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
    return u, s.astype(rdt), vh


@lower(aten.linalg_qr.default)
def linalg_qr(a: Any, mode: str = "reduced") -> Any:
    """geqrf + orgqr (jax.lax.linalg.qr), as torch's CPU kernel."""
    _check_matrix(a, "linalg.qr")
    _check_float(a, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
            "or 'complete'"
        )
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    if k == 0:
        qcols = m if mode == "complete" else k
        r = jnp.zeros((*batch, m if mode == "complete" else k, n), a.dtype)
        q = _empty(a.dtype) if mode == "r" else _eye_like(batch, m, a.dtype)[..., :qcols]
        return q, r
    if mode == "r":
        return _empty(a.dtype), jax.lax.linalg.qr(a, full_matrices=False)[1]
    return jax.lax.linalg.qr(a, full_matrices=mode == "complete")


@lower(aten._linalg_eigh.default)
def _linalg_eigh(a: Any, UPLO: str = "L", compute_v: bool = True) -> Any:  # noqa: N803 - ATen's name
    """syevd through jax.lax.linalg.eigh; only the ``UPLO`` triangle of A is read, as in LAPACK."""
    _check_square(a, "linalg.eigh")
    _check_float(a, "linalg.eigh")
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    lower_ = UPLO in ("L", "l")
    n = a.shape[-1]
    rdt = _real_dtype(a.dtype)
    if n == 0:
        w = jnp.zeros(a.shape[:-1], rdt)
        return w, (jnp.zeros(a.shape, a.dtype) if compute_v else _empty(a.dtype))
    v, w = jax.lax.linalg.eigh(a, lower=lower_, symmetrize_input=False, sort_eigenvalues=True)
    return w.astype(rdt), (v if compute_v else _empty(a.dtype))


@lower(aten.geqrf.default)
def geqrf(a: Any) -> Any:
    _check_matrix(a, "torch.geqrf", "A")
    _check_float(a, "torch.geqrf")
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if min(m, n) == 0:
        return a, jnp.zeros((*batch, 0), a.dtype)

    return _geqrf(a)


def _householder_check(a: Any, tau: Any, name: str) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if tau.ndim != a.ndim - 1 or tau.shape[:-1] != a.shape[:-2]:
        raise RuntimeError(
            f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
            f"{list(tau.shape[:-1])}"
        )
    if a.dtype != tau.dtype:
        raise RuntimeError(f"{name}: tau dtype {tau.dtype} does not match input dtype {a.dtype}")


def _householder(a: Any, tau: Any) -> Any:
    """orgqr: the first ``a.shape[-1]`` columns of H_1 ... H_k (k = tau.shape[-1]); needs m >= n >= k."""
    m, n = a.shape[-2:]
    if n == 0:
        return jnp.zeros(a.shape, a.dtype)
    if tau.shape[-1] == 0:
        return jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)
    return jax.lax.linalg.householder_product(a, tau)


@lower(aten.linalg_householder_product.default)
def linalg_householder_product(a: Any, tau: Any) -> Any:
    name = "torch.linalg.householder_product"
    _householder_check(a, tau, name)
    _check_float(a, name)
    if a.shape[-2] < a.shape[-1]:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if a.shape[-1] < tau.shape[-1]:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    return _householder(a, tau)


@lower(aten.ormqr.default)
def ormqr(a: Any, tau: Any, other: Any, left: bool = True, transpose: bool = False) -> Any:
    """Q (or Q^H) times ``other`` from the side asked, with Q = H_1 ... H_k formed explicitly (mn x mn)."""
    name = "torch.ormqr"
    _householder_check(a, tau, name)
    _check_float(a, name)
    if other.ndim < 2:
        raise RuntimeError(f"{name}: other must have at least 2 dimensions.")
    if a.dtype != other.dtype:
        raise RuntimeError(
            f"{name}: Expected input and other to have the same dtype, but got {a.dtype} and {other.dtype}"
        )
    mn = other.shape[-2] if left else other.shape[-1]
    if a.shape[-2] != mn:
        raise RuntimeError(f"{name}: input.shape[-2] must be equal to other.shape[{-2 if left else -1}]")
    if a.shape[-1] > mn:
        raise RuntimeError(
            f"{name}: input.shape[-1] must be less than or equal to other.shape[{-2 if left else -1}]"
        )
    if tau.shape[-1] > a.shape[-1]:
        raise RuntimeError(f"{name}: tau.shape[-1] must be less than or equal to input.shape[-1]")
    if a.shape[:-2] != other.shape[:-2]:
        raise RuntimeError(
            f"{name}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
            f"{list(other.shape[:-2])}"
        )
    pad = [(0, 0)] * (a.ndim - 1) + [(0, mn - a.shape[-1])]
    q = _householder(jnp.pad(a, pad), tau)
    if transpose:
        q = _mh(q)
    return _mm_any(q, other) if left else _mm_any(other, q)


def _mm_any(a: Any, b: Any) -> Any:
    return jnp.matmul(a, b, precision=_P.HIGHEST).astype(a.dtype)


# torch's matrix exponential (Bader, Blanes, Casas 2019: optimized Taylor polynomials of degree 1, 2, 4, 8, 12,
# 18 with scaling and squaring), replicated step by step so that rounding agrees with torch's CPU kernel.
_MEXP_THETAS = {
    4: (
        1.192092800768788e-07,
        5.978858893805233e-04,
        5.116619363445086e-02,
        5.800524627688768e-01,
        1.461661507209034e00,
        3.010066362817634e00,
    ),
    8: (
        2.220446049250313e-16,
        2.580956802971767e-08,
        3.397168839976962e-04,
        4.991228871115323e-02,
        2.996158913811580e-01,
        1.090863719290036e00,
    ),
}
_T12_B = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359),
)
_T18_B = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
    (
        0.0,
        3.97849749499645077844e-01,
        1.36783778460411720168e00,
        4.98289622525382669416e-01,
        -6.37898194594723280150e-04,
    ),
    (
        -1.09676396052962061844e01,
        1.68015813878906206114e00,
        5.71779846478865511061e-02,
        -6.98210122488052056106e-03,
        3.34975017086070470649e-05,
    ),
    (
        -9.04316832390810593223e-02,
        -6.76404519071381882256e-02,
        6.75961301770459654925e-02,
        2.95552570429315521194e-02,
        -1.39180257516060693404e-05,
    ),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05),
)


def _mm_seq(a: Any, b: Any) -> Any:
    """Matrix product accumulated over k in order, one rounding per step: torch's CPU kernel for small batched
    products (baddbmm_cpu_kernel, used when m*n*k < 400)."""
    out = a[..., :, :1] * b[..., :1, :]
    for k in range(1, a.shape[-1]):
        out = out + a[..., :, k : k + 1] * b[..., k : k + 1, :]
    return out


def _lincomb(mats: list[Any], coefs: Any, dt: Any) -> Any:
    """sum_j c_j * M_j accumulated in order (torch's _compute_linear_combination), the coefficients rounded to
    the real dtype first as torch's tables are."""
    out = jnp.zeros_like(mats[0])
    for m_, c in zip(mats, coefs, strict=False):
        out = out + jnp.asarray(c, dt) * m_
    return out


def _mexp_mm(a: Any, b: Any) -> Any:
    """torch's CPU bmm: an in-order loop below 400 multiply-adds per product, BLAS above."""
    return _mm_seq(a, b) if a.shape[-1] ** 3 < 400 else _mm_any(a, b)


def _mexp_taylor(a: Any, deg: int) -> Any:
    rdt = _real_dtype(a.dtype)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if deg == 1:
        return eye + a
    a2 = _mexp_mm(a, a)
    if deg == 2:
        return eye + a + a2 / jnp.asarray(2.0, rdt)
    if deg == 4:
        p = _mexp_mm(a2, _lincomb([eye, a, a2], (1 / 2.0, 1 / 6.0, 1 / 24.0), rdt))
        return eye + a + p
    if deg == 8:
        sq = 0.1330413469565007072504e2
        x3 = 2.0 / 3.0
        x1 = x3 * ((1.0 + sq) / 88.0)
        x2 = x3 * ((1.0 + sq) / 352.0)
        x4 = (-271.0 + 29.0 * sq) / (315.0 * x3)
        x5 = (-11.0 + 11.0 * sq) / (1260.0 * x3)
        x6 = (-99.0 + 11.0 * sq) / (5040.0 * x3)
        x7 = (89.0 - sq) / (5040.0 * x3)
        y2 = (857.0 - 58.0 * sq) / 630.0
        a4 = _mexp_mm(a2, _lincomb([a, a2], (x1, x2), rdt))
        a8 = _mexp_mm(_lincomb([a2, a4], (x3, 1.0), rdt), _lincomb([eye, a, a2, a4], (x4, x5, x6, x7), rdt))
        return _lincomb([eye, a, a2, a4, a8], (1.0, 1.0, y2, 0.0, 1.0), rdt)
    a3 = _mexp_mm(a, a2)
    if deg == 12:
        bs = [_lincomb([eye, a, a2, a3], row, rdt) for row in _T12_B]
        b2 = bs[2] + _mexp_mm(bs[3], bs[3])
        return bs[0] + _mexp_mm(bs[1] + b2, b2)
    a6 = _mexp_mm(a3, a3)
    bs = [_lincomb([eye, a, a2, a3, a6], row, rdt) for row in _T18_B]
    b3 = bs[3] + _mexp_mm(bs[0], bs[4])
    return bs[1] + _mexp_mm(bs[2] + b3, b3)


def _mexp_t18_scale_square(a: Any, norm: Any, theta: float) -> Any:
    rdt = norm.dtype
    s = jnp.maximum(jnp.ceil(jnp.log2(norm / jnp.asarray(theta, rdt))), 0)
    s = jnp.where(jnp.isfinite(s), s, 0)
    scaled = a * jnp.power(jnp.asarray(2, rdt), -s)[:, None, None].astype(a.dtype)
    acc = _mexp_taylor(scaled, 18)
    steps = s.astype(jnp.int32)

    def body(i: Any, x: Any) -> Any:
        return jnp.where((i < steps)[:, None, None], _mexp_mm(x, x), x)

    if not _concrete(steps):
        return jax.lax.fori_loop(0, 128, body, acc)
    for i in range(int(jnp.max(steps))):  # eager: op by op, so no fused multiply-adds, as torch
        acc = body(i, acc)
    return acc


@lower(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(a: Any) -> Any:
    """torch's algorithm: a single matrix gets the lowest Taylor degree its 1-norm allows; batches always degree
    18 with per-matrix scaling and squaring."""
    _check_square(a, "linalg.matrix_exp")
    _check_float(a, "linalg.matrix_exp")
    n = a.shape[-1]
    if n == 0:
        return a
    if n == 1:
        return jnp.exp(a)
    if a.dtype in _LOW:
        # torch's CPU kernel is broken here (matrix_exp(0.1 * eye) in bfloat16 is inf, its OpInfo samples all NaN),
        # so there is no reference to match; refuse instead of returning an answer that cannot be checked
        raise NotImplementedError(
            f"linalg.matrix_exp on TPU does not support {a.dtype} (torch's CPU kernel returns "
            "inf/NaN for it); use float32"
        )
    return _matrix_exp(a, _MEXP_THETAS[jnp.dtype(_real_dtype(a.dtype)).itemsize])


def _matrix_exp(a: Any, thetas: Any) -> Any:
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    rdt = _real_dtype(a.dtype)
    norm = jnp.max(jnp.sum(jnp.abs(flat), axis=-2), axis=-1)
    big = _mexp_t18_scale_square(flat, norm, thetas[5])
    if flat.shape[0] > 1:
        return big.reshape(a.shape)
    res = jnp.full_like(flat, jnp.nan)
    lo = -1.0
    for deg, hi in zip((1, 2, 4, 8, 12), thetas[:5], strict=True):
        sel = (norm > jnp.asarray(lo, rdt)) & (norm <= jnp.asarray(hi, rdt))
        res = jnp.where(sel[:, None, None], _mexp_taylor(flat, deg), res)
        lo = hi
    res = jnp.where((norm >= jnp.asarray(thetas[4], rdt))[:, None, None], big, res)
    return res.reshape(a.shape)


def _pinv_tols(a: Any, atol: Any, rtol: Any) -> Any:
    """torch's tolerance rule: zero the singular values <= max(atol, rtol * sigma_max), tolerances in float64."""
    f64 = jnp.float64
    if (atol is not None and jnp.iscomplexobj(atol)) or (rtol is not None and jnp.iscomplexobj(rtol)):
        raise RuntimeError("linalg.pinv: atol and rtol tensors of complex type are not supported")
    atol_ = jnp.zeros((), f64) if atol is None else atol
    if rtol is None:
        eps = jnp.finfo(_real_dtype(a.dtype)).eps
        default = jnp.asarray(eps * max(a.shape[-1], a.shape[-2]), f64)
        rtol_ = default if atol is None else jnp.where(atol > 0, jnp.zeros((), f64), default)
    else:
        rtol_ = rtol
    return atol_, rtol_


@lower(aten.linalg_pinv.atol_rtol_tensor)
def linalg_pinv(a: Any, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Any:
    _check_matrix(a, "linalg.pinv")
    _check_float(a, "linalg.pinv")
    if a.size == 0:
        return jnp.zeros((*a.shape[:-2], a.shape[-1], a.shape[-2]), a.dtype)
    atol_, rtol_ = _pinv_tols(a, atol, rtol)
    if not hermitian:
        u, s, vh = _linalg_svd(a, False)
        max_val = s[..., :1]
        tol = jnp.maximum(atol_[..., None], rtol_[..., None] * max_val)
        s_inv = jnp.where(s > tol, 1 / s, jnp.zeros((), s.dtype)).astype(a.dtype)
        return _mm_any(_mh(vh) * s_inv[..., None, :], _mh(u))
    w, v = _linalg_eigh(a)
    w_abs = jnp.abs(w)
    max_val = jnp.max(w_abs, axis=-1, keepdims=True)
    tol = jnp.maximum(atol_[..., None], rtol_[..., None] * max_val)
    w_inv = jnp.where(w_abs > tol, 1 / w, jnp.zeros((), w.dtype)).astype(a.dtype)
    return _mm_any(v * w_inv[..., None, :], _mh(v))


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_gels(a: Any, b: Any) -> tuple[Any, Any]:
    """LAPACK gels (A assumed full rank): QR of A (m >= n) or of A^H (m < n, minimum-norm solution).

    Returns the solution and, for m > n, the squared residuals as gels leaves them (rows n: of Q^H B).
    """
    m, n = a.shape[-2:]
    ts = jax.lax.linalg.triangular_solve
    if m >= n:
        q, r = jax.lax.linalg.qr(a, full_matrices=True)
        c = _mm_any(_mh(q), b)
        x = ts(r[..., :n, :], c[..., :n, :], left_side=True, lower=False)
        res = jnp.sum(jnp.abs(c[..., n:, :]) ** 2, axis=-2) if m > n else None
        return x, res
    q, r = jax.lax.linalg.qr(_mh(a), full_matrices=False)  # A = R^H Q^H
    y = ts(r, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    return _mm_any(q, y), None


@lower(aten.linalg_lstsq.default)
def linalg_lstsq(a: Any, b: Any, rcond: float | None = None, *, driver: str | None = None) -> Any:
    """gels: QR solve; gelsy/gelsd/gelss: the SVD minimum-norm solution with torch's rank rule s > rcond*s_max.

    gelsy's rank comes from a pivoted QR in LAPACK; it agrees with the SVD rank except for matrices whose
    singular values straddle the cutoff within rounding.
    """
    name = "torch.linalg.lstsq"
    if a.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    _check_float(a, name)
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{name}: Expected input and other to have the same dtype, but got input's dtype "
            f"{a.dtype} and other's dtype {b.dtype}"
        )
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = _solve_is_vector_rhs(a, b)
    bm = b[..., None] if vector else b
    if bm.ndim < 2:
        raise RuntimeError(f"{name}: other must have at least 1 dimension.")
    m, n = a.shape[-2:]
    if bm.shape[-2] != m:
        raise RuntimeError(f"{name}: input.size(-2) should match other.size(-{1 if vector else 2})")
    a_, b_ = _bcast_batch(a, bm)
    batch, k = a_.shape[:-2], b_.shape[-1]
    rdt = _real_dtype(a.dtype)
    eps = float(jnp.finfo(rdt).eps)
    rc = eps * max(m, n) if rcond is None else float(rcond)
    if rc < 0:
        rc = eps  # LAPACK: a negative rcond means machine precision
    residuals = _empty(rdt)
    rank = _empty(jnp.int64)
    sv = _empty(rdt)
    if min(m, n) == 0:
        x = jnp.zeros((*batch, n, k), a.dtype)
        if driver != "gels":
            rank = jnp.zeros(batch, jnp.int64)
        if driver in ("gelsd", "gelss"):
            sv = jnp.zeros((*batch, 0), rdt)
        if m > n and driver != "gelsy":
            residuals = jnp.sum(jnp.abs(b_) ** 2, axis=-2).astype(rdt)
    elif driver == "gels":
        x, res = _lstsq_gels(a_, b_)
        if res is not None:
            residuals = res.astype(rdt)
    else:
        u, s, vh = jax.lax.linalg.svd(a_, full_matrices=True, compute_uv=True)
        keep = s > rc * s[..., :1]
        rank = jnp.sum(keep, axis=-1).astype(jnp.int64)
        s_inv = jnp.where(keep, 1 / s, jnp.zeros((), s.dtype)).astype(a.dtype)
        c = _mm_any(_mh(u), b_)
        x = _mm_any(_mh(vh[..., : min(m, n), :]), s_inv[..., :, None] * c[..., : min(m, n), :])
        if driver in ("gelsd", "gelss"):
            sv = s.astype(rdt)
            if m > n:
                if not _concrete(rank):
                    raise NotImplementedError(
                        f"{name}(driver={driver!r}) under tracing: residuals depend on the "
                        "rank (data-dependent shape); not implemented for TPU"
                    )
                if bool(jnp.all(rank == n)):
                    residuals = jnp.sum(jnp.abs(c[..., n:, :]) ** 2, axis=-2).astype(rdt)
    return (x[..., 0] if vector else x), residuals, rank, sv


# LDL^T (Bunch-Kaufman, LAPACK sytf2/sytrs with uplo='L', as torch's CPU kernel): pivoting is data-dependent,
# so the factorization runs on the host on concrete values, one matrix at a time, in the input's precision.
_BK_ALPHA = (1.0 + 17.0**0.5) / 8.0


def _sytf2_lower(a: Any) -> tuple[Any, Any, int]:
    """LAPACK dsytf2 (uplo='L') on one real matrix: the compact LD, 1-based pivots (negative for 2x2 blocks), info."""

    a = np.array(a, copy=True)
    n = a.shape[0]
    dt = a.dtype.type
    alpha = dt(_BK_ALPHA)
    ipiv = np.zeros(n, np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(np.abs(a[k + 1 :, k])))
            colmax = abs(a[imax, k])
        else:
            imax, colmax = k, dt(0)
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            if info == 0:
                info = k + 1
            kp = k
        else:
            if absakk >= alpha * colmax:
                kp = k
            else:
                jmax = k + int(np.argmax(np.abs(a[imax, k:imax])))
                rowmax = abs(a[imax, jmax])
                if imax < n - 1:
                    jmax = imax + 1 + int(np.argmax(np.abs(a[imax + 1 :, imax])))
                    rowmax = max(rowmax, abs(a[jmax, imax]))
                if absakk >= alpha * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= alpha * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:
                if kp < n - 1:
                    a[kp + 1 :, kk], a[kp + 1 :, kp] = a[kp + 1 :, kp].copy(), a[kp + 1 :, kk].copy()
                seg = a[kk + 1 : kp, kk].copy()
                a[kk + 1 : kp, kk] = a[kp, kk + 1 : kp]
                a[kp, kk + 1 : kp] = seg
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if kstep == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    d11 = dt(1) / a[k, k]
                    x = a[k + 1 :, k].copy()
                    for j in range(k + 1, n):  # dsyr on the lower triangle: A(i,j) += x(i) * (-d11 * x(j))
                        a[j:, j] += x[j - k - 1 :] * (-d11 * x[j - k - 1])
                    a[k + 1 :, k] *= d11
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = dt(1) / (d11 * d22 - dt(1))
                d21 = t / d21
                for j in range(k + 2, n):
                    wk = d21 * (d11 * a[j, k] - a[j, k + 1])
                    wkp1 = d21 * (d22 * a[j, k + 1] - a[j, k])
                    a[j:, j] -= a[j:, k] * wk + a[j:, k + 1] * wkp1
                    a[j, k] = wk
                    a[j, k + 1] = wkp1
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(a), ipiv, info


def _host_ldl(name: str, *xs: Any) -> None:
    for x in xs:
        if not _concrete(x):
            raise NotImplementedError(
                f"{name} under tracing (data-dependent pivoting) is not implemented for TPU"
            )
        if jnp.iscomplexobj(x):
            raise NotImplementedError(f"{name} of a complex matrix is not implemented for TPU")


@lower(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(a: Any, *, hermitian: bool = False, check_errors: bool = False) -> Any:
    name = "torch.linalg.ldl_factor_ex"
    _check_square(a, name)
    _check_float(a, name)
    _host_ldl(name, a)
    batch, n = a.shape[:-2], a.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    flat = np.asarray(a).reshape((nb, n, n))
    lds, pivs, infos = [], [], []
    for m_ in flat:
        ld, piv, info = _sytf2_lower(m_)
        lds.append(ld)
        pivs.append(piv)
        infos.append(info)
    ld = np.stack(lds) if lds else np.zeros((0, n, n), flat.dtype)
    piv = np.stack(pivs) if pivs else np.zeros((0, n), np.int32)
    info = np.asarray(infos, np.int32)
    if check_errors and info.size and int(info.max()) > 0:
        raise RuntimeError(
            f"{name}: The factorization could not be completed because the input is not invertible "
            f"(info = {int(info.max())})."
        )
    return (
        jnp.asarray(ld.reshape(a.shape)),
        jnp.asarray(piv.reshape((*batch, n))),
        jnp.asarray(info.reshape(batch)),
    )


def _sytrs_lower(ld: Any, ipiv: Any, b: Any) -> Any:
    """LAPACK dsytrs (uplo='L'): solve A X = B from sytrf's compact LD and pivots, for one matrix."""

    b = np.array(b, copy=True)
    n = ld.shape[0]
    dt = b.dtype.type
    k = 0
    while k < n:  # L D X = B
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            if k < n - 1:
                b[k + 1 :] -= np.outer(ld[k + 1 :, k], b[k])
            b[k] /= ld[k, k]
            k += 1
        else:
            kp = -ipiv[k] - 1
            if kp != k + 1:
                b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2 :] -= np.outer(ld[k + 2 :, k], b[k])
                b[k + 2 :] -= np.outer(ld[k + 2 :, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1 = ld[k, k] / akm1k
            ak = ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - dt(1)
            bkm1 = b[k] / akm1k
            bk = b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T X = B
        if ipiv[k] > 0:
            if k < n - 1:
                b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            kp = ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
                b[k - 1] -= ld[k + 1 :, k - 1] @ b[k + 1 :]
            kp = -ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


@lower(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(ld: Any, pivots: Any, b: Any, *, hermitian: bool = False) -> Any:
    name = "torch.linalg.ldl_solve"
    _check_square(ld, name)
    _check_float(ld, name)
    if b.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    if pivots.ndim != ld.ndim - 1 or pivots.shape[-1] != ld.shape[-1]:
        raise RuntimeError(
            f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with "
            f"shape {list(pivots.shape)} instead"
        )
    if not jnp.issubdtype(pivots.dtype, jnp.integer) or pivots.dtype != jnp.int32:
        raise RuntimeError(f"{name}: Expected pivots to be integers. Got {pivots.dtype}")
    if ld.dtype != b.dtype:
        raise RuntimeError(f"{name}: LD dtype {ld.dtype} does not match b dtype {b.dtype}")
    n = ld.shape[-1]
    if b.shape[-2] != n:
        raise RuntimeError(
            f"{name}: Incompatible shapes of A and B for the equation AX = B ({n}x{n} and "
            f"{b.shape[-2]}x{b.shape[-1]})"
        )
    _host_ldl(name, ld, pivots, b)
    batch = jnp.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    nb = int(np.prod(batch, dtype=np.int64))
    ld_ = np.broadcast_to(np.asarray(ld), (*batch, n, n)).reshape((nb, n, n))
    piv_ = np.broadcast_to(np.asarray(pivots), (*batch, n)).reshape((nb, n))
    b_ = np.broadcast_to(np.asarray(b), (*batch, *b.shape[-2:])).reshape((nb, *b.shape[-2:]))
    out = [_sytrs_lower(ld_[i], piv_[i], b_[i]) for i in range(b_.shape[0])]
    x = np.stack(out) if out else np.zeros(b_.shape, b_.dtype)
    return jnp.asarray(x.reshape((*batch, *b.shape[-2:])))
