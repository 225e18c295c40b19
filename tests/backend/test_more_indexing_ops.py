"""Focused cpu-vs-tpu checks for the indexing / reduction / sorting lowerings added for OpInfo conformance:
index_reduce, unique*, mode, histograms, segment_reduce, quantile, tensor_split, diagonal_scatter, sgn."""

from __future__ import annotations

import pytest
import torch

from tests.backend.conftest import to_cpu


def _grad(fn, *xs: torch.Tensor) -> list[torch.Tensor]:
    """Forward on the given leaves, backward of sum(), gradients on the CPU."""
    leaves = [x.detach().requires_grad_() for x in xs]
    out = fn(*leaves)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return [to_cpu(x.grad) for x in leaves]


def _both(fn, *xs: torch.Tensor) -> tuple:
    return fn(*xs), fn(*[x.to("tpu") for x in xs])


def test_index_reduce() -> None:
    torch.manual_seed(0)
    x, src = torch.randn(4, 3), torch.randn(5, 3)
    idx = torch.tensor([0, 2, 2, 3, 0])
    for reduce, include_self in (("prod", True), ("mean", False), ("amax", True), ("amin", False)):

        def f(
            a: torch.Tensor, s: torch.Tensor, reduce: str = reduce, inc: bool = include_self
        ) -> torch.Tensor:
            return a.index_reduce(0, idx.to(a.device), s, reduce, include_self=inc)

        c, t = _both(f, x, src)
        torch.testing.assert_close(to_cpu(t), c)
        if reduce in ("prod", "amax"):
            for gc, gt in zip(_grad(f, x, src), _grad(f, x.to("tpu"), src.to("tpu")), strict=True):
                torch.testing.assert_close(gt, gc)
    xi, si = torch.randint(-5, 5, (4, 3)), torch.randint(-5, 5, (5, 3))
    ci, ti = _both(lambda a, s: a.index_reduce(0, idx.to(a.device), s, "mean", include_self=True), xi, si)
    assert torch.equal(to_cpu(ti), ci)


def test_unique_family() -> None:
    x = torch.tensor([[3, 1, 2], [3, 1, 5], [3, 1, 2]])
    for kw in (
        {},
        {"return_inverse": True, "return_counts": True},
        {"dim": 0, "return_inverse": True},
        {"dim": 1, "return_counts": True},
    ):
        c, t = _both(lambda a, kw=kw: torch.unique(a, **kw), x)
        for a, b in zip(
            c if isinstance(c, tuple) else (c,), t if isinstance(t, tuple) else (t,), strict=True
        ):
            assert torch.equal(to_cpu(b), a)
    c, t = _both(lambda a: torch.unique_consecutive(a, return_inverse=True, return_counts=True), x.flatten())
    for a, b in zip(c, t, strict=True):
        assert torch.equal(to_cpu(b), a)
    nan = torch.tensor([float("nan"), 1.0, float("nan")])
    c, t = _both(lambda a: torch.unique(a, return_counts=True), nan)
    torch.testing.assert_close(to_cpu(t[0]), c[0], equal_nan=True)


def test_index_fill_value_grad() -> None:
    x, v = torch.randn(4, 3), torch.tensor(2.0)
    idx = torch.tensor([1, 1, 2])

    def f(a: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        return a.index_fill(0, idx.to(a.device), val)

    for gc, gt in zip(_grad(f, x, v), _grad(f, x.to("tpu"), v.to("tpu")), strict=True):
        torch.testing.assert_close(gt, gc)


def test_mode_matches_cpu_including_tie_index() -> None:
    torch.manual_seed(0)
    x = torch.randint(0, 4, (6, 12))  # rows <= 16: torch returns the last occurrence of the mode
    c, t = _both(lambda a: torch.mode(a, 1), x)
    assert torch.equal(to_cpu(t.values), c.values) and torch.equal(to_cpu(t.indices), c.indices)
    xf = torch.randn(3, 7)
    gc, gt = _grad(lambda a: torch.mode(a, 0), xf), _grad(lambda a: torch.mode(a, 0), xf.to("tpu"))
    torch.testing.assert_close(gt[0], gc[0])
    with pytest.raises(NotImplementedError, match="mode"):
        torch.mode(torch.tensor([1.0, float("nan"), 1.0]).to("tpu"))


def test_histograms() -> None:
    torch.manual_seed(0)
    x = torch.randn(50)
    w = torch.rand(50)
    c, t = _both(lambda a: torch.histc(a, bins=7, min=-1, max=1), x)
    torch.testing.assert_close(to_cpu(t), c)
    for bins in (4, torch.tensor([-2.0, -0.5, 0.0, 0.3, 2.0])):  # linspace edges, given edges
        c = torch.histogram(x, bins, weight=w, density=True)
        t = torch.histogram(
            x.to("tpu"), bins if isinstance(bins, int) else bins.to("tpu"), weight=w.to("tpu"), density=True
        )
        torch.testing.assert_close(to_cpu(t.hist), c.hist)
        torch.testing.assert_close(to_cpu(t.bin_edges), c.bin_edges, rtol=0, atol=0)


def test_linspace_edges_bit_exact() -> None:
    c = torch.histogram(torch.tensor([0.1, 0.7]), 30).bin_edges
    t = torch.histogram(torch.tensor([0.1, 0.7]).to("tpu"), 30).bin_edges
    assert torch.equal(to_cpu(t), c)


def test_segment_reduce() -> None:
    torch.manual_seed(0)
    data = torch.randn(6, 2)
    data[1, 0] = data[2, 0]  # a tie for max
    data[4, 1] = 0.0  # a zero for prod's backward
    lengths = torch.tensor([3, 0, 3])
    for reduce in ("mean", "max", "prod"):

        def f(d: torch.Tensor, reduce: str = reduce) -> torch.Tensor:
            return torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), unsafe=True)

        c, t = _both(f, data)
        torch.testing.assert_close(to_cpu(t), c, equal_nan=True)
        torch.testing.assert_close(_grad(f, data.to("tpu"))[0], _grad(f, data)[0], equal_nan=True)


@pytest.mark.parametrize("fn", [torch.quantile, torch.nanquantile])
def test_quantile(fn) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    x[0, 1] = float("nan")
    q = torch.tensor([0.2, 0.5, 1.0])
    for args, kw in (((0.3,), {}), ((q,), {"dim": 1, "keepdim": True, "interpolation": "nearest"})):
        c = fn(x, *args, **kw)
        t = fn(x.to("tpu"), *[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args], **kw)
        torch.testing.assert_close(to_cpu(t), c, equal_nan=True)
    y = torch.randn(3, 6)
    gc = _grad(lambda a: fn(a, 0.4, dim=1), y)
    gt = _grad(lambda a: fn(a, 0.4, dim=1), y.to("tpu"))
    torch.testing.assert_close(gt[0], gc[0])


def test_tensor_split_with_device_indices() -> None:
    x = torch.arange(10.0)
    idx = torch.tensor([2, 5])
    c = torch.tensor_split(x, idx)
    t = torch.tensor_split(x.to("tpu"), idx.to("tpu"))
    assert len(c) == len(t) and all(torch.equal(to_cpu(b), a) for a, b in zip(c, t, strict=True))


def test_diagonal_scatter_grad_and_sgn_grad() -> None:
    x, s = torch.randn(4, 5), torch.randn(4)

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diagonal_scatter(a, b, 1)[:, 1:]

    for gc, gt in zip(_grad(f, x, s), _grad(f, x.to("tpu"), s.to("tpu")), strict=True):
        torch.testing.assert_close(gt, gc)
    torch.testing.assert_close(_grad(torch.sgn, x.to("tpu"))[0], _grad(torch.sgn, x)[0])
