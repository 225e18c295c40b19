"""Tensor semantics on "tpu": dtypes, views and aliasing, out=, transfers, printing, save/load, RNG."""

from __future__ import annotations

import copy
import io

import pytest
import torch
import torch.nn as nn

DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_round_trip(dtype: torch.dtype) -> None:
    src = (torch.arange(6) % 3).to(dtype)
    if dtype.is_floating_point:
        src = src * 1.5 - 1 if dtype != torch.bool else src
    t = src.to("tpu")
    assert t.dtype == dtype and t.device.type == "tpu"
    back = t.cpu()
    assert back.dtype == dtype
    assert torch.equal(back, src)
    assert torch.ones(2, dtype=dtype, device="tpu").dtype == dtype


def test_64bit_kept() -> None:
    big = torch.tensor([2**40 + 1], dtype=torch.int64, device="tpu")
    assert (big + 1).cpu().item() == 2**40 + 2
    d = torch.tensor([1 / 3], dtype=torch.float64, device="tpu")
    assert (d * 3).dtype == torch.float64
    assert torch.arange(3, device="tpu").dtype == torch.int64


def test_type_promotion_like_torch() -> None:
    i = torch.arange(3, device="tpu")
    assert (i * 2.5).dtype == torch.float32
    assert (i / 2).dtype == torch.float32
    assert (
        torch.ones(2, dtype=torch.int32, device="tpu") + torch.tensor(1, device="tpu")
    ).dtype == torch.int32
    assert (
        torch.ones(2, dtype=torch.bfloat16, device="tpu") * torch.tensor(2.0, device="tpu")
    ).dtype == torch.bfloat16
    assert (
        torch.ones(2, dtype=torch.float16, device="tpu") + torch.ones(2, dtype=torch.bfloat16, device="tpu")
    ).dtype == torch.float32


def test_write_through_views() -> None:
    x = torch.zeros(3, 4, device="tpu")
    x[0].add_(1)
    x.t()[2].fill_(7)
    x.narrow(0, 2, 1).mul_(0).add_(5)
    v = x.view(12)
    v[1] = -1
    ref = torch.zeros(3, 4)
    ref[0].add_(1)
    ref.t()[2].fill_(7)
    ref.narrow(0, 2, 1).mul_(0).add_(5)
    ref.view(12)[1] = -1
    assert torch.equal(x.cpu(), ref)


def test_view_sees_base_updates() -> None:
    x = torch.arange(6.0, device="tpu")
    v = x.view(2, 3)[1]
    x.add_(10)
    assert v.tolist() == [13.0, 14.0, 15.0]
    e = x[:3].expand(2, 3)
    x.zero_()
    assert e.sum().item() == 0


def test_as_strided_and_detach_alias() -> None:
    a = torch.zeros(6, device="tpu")
    a.as_strided((2, 2), (3, 1)).fill_(1)
    assert a.tolist() == [1, 1, 0, 1, 1, 0]
    d = a.detach()
    d.add_(1)
    assert a.tolist() == [2, 2, 1, 2, 2, 1]


def _overlapping_chunks(h: torch.Tensor, w: int) -> torch.Tensor:
    """Longformer's sliding-window chunking: non-overlapping chunks of 2w, then as_strided to overlap by w."""
    h = h.view(h.size(0), h.size(1) // (2 * w), 2 * w, h.size(2))
    size, stride = list(h.size()), list(h.stride())
    size[1], stride[1] = size[1] * 2 - 1, stride[1] // 2
    return h.as_strided(size=size, stride=stride)


def test_as_strided_after_a_reshape_a_real_device_would_copy() -> None:
    """A transposed query reshaped (a copy on CUDA or the CPU: here a view, since wrappers report
    contiguity) and then chunked with as_strided: forward and gradient as on the CPU."""
    q = torch.randn(2, 8, 3, 4, requires_grad=True)  # batch, seq, heads, head_dim
    qt = q.detach().to("tpu").requires_grad_()

    def chunks(x: torch.Tensor) -> torch.Tensor:
        return _overlapping_chunks(x.transpose(1, 2).reshape(2 * 3, 8, 4), w=2)

    want, got = chunks(q), chunks(qt)
    torch.testing.assert_close(got.cpu(), want)
    (want * torch.arange(want.numel()).view_as(want)).sum().backward()
    (got * torch.arange(got.numel(), device="tpu").view_as(got)).sum().backward()
    torch.testing.assert_close(qt.grad.cpu(), q.grad)


def test_as_strided_of_a_view_reads_the_storage_as_torch_does() -> None:
    cpu = torch.arange(20.0)
    base = cpu.to("tpu")
    assert base[5:15].as_strided((2, 2), (1, 2)).cpu().tolist() == [[5.0, 7.0], [6.0, 8.0]]  # from its offset
    assert torch.equal(
        base[5:15].as_strided((2, 2), (1, 2), 0).cpu(), cpu[5:15].as_strided((2, 2), (1, 2), 0)
    )
    assert torch.equal(
        base.view(4, 5).t().as_strided((2, 2), (1, 2)).cpu(), cpu.view(4, 5).t().as_strided((2, 2), (1, 2))
    )


def test_out_variants() -> None:
    a = torch.arange(4.0, device="tpu")
    out = torch.empty(4, device="tpu")
    r = torch.add(a, 1, out=out)
    assert r is out and out.tolist() == [1, 2, 3, 4]
    vals, idx = torch.empty(2, device="tpu"), torch.empty(2, dtype=torch.long, device="tpu")
    torch.max(torch.tensor([[1.0, 5.0], [7.0, 2.0]], device="tpu"), 1, out=(vals, idx))
    assert vals.tolist() == [5, 7] and idx.tolist() == [1, 0]
    with pytest.raises(RuntimeError, match="cannot resize"):
        torch.add(a, 1, out=torch.empty(3, device="tpu"))


def test_inplace_on_leaf_under_no_grad() -> None:
    p = nn.Parameter(torch.ones(3, device="tpu"))
    with torch.no_grad():
        p.mul_(3)
    assert p.tolist() == [3, 3, 3] and p.requires_grad
    with pytest.raises(RuntimeError, match="leaf Variable"):
        p.mul_(2)


def test_transfers_item_tolist_numpy() -> None:
    c = torch.randn(2, 3)
    t = c.to("tpu", non_blocking=True)
    assert torch.equal(t.cpu(), c)
    assert torch.equal(t.to("cpu", non_blocking=True), c)
    assert t.tpu() is t and c.tpu().is_tpu
    assert t[0, 1].item() == c[0, 1].item()
    assert t.tolist() == c.tolist()
    assert (t.cpu().numpy() == c.numpy()).all()
    with pytest.raises(TypeError, match="Use Tensor.cpu()"):
        t.numpy()
    assert torch.tensor([1, 2], device="tpu").sum().item() == 3


def test_printing() -> None:
    s = repr(torch.tensor([1.5, 2.0], device="tpu"))
    assert s == "tensor([1.5000, 2.0000], device='tpu:0')"
    assert "dtype=torch.bfloat16" in repr(torch.ones(2, dtype=torch.bfloat16, device="tpu"))
    assert "grad_fn" in repr(torch.ones(2, device="tpu", requires_grad=True) * 2)


def test_save_load_weights_only(tmp_path) -> None:  # noqa: ANN001
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to("tpu")
    path = tmp_path / "w.pt"
    torch.save(m.state_dict(), path)
    sd = torch.load(path)  # weights_only=True is the default
    assert sd["0.weight"].device.type == "tpu"
    m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to("tpu")
    m2.load_state_dict(sd)
    for k, v in m.state_dict().items():
        assert torch.equal(v.cpu(), m2.state_dict()[k].cpu()), k
    buf = io.BytesIO()
    torch.save(torch.arange(3, device="tpu"), buf)
    buf.seek(0)
    assert torch.load(buf, map_location="cpu").device.type == "cpu"


def test_deepcopy_and_clone_are_independent() -> None:
    x = torch.ones(3, device="tpu")
    y = x.clone()
    z = copy.deepcopy(x)
    x.add_(1)
    assert y.tolist() == [1, 1, 1] and z.tolist() == [1, 1, 1]


def test_dataloader_pin_memory() -> None:
    ds = torch.utils.data.TensorDataset(torch.randn(8, 3), torch.arange(8))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True)
    total = 0
    for xb, yb in dl:
        total += xb.to("tpu", non_blocking=True).shape[0] + 0 * yb.sum().item()
    assert total == 8


def test_manual_seed_reproducible() -> None:
    torch.manual_seed(7)
    a = torch.randn(5, device="tpu"), torch.rand(3, device="tpu"), torch.randint(0, 9, (4,), device="tpu")
    torch.manual_seed(7)
    b = torch.randn(5, device="tpu"), torch.rand(3, device="tpu"), torch.randint(0, 9, (4,), device="tpu")
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u.cpu(), v.cpu())
    torch.manual_seed(8)
    assert not torch.equal(torch.randn(5, device="tpu").cpu(), a[0].cpu())
    s = torch.tpu.get_rng_state if False else None  # legacy; state APIs used by torch internals below
    with torch.random.fork_rng(device_type="tpu"):
        torch.randn(3, device="tpu")
    del s


def test_autograd_matches_cpu() -> None:
    torch.manual_seed(0)
    xc = torch.randn(4, 5, requires_grad=True)
    wc = torch.randn(5, 3, requires_grad=True)
    xt = xc.detach().to("tpu").requires_grad_()
    wt = wc.detach().to("tpu").requires_grad_()
    for x, w in ((xc, wc), (xt, wt)):
        y = torch.tanh(x @ w).pow(2).sum() + torch.softmax(x, -1).max()
        y.backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad)


def test_cpu_tensor_mixing_rules() -> None:
    t = torch.ones(2, device="tpu")
    assert (t + torch.tensor(2.0)).tolist() == [3, 3]  # CPU scalars are allowed
    with pytest.raises(RuntimeError, match="same device"):
        t + torch.ones(2)
