"""Fused optimizers on "tpu" against torch's CPU optimizers, as a training script uses them.

Each case trains a small model for several steps on "tpu" with ``fused=True`` (or ``foreach=True``) and the
same model on the CPU with the plain single-tensor implementation, then compares parameters and optimizer
state to 1e-5. GradScaler cases check the AMP path (``grad_scale``/``found_inf`` handed to the fused kernel).
"""

from __future__ import annotations

import copy

import pytest
import torch

from tpu_workbench.backend import dispatch

STEPS = 4


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _batches(n: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 5, generator=g), torch.randn(8, 3, generator=g)) for _ in range(n)]


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, device: str, batches: list) -> None:
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()


def _state_close(cpu_opt: torch.optim.Optimizer, tpu_opt: torch.optim.Optimizer) -> None:
    for cs, ts in zip(cpu_opt.state.values(), tpu_opt.state.values(), strict=True):
        for k, v in cs.items():
            if isinstance(v, torch.Tensor) and k != "step":
                torch.testing.assert_close(ts[k].cpu(), v, atol=1e-5, rtol=1e-5, msg=f"state {k}")
            elif k == "step":
                assert float(ts[k]) == float(v)


def _compare(opt_cls: type, tpu_kwargs: dict, cpu_kwargs: dict | None = None, **hyper: object) -> None:
    cpu_model = _model()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt = opt_cls(cpu_model.parameters(), foreach=False, **(cpu_kwargs or {}), **hyper)
    tpu_opt = opt_cls(tpu_model.parameters(), **tpu_kwargs, **hyper)
    batches = _batches()
    _train(cpu_model, cpu_opt, "cpu", batches)
    rescues = dict(dispatch.BACKWARD_RESCUES)
    _train(tpu_model, tpu_opt, "tpu", batches)
    assert dict(dispatch.BACKWARD_RESCUES) == rescues
    for pc, pt in zip(cpu_model.parameters(), tpu_model.parameters(), strict=True):
        assert pt.device.type == "tpu"
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-5)
    _state_close(cpu_opt, tpu_opt)


ADAM_CASES = [
    {},
    {"weight_decay": 0.1},
    {"amsgrad": True},
    {"maximize": True, "weight_decay": 0.05},
    {"amsgrad": True, "maximize": True, "betas": (0.8, 0.95)},
]


@pytest.mark.parametrize("hyper", ADAM_CASES, ids=lambda h: ",".join(h) or "plain")
@pytest.mark.slow
@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW], ids=["Adam", "AdamW"])
def test_fused_adam_matches_cpu(opt_cls: type, hyper: dict) -> None:
    _compare(opt_cls, {"fused": True}, lr=0.01, **hyper)


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW], ids=["Adam", "AdamW"])
def test_fused_adam_capturable(opt_cls: type) -> None:
    _compare(opt_cls, {"fused": True, "capturable": True}, lr=0.01, weight_decay=0.1)


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW], ids=["Adam", "AdamW"])
def test_foreach_adam_matches_cpu(opt_cls: type) -> None:
    _compare(opt_cls, {"foreach": True}, lr=0.01, weight_decay=0.1, amsgrad=True)


def test_fused_adamw_tensor_lr() -> None:
    """A tensor lr (CPU tensor: read on the host) and an lr schedule, which must not recompile per value."""
    cpu_model = _model()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=torch.tensor(0.02), foreach=False)
    tpu_opt = torch.optim.AdamW(tpu_model.parameters(), lr=torch.tensor(0.02), fused=True)
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5) for o in (cpu_opt, tpu_opt)]
    for x, y in _batches():
        for m, o, dev in ((cpu_model, cpu_opt, "cpu"), (tpu_model, tpu_opt, "tpu")):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev)).backward()
            o.step()
        for s in scheds:
            s.step()
    for pc, pt in zip(cpu_model.parameters(), tpu_model.parameters(), strict=True):
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-5)


def test_fused_adam_device_tensor_lr() -> None:
    """The functional overload with an lr tensor on the device (what capturable graphs pass)."""
    p = [torch.randn(4, 3), torch.randn(5)]
    g = [torch.randn_like(t) for t in p]
    m = [torch.randn_like(t) for t in p]
    v = [torch.rand_like(t) for t in p]
    steps = [torch.tensor(3.0) for _ in p]
    kw = dict(beta1=0.9, beta2=0.99, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)
    ref = torch.ops.aten._fused_adamw.tensor_lr(p, g, m, v, [], steps, lr=torch.tensor(0.1), **kw)
    tpu = lambda ts: [t.to("tpu") for t in ts]  # noqa: E731
    out = torch.ops.aten._fused_adamw.tensor_lr(
        tpu(p), tpu(g), tpu(m), tpu(v), [], tpu(steps), lr=torch.tensor(0.1, device="tpu"), **kw
    )
    for r, o in zip(ref, out, strict=True):
        for a, b in zip(r, o, strict=True):
            torch.testing.assert_close(b.cpu(), a, atol=1e-6, rtol=1e-6)


SGD_CASES = [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
    {"momentum": 0.8, "dampening": 0.3, "maximize": True},
    {"weight_decay": 0.1, "maximize": True},
]


@pytest.mark.parametrize("hyper", SGD_CASES, ids=lambda h: ",".join(h) or "plain")
def test_fused_sgd_matches_cpu(hyper: dict) -> None:
    _compare(torch.optim.SGD, {"fused": True}, lr=0.05, **hyper)


@pytest.mark.parametrize(
    "hyper",
    [{}, {"weight_decay": 0.1, "lr_decay": 0.01}, {"maximize": True}],
    ids=["plain", "decay", "maximize"],
)
def test_fused_adagrad_matches_cpu(hyper: dict) -> None:
    _compare(torch.optim.Adagrad, {"fused": True}, lr=0.1, **hyper)


def _scaler_run(device: str, fused: bool, batches: list, poison: int) -> tuple[torch.nn.Module, float, list]:
    model = _model().to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=0.01, weight_decay=0.1, fused=fused or None, foreach=None if fused else False
    )
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
    scales = []
    for i, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        if i == poison:
            loss = loss * float("inf")  # an overflowing step: skipped, scale backs off
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return model, scaler.get_scale(), scales


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_grad_scaler_matches_cpu(fused: bool) -> None:
    batches = _batches(6)
    cpu_model, _, cpu_scales = _scaler_run("cpu", False, batches, poison=2)
    tpu_model, _, tpu_scales = _scaler_run("tpu", fused, batches, poison=2)
    assert tpu_scales == cpu_scales
    assert cpu_scales[2] < cpu_scales[1]  # the inf step backed the scale off
    for pc, pt in zip(cpu_model.parameters(), tpu_model.parameters(), strict=True):
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-5)


def test_fused_adam_skips_on_found_inf() -> None:
    """found_inf == 1: nothing is written, not even the unscaled gradients."""
    p = torch.randn(6, device="tpu")
    g = torch.randn(6, device="tpu")
    m, v = torch.zeros(6, device="tpu"), torch.zeros(6, device="tpu")
    step = torch.tensor(1.0, device="tpu")
    before = [t.cpu().clone() for t in (p, g, m, v)]
    torch._fused_adam_(
        [p],
        [g],
        [m],
        [v],
        [],
        [step],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        grad_scale=torch.tensor([4.0], device="tpu"),
        found_inf=torch.tensor([1.0], device="tpu"),
    )
    for b, t in zip(before, (p, g, m, v), strict=True):
        assert torch.equal(t.cpu(), b)
    torch._fused_adam_(
        [p],
        [g],
        [m],
        [v],
        [],
        [step],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        grad_scale=torch.tensor([4.0], device="tpu"),
        found_inf=torch.tensor([0.0], device="tpu"),
    )
    torch.testing.assert_close(g.cpu(), before[1] / 4)  # unscaled gradient stored back, as torch's kernels do


def test_fused_adam_bfloat16_params() -> None:
    """bfloat16 parameters: float32 arithmetic, one rounding per stored tensor, as torch's fused CPU kernel."""
    p = torch.randn(64, dtype=torch.bfloat16)
    g = torch.randn(64, dtype=torch.bfloat16)
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    step = torch.tensor(1.0)
    tp, tg, tm, tv, ts = (t.to("tpu") for t in (p, g, m, v, step))
    kw = dict(lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    torch._fused_adam_([p], [g], [m], [v], [], [step], **kw)
    torch._fused_adam_([tp], [tg], [tm], [tv], [], [ts], **kw)
    for a, b in ((p, tp), (m, tm), (v, tv)):
        torch.testing.assert_close(b.cpu(), a, atol=1e-2, rtol=1e-2)


def test_fused_adam_writes_through_views() -> None:
    """A parameter that is a view of a bigger buffer: the update reaches the buffer."""
    flat = torch.randn(12, device="tpu")
    p = flat[2:8]
    g, m, v = torch.ones(6, device="tpu"), torch.zeros(6, device="tpu"), torch.zeros(6, device="tpu")
    before = flat.cpu().clone()
    torch._fused_sgd_(
        [p],
        [g],
        [],
        weight_decay=0.0,
        momentum=0.0,
        lr=0.5,
        dampening=0.0,
        nesterov=False,
        maximize=False,
        is_first_step=False,
    )
    expect = before.clone()
    expect[2:8] -= 0.5
    torch.testing.assert_close(flat.cpu(), expect)
    del m, v


@pytest.mark.parametrize("other", ["list", "scalar", "scalarlist"])
def test_foreach_maximum_minimum_inplace(other: str) -> None:
    """The foreach (multi-tensor) optimizers' in-place maximum/minimum (amsgrad uses maximum_)."""
    xs = [torch.randn(3), torch.randn(2, 2)]
    o = {"list": [torch.randn(3), torch.randn(2, 2)], "scalar": 0.1, "scalarlist": [0.2, -0.3]}[other]
    for op in (torch._foreach_maximum_, torch._foreach_minimum_):
        cpu = [t.clone() for t in xs]
        tpu = [t.to("tpu") for t in xs]
        op(cpu, o)
        op(tpu, [t.to("tpu") for t in o] if other == "list" else o)
        for c, t in zip(cpu, tpu, strict=True):
            assert torch.equal(t.cpu(), c)


def test_foreach_powsum() -> None:
    xs = [torch.randn(3), torch.randn(2, 2)]
    for ord_ in (1, 2, 3, 0.5):
        for c, t in zip(
            torch._foreach_powsum(xs, ord_),
            torch._foreach_powsum([x.to("tpu") for x in xs], ord_),
            strict=True,
        ):
            torch.testing.assert_close(t.cpu(), c)


def test_fused_out_overloads_match_cpu() -> None:
    """The ``.out`` forms: ``out`` gets the new parameters; like torch's generated CPU kernels, nothing else is
    written."""
    g = torch.Generator().manual_seed(4)
    p, gr = [torch.randn(5, generator=g)], [torch.randn(5, generator=g)]
    m, v = [torch.randn(5, generator=g)], [torch.rand(5, generator=g)]
    steps = [torch.tensor(2.0)]
    kw = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
    cpu = [[t.clone() for t in ts] for ts in (p, gr, m, v, steps)]
    tpu = [[t.to("tpu") for t in ts] for ts in (p, gr, m, v, steps)]
    out_c, out_t = [torch.empty(5)], [torch.empty(5, device="tpu")]
    torch.ops.aten._fused_adamw.out(cpu[0], cpu[1], cpu[2], cpu[3], [], cpu[4], out=out_c, **kw)
    torch.ops.aten._fused_adamw.out(tpu[0], tpu[1], tpu[2], tpu[3], [], tpu[4], out=out_t, **kw)
    torch.testing.assert_close(out_t[0].cpu(), out_c[0])
    for c, t in zip(cpu[:4], tpu[:4], strict=True):
        torch.testing.assert_close(t[0].cpu(), c[0])
    sgd_kw = dict(weight_decay=0.0, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True, maximize=False,
                  is_first_step=False)  # fmt: skip
    buf_c, buf_t = [torch.ones(5)], [torch.ones(5, device="tpu")]
    o_c, o_t = [torch.empty(5)], [torch.empty(5, device="tpu")]
    torch.ops.aten._fused_sgd.out(cpu[0], cpu[1], buf_c, out=o_c, **sgd_kw)
    torch.ops.aten._fused_sgd.out(tpu[0], tpu[1], buf_t, out=o_t, **sgd_kw)
    torch.testing.assert_close(o_t[0].cpu(), o_c[0])
    torch.testing.assert_close(buf_t[0].cpu(), buf_c[0])


def test_foreach_capturable_adam_matches_cpu() -> None:
    _compare(torch.optim.Adam, {"foreach": True, "capturable": True}, lr=0.01, weight_decay=0.1)


def test_amp_ops_match_cpu() -> None:
    """GradScaler's two ops, in place and in their ``.out`` forms (which write only ``out``, as on the CPU)."""
    for dev in ("cpu", "tpu"):
        grads = [torch.tensor([1.0, float("inf")], device=dev), torch.tensor([2.0, 4.0], device=dev)]
        found, inv = torch.zeros(1, device=dev), torch.tensor(0.5, device=dev)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        assert found.item() == 1.0 and grads[1].cpu().tolist() == [1.0, 2.0]
        out = [torch.empty(2, device=dev)]
        torch.ops.aten._amp_foreach_non_finite_check_and_unscale.out([grads[1]], found.zero_(), inv, out=out)
        assert out[0].cpu().tolist() == [0.5, 1.0] and found.item() == 0.0
        scale, tracker = torch.tensor([4.0], device=dev), torch.tensor([1], dtype=torch.int32, device=dev)
        torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=dev), 2.0, 0.5, 2)
        assert scale.item() == 8.0 and tracker.item() == 0
        torch._amp_update_scale_(scale, tracker, torch.ones(1, device=dev), 2.0, 0.5, 2)
        assert scale.item() == 4.0 and tracker.item() == 0
        o = torch.empty(1, device=dev)
        torch.ops.aten._amp_update_scale.out(
            scale, tracker.fill_(1), torch.zeros(1, device=dev), 2.0, 0.5, 2, out=o
        )
        assert o.item() == 8.0 and scale.item() == 4.0 and tracker.item() == 1
