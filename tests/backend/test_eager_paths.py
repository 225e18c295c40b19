"""Strict eager's coarse paths give what the op-by-op paths give: backward on the calling thread, decompositions
traced into one program, nll_loss as one lowering, a foreach op over a list as one program."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench.backend import traced as traced_mod
from tpu_workbench.backend.ops import foreach as foreach_mod


# ----------------------------------------------------------------------------- backward's thread
def test_backward_runs_on_the_thread_that_moved_data_to_the_device() -> None:
    seen = []
    x = torch.randn(4, 4).to("tpu").requires_grad_()
    y = (x * 2).sum()
    x.register_hook(lambda g: seen.append(threading.get_ident()))
    y.backward()
    assert seen == [threading.get_ident()]
    assert torch.autograd.is_multithreading_enabled() is False


def test_a_new_thread_is_adopted_when_it_moves_data_too() -> None:
    out = {}

    def work() -> None:
        x = torch.randn(3).to("tpu").requires_grad_()
        x.register_hook(lambda g: out.update(thread=threading.get_ident()))
        (x * x).sum().backward()
        out["me"] = threading.get_ident()
        out["grad"] = x.grad.cpu()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out["thread"] == out["me"]
    assert out["grad"].shape == (3,)


@pytest.mark.slow
def test_the_switch_keeps_pytorchs_device_thread() -> None:
    code = (
        "import threading, torch\nx = torch.randn(2).to('tpu').requires_grad_()\nseen = []\n"
        "x.register_hook(lambda g: seen.append(threading.get_ident()))\n(x * 3).sum().backward()\n"
        "print(seen[0] != threading.get_ident(), torch.autograd.is_multithreading_enabled(), x.grad.cpu().tolist())"
    )
    env = dict(os.environ, TORCH_TPU_AUTOGRAD_DEVICE_THREAD="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True True [3.0, 3.0]"


# ----------------------------------------------------------------------------- traced decompositions
def _ln_backward(dev: str) -> tuple:
    torch.manual_seed(0)
    x, w, b = (torch.randn(*s, dtype=torch.float64).to(dev).requires_grad_() for s in ((8, 16), (16,), (16,)))
    F.layer_norm(x, (16,), w, b).pow(2).sum().backward()
    return x.grad.cpu(), w.grad.cpu(), b.grad.cpu()


def _decomposition_cache(op: object) -> dict:
    from tpu_workbench.backend import dispatch  # (the plan closes over the traced wrapper)

    plan = dispatch._PLANS[op]
    run = plan.__closure__[0].cell_contents
    return run.cache


def test_a_decomposed_backward_becomes_one_program_and_matches_the_cpu() -> None:
    want = _ln_backward("cpu")
    for _ in range(3):  # built at the first sighting (several computations), then the cached program
        got = _ln_backward("tpu")
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
    cache = _decomposition_cache(torch.ops.aten.native_layer_norm_backward.default)
    assert any(isinstance(v, tuple) for v in cache.values()), "no program was built"


def test_fused_eager_records_a_built_decomposition_as_one_node_with_strict_values() -> None:
    from tpu_workbench.backend import lazy

    want = _ln_backward("tpu")  # strict eager (the program is built by now, or is built below)
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        for _ in range(3):
            got = _ln_backward("tpu")
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
        lazy.reset_stats()
        x, w, b = (
            torch.randn(*s, dtype=torch.float64).to("tpu").requires_grad_() for s in ((8, 16), (16,), (16,))
        )
        out = F.layer_norm(x, (16,), w, b)
        lazy.flush()
        before = lazy.stats()["ops_recorded"]
        out.pow(2).sum().backward()
        recorded = lazy.stats()["ops_recorded"] - before
        lazy.flush()
        assert lazy.stats()["ops_strict"] == 0
    # pow, sum and their backward, the layer norm backward as one node, and the gradient accumulation: far
    # fewer than the decomposition's own ~20 ops
    assert recorded < 15, recorded


def test_a_decomposition_that_reaches_a_host_check_keeps_raising() -> None:
    run = traced_mod.traced(lambda x, i: torch.gather(x * 2, 1, i))
    x = torch.randn(3, 4).to("tpu")
    bad = torch.tensor([[0], [9], [1]]).to("tpu")
    for _ in range(3):  # the trace would drop gather's bound check: the signature stays op by op
        with pytest.raises(RuntimeError, match="out of bounds"):
            run(x, bad)
    assert all(v is traced_mod._PLAIN for v in run.cache.values())
    good = torch.tensor([[0], [3], [1]])
    for _ in range(3):
        torch.testing.assert_close(run(x, good.to("tpu")).cpu(), torch.gather(x.cpu() * 2, 1, good))


def test_a_traced_function_runs_one_program_with_the_same_bits_from_the_first_call() -> None:
    """A multiply feeding an add is one FMA inside the program (XLA:CPU contracts it) and two roundings run op by
    op: the first sighting must not take the op-by-op path, or a process's first seeded step differs from the
    next (on the host that found it, the op-by-op run of this function differs from the program's)."""
    run = traced_mod.traced(lambda x, y, z: x * y + z)
    g = torch.Generator().manual_seed(0)
    x, y, z = (torch.randn(4096, generator=g) for _ in range(3))
    first = run(x.to("tpu"), y.to("tpu"), z.to("tpu")).cpu()
    assert any(isinstance(v, tuple) for v in run.cache.values()), "no program was built at the first call"
    for _ in range(2):
        assert torch.equal(run(x.to("tpu"), y.to("tpu"), z.to("tpu")).cpu(), first)
    torch.testing.assert_close(first, x * y + z)


def test_a_traced_function_of_one_computation_runs_op_by_op_first() -> None:
    """One floating-point computation rounds once either way: its first sighting compiles nothing."""
    calls: list = []

    def one(x: torch.Tensor) -> torch.Tensor:
        calls.append(traced_mod.tracing())
        return x.exp()

    run = traced_mod.traced(one)
    x = torch.randn(5)
    first = run(x.to("tpu")).cpu()
    assert calls == [True, False]  # traced once to count its computations, then run op by op
    assert torch.equal(run(x.to("tpu")).cpu(), first) and len(calls) == 2  # the program from then on
    torch.testing.assert_close(first, x.exp())


def test_a_traced_function_that_writes_an_input_stays_op_by_op() -> None:
    def writes(x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x * 2

    run = traced_mod.traced(writes)
    x = torch.zeros(3).to("tpu")
    for _ in range(3):
        run(x)
    assert x.cpu().tolist() == [3.0, 3.0, 3.0]
    assert all(v is not None and not isinstance(v, tuple) for v in run.cache.values())


def test_a_random_decomposition_still_draws_fresh_values_each_call() -> None:
    x = torch.ones(64, 64).to("tpu")
    draws = [F.alpha_dropout(x, 0.5, training=True).cpu() for _ in range(4)]
    for a, b in zip(draws, draws[1:], strict=False):
        assert not torch.equal(a, b)


def test_tracing_is_off_outside_a_trace() -> None:
    assert traced_mod.tracing() is False


# ----------------------------------------------------------------------------- nll_loss
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"reduction": "sum"},
        {"reduction": "none"},
        {"ignore_index": 2},
        {"label_smoothing": 0.1},
        {"weight": "w"},
        {"weight": "w", "reduction": "none"},
    ],
)
def test_cross_entropy_forward_and_backward_match_the_cpu(kwargs: dict) -> None:
    torch.manual_seed(0)
    x = torch.randn(6, 5, dtype=torch.float64)
    t = (
        torch.tensor([1, 4, 2, -100, 0, 3])
        if "ignore_index" not in kwargs
        else torch.tensor([1, 4, 2, 2, 0, 3])
    )
    w = torch.rand(5, dtype=torch.float64)
    res = []
    for dev in ("cpu", "tpu"):
        xx = x.detach().to(dev).requires_grad_()
        kw = {k: (w.to(dev) if v == "w" else v) for k, v in kwargs.items()}
        for _ in range(3):
            xx.grad = None
            loss = F.cross_entropy(xx, t.to(dev), **kw)
            loss.sum().backward()
        res.append((loss.detach().cpu(), xx.grad.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0])
    torch.testing.assert_close(res[1][1], res[0][1])


def test_nll_loss_of_one_sample_and_of_all_ignored() -> None:
    x1, t1 = torch.randn(5), torch.tensor(3)
    torch.testing.assert_close(F.nll_loss(x1.to("tpu"), t1.to("tpu")).cpu(), F.nll_loss(x1, t1))
    x = torch.randn(4, 5)
    t = torch.full((4,), -100)
    assert torch.isnan(F.cross_entropy(x.to("tpu"), t.to("tpu")).cpu())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_cross_entropy_accumulates_as_torch_does(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x, t = torch.randn(64, 50).to(dtype), torch.randint(0, 50, (64,))
    for red in ("mean", "sum"):
        torch.testing.assert_close(
            F.cross_entropy(x.to("tpu"), t.to("tpu"), reduction=red).cpu(),
            F.cross_entropy(x, t, reduction=red),
        )


@pytest.mark.parametrize("bad", [7, -3])
def test_an_out_of_bounds_target_raises_cpus_error_every_time(bad: int) -> None:
    x = torch.randn(3, 5).to("tpu")
    t = torch.tensor([1, bad, 2]).to("tpu")
    for _ in range(3):
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            F.cross_entropy(x, t)


# ----------------------------------------------------------------------------- foreach over a list
def _lists(dev: str) -> tuple[list, list]:
    torch.manual_seed(0)
    a = [torch.randn(s, dtype=torch.float64).abs().to(dev) for s in ((3, 4), (5,), (2, 2, 2))]
    b = [torch.randn(s, dtype=torch.float64).to(dev) for s in ((3, 4), (5,), (2, 2, 2))]
    return a, b


@pytest.mark.parametrize(
    "name", ["add_", "mul_", "addcmul_", "lerp_", "div_", "sqrt_", "norm", "add", "sqrt"]
)
def test_foreach_ops_match_the_cpu_on_every_call(name: str) -> None:
    def run(dev: str) -> list:
        a, b = _lists(dev)
        out = None
        for step in range(3):
            f = getattr(torch, f"_foreach_{name}")
            if name in ("add_", "add"):
                out = f(a, b, alpha=0.5 + step)
            elif name == "mul_":
                out = f(a, 0.9 - step / 10)
            elif name == "addcmul_":
                out = f(a, b, b, value=0.1 * (step + 1))
            elif name == "lerp_":
                out = f(a, b, 0.25)
            elif name == "div_":
                out = f(a, [1.5, 2.0 + step, 3.0])
            else:
                out = f(a)
        return [t.cpu() for t in (out if out is not None else a)]

    for g, w in zip(run("tpu"), run("cpu"), strict=True):
        torch.testing.assert_close(g, w)


def test_foreach_writing_a_tensor_that_another_element_reads_keeps_the_loops_order() -> None:
    def run(dev: str) -> list:
        x = torch.arange(4.0).to(dev)
        y = torch.ones(4).to(dev)
        torch._foreach_add_([x, y], [y, x])  # y += (x updated first)
        return [x.cpu(), y.cpu()]

    for g, w in zip(run("tpu"), run("cpu"), strict=True):
        torch.testing.assert_close(g, w)


def test_foreach_through_views_writes_their_roots() -> None:
    def run(dev: str) -> torch.Tensor:
        base = torch.arange(12.0).reshape(3, 4).to(dev)
        views = [base[0], base[2], base.t()[1]]
        for _ in range(3):
            torch._foreach_mul_(views[:2], 2.0)
        torch._foreach_add_(views[2:], 100.0)
        return base.cpu()

    torch.testing.assert_close(run("tpu"), run("cpu"))


def test_foreach_over_a_list_is_one_program() -> None:
    a, b = _lists("tpu")
    for _ in range(3):
        torch._foreach_add_(a, b)
    batched = [exe for fn, (_, exe) in foreach_mod._BATCHES.items() if fn.__name__ == "add"]
    assert batched and any(isinstance(v, tuple) for v in batched[0].cache.values())


def test_gradient_clipping_takes_the_foreach_path() -> None:
    from tpu_workbench.backend import dispatch

    ps = [torch.nn.Parameter(torch.randn(3, 3).to("tpu")) for _ in range(3)]
    for p in ps:
        p.grad = torch.randn(3, 3).to("tpu") * 10
    dispatch._PLANS.pop(torch.ops.aten._foreach_norm.Scalar, None)
    seen = []
    orig = dispatch.dispatch

    def spy(func, types=(), args=(), kwargs=None):  # noqa: ANN001, ANN202
        seen.append(func)
        return orig(func, types, args, kwargs)

    from tpu_workbench.backend import tensor

    tensor.set_dispatch_handler(spy)
    try:
        total = torch.nn.utils.clip_grad_norm_(ps, 1.0)
    finally:
        tensor.set_dispatch_handler(orig)
    assert torch.ops.aten._foreach_norm.Scalar in seen
    assert float(total) > 1.0
    assert abs(float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in ps]))) - 1.0) < 1e-3
