"""Strict eager's views run no program when they are made (backend/views.py): they read their root's current
value when read, an op reading one computes it inside its own program (with the bits the computed view gives),
and a write through a bijective view inverts the view instead of scattering."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.backend import op_jit as op_jit_mod
from tpu_workbench.backend import tensor as tensor_mod


def _chains() -> dict:
    return {
        "t": lambda x: x.t(),
        "view then transpose": lambda x: x.view(3, 2, 4).transpose(0, 2),
        "permute then unsqueeze": lambda x: x.permute(1, 0).unsqueeze(0),
        "flatten": lambda x: x.view(-1),
        "split part": lambda x: x.split(2, dim=1)[1],
        "select a row": lambda x: x[2],
        "narrow then t": lambda x: x.narrow(0, 1, 3).t(),
    }


@pytest.mark.parametrize("name", list(_chains()))
def test_a_view_is_computed_when_read_and_sees_later_writes_to_its_root(name: str) -> None:
    make = _chains()[name]
    cpu = torch.arange(24.0).view(6, 4)
    dev = cpu.to("tpu")
    v_cpu, v_dev = make(cpu), make(dev)
    assert v_dev._elem is None, "the view ran a program when it was made"
    cpu.mul_(3).add_(1)
    dev.mul_(3).add_(1)
    assert torch.equal(v_dev.cpu(), v_cpu)


@pytest.mark.parametrize("name", list(_chains()))
def test_writing_through_a_view_reaches_the_root_as_on_the_cpu(name: str) -> None:
    make = _chains()[name]
    cpu = torch.arange(24.0).view(6, 4)
    dev = cpu.to("tpu")
    for _ in range(3):  # the first call runs plainly, later ones through the cached programs
        make(cpu).mul_(-2).add_(0.5)
        make(dev).mul_(-2).add_(0.5)
        assert torch.equal(dev.cpu(), cpu)


def test_an_op_reading_a_view_gives_the_bits_it_gives_on_the_computed_view() -> None:
    torch.manual_seed(0)
    x = torch.randn(16, 32).to("tpu")
    w = torch.randn(24, 32).to("tpu")
    computed = w.t().contiguous()  # the view's array, made by its own program
    want = (x @ computed).cpu()
    for _ in range(3):
        got = x @ w.t()  # the transpose replayed inside mm's program
        assert torch.equal(got.cpu(), want)


def test_a_deferred_view_reaches_an_executable_as_its_root_and_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = op_jit_mod._spec

    def spy(x, arrays, floats):
        if x.__class__ is op_jit_mod.PendingView:
            seen.append(len(x.chain))
        return real(x, arrays, floats)

    monkeypatch.setattr(op_jit_mod, "_spec", spy)
    x = torch.randn(4, 6).to("tpu")
    y = torch.randn(2, 3, 4).to("tpu")
    (x + y.view(4, 6)).cpu()
    assert seen == [1]


def test_detach_of_a_deferred_view_is_deferred_and_aliases() -> None:
    base = torch.arange(6.0).to("tpu")
    d = base.view(2, 3).t().detach()
    assert d._elem is None
    base.add_(10)
    assert torch.equal(d.cpu(), (torch.arange(6.0) + 10).view(2, 3).t())


def test_a_bad_view_raises_what_the_cpu_raises() -> None:
    x = torch.arange(24.0)
    for make in (lambda t: t.view(5, 5), lambda t: t.view(2, 3).t().view(3, 2, 2), lambda t: t.view(4, 6)[9]):
        with pytest.raises(Exception) as want:
            make(x)
        with pytest.raises(type(want.value)) as got:
            make(x.to("tpu"))
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


def test_a_view_taken_in_inference_mode_of_an_ordinary_tensor_is_ordinary() -> None:
    x = torch.randn(3, 4).to("tpu")
    with torch.inference_mode():
        v = x.t()
    assert not v.is_inference()
    assert torch.equal(v.cpu(), x.cpu().t())


@pytest.mark.parametrize(
    "chain",
    [
        lambda x: x.t(),
        lambda x: x.view(2, 12).t(),
        lambda x: x.permute(1, 0).unsqueeze(0),
        lambda x: x.unsqueeze(1).transpose(0, 2),
    ],
)
def test_the_inverse_write_equals_the_scatter_it_replaces(chain) -> None:
    import jax.numpy as jnp

    x = torch.randn(4, 6).to("tpu")
    v = chain(x)
    steps = v._chain
    base = tensor_mod.payload(x)
    new = jnp.asarray(torch.randn(*v.shape).numpy())
    inverted = tensor_mod._write_by_inverse(base, steps, new)
    assert inverted is not None
    # the scatter path: the same function with the inverses switched off
    scattered = _scatter_without_inverse(base, steps, new)
    assert bool(jnp.array_equal(inverted, scattered))


def _scatter_without_inverse(base, steps, new):
    real = tensor_mod._write_by_inverse
    tensor_mod._write_by_inverse = lambda *a: None
    try:
        return tensor_mod._scatter_through(base, steps, new)
    finally:
        tensor_mod._write_by_inverse = real


def test_foreach_over_transposed_gradients_matches_the_loop() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ref.load_state_dict(model.state_dict())
    model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, foreach=False)
    x = torch.randn(5, 8)
    for _ in range(3):
        for m, o, dev in ((model, opt, "tpu"), (ref, ref_opt, "cpu")):
            o.zero_grad()
            m(x.to(dev)).square().sum().backward()
            torch.nn.utils.clip_grad_norm_(list(m.parameters()), 0.5)
            o.step()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
