"""scaled_dot_product_attention on "tpu": one fused op forward and one backward where it computes what the math
path does (backend/ops/attention.py), the math path everywhere else, and the CPU's answers in both."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench import backend  # noqa: F401 - registers the device
from tpu_workbench.backend import dispatch, lazy
from tpu_workbench.backend import tensor as tensor_module

B, H, L, S, D = 2, 4, 5, 7, 8
FUSED_FWD = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


class _Ops:
    """Names of the ATen ops the device dispatches inside the block."""

    def __enter__(self) -> list[str]:
        self.names: list[str] = []
        self.orig = dispatch.dispatch

        def record(func, types=(), args=(), kwargs=None):  # noqa: ANN001, ANN202
            self.names.append(func.name())
            return self.orig(func, types, args, kwargs)

        tensor_module.set_dispatch_handler(record)
        return self.names

    def __exit__(self, *exc: object) -> None:
        tensor_module.set_dispatch_handler(self.orig)


def _inputs(hk: int = H) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(B, H, L, D, generator=g),
        torch.randn(B, hk, S, D, generator=g),
        torch.randn(B, hk, S, D, generator=g),
        torch.randn(B, H, L, D, generator=g),
    )


def _run(
    dev: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grad: torch.Tensor,
    mask: torch.Tensor | None,
    **kw: object,
) -> list[torch.Tensor]:
    q, k, v = (t.detach().to(dev).requires_grad_() for t in (q, k, v))
    m = None if mask is None else mask.detach().to(dev).requires_grad_(mask.requires_grad)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    (y * grad.to(dev)).sum().backward()
    out = [y.detach().cpu(), q.grad.cpu(), k.grad.cpu(), v.grad.cpu()]
    if m is not None and m.requires_grad:
        out.append(m.grad.cpu())
    return out


CASES = {
    "plain": (None, {}),
    "causal": (None, {"is_causal": True}),
    "scale": (None, {"scale": 0.3}),
    "bool mask": (torch.rand(L, S, generator=torch.Generator().manual_seed(1)) > 0.3, {}),
    "float mask, broadcast over heads": (torch.randn(B, 1, L, S), {}),
    "a query row with nothing to attend to": (torch.tensor([[False] * S] + [[True] * S] * (L - 1)), {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fused_op_gives_the_cpu_answer_and_gradients(case: str) -> None:
    mask, kw = CASES[case]
    q, k, v, g = _inputs()
    want = _run("cpu", q, k, v, g, mask, **kw)
    with _Ops() as names:
        got = _run("tpu", q, k, v, g, mask, **kw)
    assert names.count(FUSED_FWD) == 1 and names.count(FUSED_BWD) == 1, names
    assert "aten::bmm" not in names and "aten::_safe_softmax" not in names
    for w, t in zip(want, got, strict=True):
        torch.testing.assert_close(t, w, rtol=1e-5, atol=1e-5)


def test_grouped_query_attention_and_a_float_mask_that_learns() -> None:
    q, k, v, g = _inputs(hk=2)
    mask = torch.randn(1, H, L, S).requires_grad_()
    want = _run("cpu", q, k, v, g, mask, enable_gqa=True)
    with _Ops() as names:
        got = _run("tpu", q, k, v, g, mask, enable_gqa=True)
    assert FUSED_FWD in names and FUSED_BWD in names
    assert len(got) == 5  # the mask's gradient, summed back to its broadcast shape
    for w, t in zip(want, got, strict=True):
        torch.testing.assert_close(t, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [{"dropout_p": 0.5}, {"is_causal": True, "attn_mask": torch.ones(L, S) > 0}])
def test_other_settings_keep_the_math_path(kw: dict) -> None:
    q, k, v, _ = _inputs()
    kw = {n: (x.to("tpu") if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
    with _Ops() as names:
        try:
            F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), **kw)
        except RuntimeError:
            pass  # (causal with an explicit mask: the math path's own refusal, if it refuses)
    assert FUSED_FWD not in names


def test_fused_eager_records_the_attention_without_running_it() -> None:
    q, k, v, g = _inputs()
    want = _run("cpu", q, k, v, g, None, is_causal=True)
    lazy.reset_stats()
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        qt, kt, vt = (t.to("tpu").requires_grad_() for t in (q, k, v))
        y = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        (y * g.to("tpu")).sum().backward()
        assert lazy.stats()["flushes"] == 0  # forward and backward still pending
        got = [y.detach().cpu(), qt.grad.cpu(), kt.grad.cpu(), vt.grad.cpu()]
    for w, t in zip(want, got, strict=True):
        torch.testing.assert_close(t, w, rtol=1e-5, atol=1e-5)


def test_no_grad_inference_mode_and_compile_agree_with_the_cpu() -> None:
    q, k, v, _ = _inputs()
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qt, kt, vt = (t.to("tpu") for t in (q, k, v))
    with torch.no_grad():
        torch.testing.assert_close(F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).cpu(), want)
    with torch.inference_mode():
        torch.testing.assert_close(F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).cpu(), want)
    compiled = torch.compile(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), backend="tpu"
    )
    torch.testing.assert_close(compiled(qt, kt, vt).cpu(), want, rtol=1e-5, atol=1e-5)


def test_bfloat16_under_autocast_stays_close_to_the_cpu() -> None:
    q, k, v, _ = _inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qt, kt, vt = (t.to("tpu") for t in (q, k, v))
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), want.float(), rtol=2e-2, atol=2e-2)
