"""bfloat16 nn lowerings match torch CPU (float32 accumulation / torch's own rounding points)."""

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench import backend

backend.register()
bf = torch.bfloat16


def _close(cpu: torch.Tensor, tpu: torch.Tensor) -> None:
    assert tpu.dtype == cpu.dtype and tpu.shape == cpu.shape
    torch.testing.assert_close(tpu.cpu(), cpu, atol=2e-2, rtol=1.6e-2)


def _t(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.to("tpu") for t in ts]


def test_conv_transpose2d_big_output_padding() -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 2, 4, 4, dtype=bf), torch.randn(2, 2, 4, 5, dtype=bf), torch.randn(4, dtype=bf)
    kw = dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))
    ref = F.conv_transpose2d(x, w, b, **kw)
    got = F.conv_transpose2d(*_t(x, w, b), **kw)
    assert torch.equal(got.cpu(), ref)


def test_conv_transpose2d_plain() -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(1, 3, 4, 4, dtype=bf), torch.randn(3, 3, 3, 3, dtype=bf), torch.randn(3, dtype=bf)
    _close(
        F.conv_transpose2d(x, w, b, stride=2, padding=2, output_padding=1),
        F.conv_transpose2d(*_t(x, w, b), stride=2, padding=2, output_padding=1),
    )


def test_batch_norm_with_update_dtypes() -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 5, 5, dtype=bf)
    ps = [torch.randn(5, dtype=bf) for _ in range(3)] + [torch.rand(5, dtype=bf) + 0.5]
    ref = torch.ops.aten._batch_norm_with_update(x, *ps, 0.5, 0.6)
    got = torch.ops.aten._batch_norm_with_update(*_t(x, *ps), 0.5, 0.6)
    for r, g in zip(ref, got, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
    _close(ref[0], got[0])


@pytest.mark.parametrize("eps", [1e-5, 0.6])
def test_instance_norm(eps: float) -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 2, 3, 4, dtype=bf) * 3, torch.randn(2, dtype=bf), torch.randn(2, dtype=bf)
    _close(
        F.instance_norm(x, weight=w, bias=b, eps=eps),
        F.instance_norm(*_t(x), weight=_t(w)[0], bias=_t(b)[0], eps=eps),
    )


def test_bilinear() -> None:
    torch.manual_seed(0)
    a, c, w, b = (
        torch.randn(8, 8, dtype=bf),
        torch.randn(8, 8, dtype=bf),
        torch.randn(8, 8, 8, dtype=bf),
        torch.randn(8, dtype=bf),
    )
    assert torch.equal(F.bilinear(*_t(a, c, w, b)).cpu(), F.bilinear(a, c, w, b))


def test_trilinear_upsample() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 3, 5, dtype=bf)
    for kw in (dict(size=(5, 4, 6), align_corners=True), dict(scale_factor=1.7, align_corners=False)):
        ref = F.interpolate(x, mode="trilinear", **kw)
        assert torch.equal(F.interpolate(x.to("tpu"), mode="trilinear", **kw).cpu(), ref)


def test_embedding_bag_sum() -> None:
    torch.manual_seed(0)
    w, idx, off, psw = (
        torch.randn(10, 5, dtype=bf),
        torch.tensor([1, 2, 4, 5, 4]),
        torch.tensor([0, 2]),
        torch.randn(5, dtype=bf),
    )
    ref = F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=psw)
    got = F.embedding_bag(*_t(idx, w, off), mode="sum", per_sample_weights=psw.to("tpu"))
    assert torch.equal(got.cpu(), ref)


def test_embedding_max_norm() -> None:
    torch.manual_seed(0)
    w, idx = torch.randn(10, 4, dtype=bf) * 3, torch.tensor([[1, 2, 2], [7, 1, 0]])
    wc, wt = w.clone(), w.clone().to("tpu")
    ref = F.embedding(idx, wc, max_norm=1.5)
    got = F.embedding(idx.to("tpu"), wt, max_norm=1.5)
    _close(ref, got)
    _close(wc, wt)
