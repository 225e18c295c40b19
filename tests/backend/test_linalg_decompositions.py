"""Decompositions on the tpu device: reconstruction identities and agreement with torch's CPU kernels."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench import backend

backend.register()


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_reconstructs(shape: tuple[int, ...], full: bool) -> None:
    a = _rand(*shape)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full)
    k = min(shape[-2:])
    rec = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    torch.testing.assert_close(rec.cpu(), a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))
    assert u.shape == torch.linalg.svd(a, full_matrices=full).U.shape


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_reconstructs(mode: str) -> None:
    a = _rand(2, 6, 4)
    q, r = torch.linalg.qr(a.to("tpu"), mode=mode)
    qc, rc = torch.linalg.qr(a, mode=mode)
    assert q.shape == qc.shape and r.shape == rc.shape
    torch.testing.assert_close(
        r.cpu(), rc, atol=1e-5, rtol=1e-5
    )  # same LAPACK convention: diag(R) signs agree
    if mode != "r":
        torch.testing.assert_close((q @ r).cpu(), a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(uplo: str) -> None:
    a = _rand(5, 5)
    w, v = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
    sym = torch.tril(a) + torch.tril(a, -1).mT if uplo == "L" else torch.triu(a) + torch.triu(a, 1).mT
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(a, UPLO=uplo), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close((v * w[None, :] @ v.mT).cpu(), sym, atol=1e-4, rtol=1e-4)


def test_householder_ormqr_geqrf() -> None:
    a = _rand(6, 4)
    h, tau = torch.geqrf(a.to("tpu"))
    hc, tauc = torch.geqrf(a)
    torch.testing.assert_close(h.cpu(), hc, atol=1e-5, rtol=1e-5)
    q = torch.linalg.householder_product(h, tau)
    torch.testing.assert_close(q.cpu(), torch.linalg.householder_product(hc, tauc), atol=1e-5, rtol=1e-5)
    c = _rand(6, 3, seed=1)
    for left, tr in [(True, False), (True, True)]:
        got = torch.ormqr(h, tau, c.to("tpu"), left=left, transpose=tr).cpu()
        torch.testing.assert_close(
            got, torch.ormqr(hc, tauc, c, left=left, transpose=tr), atol=1e-5, rtol=1e-5
        )


@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_matches_cpu(driver: str) -> None:
    a, b = _rand(2, 6, 3), _rand(2, 6, 2, seed=1)
    got = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
    want = torch.linalg.lstsq(a, b, driver=driver)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, atol=1e-4, rtol=1e-4)


def test_pinv_and_rank() -> None:
    a = _rand(5, 3) @ _rand(3, 6, seed=1)  # rank 3
    torch.testing.assert_close(
        torch.linalg.pinv(a.to("tpu")).cpu(), torch.linalg.pinv(a), atol=1e-4, rtol=1e-4
    )
    assert int(torch.linalg.matrix_rank(a.to("tpu"))) == 3
    s = a @ a.mT
    torch.testing.assert_close(
        torch.linalg.pinv(s.to("tpu"), hermitian=True).cpu(),
        torch.linalg.pinv(s, hermitian=True),
        atol=1e-3,
        rtol=1e-3,
    )


def test_matrix_exp_repeats_bitwise_and_is_as_exact_as_cpu() -> None:
    """Compiled from the first call (op_jit), XLA:CPU contracts multiply-adds into FMAs: one rounding where the CPU
    kernel rounds twice, so the last bits differ from CPU's fp32 (not from the exact value). What must hold: every
    call gives the same bits, and the error against a float64 reference is no larger than CPU fp32's own."""
    a = _rand(2, 4, 4) * 3
    first = torch.matrix_exp(a.to("tpu")).cpu()
    assert torch.equal(first, torch.matrix_exp(a.to("tpu")).cpu())
    exact = torch.matrix_exp(a.double())
    cpu_error = (torch.matrix_exp(a).double() - exact).abs().max()
    assert (first.double() - exact).abs().max() <= max(cpu_error, 1e-7 * exact.abs().max())
    one = _rand(4, 4, seed=2) * 0.1  # low Taylor degree branch
    torch.testing.assert_close(torch.matrix_exp(one.to("tpu")).cpu(), torch.matrix_exp(one))


def test_ldl_factor_and_solve() -> None:
    for seed in range(6):
        a = _rand(6, 6, seed=seed)
        a = a + a.mT
        a[0, 0] = 1e-3  # forces Bunch-Kaufman 2x2 pivots on some seeds
        ld, piv = torch.linalg.ldl_factor(a.to("tpu"))
        ldc, pivc = torch.linalg.ldl_factor(a)
        assert torch.equal(piv.cpu(), pivc)
        torch.testing.assert_close(ld.cpu(), ldc, atol=1e-4, rtol=1e-4)
        b = _rand(6, 2, seed=seed + 10)
        x = torch.linalg.ldl_solve(ld, piv, b.to("tpu")).cpu()
        torch.testing.assert_close(a @ x, b, atol=1e-3, rtol=1e-3)


def test_bad_arguments_raise() -> None:
    a = _rand(3, 3).to("tpu")
    with pytest.raises(RuntimeError, match="UPLO"):
        torch.linalg.eigh(a, UPLO="X")
    with pytest.raises(RuntimeError, match="mode"):
        torch.linalg.qr(a, mode="bogus")
    with pytest.raises(RuntimeError, match="driver"):
        torch.linalg.lstsq(a, a, driver="nope")
