"""Special functions on "tpu" vs torch's CPU kernels at their edges: poles, signed zeros, inf/NaN,
negative arguments, n < 0 / non-integer / NaN n for the polynomials, and the branch switch points."""

from __future__ import annotations

import math

import pytest
import torch

INF, NAN = math.inf, math.nan
EDGE = [0.0, -0.0, -1.0, -2.0, -2.5, -8.4784, 0.5, 1.0, 2.0, 1e-30, 5.0, 8.0, 24.9, 25.1, -7.99, -8.01, 30.0,
        -30.0, 104.0, INF, -INF, NAN]  # fmt: skip


def _close(cpu: torch.Tensor, tpu: torch.Tensor, dtype: torch.dtype) -> None:
    tol = {"rtol": 1.3e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-7, "atol": 1e-7}
    out = tpu.cpu()
    assert out.dtype == cpu.dtype
    torch.testing.assert_close(out, cpu, equal_nan=True, **tol)


@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0",
                                  "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                                  "airy_ai"])  # fmt: skip
def test_bessel_airy_edges(name: str) -> None:
    fn = getattr(torch.special, name)
    x = torch.tensor(EDGE, dtype=torch.float32)
    _close(fn(x), fn(x.to("tpu")), torch.float32)


def test_bessel_int_input() -> None:
    xi = torch.arange(-3, 4)  # int64 -> float32
    _close(torch.special.bessel_y0(xi), torch.special.bessel_y0(xi.to("tpu")), torch.float32)


def test_digamma_polygamma_edges() -> None:
    x = torch.tensor(EDGE + [-3.9999999999999996, 1e10], dtype=torch.float64)
    for dt, ns in ((torch.float32, range(1, 6)), (torch.float64, (1, 3))):
        xd = x.to(dt)
        _close(torch.digamma(xd), torch.digamma(xd.to("tpu")), dt)
        for n in ns:
            _close(torch.polygamma(n, xd), torch.polygamma(n, xd.to("tpu")), dt)
    with pytest.raises(RuntimeError, match="negative n"):
        torch.polygamma(-1, x.to("tpu"))


def test_polygamma_grad() -> None:
    x = torch.tensor([-2.5, 0.3, 4.0], requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    (g,) = torch.autograd.grad(torch.polygamma(2, x).sum(), x)
    (gt,) = torch.autograd.grad(torch.polygamma(2, xt).sum(), xt)
    _close(g, gt, torch.float32)


def test_zeta_edges() -> None:
    a = torch.tensor([2.0, 2.0, 3.0, 2.5, 1.0, 0.5, NAN, 2.0, 2.0, INF, 2.0, 5.0, 7.0, 4.5, 100.0])
    q = torch.tensor([INF, -INF, -2.5, -2.5, NAN, 1.0, 1.0, NAN, 0.0, 2.0, -0.0, -20.5, -8.3, 0.3, 2.0])
    _close(torch.special.zeta(a, q), torch.special.zeta(a.to("tpu"), q.to("tpu")), torch.float32)
    _close(torch.special.zeta(3, q), torch.special.zeta(3, q.to("tpu")), torch.float32)


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]  # fmt: skip


@pytest.mark.parametrize("name", POLYS)
def test_polynomial_edges(name: str) -> None:
    fn = getattr(torch.special, name)
    xv = torch.tensor([0.0, 1.0, -1.0, 0.5, -0.3, 2.0, -2.0, 0.999, INF, -INF])
    nv = torch.tensor([NAN, INF, -INF, 1e19, -1.0, -0.5, 0.0, 0.7, 1.0, 2.0, 4.5, 5.0, 7.0, 9.0, 12.0, 129.0])
    x, n = torch.meshgrid(xv, nv, indexing="ij")
    _close(fn(x, n), fn(x.to("tpu"), n.to("tpu")), torch.float32)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_u", "legendre_polynomial_p"])
def test_polynomial_overloads(name: str) -> None:
    fn = getattr(torch.special, name)
    xi, ni = torch.arange(-3, 4), torch.arange(0, 7)
    _close(fn(xi, ni), fn(xi.to("tpu"), ni.to("tpu")), torch.float32)  # int64 x int64 -> float32
    _close(fn(0.25, ni), fn(0.25, ni.to("tpu")), torch.float32)  # x_scalar
    _close(fn(xi.double(), 5), fn(xi.double().to("tpu"), 5), torch.float64)  # n_scalar
