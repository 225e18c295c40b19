"""bfloat16 ops that torch's CPU kernels compute in float32 ("opmath") or with per-op bfloat16 rounding: the
"tpu" results must equal torch CPU bit for bit on random inputs."""

from __future__ import annotations

import pytest
import torch

BF = torch.bfloat16


def _r(*shape: int, scale: float = 3.0) -> torch.Tensor:
    return (torch.randn(*shape) * scale).to(BF)


def _same(fn, *args, **kwargs) -> None:  # noqa: ANN001
    cpu = fn(*args, **kwargs)
    tpu = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args], **kwargs).cpu()
    assert tpu.dtype == cpu.dtype
    torch.testing.assert_close(tpu, cpu, rtol=0, atol=0, equal_nan=True)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_addcdiv_addcmul() -> None:
    x, a, b = _r(400), _r(400), _r(400)
    _same(torch.addcdiv, x, a, b, value=0.7)
    _same(torch.addcmul, x, a, b, value=-1.3)


def test_cross() -> None:
    _same(torch.linalg.cross, _r(500, 3), _r(500, 3))
    _same(torch.linalg.cross, _r(3, 40), _r(3, 1), dim=0)


def test_cumsum() -> None:
    _same(torch.cumsum, _r(20, 300), 1)


def test_floor_divide() -> None:
    a, b = _r(1000), _r(1000, scale=0.5)
    b[:3] = 0
    _same(torch.floor_divide, a, b)
    _same(torch.div, a, b, rounding_mode="floor")
    _same(torch.floor_divide, a.float(), b.float())


def test_addr_addbmm() -> None:
    _same(torch.addr, _r(30, 20), _r(30), _r(20), alpha=0.3, beta=1.7)
    _same(torch.addr, _r(30, 20), _r(30), _r(20), alpha=1.3, beta=0)
    _same(torch.addbmm, _r(5, 6), _r(4, 5, 7), _r(4, 7, 6), alpha=0.5, beta=2)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n: int) -> None:
    x = _r(300, scale=6.0)
    _same(torch.polygamma, n, x)


def test_matrix_exp_low_precision_refused() -> None:
    with pytest.raises(NotImplementedError, match="matrix_exp"):
        torch.linalg.matrix_exp(torch.eye(3, dtype=BF).to("tpu"))
