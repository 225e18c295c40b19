"""Special functions (polygamma, zeta, Bessel, Airy, orthogonal polynomials) lowered to JAX.

Torch's CPU kernels (ATen/native/Math.h) define the edge semantics matched here: poles, signed zeros, NaN/inf
inputs, n < 0 or non-integer n for the polynomials. The transcendental functions (zeta, Bessel, Airy) are
evaluated in float64 and rounded to the result dtype, as torch's zeta does for float inputs; the polynomials
run in the result dtype with torch's own recurrences so their rounding follows torch's.

Algorithms (own implementations of textbook methods):
- Hurwitz zeta: direct summation then Euler-Maclaurin, with torch's (Cephes') domain rules and cut-offs.
- J0/J1: trapezoidal rule on Bessel's periodic integral (spectrally accurate) for |x| <= 25; Y0/Y1 from
  Neumann's series in J_{2k} evaluated by the same rule; Hankel's asymptotic expansion beyond 25.
- K0/K1: power series for x <= 2; trapezoidal rule on K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt above.
- Airy Ai: Maclaurin series on [-8, 1], K_{1/3} integral above 1, asymptotic expansion below -8.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from tpu_workbench.backend.ops._util import aten, float_of, jdt, result_dtype
from tpu_workbench.backend.ops.registry import lower

prims = torch.ops.prims  # torch's refs decompose some special ops into these: lowered too
F64 = jnp.float64
EULER = 0.57721566490153286061
_INT64_MIN = -(2**63)


def _as_f64(x: Any) -> tuple[Any, Any]:
    """(x as float64, dtype of the result): int inputs give the default float dtype."""
    xf = float_of(x)
    return xf.astype(F64), xf.dtype


def _where(c: Any, a: Any, b: Any) -> Any:
    return jnp.where(c, a, b)


# ----------------------------------------------------------------------------- zeta / polygamma / digamma
_EM_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)  # (2k)!/B_2k, Euler-Maclaurin denominators
_MACHEP = 1.11022302462515654042e-16


def _zeta64(x: Any, q: Any, wdt: Any = F64) -> Any:
    """Hurwitz zeta(x, q) in float64 (or ``wdt``: torch's acc type, float32 for bfloat16/float16) with torch's
    rules: x == 1 -> inf, x < 1 -> nan, q a non-positive integer -> inf, q < 0 with non-integer x -> nan; q < 0
    otherwise sums the shifted terms directly."""
    x, q = jnp.broadcast_arrays(x.astype(wdt), q.astype(wdt))
    pole = (x == 1) | ((x > 1) & (q <= 0) & (q == jnp.floor(q)))
    bad = (x < 1) | ((x > 1) & (q <= 0) & (q != jnp.floor(q)) & (x != jnp.floor(x)))
    special = pole | bad
    xs = _where(special, 2.0, x)
    qs = _where(special, 1.0, q)

    # direct sum until at least 9 terms are added and a > 9, or the terms stop mattering
    def cond(st: Any) -> Any:
        i, a, _b, _s, done = st
        return jnp.any(~done & ((i < 9) | (a <= 9.0)))

    def body(st: Any) -> Any:
        i, a, b, s, done = st
        act = ~done & ((i < 9) | (a <= 9.0))
        a2 = a + 1.0
        b2 = jnp.power(a2, -xs)
        s2 = s + b2
        conv = act & (-_MACHEP * s2 < b2) & (b2 < _MACHEP * s2)
        return (
            _where(act, i + 1, i),
            _where(act, a2, a),
            _where(act, b2, b),
            _where(act, s2, s),
            done | conv,
        )

    s0 = jnp.power(qs, -xs)
    st = (jnp.zeros(xs.shape, jnp.int32), qs, jnp.zeros_like(xs), s0, jnp.zeros(xs.shape, bool))
    _, a, b, s, done = jax.lax.while_loop(cond, body, st)

    # Euler-Maclaurin tail from w = a
    w = a
    s = _where(done, s, s + b * w / (xs - 1.0) - 0.5 * b)
    fac = jnp.ones_like(xs)
    k = 0.0
    for ak in _EM_A:
        fac = fac * (xs + k)
        b = b / w
        t = fac * b / ak
        s_new = s + t
        s = _where(done, s, s_new)
        done = done | (jnp.abs(t / s_new) < _MACHEP)
        k += 1.0
        fac = fac * (xs + k)
        b = b / w
        k += 1.0
    return _where(pole, jnp.inf, _where(bad, jnp.nan, s))


def _low(x: Any) -> bool:
    return x.dtype in (jnp.bfloat16, jnp.float16)


def _digamma(x: Any) -> Any:
    """digamma with torch's edges: +-0 -> -+inf, negative integers and -inf -> nan. bfloat16/float16 run in
    float32 (torch's calc_digamma(float)) and round once."""
    x = float_of(x)
    if _low(x):
        return _digamma(x.astype(jnp.float32)).astype(x.dtype)
    neg = x < 0
    neg_int = neg & (x == jnp.trunc(x))
    # reflection with the fractional part, like torch: tan(pi * frac(x)) keeps full accuracy near the poles
    frac = (x - jnp.trunc(x)).astype(F64)
    cot = (math.pi / jnp.tan(math.pi * _where(neg & ~neg_int, frac, 0.5))).astype(x.dtype)
    r = _where(neg, jax.scipy.special.digamma(1 - x) - cot, jax.scipy.special.digamma(x))
    r = _where(neg_int, jnp.nan, r)
    return _where(x == 0, jnp.where(jnp.signbit(x), jnp.inf, -jnp.inf).astype(x.dtype), r)


def _trigamma(x: Any) -> Any:
    """torch's calc_trigamma in the input dtype (float32 for bfloat16/float16, rounded once): reflection below
    0.5, six shifts, asymptotic series."""
    if _low(x):
        return _trigamma(x.astype(jnp.float32)).astype(x.dtype)
    pi = jnp.asarray(math.pi, x.dtype)
    refl = x < 0.5
    sin_pi_x = jnp.sin(pi * x)
    result = _where(refl, -(pi * pi) / (sin_pi_x * sin_pi_x), jnp.zeros_like(x))
    sign = _where(refl, -1.0, 1.0).astype(x.dtype)
    y = _where(refl, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (y * y)
        y = y + 1
    ixx = 1 / (y * y)
    result = result + (1 + 1 / (2 * y) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / y
    return sign * result


@lower(aten.polygamma.default, aten.special_polygamma.default, jit=True)
def polygamma(n: int, x: Any) -> Any:
    """n == 0: digamma; n == 1: trigamma; else (-1)^(n+1) n! zeta(n+1, x), zeta in float64 like torch."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = float_of(x)
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(x)
    if _low(x):
        # torch: zeta<scalar_t> accumulates in float32 and returns scalar_t; the float32 factor
        # exp(lgamma(n + 1)) times that rounded zeta is computed in float32 and rounded again
        z = (
            _zeta64(jnp.asarray(float(n + 1), jnp.float32), x, jnp.float32)
            .astype(x.dtype)
            .astype(jnp.float32)
        )
        return (jnp.asarray(_fact32(n), jnp.float32) * z).astype(x.dtype)
    z = _zeta64(jnp.asarray(float(n + 1), F64), x).astype(x.dtype)
    return jnp.asarray((1.0 if n % 2 else -1.0) * math.factorial(n), x.dtype) * z


def _fact32(n: int) -> float:
    """(-1)^(n+1) exp(lgamma(n + 1)) in float32, as torch's calc_polygamma computes it (torch's own libm)."""
    return (1.0 if n % 2 else -1.0) * float(torch.tensor(float(n + 1), dtype=torch.float32).lgamma().exp())


lower(aten.digamma.default, prims.digamma.default, jit=True)(_digamma)


@lower(
    aten.special_zeta.default,
    aten.special_zeta.self_scalar,
    aten.special_zeta.other_scalar,
    prims.zeta.default,
    jit=True,
)
def special_zeta(x: Any, q: Any) -> Any:
    dt = result_dtype(x, q)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = jdt(None)
    return _zeta64(jnp.asarray(x, F64), jnp.asarray(q, F64)).astype(dt)


# ----------------------------------------------------------------------------- Bessel J and Y
_JM = 128  # trapezoid nodes over one period; exact to float64 for |x| <= 25
_JK = 32  # Neumann series terms: J_64(25) ~ 1e-18
_JY_SWITCH = 25.0


def _neumann_weights() -> tuple[np.ndarray, ...]:
    """Node weights so that sum_j w(theta_j) * {cos, sin}(x sin theta_j) / M gives the needed J sums.

    J_m(x) = (1/M) sum_j cos(m theta_j - x sin theta_j) = (1/M) sum_j [cos(m t) cos(x sin t) + sin(m t) sin(x sin t)]
    """
    th = 2 * np.pi * np.arange(_JM) / _JM
    k = np.arange(1, _JK + 1)[:, None]
    sgn = (-1.0) ** k / k
    # Y0: sum_k (-1)^k J_{2k} / k
    y0c = (sgn * np.cos(2 * k * th)).sum(0)
    y0s = (sgn * np.sin(2 * k * th)).sum(0)
    # Y1 part: sum_k (-1)^k (J_{2k-1} - J_{2k+1}) / k
    y1c = (sgn * (np.cos((2 * k - 1) * th) - np.cos((2 * k + 1) * th))).sum(0)
    y1s = (sgn * (np.sin((2 * k - 1) * th) - np.sin((2 * k + 1) * th))).sum(0)
    return np.sin(th), np.cos(th), y0c, y0s, y1c, y1s


_NW = _neumann_weights()


def _jy_small(x: Any) -> tuple[Any, Any, Any, Any]:
    """J0, J1, Y0, Y1 for 0 < x <= 25 (x float64; Y is garbage for x <= 0, masked by the callers)."""
    sin_t, cos_t, y0c, y0s, y1c, y1s = (jnp.asarray(w, F64) for w in _NW)

    def step(acc: Any, node: Any) -> Any:
        st, ct, wc0, ws0, wc1, ws1 = node
        c, s = jnp.cos(x * st), jnp.sin(x * st)
        j0, j1, n0, n1 = acc
        return (j0 + c, j1 + ct * c + st * s, n0 + wc0 * c + ws0 * s, n1 + wc1 * c + ws1 * s), None

    z = jnp.zeros_like(x)
    (j0, j1, n0, n1), _ = jax.lax.scan(step, (z, z, z, z), (sin_t, cos_t, y0c, y0s, y1c, y1s))
    j0, j1, n0, n1 = (v / _JM for v in (j0, j1, n0, n1))
    lg = jnp.log(jnp.where(x > 0, x, 1.0) / 2) + EULER
    y0 = (2 / math.pi) * lg * j0 - (4 / math.pi) * n0
    y1 = -(2 / math.pi) * j0 / x + (2 / math.pi) * lg * j1 + (2 / math.pi) * n1
    return j0, j1, y0, y1


def _hankel(nu: float, x: Any) -> tuple[Any, Any]:
    """(J_nu, Y_nu) for x >= 25 from Hankel's expansion (truncation error < 1e-16 there)."""
    mu = 4.0 * nu * nu
    p = jnp.ones_like(x)
    q = jnp.zeros_like(x)
    term = jnp.ones_like(x)
    for k in range(1, 24):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        if k % 4 == 1:
            q = q + term
        elif k % 4 == 2:
            p = p - term
        elif k % 4 == 3:
            q = q - term
        else:
            p = p + term
    chi = x - (0.5 * nu + 0.25) * math.pi
    amp = jnp.sqrt(2 / (math.pi * x))
    c, s = jnp.cos(chi), jnp.sin(chi)
    return amp * (p * c - q * s), amp * (p * s + q * c)


def _jy(x: Any) -> tuple[Any, Any, Any, Any]:
    """J0(|x|), J1(|x|), Y0(|x|), Y1(|x|) in float64."""
    ax = jnp.abs(x)
    big = ax > _JY_SWITCH
    small_x = _where(big, 1.0, ax)
    big_x = _where(big, ax, 2 * _JY_SWITCH)
    j0s, j1s, y0s, y1s = _jy_small(small_x)
    j0b, y0b = _hankel(0.0, big_x)
    j1b, y1b = _hankel(1.0, big_x)
    return _where(big, j0b, j0s), _where(big, j1b, j1s), _where(big, y0b, y0s), _where(big, y1b, y1s)


def _bessel_j0(x: Any) -> Any:
    x, dt = _as_f64(x)
    return _where(jnp.isinf(x), jnp.nan, _jy(x)[0]).astype(dt)


def _bessel_j1(x: Any) -> Any:
    x, dt = _as_f64(x)
    j1 = _jy(x)[1]
    return _where(jnp.isinf(x), jnp.nan, _where(x < 0, -j1, j1)).astype(dt)


def _bessel_y(idx: int) -> Any:
    def fn(x: Any) -> Any:
        x, dt = _as_f64(x)
        y = _jy(x)[idx]
        y = _where(x == 0, -jnp.inf, _where((x < 0) | jnp.isinf(x), jnp.nan, y))
        return y.astype(dt)

    return fn


# ----------------------------------------------------------------------------- modified Bessel K
_KN = 48


def _k_integral(nu: float, x: Any) -> Any:
    """exp(x) K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt by the trapezoidal rule (x >= ~1).

    The integrand is analytic in a strip, so the rule converges exponentially; the step shrinks like
    1/sqrt(x) so the Gaussian-like peak at large x stays resolved.
    """
    h = jnp.minimum(0.25, 0.6 / jnp.sqrt(x))

    def step(acc: Any, k: Any) -> Any:
        t = k * h
        w = jnp.where(k == 0, 0.5, 1.0)
        return acc + w * jnp.exp(-x * (jnp.cosh(t) - 1.0)) * jnp.cosh(nu * t), None

    acc, _ = jax.lax.scan(step, jnp.zeros_like(x), jnp.arange(_KN, dtype=F64))
    return h * acc


def _k_series(x: Any) -> tuple[Any, Any]:
    """K0, K1 for 0 < x <= 2 from their power series (A&S 9.6.11/9.6.13)."""
    y = x * x / 4
    lg = jnp.log(x / 2)
    i0 = jnp.zeros_like(x)
    i1 = jnp.zeros_like(x)
    s0 = jnp.zeros_like(x)
    s1 = jnp.zeros_like(x)
    term0 = jnp.ones_like(x)  # y^k / (k!)^2
    term1 = jnp.ones_like(x)  # y^k / (k! (k+1)!)
    harm = 0.0
    for k in range(30):
        if k > 0:
            term0 = term0 * y / (k * k)
            term1 = term1 * y / (k * (k + 1))
            harm += 1.0 / k
        i0 = i0 + term0
        i1 = i1 + term1
        s0 = s0 + harm * term0
        s1 = s1 + (2 * (harm - EULER) + 1.0 / (k + 1)) * term1  # psi(k+1) + psi(k+2)
    k0 = -(lg + EULER) * i0 + s0
    k1 = 1 / x + lg * (x / 2) * i1 - (x / 4) * s1
    return k0, k1


def _bessel_k(nu: int, scaled: bool) -> Any:
    def fn(x: Any) -> Any:
        x, dt = _as_f64(x)
        small = x <= 2
        xs = _where(small & (x > 0), x, 1.0)
        xb = _where(small | jnp.isnan(x), 4.0, x)
        ser = _k_series(xs)[nu]
        if scaled:
            ser = ser * jnp.exp(xs)
            big = _k_integral(float(nu), xb)
        else:
            big = jnp.exp(-xb) * _k_integral(float(nu), xb)
        r = _where(small, ser, big)
        r = _where(jnp.isposinf(x), 0.0, r)
        r = _where(x == 0, jnp.inf, _where((x < 0) | jnp.isnan(x), jnp.nan, r))
        return r.astype(dt)

    return fn


# ----------------------------------------------------------------------------- Airy Ai
_AI0 = 0.355028053887817239260  # Ai(0)
_AIP0 = 0.258819403792806798405  # -Ai'(0)
_AI_NEG = -8.0
_AI_SERIES_TERMS = 60


def _airy_series(x: Any) -> Any:
    """Maclaurin series Ai(x) = Ai(0) f(x) + Ai'(0) g(x) (A&S 10.4.2), fine on [-8, 1] in float64."""
    t = x * x * x
    f = jnp.ones_like(x)
    g = jnp.ones_like(x)
    tf = jnp.ones_like(x)
    tg = jnp.ones_like(x)
    for k in range(1, _AI_SERIES_TERMS):
        tf = tf * t / ((3 * k - 1) * (3 * k))
        tg = tg * t / ((3 * k) * (3 * k + 1))
        f = f + tf
        g = g + tg
    return _AI0 * f - _AIP0 * x * g


def _airy_neg_asym(x: Any) -> Any:
    """Ai(-z), z = -x >= 8: A&S 10.4.60 with u_k = Gamma(3k+1/2) / (54^k k! Gamma(k+1/2))."""
    z = -x
    zeta = (2.0 / 3.0) * z * jnp.sqrt(z)
    p = jnp.zeros_like(x)
    q = jnp.zeros_like(x)
    for k in range(24):
        uk = math.exp(
            math.lgamma(3 * k + 0.5) - k * math.log(54.0) - math.lgamma(k + 1) - math.lgamma(k + 0.5)
        )
        term = uk / zeta**k
        sign = -1.0 if (k // 2) % 2 else 1.0
        if k % 2 == 0:
            p = p + sign * term
        else:
            q = q + sign * term
    ph = zeta + math.pi / 4
    return (jnp.sin(ph) * p - jnp.cos(ph) * q) / (math.sqrt(math.pi) * jnp.sqrt(jnp.sqrt(z)))


def _airy_ai(x: Any) -> Any:
    x, dt = _as_f64(x)
    pos = x > 1
    neg = x < _AI_NEG
    mid_x = _where(pos | neg, 0.0, x)
    pos_x = _where(pos & jnp.isfinite(x), x, 2.0)
    neg_x = _where(neg & jnp.isfinite(x), x, 2 * _AI_NEG)
    zeta = (2.0 / 3.0) * pos_x * jnp.sqrt(pos_x)
    ai_pos = jnp.sqrt(pos_x / 3) / math.pi * jnp.exp(-zeta) * _k_integral(1.0 / 3.0, zeta)
    r = _where(pos, ai_pos, _where(neg, _airy_neg_asym(neg_x), _airy_series(mid_x)))
    r = _where(x > 103.892, 0.0, r)
    return _where(jnp.isinf(x) | jnp.isnan(x), jnp.nan, r).astype(dt)


for _op, _fn in [
    (aten.special_bessel_j0.default, _bessel_j0), (aten.special_bessel_j1.default, _bessel_j1),
    (prims.bessel_j0.default, _bessel_j0), (prims.bessel_j1.default, _bessel_j1),
    (aten.special_bessel_y0.default, _bessel_y(2)), (aten.special_bessel_y1.default, _bessel_y(3)),
    (aten.special_modified_bessel_k0.default, _bessel_k(0, False)),
    (aten.special_modified_bessel_k1.default, _bessel_k(1, False)),
    (aten.special_scaled_modified_bessel_k0.default, _bessel_k(0, True)),
    (aten.special_scaled_modified_bessel_k1.default, _bessel_k(1, True)),
    (aten.special_airy_ai.default, _airy_ai),
]:  # fmt: skip
    lower(_op, jit=True)(_fn)


# ----------------------------------------------------------------------------- orthogonal polynomials
def _n_to_int(n: Any, nan_inf_to_minus_one: bool) -> Any:
    """torch's static_cast<int64_t>(n): truncation; NaN and out-of-range give INT64_MIN on x86 (hermite_h
    maps NaN/inf to -1 first). Either way such n count as negative, so the result is 0."""
    bad = jnp.isnan(n) | (n >= 2.0**63) | (n < -(2.0**63))
    fill = -1 if nan_inf_to_minus_one else _INT64_MIN
    return _where(bad, jnp.int64(fill), jnp.trunc(_where(bad, 0, n)).astype(jnp.int64))


def _select(cases: list[tuple[Any, Any]], shape: tuple[int, ...], dt: Any) -> tuple[Any, Any]:
    """First matching (condition, value) wins, like a chain of early returns."""
    val = jnp.zeros(shape, dt)
    decided = jnp.zeros(shape, bool)
    for cond, v in reversed(cases):
        val = _where(cond, jnp.asarray(v).astype(dt), val)
        decided = decided | cond
    return val, decided


def _poly(x: Any, n: Any, cases: Any, q0: Any, step: Any, nan_inf_to_minus_one: bool = False) -> Any:
    """Shared driver: torch's early returns (``cases``), then the three-term recurrence for j = 2..n.

    The recurrence runs as one ``while_loop`` up to the largest n still needing it; an element stops when
    j > n or its value went NaN (torch's loop condition).
    """
    dt = result_dtype(x, n)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = jdt(None)
    x = jnp.asarray(x).astype(dt)
    nf = jnp.asarray(n).astype(dt)
    x, nf = jnp.broadcast_arrays(x, nf)
    ni = _n_to_int(nf, nan_inf_to_minus_one)
    val, decided = _select(cases(x, ni, dt), x.shape, dt)
    q = jnp.broadcast_to(q0(x), x.shape).astype(dt)
    p = jnp.ones_like(x)

    def active(j: Any, q: Any) -> Any:
        return ~decided & (j <= ni) & ~jnp.isnan(q)

    def cond(st: Any) -> Any:
        j, _p, q, _r = st
        return jnp.any(active(j, q))

    def body(st: Any) -> Any:
        j, p, q, r = st
        act = active(j, q)
        rn = step(j, x, p, q, dt)
        return j + 1, _where(act, q, p), _where(act, rn, q), _where(act, rn, r)

    _, _, _, r = jax.lax.while_loop(cond, body, (jnp.int64(2), p, q, q))
    return _where(decided, val, r)


def _even(ni: Any) -> Any:
    return ni % 2 == 0


def _i(v: Any, dt: Any) -> Any:
    """An int64 expression converted to the compute dtype (torch's implicit int64 -> T)."""
    return v.astype(dt)


def _cheb_cases(kind: str) -> Any:
    def cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
        one = jnp.ones_like(x)
        ax = jnp.abs(x)
        a = jnp.arccos(_where(ax < 1, x, 0))
        n1, n21 = _i(n + 1, dt), _i(n + n + 1, dt)
        nh = _i(n, dt) + jnp.asarray(0.5, dt)
        out: list[tuple[Any, Any]] = [(n < 0, 0 * one)]
        if kind == "t":
            out += [
                (ax == 1, _where((x > 0) | _even(n), one, -one)),
                ((n > 6) & (ax < 1), jnp.cos(_i(n, dt) * a)),
                (n == 0, one),
                (n == 1, x),
            ]
        elif kind == "u":
            sa = jnp.sin(a)
            out += [
                (ax == 1, _where((x > 0) | _even(n), n1, -n1)),
                ((n > 8) & (ax < 1), _where(sa != 0, jnp.sin(n1 * a) / sa, n1 * jnp.cos(n1 * a) / x)),
                (n == 0, one),
                (n == 1, x + x),
            ]
        elif kind == "v":
            pm = _where(_even(n), n21, -n21)
            out += [
                (ax == 1, _where(x > 0, one, pm)),
                ((n > 8) & (ax < 1), _where(jnp.sin(a / 2) != 1, jnp.cos(nh * a) / jnp.cos(a / 2), pm)),
                (n == 0, one),
                (n == 1, x + x - 1),
            ]
        else:
            edge = _where(x > 0, n21, _where(_even(n), one, -one))
            out += [
                (ax == 1, edge),
                ((n > 8) & (ax < 1), _where(jnp.cos(a / 2) != 1, jnp.sin(nh * a) / jnp.sin(a / 2), edge)),
                (n == 0, one),
                (n == 1, x + x + 1),
            ]
        return out

    return cases


def _shifted_cases(kind: str) -> Any:
    def cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
        one = jnp.ones_like(x)
        y = x + x - 1
        inside = jnp.abs(y) < 1
        a = jnp.arccos(_where(inside, y, 0))
        n1, n21 = _i(n + 1, dt), _i(n + n + 1, dt)
        nh = _i(n, dt) + jnp.asarray(0.5, dt)
        sgn = _where(_even(n), one, -one)
        out: list[tuple[Any, Any]] = [(n < 0, 0 * one)]
        if kind == "t":
            out += [
                (x == 1, one),
                (x == 0, sgn),
                ((n > 6) & inside, jnp.cos(_i(n, dt) * a)),
                (n == 0, one),
                (n == 1, y),
            ]
        elif kind == "u":
            sa = jnp.sin(a)
            out += [
                (x == 1, n1),
                (x == 0, sgn * n1),
                ((n > 6) & inside, _where(sa != 0, jnp.sin(n1 * a) / sa, n1 * jnp.cos(n1 * a) / y)),
                (n == 0, one),
                (n == 1, y + y),
            ]
        elif kind == "v":
            out += [
                (x == 1, one),
                (x == 0, sgn * n21),
                ((n > 6) & inside, _where(jnp.sin(a / 2) != 1, jnp.cos(nh * a) / jnp.cos(a / 2), sgn * n21)),
                (n == 0, one),
                (n == 1, y + y - 1),
            ]
        else:
            out += [
                (x == 1, n21),
                (x == 0, sgn),
                ((n > 4) & inside, _where(jnp.cos(a / 2) != 1, jnp.sin(nh * a) / jnp.sin(a / 2), sgn)),
                (n == 0, one),
                (n == 1, y + y + 1),
            ]
        return out

    return cases


def _cheb_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    return (x + x) * q - p


def _shifted_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    return (x + x - 1 + (x + x - 1)) * q - p


_CHEB_Q0 = {"t": lambda x: x, "u": lambda x: x + x, "v": lambda x: x + x - 1, "w": lambda x: x + x + 1}
_SHIFTED_Q0 = {
    "t": lambda x: x + x - 1,
    "u": lambda x: x + x - 1 + (x + x - 1),
    "v": lambda x: x + x - 1 + (x + x - 1) - 1,
    "w": lambda x: x + x - 1 + (x + x - 1) + 1,
}


def _hermite_limit(dt: Any) -> int:
    return 128 if dt == jnp.float32 else 512 if dt == jnp.float64 else 1024


def _hermite_h_cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
    one = jnp.ones_like(x)
    return [(n < 0, 0 * one), (n == 0, one), (n == 1, x + x), (n > _hermite_limit(dt), jnp.nan * one)]


def _hermite_he_cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
    one = jnp.ones_like(x)
    return [(n < 0, 0 * one), (n == 0, one), (n == 1, x), (n > _hermite_limit(dt), jnp.nan * one)]


def _laguerre_cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
    one = jnp.ones_like(x)
    return [(n < 0, 0 * one), (jnp.abs(x) == 0, one), (n == 0, one), (n == 1, 1 - x)]


def _legendre_cases(x: Any, n: Any, dt: Any) -> list[tuple[Any, Any]]:
    one = jnp.ones_like(x)
    return [
        (n < 0, 0 * one),
        (jnp.abs(x) == 1, _where((x > 0) | _even(n), one, -one)),
        (n == 0, one),
        (n == 1, x),
    ]


def _hermite_h_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    return (x + x) * q - _i(2 * (j - 1), dt) * p


def _hermite_he_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    return x * q - _i(j - 1, dt) * p


def _laguerre_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    k = j - 1
    return ((_i(k + k, dt) + (1 - x)) * q - _i(k, dt) * p) / _i(k + 1, dt)


def _legendre_step(j: Any, x: Any, p: Any, q: Any, dt: Any) -> Any:
    k = j - 1
    return (_i(k + k + 1, dt) * x * q - _i(k, dt) * p) / _i(k + 1, dt)


def _register_poly(name: str, cases: Any, q0: Any, step: Any, nan_inf_to_minus_one: bool = False) -> None:
    packet = getattr(aten, f"special_{name}")

    def impl(x: Any, n: Any) -> Any:
        return _poly(x, n, cases, q0, step, nan_inf_to_minus_one)

    impl.__doc__ = f"torch.special.{name}(x, n): torch's early returns, then its recurrence."
    lower(packet.default, packet.x_scalar, packet.n_scalar, jit=True)(impl)


for _k in "tuvw":
    _register_poly(f"chebyshev_polynomial_{_k}", _cheb_cases(_k), _CHEB_Q0[_k], _cheb_step)
    _register_poly(f"shifted_chebyshev_polynomial_{_k}", _shifted_cases(_k), _SHIFTED_Q0[_k], _shifted_step)
_register_poly("hermite_polynomial_h", _hermite_h_cases, lambda x: x + x, _hermite_h_step, True)
_register_poly("hermite_polynomial_he", _hermite_he_cases, lambda x: x, _hermite_he_step)
_register_poly("laguerre_polynomial_l", _laguerre_cases, lambda x: 1 - x, _laguerre_step)
_register_poly("legendre_polynomial_p", _legendre_cases, lambda x: x, _legendre_step)
