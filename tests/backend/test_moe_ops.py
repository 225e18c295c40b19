"""Ops that Mixture-of-Experts and speech models reach on an accelerator, checked against the CPU (or, where
torch's CPU kernel refuses what CUDA accepts, against CUDA's documented rule computed here in numpy)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tpu_workbench.backend import dispatch
from tpu_workbench.backend.ops import prims as prims_family

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def _histc_cuda_rule(x: np.ndarray, bins: int, lo: int, hi: int) -> np.ndarray:
    """CUDA's integer histc: bin = (v - lo) * bins // (hi - lo), the top value in the last bin."""
    if lo == hi:
        lo, hi = int(x.min()), int(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    v = x.astype(np.int64).reshape(-1)
    v = v[(v >= lo) & (v <= hi)]
    b = np.minimum((v - lo) * bins // (hi - lo), bins - 1)
    return np.bincount(b, minlength=bins).astype(x.dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("bins,lo,hi", [(8, 0, 7), (5, 0, 0), (3, 2, 9), (16, 0, 100)])
def test_histc_integer_input_like_cuda(dtype: torch.dtype, bins: int, lo: int, hi: int) -> None:
    x = torch.randint(0, 12, (200,), generator=torch.Generator().manual_seed(bins)).to(dtype)
    out = torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi)
    assert out.dtype == dtype and out.device.type == "tpu"
    assert out.cpu().tolist() == _histc_cuda_rule(x.numpy(), bins, lo, hi).tolist()


def test_histc_moe_routing_counts_experts() -> None:
    """transformers' MoE load-balancing: tokens per expert from int32 expert ids."""
    experts = 6
    ids = torch.randint(0, experts, (4, 9, 2), dtype=torch.int32)
    counts = torch.histc(ids.to("tpu"), bins=experts, min=0, max=experts - 1)
    assert torch.equal(counts.cpu(), torch.bincount(ids.reshape(-1), minlength=experts).to(torch.int32))
    float_counts = torch.histc(ids.to("tpu").float(), bins=experts, min=0, max=experts - 1)
    assert torch.equal(float_counts.cpu(), torch.histc(ids.float(), bins=experts, min=0, max=experts - 1))


def test_histc_float_still_matches_cpu_and_bool_refused() -> None:
    x = torch.randn(300)
    for kw in ({"bins": 10}, {"bins": 7, "min": -1.0, "max": 0.5}):
        assert torch.equal(torch.histc(x.to("tpu"), **kw).cpu(), torch.histc(x, **kw))
    with pytest.raises(RuntimeError, match="Bool"):
        torch.histc(torch.ones(3, dtype=torch.bool, device="tpu"))


def test_check_tensor_all() -> None:
    ok = torch.tensor([True, True], device="tpu")
    torch._check_tensor_all_with(ValueError, ok, lambda: "unused")
    torch._check_tensor_all(ok)
    with pytest.raises(ValueError, match="not all"):
        torch._check_tensor_all_with(ValueError, torch.tensor([True, False], device="tpu"), lambda: "not all")
    assert torch.ops.aten._is_any_true(torch.tensor([False, True], device="tpu")).item() is True
    assert torch.ops.aten._is_all_true(torch.tensor([False, True], device="tpu")).item() is False
    assert torch.ops.aten._is_all_true(torch.tensor([False, True], device="tpu")).device.type == "tpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_inplace_floor_division_and_power(dtype: torch.dtype) -> None:
    base = (torch.arange(-6, 6) * 1.5).to(dtype)
    ops = (lambda t: t.__ifloordiv__(2), lambda t: t.__ifloordiv__(torch.full((12,), -4, device=t.device).to(dtype)),
           lambda t: t.__ipow__(torch.full((12,), 2, device=t.device).to(dtype)))  # fmt: skip
    for op in ops:
        cpu, tpu = base.clone(), base.to("tpu")
        op(cpu)
        op(tpu)
        assert torch.equal(tpu.cpu(), cpu)


def test_inplace_shifts() -> None:
    base = torch.arange(-5, 5)
    for op in (
        lambda t: t.bitwise_left_shift_(2),
        lambda t: t.bitwise_right_shift_(1),
        lambda t: t.bitwise_left_shift_(torch.tensor(3, device=t.device)),
    ):
        cpu, tpu = base.clone(), base.to("tpu")
        op(cpu)
        op(tpu)
        assert torch.equal(tpu.cpu(), cpu)


# ----------------------------------------------------------------------------- prims
def _prim_inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        a, b = torch.rand(17, generator=g, dtype=dtype) * 1.6 + 0.2, torch.randn(17, generator=g, dtype=dtype)
        if name in ("acosh",):
            a = a + 1
        if name in ("asin", "acos", "atanh", "erf_inv"):
            a = a / 2
        return [a, b]
    a, b = (
        torch.randint(-9, 9, (17,), generator=g, dtype=dtype),
        torch.randint(1, 5, (17,), generator=g, dtype=dtype),
    )
    return [a, b]


_INT_OK = {"abs", "neg", "sign", "bitwise_not", "add", "sub", "mul", "div", "remainder", "maximum", "minimum",
           "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_arithmetic", "eq", "ne", "lt",
           "le", "gt", "ge", "round", "signbit", "isfinite"}  # fmt: skip
_ARITY = {**dict.fromkeys(prims_family._UNARY, 1), **dict.fromkeys(prims_family._PREDICATE, 1),
          **dict.fromkeys(prims_family._BINARY, 2), **dict.fromkeys(prims_family._COMPARE, 2)}  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
@pytest.mark.parametrize("name", sorted(_ARITY))
def test_prims_match_cpu(name: str, dtype: torch.dtype) -> None:
    if not dtype.is_floating_point and name not in _INT_OK:
        pytest.skip("float-only primitive")
    prim = getattr(torch.ops.prims, name).default
    args = _prim_inputs(name, dtype)[: _ARITY[name]]
    try:
        ref = prim(*args)
    except (RuntimeError, NotImplementedError):  # e.g. bitwise ops on floats: the device must refuse too
        with pytest.raises(Exception):  # noqa: B017 - jax's TypeError or torch's RuntimeError
            prim(*[a.to("tpu") for a in args])
        return
    out = prim(*[a.to("tpu") for a in args])
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, atol=1e-6, rtol=1e-6)


def test_prims_where_and_convert() -> None:
    p = torch.ops.prims
    c = torch.tensor([True, False, True])
    a, b = torch.tensor([1.0, 2, 3]), torch.tensor([4.0, 5, 6])
    assert torch.equal(p.where(c.to("tpu"), a.to("tpu"), b.to("tpu")).cpu(), p.where(c, a, b))
    out = p.convert_element_type(a.to("tpu"), torch.int32)
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), p.convert_element_type(a, torch.int32))


# ----------------------------------------------------------------------------- grouped matmul
def _grouped_ref(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None) -> torch.Tensor:
    """The per-group loop torch's fallback kernel runs, in float64 (zeros past offs[-1])."""
    a, b = a.double(), b.double()
    if offs is None:
        return a @ b
    ends = offs.tolist()
    starts = [0, *ends[:-1]]
    if a.dim() == 2 and b.dim() == 3:
        out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[s:e] = a[s:e] @ b[g]
        return out
    if a.dim() == 3:
        out = torch.zeros(a.shape[1], b.shape[1], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[:, s:e] = a[g] @ b[:, s:e]
        return out
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends, strict=True)])


GROUPED_CASES = {
    "2dx3d": ((13, 8), (3, 8, 4), [3, 3, 11]),
    "3dx2d": ((3, 5, 8), (8, 12), [4, 4, 12]),
    "2dx2d": ((5, 12), (12, 4), [2, 7, 12]),
    "3dx3d": ((3, 5, 8), (3, 8, 4), None),
}


@pytest.mark.parametrize("case", list(GROUPED_CASES))
def test_grouped_mm_forward_and_backward(case: str) -> None:
    sa, sb, offs = GROUPED_CASES[case]
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(sa, generator=g), torch.randn(sb, generator=g)
    o = None if offs is None else torch.tensor(offs, dtype=torch.int32)
    ta = a.to("tpu").requires_grad_()
    tb = b.to("tpu").requires_grad_()
    out = torch._grouped_mm(ta, tb, offs=None if o is None else o.to("tpu"))
    ref_a, ref_b = a.double().requires_grad_(), b.double().requires_grad_()
    ref = _grouped_ref(ref_a, ref_b, o)
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), atol=1e-5, rtol=1e-5)
    w = torch.randn(ref.shape, generator=g)
    out.backward(w.to("tpu"))
    ref.backward(w.double())
    torch.testing.assert_close(ta.grad.cpu().double(), ref_a.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tb.grad.cpu().double(), ref_b.grad, atol=1e-5, rtol=1e-5)


def test_grouped_mm_bfloat16_and_checks() -> None:
    a, b = torch.randn(6, 8, dtype=torch.bfloat16), torch.randn(2, 8, 8, dtype=torch.bfloat16)
    o = torch.tensor([2, 6], dtype=torch.int32)
    ref = torch._grouped_mm(a, b, offs=o)
    out = torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs=o.to("tpu"))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), ref, atol=2e-2, rtol=2e-2)
    with pytest.raises(RuntimeError, match="Offsets have to be int32"):
        torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs=o.long().to("tpu"))
    with pytest.raises(RuntimeError, match="Have to provide offsets"):
        torch._grouped_mm(a.to("tpu"), b.to("tpu"))
    with pytest.raises(RuntimeError, match="Float32, BFloat16 or Float16"):
        torch._grouped_mm(a.double().to("tpu"), b.double().to("tpu"), offs=o.to("tpu"))


# ----------------------------------------------------------------------------- weight norm
WEIGHT_NORM_MODELS = {
    # wav2vec2 / HuBERT / WavLM positional convolution: grouped Conv1d, norm over the kernel dim
    "parametrize-conv1d-dim2": lambda: torch.nn.utils.parametrizations.weight_norm(
        torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2
    ),
    "parametrize-linear": lambda: torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 4)),
    "legacy-conv1d": lambda dev="cpu": torch.nn.utils.weight_norm(torch.nn.Conv1d(8, 4, 3).to(dev)),
    "legacy-linear-dim-none": lambda dev="cpu": torch.nn.utils.weight_norm(
        torch.nn.Linear(8, 4).to(dev), dim=None
    ),
}


@pytest.mark.parametrize("name", list(WEIGHT_NORM_MODELS))
def test_weight_norm_forward_backward_without_cpu_rescue(name: str) -> None:
    torch.manual_seed(0)
    cpu = WEIGHT_NORM_MODELS[name]()
    torch.manual_seed(0)  # built twice: the legacy hook's computed weight cannot be deep-copied
    tpu = WEIGHT_NORM_MODELS[name]("tpu") if name.startswith("legacy") else copy.deepcopy(cpu).to("tpu")
    x = torch.randn(2, 8, 10) if "conv" in name else torch.randn(3, cpu.in_features)
    rescues = dict(dispatch.BACKWARD_RESCUES)
    outs = []
    for m, dev in ((cpu, "cpu"), (tpu, "tpu")):
        y = m(x.to(dev))
        (y * y).sum().backward()
        outs.append((y.detach().cpu(), {n: p.grad.cpu() for n, p in m.named_parameters()}))
    assert dict(dispatch.BACKWARD_RESCUES) == rescues, "weight norm's backward was re-run on the CPU"
    torch.testing.assert_close(outs[1][0], outs[0][0], atol=1e-5, rtol=1e-5)
    assert outs[0][1].keys() == outs[1][1].keys()
    for n, gc in outs[0][1].items():
        torch.testing.assert_close(outs[1][1][n], gc, atol=1e-5, rtol=1e-5, msg=lambda m, n=n: f"{n}: {m}")


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_matches_cpu(dim: int) -> None:
    g = torch.Generator().manual_seed(2)
    v = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
    gshape = [1, 1, 1]
    gshape[dim] = v.shape[dim]
    gg = torch.randn(gshape, generator=g, dtype=torch.float64)
    w, n = torch._weight_norm_interface(v, gg, dim)
    wt, nt = torch._weight_norm_interface(v.to("tpu"), gg.to("tpu"), dim)
    torch.testing.assert_close(wt.cpu(), w)
    torch.testing.assert_close(nt.cpu(), n)
    gw = torch.randn(v.shape, generator=g, dtype=torch.float64)
    ref = torch.ops.aten._weight_norm_interface_backward(gw, v, gg, n, dim)
    out = torch.ops.aten._weight_norm_interface_backward(
        gw.to("tpu"), v.to("tpu"), gg.to("tpu"), n.to("tpu"), dim
    )
    for r, o in zip(ref, out, strict=True):
        torch.testing.assert_close(o.cpu(), r)
    _, nb = torch._weight_norm_interface(v.to("tpu", torch.bfloat16), gg.to("tpu", torch.bfloat16), dim)
    assert nb.dtype == torch.float32  # as torch keeps half-precision norms


# ----------------------------------------------------------------------------- a real MoE model
@pytest.mark.slow
def test_tiny_mixtral_forward_backward_matches_cpu() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    cpu = transformers.MixtralForCausalLM(cfg)
    tpu = copy.deepcopy(cpu).to("tpu")
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(0))
    ref = cpu(ids, labels=ids)
    ref.loss.backward()
    out = tpu(ids.to("tpu"), labels=ids.to("tpu"))
    out.loss.backward()
    torch.testing.assert_close(out.logits.detach().cpu(), ref.logits.detach(), atol=1e-4, rtol=1e-4)
    for (n, pc), pt in zip(cpu.named_parameters(), tpu.parameters(), strict=True):
        if pc.grad is None:
            assert pt.grad is None, n
            continue
        torch.testing.assert_close(
            pt.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}"
        )
