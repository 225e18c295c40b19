"""Complex arithmetic with the CPU's values at inf/NaN/signed-zero inputs.

XLA's complex exp/div/pow/abs give NaN (or a finite value) where PyTorch's CPU kernels give a C99 Annex G value
(glibc ``cexpf``/``clogf``/``cpowf``, gcc's ``__mulsc3``) or c10's own formula (``c10::complex`` division is
numpy's Smith algorithm; multiplication is the naive formula). Each function here writes that formula out on
(real, imaginary) parts, so the device returns what the CPU returns. Ordinary values take the same arithmetic
as before (to within the dtype's rounding).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp


def parts(z: Any) -> tuple[Any, Any]:
    return jnp.real(z), jnp.imag(z)


def make(re: Any, im: Any, dtype: Any) -> Any:
    """The complex array of dtype ``dtype`` with these parts."""
    re, im = jnp.broadcast_arrays(re, im)
    return jax.lax.complex(re, im).astype(dtype)


def _copysign0(x: Any, like: Any) -> Any:
    return jnp.copysign(jnp.zeros_like(x), like)


def mul_naive(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """c10::complex operator*: (ac - bd) + (ad + bc)i, no recovery of NaN parts."""
    return a * c - b * d, a * d + b * c


def mul_annex_g(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """gcc's __mulsc3 (C99 Annex G): the naive product, with an infinite operand recovered from NaN parts."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    x, y = ac - bd, ad + bc
    both_nan = jnp.isnan(x) & jnp.isnan(y)
    inf_ab = jnp.isinf(a) | jnp.isinf(b)
    inf_cd = jnp.isinf(c) | jnp.isinf(d)
    one = jnp.ones_like(a)

    def box(u: Any, isinf_u: Any) -> Any:
        return jnp.copysign(jnp.where(isinf_u, one, jnp.zeros_like(u)), u)

    def nan0(u: Any) -> Any:
        return jnp.where(jnp.isnan(u), _copysign0(u, u), u)

    a1 = jnp.where(inf_ab, box(a, jnp.isinf(a)), a)
    b1 = jnp.where(inf_ab, box(b, jnp.isinf(b)), b)
    c1 = jnp.where(inf_ab, nan0(c), c)
    d1 = jnp.where(inf_ab, nan0(d), d)
    c2 = jnp.where(inf_cd, box(c1, jnp.isinf(c1)), c1)
    d2 = jnp.where(inf_cd, box(d1, jnp.isinf(d1)), d1)
    a2 = jnp.where(inf_cd, nan0(a1), a1)
    b2 = jnp.where(inf_cd, nan0(b1), b1)
    overflow = ~inf_ab & ~inf_cd & (jnp.isinf(ac) | jnp.isinf(bd) | jnp.isinf(ad) | jnp.isinf(bc))
    a3, b3 = jnp.where(overflow, nan0(a2), a2), jnp.where(overflow, nan0(b2), b2)
    c3, d3 = jnp.where(overflow, nan0(c2), c2), jnp.where(overflow, nan0(d2), d2)
    recalc = both_nan & (inf_ab | inf_cd | overflow)
    inf = jnp.asarray(math.inf, a.dtype)
    x = jnp.where(recalc, inf * (a3 * c3 - b3 * d3), x)
    y = jnp.where(recalc, inf * (a3 * d3 + b3 * c3), y)
    return x, y


def div(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """c10::complex operator/ (numpy's Smith division; 0/0 divides part by part)."""
    abs_c, abs_d = jnp.abs(c), jnp.abs(d)
    c_big = abs_c >= abs_d
    zero = (abs_c == 0) & (abs_d == 0)
    safe_c = jnp.where(c_big, c, jnp.ones_like(c))
    safe_d = jnp.where(c_big, jnp.ones_like(d), d)
    rat1 = d / safe_c
    scl1 = 1 / (c + d * rat1)
    re1, im1 = (a + b * rat1) * scl1, (b - a * rat1) * scl1
    rat2 = c / safe_d
    scl2 = 1 / (d + c * rat2)
    re2, im2 = (a * rat2 + b) * scl2, (b * rat2 - a) * scl2
    re = jnp.where(zero, a / abs_c, jnp.where(c_big, re1, re2))
    im = jnp.where(zero, b / abs_d, jnp.where(c_big, im1, im2))
    return re, im


def exp(x: Any, y: Any) -> tuple[Any, Any]:
    """glibc cexp: exp(x)(cos y + i sin y) for finite parts, Annex G's values at inf/NaN parts."""
    fin_x, fin_y = jnp.isfinite(x), jnp.isfinite(y)
    y_zero = y == 0
    ex = jnp.exp(jnp.where(fin_x, x, jnp.zeros_like(x)))
    ys = jnp.where(fin_y, y, jnp.zeros_like(y))
    cos, sin = jnp.where(y_zero, jnp.ones_like(y), jnp.cos(ys)), jnp.where(y_zero, y, jnp.sin(ys))
    nan = jnp.full_like(x, math.nan)
    inf = jnp.full_like(x, math.inf)
    # finite real part
    re_f = jnp.where(fin_y, ex * cos, nan)
    im_f = jnp.where(fin_y, ex * sin, nan)
    # infinite real part
    pos = x > 0
    value = jnp.where(pos, inf, jnp.zeros_like(x))
    re_i = jnp.where(fin_y, jnp.where(y_zero, value, jnp.copysign(value, cos)), jnp.where(pos, inf, 0))
    im_i = jnp.where(
        fin_y,
        jnp.where(y_zero, y, jnp.copysign(value, sin)),
        jnp.where(pos, nan, _copysign0(y, y)),
    )
    # NaN real part
    re_n = nan
    im_n = jnp.where(y_zero, y, nan)
    is_inf = jnp.isinf(x)
    re = jnp.where(fin_x, re_f, jnp.where(is_inf, re_i, re_n))
    im = jnp.where(fin_x, im_f, jnp.where(is_inf, im_i, im_n))
    return re, im


def abs_(x: Any, y: Any) -> Any:
    """C hypot: infinite when either part is infinite, even if the other is NaN."""
    return jnp.where(jnp.isinf(x) | jnp.isinf(y), jnp.full_like(x, math.inf), jnp.hypot(x, y))


def log(x: Any, y: Any) -> tuple[Any, Any]:
    """glibc clog: log|z| + i atan2(y, x); a NaN part gives a NaN angle (and an infinite modulus if the other
    part is infinite)."""
    any_nan = jnp.isnan(x) | jnp.isnan(y)
    re = jnp.log(abs_(x, y))
    im = jnp.where(any_nan, jnp.full_like(x, math.nan), jnp.arctan2(y, x))
    return re, im


def pow_(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """glibc cpow: cexp(w * clog(z)), the product with gcc's Annex G recovery."""
    lr, li = log(a, b)
    return exp(*mul_annex_g(c, d, lr, li))


def sqrt(x: Any, y: Any) -> tuple[Any, Any]:
    """glibc csqrt: the principal root, the sign of a zero imaginary part choosing the side of the cut."""
    nan, inf = jnp.full_like(x, math.nan), jnp.full_like(x, math.inf)
    zero = jnp.zeros_like(x)
    # both parts finite
    d = jnp.hypot(x, y)
    pos = x > 0
    r_pos = jnp.sqrt(0.5 * (d + x))
    s_pos = 0.5 * (y / jnp.where(r_pos == 0, 1, r_pos))
    s_neg = jnp.sqrt(0.5 * (d - x))
    r_neg = jnp.abs(0.5 * (y / jnp.where(s_neg == 0, 1, s_neg)))
    r_gen, s_gen = jnp.where(pos, r_pos, r_neg), jnp.where(pos, s_pos, s_neg)
    r0 = jnp.sqrt(0.5 * jnp.abs(y))  # real part zero
    re_f = jnp.where(
        y == 0, jnp.where(x < 0, zero, jnp.abs(jnp.sqrt(jnp.abs(x)))), jnp.where(x == 0, r0, r_gen)
    )
    im_mag = jnp.where(y == 0, jnp.where(x < 0, jnp.sqrt(jnp.abs(x)), zero), jnp.where(x == 0, r0, s_gen))
    im_f = jnp.copysign(im_mag, y)
    # an infinite or NaN part
    y_inf, x_inf, y_nan = jnp.isinf(y), jnp.isinf(x), jnp.isnan(y)
    re_s = jnp.where(y_inf, inf, jnp.where(x_inf, jnp.where(x < 0, jnp.where(y_nan, nan, zero), x), nan))
    im_s = jnp.where(
        y_inf,
        y,
        jnp.where(
            x_inf, jnp.where(x < 0, jnp.copysign(inf, y), jnp.where(y_nan, nan, jnp.copysign(zero, y))), nan
        ),
    )
    special = ~(jnp.isfinite(x) & jnp.isfinite(y))
    return jnp.where(special, re_s, re_f), jnp.where(special, im_s, im_f)
