"""``nn.Linear`` on TPU tensors is one op forward (``mkldnn_linear``) and one backward, with the composite's
arithmetic: the same bits as ``t`` + ``mm``/``addmm`` + views, and everything autograd offers around it (double
backward, forward AD, functorch, compile) still works through the composite."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench.backend import dispatch as dispatch_mod

SHAPES = [(5, 8), (2, 3, 8), (8,), (2, 2, 2, 8), (0, 8)]


def _pair(shape: tuple, bias: bool, seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    w = torch.randn(4, 8, generator=g)
    b = torch.randn(4, generator=g) if bias else None
    return x, w, b


def _composite(x, w, b):
    return torch.ops.aten.linear.default.decompose(x, w, b)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_one_op_linear_gives_the_composites_bits_forward_and_backward(shape: tuple, bias: bool) -> None:
    x, w, b = _pair(shape, bias)
    results = []
    for fn in (F.linear, _composite):
        xt, wt = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
        bt = b.to("tpu").requires_grad_() if b is not None else None
        y = fn(xt, wt, bt)
        (y * torch.linspace(-1, 1, 4).to("tpu")).sum().backward()
        results.append([y.detach().cpu(), xt.grad.cpu(), wt.grad.cpu()] + ([bt.grad.cpu()] if bias else []))
    for got, want in zip(*results, strict=True):
        assert torch.equal(got, want)
    cpu = F.linear(x, w, b)
    torch.testing.assert_close(results[0][0], cpu)


def test_linear_is_one_dispatch_and_one_autograd_node(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = dispatch_mod.dispatch

    def spy(func, types=(), args=(), kwargs=None):
        seen.append(str(func))
        return real(func, types, args, kwargs)

    x, w, b = _pair((2, 3, 8), True)
    xt, wt, bt = (t.to("tpu").requires_grad_() for t in (x, w, b))
    from tpu_workbench.backend import tensor as tensor_mod

    monkeypatch.setattr(tensor_mod, "_dispatch", spy)
    monkeypatch.setattr(dispatch_mod, "dispatch", spy)  # (the backward kernel calls the dispatcher itself)
    y = F.linear(xt, wt, bt)
    assert seen == ["aten.mkldnn_linear.default"]
    assert type(y.grad_fn).__name__ == "MkldnnLinearBackward0"
    seen.clear()
    y.backward(torch.ones_like(y))
    assert seen.count("aten.mkldnn_linear_backward.default") == 1
    assert not any("mm" in s and "linear" not in s for s in seen)


@pytest.mark.parametrize("needs", ["input", "weight", "bias", "all"])
def test_only_the_gradients_asked_for_are_computed(needs: str) -> None:
    x, w, b = _pair((3, 8), True)
    tx, tw, tb = x.to("tpu"), w.to("tpu"), b.to("tpu")
    for t, name in ((tx, "input"), (tw, "weight"), (tb, "bias"), (x, "input"), (w, "weight"), (b, "bias")):
        t.requires_grad_(needs in (name, "all"))
    F.linear(tx, tw, tb).sum().backward()
    F.linear(x, w, b).sum().backward()
    for dev, cpu in ((tx, x), (tw, w), (tb, b)):
        assert (dev.grad is None) == (cpu.grad is None)
        if cpu.grad is not None:
            torch.testing.assert_close(dev.grad.cpu(), cpu.grad)


def test_double_backward_through_linear_matches_the_cpu() -> None:
    """A gradient penalty (WGAN-GP) differentiates the backward itself."""
    x, w, b = _pair((6, 8), True)
    out = []
    for dev in ("cpu", "tpu"):
        lin = torch.nn.Linear(8, 4).to(dev)
        with torch.no_grad():
            lin.weight.copy_(w.to(dev))
            lin.bias.copy_(b.to(dev))
        xi = x.to(dev).requires_grad_()
        (gx,) = torch.autograd.grad(torch.tanh(lin(xi)).sum(), xi, create_graph=True)
        penalty = (gx.norm(dim=1) - 1).pow(2).mean()
        penalty.backward()
        out.append((penalty.detach().cpu(), lin.weight.grad.cpu(), lin.bias.grad.cpu()))
    for got, want in zip(out[1], out[0], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_forward_ad_through_linear_matches_the_cpu() -> None:
    import torch.autograd.forward_ad as fwAD

    x, w, b = _pair((3, 8), True)
    tangent = torch.randn(3, 8, generator=torch.Generator().manual_seed(5))
    res = []
    for dev in ("cpu", "tpu"):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.to(dev), tangent.to(dev))
            y = F.linear(dual, w.to(dev), b.to(dev))
            res.append(fwAD.unpack_dual(y).tangent.cpu())
    torch.testing.assert_close(res[1], res[0])


def test_functorch_vmap_and_grad_through_linear_match_the_cpu() -> None:
    x, w, b = _pair((5, 8), True)

    def loss(wi, xi):
        return torch.tanh(F.linear(xi, wi, None)).sum()

    res = []
    for dev in ("cpu", "tpu"):
        per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(w.to(dev), x.to(dev))
        res.append(per_example.cpu())
    torch.testing.assert_close(res[1], res[0], rtol=1e-5, atol=1e-6)


def test_a_bad_linear_raises_what_the_cpu_raises() -> None:
    cases = [
        (torch.randn(3, 7), torch.randn(4, 8), None),
        (torch.randn(3, 8), torch.randn(4, 8), torch.randn(5)),
        (torch.randn(3, 8, dtype=torch.float64), torch.randn(4, 8), None),
    ]
    for x, w, b in cases:
        with pytest.raises(RuntimeError) as want:
            F.linear(x, w, b)
        with pytest.raises(RuntimeError) as got:
            F.linear(x.to("tpu"), w.to("tpu"), b.to("tpu") if b is not None else None)
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


def test_compiled_linear_model_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
    x = torch.randn(5, 8).to("tpu")
    eager = model(x).detach().cpu()
    compiled = torch.compile(model, backend="tpu")(x).detach().cpu()
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)


def test_autocast_linear_runs_in_bfloat16_as_on_the_cpu() -> None:
    x, w, b = _pair((4, 8), True)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = F.linear(x.to("tpu"), w.to("tpu"), b.to("tpu"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = F.linear(x, w, b)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), want.float(), rtol=2e-2, atol=2e-2)
