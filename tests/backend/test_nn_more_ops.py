"""NN lowerings beyond the OpInfo samples: every mode/padding/p/reduction variant of grid_sample, cdist/pdist,
embedding_bag, margin losses, adaptive max pooling, group norm, bilinear, rrelu, ctc_loss and the
antialiased bilinear upsample, forward and gradient, "tpu" vs torch's CPU kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

TOL = {"rtol": 2e-4, "atol": 2e-5}


def _tpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        t = x.detach().to("tpu")
        return t.requires_grad_() if x.requires_grad else t
    return x


def _check(fn: Callable[..., Any], *args: Any, grad: bool = True, **kwargs: Any) -> None:
    """fn on CPU and on "tpu": same outputs, and the same gradients of sum(outputs) for float inputs."""
    cargs = [
        a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() and grad else a
        for a in args
    ]
    targs = [_tpu(a) for a in cargs]
    c, t = fn(*cargs, **kwargs), fn(*targs, **{k: _tpu(v) for k, v in kwargs.items()})
    cs, ts = (c if isinstance(c, tuple) else (c,)), (t if isinstance(t, tuple) else (t,))
    for a, b in zip(cs, ts, strict=True):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), equal_nan=True, **TOL)
    if not grad:
        return
    cin = [a for a in cargs if isinstance(a, torch.Tensor) and a.requires_grad]
    tin = [a for a in targs if isinstance(a, torch.Tensor) and a.requires_grad]
    cg = torch.autograd.grad(sum(o.sum() for o in cs if o.is_floating_point()), cin, allow_unused=True)
    tg = torch.autograd.grad(sum(o.sum() for o in ts if o.is_floating_point()), tin, allow_unused=True)
    for a, b in zip(cg, tg, strict=True):
        if a is None:
            assert b is None or not b.cpu().any()
        else:
            torch.testing.assert_close(b.cpu(), a, equal_nan=True, **TOL)


@pytest.mark.parametrize(
    ("mode", "padding_mode", "align_corners"),
    [("bilinear", "reflection", True), ("nearest", "border", True), ("bicubic", "zeros", False)],
)
def test_grid_sample_2d(mode: str, padding_mode: str, align_corners: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 6, generator=g)
    grid = torch.rand(2, 4, 7, 2, generator=g) * 2.6 - 1.3  # partly outside [-1, 1]
    _check(F.grid_sample, x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def test_grid_sample_3d() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 2, 3, 4, 5, generator=g)
    grid = torch.rand(1, 2, 3, 4, 3, generator=g) * 2.6 - 1.3
    _check(F.grid_sample, x, grid, mode="bilinear", padding_mode="border", align_corners=False)


@pytest.mark.parametrize("p", [0.0, 0.5, 2.0, 3.0, float("inf")])
def test_cdist_pdist(p: float) -> None:
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(2, 4, 3, generator=g), torch.randn(1, 5, 3, generator=g)
    b[0, 0] = a[0, 1]  # a zero distance (and zero components): torch's subgradient is 0 there
    _check(torch.cdist, a, b, p=p)
    x = torch.randn(5, 3, generator=g)
    x[3] = x[1]
    _check(F.pdist, x, p=p)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sum", "max"])
def test_embedding_bag(mode: str) -> None:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(10, 4, generator=g)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    offsets = torch.tensor([0, 3, 3, 6])  # one empty bag
    last = torch.tensor([0, 3, 3, 6, 10])
    for kw in ({}, {"padding_idx": 2}, {} if mode == "max" else {"scale_grad_by_freq": True}):
        _check(F.embedding_bag, idx, w, offsets, mode=mode, **kw)
    _check(F.embedding_bag, idx, w, last, mode=mode, include_last_offset=True)
    if mode == "sum":
        psw = torch.rand(10, generator=g)
        _check(F.embedding_bag, idx, w, offsets, mode=mode, per_sample_weights=psw, padding_idx=4)
    _check(F.embedding_bag, idx.reshape(2, 5), w, mode=mode)


def test_margin_losses() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 5, generator=g)
    t = torch.tensor([0, 3, 4, 1])
    wt = torch.rand(5, generator=g)
    _check(F.multi_margin_loss, x, t, p=2, margin=0.7, weight=wt, reduction="none")
    _check(F.multi_margin_loss, x[0], t[:1], p=1, reduction="mean")
    mt = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 2, 2, 0], [0, 1, 2, 3, 4], [-1, 1, 1, 1, 1]])
    _check(F.multilabel_margin_loss, x, mt, reduction="none")
    _check(F.multilabel_margin_loss, x[1], mt[1], reduction="sum")


def test_adaptive_max_pool() -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 7, 9, generator=g)
    _check(F.adaptive_max_pool2d, x, (3, 4), return_indices=True)
    _check(F.adaptive_max_pool2d, x[0], 5, return_indices=True)
    _check(F.adaptive_max_pool1d, x[:, :, 0], 4, return_indices=True)
    _check(F.adaptive_max_pool3d, torch.randn(1, 2, 5, 6, 7, generator=g), (2, 4, 3), return_indices=True)


def test_group_norm_stats_grad() -> None:
    g = torch.Generator().manual_seed(6)
    x, w, b = torch.randn(3, 6, 5, generator=g), torch.randn(6, generator=g), torch.randn(6, generator=g)
    _check(torch.native_group_norm, x, w, b, 3, 6, 5, 3, 1e-5)  # grads through mean/rstd need unsqueeze_
    _check(F.group_norm, x, 2, None, None)


def test_unsqueeze_inplace_on_device() -> None:
    y = torch.arange(6.0, device="tpu").reshape(2, 3) * 1
    y.unsqueeze_(0).transpose_(1, 2)
    assert y.shape == (1, 3, 2)
    torch.testing.assert_close(y.cpu(), torch.arange(6.0).reshape(2, 3).unsqueeze(0).transpose(1, 2))
    z = torch.zeros(2, 3, device="tpu")
    v = z[0]
    v.unsqueeze_(0).fill_(5)  # a view writes through its extended chain
    assert z.cpu()[0].tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(RuntimeError, match="view"):
        z.unsqueeze_(0)  # a viewed root cannot change shape under its views


def test_bilinear_and_trilinear() -> None:
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(4, 3, generator=g), torch.randn(4, 5, generator=g)
    w, bias = torch.randn(2, 3, 5, generator=g), torch.randn(2, generator=g)
    _check(F.bilinear, a, b, w, bias)
    ai, bi, wi = (torch.randint(-3, 4, s, generator=g) for s in ((4, 3), (4, 5), (2, 3, 5)))
    _check(F.bilinear, ai, bi, wi, grad=False)


def test_rrelu() -> None:
    x = torch.randn(50)
    _check(F.rrelu, x, 0.1, 0.3, training=False)
    xt = x.to("tpu").requires_grad_()
    out = F.rrelu(xt, 0.1, 0.3, training=True)
    (gx,) = torch.autograd.grad(out.sum(), xt)
    oc, gc, xc = out.detach().cpu(), gx.cpu(), x
    assert torch.equal(oc[xc > 0], xc[xc > 0])
    slope = oc[xc <= 0] / xc[xc <= 0]
    assert ((slope >= 0.1 - 1e-6) & (slope <= 0.3 + 1e-6)).all()
    torch.testing.assert_close(gc[xc <= 0], slope)  # the backward reads the noise the forward drew
    torch.manual_seed(0)
    a = F.rrelu(x.to("tpu"), training=True).cpu()
    torch.manual_seed(0)
    assert torch.equal(a, F.rrelu(x.to("tpu"), training=True).cpu())


def test_ctc_loss() -> None:
    g = torch.Generator().manual_seed(8)
    lp = torch.randn(10, 3, 5, generator=g).log_softmax(2)
    il, tl = torch.tensor([10, 8, 4]), torch.tensor([4, 2, 3])
    tg = torch.randint(1, 5, (3, 4), generator=g)
    tg[2, :3] = 1  # "1 1 1" needs 5 frames: an infinite loss
    _check(F.ctc_loss, lp, tg, il, tl, reduction="mean", zero_infinity=True)
    _check(
        F.ctc_loss,
        lp[:, :2],
        torch.cat([tg[0, :4], tg[1, :2]]),
        il[:2].tolist(),
        tl[:2].tolist(),
        reduction="sum",
    )


def test_upsample_bilinear_aa() -> None:
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, 2, 9, 7, generator=g)
    for kw in ({"scale_factor": 0.4}, {"size": (5, 10), "align_corners": True}):
        _check(F.interpolate, x, mode="bilinear", antialias=True, **kw)


def test_embedding_bag_indices_past_last_offset_raise() -> None:
    # torch's CPU kernel reads undefined memory for indices past the last offset: refuse, never guess
    w = torch.randn(10, 3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    with pytest.raises(NotImplementedError, match="include_last_offset"):
        F.embedding_bag(
            idx.to("tpu"), w.to("tpu"), torch.tensor([0, 2, 4]).to("tpu"), include_last_offset=True
        )
    off = torch.tensor([0, 2, 4, 8])
    for mode in ("sum", "mean", "max"):
        got = F.embedding_bag(idx.to("tpu"), w.to("tpu"), off.to("tpu"), mode=mode, include_last_offset=True)
        torch.testing.assert_close(
            got.cpu(), F.embedding_bag(idx, w, off, mode=mode, include_last_offset=True)
        )
