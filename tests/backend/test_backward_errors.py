"""An error raised inside backward on "tpu" reaches the caller as the same exception CPU raises.

PyTorch's Python-backend device guard runs Python from noexcept C++ while the autograd engine unwinds;
before ``tpu_workbench.backend.backward_errors`` every such error aborted the interpreter. The cases run in a child
process so that a regression fails these tests instead of killing the test worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_CASES = r"""
import json, torch, backend
from torch.utils.checkpoint import checkpoint

def boom(*_):
    raise ValueError("boom")

def leaf_hook(x):
    x.register_hook(boom); (x * x).sum().backward()

def hook_returns_int(x):
    h = x * 2; h.register_hook(lambda g: 5); (h * h).sum().backward()

def grad_fn_hook(x):
    h = x * 2; h.grad_fn.register_hook(lambda gi, go: boom()); (h * h).sum().backward()

def grad_fn_prehook(x):
    h = x * 2; h.grad_fn.register_prehook(lambda go: boom()); (h * h).sum().backward()

def post_accumulate_hook(x):
    x.register_post_accumulate_grad_hook(boom); (x * x).sum().backward()

def module_backward_hook(x):
    m = torch.nn.Linear(3, 3).to(x.device); m.register_full_backward_hook(lambda *a: boom()); m(x).sum().backward()

def unpack_hook(x):
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, boom):
        y = (x * x).sum()
    y.backward()

def checkpoint_recompute(x):
    calls = []
    def f(a):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("recompute failed")
        return (a * a).sin()
    checkpoint(f, x, use_reentrant=False).sum().backward()

def autograd_grad(x):
    h = x * 2; h.register_hook(boom); torch.autograd.grad((h * h).sum(), x)

def op_refused_in_backward(x):
    from tpu_workbench.backend.tensor import TpuTensor
    original = TpuTensor.__dict__["__torch_dispatch__"]
    def refuse(cls, func, types, args=(), kwargs=None):
        if torch._C._current_graph_task_id() != -1:
            raise NotImplementedError(f"{func}: refused for this test")
        return original.__func__(cls, func, types, args, kwargs)
    TpuTensor.__torch_dispatch__ = classmethod(refuse)
    try:
        (x * x).sum().backward()
    finally:
        TpuTensor.__torch_dispatch__ = original

def lowering_fails_in_backward(x):
    from tpu_workbench.backend import dispatch
    op = torch.ops.aten.mul.Tensor
    (x * x).sum()  # the plan exists
    plan = dispatch._PLANS[op]
    def failing(f, a, k):
        if torch._C._current_graph_task_id() != -1:
            raise RuntimeError("mul failed for this test")
        return plan(f, a, k)
    dispatch._PLANS[op] = failing
    try:
        (x * x).sum().backward()
    finally:
        dispatch._PLANS[op] = plan

cases = [leaf_hook, hook_returns_int, grad_fn_hook, grad_fn_prehook, post_accumulate_hook,
         module_backward_hook, unpack_hook, checkpoint_recompute, autograd_grad]
out = {}
for dev in ("cpu", "tpu"):
    for case in cases + ([op_refused_in_backward, lowering_fails_in_backward] if dev == "tpu" else []):
        x = torch.randn(3).to(dev).requires_grad_()
        try:
            case(x)
            out[f"{dev}:{case.__name__}"] = None
        except Exception as e:
            out[f"{dev}:{case.__name__}"] = [type(e).__name__, str(e).split(chr(10))[0]]
x = torch.randn(3).to("tpu").requires_grad_()
(x * x).sum().backward()
out["after"] = torch.allclose(x.grad.cpu(), 2 * x.detach().cpu())
print(json.dumps(out))
"""


def _run_cases(**env: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CASES],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"the child process died (rc={proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(out: dict) -> None:
    names = sorted({k.split(":", 1)[1] for k in out if k.startswith("cpu:")})
    assert len(names) == 9
    for name in names:
        assert out[f"cpu:{name}"] is not None, name
        assert out[f"tpu:{name}"] == out[f"cpu:{name}"], name
    assert out["tpu:op_refused_in_backward"][0] == "NotImplementedError"
    assert "refused for this test" in out["tpu:op_refused_in_backward"][1]
    assert out["tpu:lowering_fails_in_backward"] == ["RuntimeError", "mul failed for this test"]
    assert out["after"] is True  # the device keeps working after the errors


@pytest.mark.slow  # 5 s subprocess
def test_errors_in_backward_raise_the_cpu_exception_and_the_device_keeps_working() -> None:
    _check(_run_cases())


@pytest.mark.slow
def test_errors_in_backward_on_pytorchs_device_thread() -> None:
    _check(_run_cases(TORCH_TPU_AUTOGRAD_DEVICE_THREAD="1"))


def test_the_guard_answers_privateuse1_and_keeps_nothing_when_no_error_is_pending() -> None:
    from tpu_workbench.backend import _torch_private as private
    from tpu_workbench.backend import backward_errors

    assert backward_errors.guard_device_type() == private.DEVICE_TYPE_PRIVATEUSE1
    assert backward_errors.take_kept() is None
