"""A view of a TPU tensor reports the strides and storage offset PyTorch gives it on CUDA (backend/strides.py),
so PyTorch's copy-or-view choices (``contiguous``, ``reshape``, ``flatten``) and its refusals (``view``) match an
accelerator's: a "copy" never aliases its source, and an alias never silently becomes a copy."""

from __future__ import annotations

import pytest
import torch

_VIEWS = {
    "t": lambda x: x.t(),
    "transpose then slice": lambda x: x.transpose(0, 1)[1:],
    "step slice": lambda x: x[:, ::2],
    "narrow columns": lambda x: x.narrow(1, 2, 3),
    "row slice": lambda x: x[2:],
    "select column": lambda x: x[:, 3],
    "expand": lambda x: x[:1].expand(3, 6),
    "unsqueeze of t": lambda x: x.t().unsqueeze(1),
    "permute 3-d": lambda x: x.view(2, 2, 6).permute(2, 0, 1),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "diagonal": lambda x: x.diagonal(),
    "split part": lambda x: x.split(4, dim=1)[1],
    "chunk part": lambda x: x.chunk(2, dim=0)[1],
    "unbind part": lambda x: x.unbind(1)[2],
    "movedim": lambda x: x.view(2, 2, 6).movedim(0, 2),
}


@pytest.fixture(params=["DEFER_NEVER", "DEFER_AND_FUSE"])
def mode(request: pytest.FixtureRequest) -> str:
    with torch.tpu.set_eager_mode(request.param):
        yield request.param


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    cpu = torch.arange(24.0).view(4, 6)
    return cpu, cpu.to("tpu")


@pytest.mark.parametrize("name", list(_VIEWS))
def test_a_view_reports_the_strides_offset_and_contiguity_a_cuda_tensor_would(name: str, mode: str) -> None:
    cpu, dev = _pair()
    v_cpu, v_dev = _VIEWS[name](cpu), _VIEWS[name](dev)
    assert v_dev.stride() == v_cpu.stride()
    assert v_dev.storage_offset() == v_cpu.storage_offset()
    assert v_dev.is_contiguous() == v_cpu.is_contiguous()
    assert v_dev.data_ptr() - dev.data_ptr() == v_cpu.data_ptr() - cpu.data_ptr()
    assert torch.equal(v_dev.cpu(), v_cpu)


@pytest.mark.parametrize("copy", ["contiguous", "reshape", "flatten", "view_as via reshape"])
def test_a_copy_of_a_transposed_view_does_not_write_back_into_its_source(copy: str, mode: str) -> None:
    make = {
        "contiguous": lambda v: v.contiguous(),
        "reshape": lambda v: v.reshape(-1),
        "flatten": lambda v: v.flatten(),
        "view_as via reshape": lambda v: v.reshape(6, 4),
    }[copy]
    cpu, dev = _pair()
    c_cpu, c_dev = make(cpu.t()), make(dev.t())
    c_cpu.add_(100)
    c_dev.add_(100)
    assert torch.equal(dev.cpu(), cpu), "writing into the copy changed its source"
    assert torch.equal(c_dev.cpu(), c_cpu)


def test_a_reshape_pytorch_can_express_as_a_view_still_aliases(mode: str) -> None:
    cpu, dev = _pair()
    r_cpu, r_dev = cpu[1:].reshape(-1), dev[1:].reshape(-1)
    assert r_dev.storage_offset() == r_cpu.storage_offset() == 6
    r_cpu.mul_(2)
    r_dev.mul_(2)
    assert torch.equal(dev.cpu(), cpu)
    assert dev.contiguous() is dev


def test_view_refuses_a_shape_the_strides_cannot_express_with_pytorchs_message() -> None:
    cpu, dev = _pair()
    with pytest.raises(RuntimeError) as on_cpu:
        cpu.t().view(-1)
    with pytest.raises(RuntimeError) as on_tpu:
        dev.t().view(-1)
    assert str(on_tpu.value) == str(on_cpu.value)


def test_gradients_flow_through_a_contiguous_copy_of_a_view() -> None:
    w_cpu = torch.randn(4, 6, requires_grad=True)
    w_dev = w_cpu.detach().to("tpu").requires_grad_()
    for w in (w_cpu, w_dev):
        c = w.t().contiguous()
        c.mul_(3)  # in place on the copy: the source is not modified (no autograd version error either)
        (c * w.t()).sum().backward()
    assert torch.allclose(w_dev.grad.cpu(), w_cpu.grad)


@pytest.mark.parametrize("name", ["t", "transpose then slice", "step slice", "row slice", "select column"])
def test_as_strided_of_a_view_reads_its_strides_in_the_storage(name: str, mode: str) -> None:
    cpu, dev = _pair()
    v_cpu, v_dev = _VIEWS[name](cpu), _VIEWS[name](dev)
    for args in [((2, 2), (1, 6)), ((3,), (5,), 2), ((2, 3), (v_cpu.stride()[0], 1))]:
        assert torch.equal(v_dev.as_strided(*args).cpu(), v_cpu.as_strided(*args)), args
    w_cpu, w_dev = v_cpu.as_strided((2, 2), (1, 6)), v_dev.as_strided((2, 2), (1, 6))
    w_cpu.fill_(-1)
    w_dev.fill_(-1)
    assert torch.equal(dev.cpu(), cpu), "as_strided's result is a view of the storage"


def test_chunking_by_the_reported_strides_matches_pytorch(mode: str) -> None:
    """Longformer-style overlapping chunks built from ``x.stride()`` of a transposed-then-reshaped tensor."""
    cpu = torch.arange(2 * 8 * 3.0).view(2, 8, 3)
    dev = cpu.to("tpu")

    def chunks(x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2).reshape(2 * 3, 8)  # a copy: the transpose is not contiguous
        size = (x.size(0), 3, 4)
        stride = (x.stride(0), 2 * x.stride(1), x.stride(1))
        return x.as_strided(size=size, stride=stride)

    assert torch.equal(chunks(dev).cpu(), chunks(cpu))


def test_as_strided_in_place_on_a_view_and_on_a_root(mode: str) -> None:
    cpu, dev = _pair()
    v_cpu, v_dev = cpu.t(), dev.t()
    v_cpu.as_strided_((3, 2), (6, 1), 1)
    v_dev.as_strided_((3, 2), (6, 1), 1)
    assert torch.equal(v_dev.cpu(), v_cpu)


_RESTRIDES = {
    "t_": lambda x: x.t_(),
    "transpose_": lambda x: x.transpose_(0, 1),
    "as_strided_ transposed": lambda x: x.as_strided_((2, 2), (1, 3), 1),
    "as_strided_ offset": lambda x: x.as_strided_((2,), (1,), 2),
    "unsqueeze_": lambda x: x.unsqueeze_(1),
}


@pytest.mark.parametrize("name", list(_RESTRIDES))
def test_a_root_restrided_in_place_reports_cudas_strides_and_copies_as_cuda_does(
    name: str, mode: str
) -> None:
    cpu = torch.arange(6.0).view(2, 3)
    dev = cpu.clone().to("tpu")
    ptr = dev.data_ptr() - dev.storage_offset() * dev.element_size()
    _RESTRIDES[name](cpu)
    _RESTRIDES[name](dev)
    assert (dev.stride(), dev.storage_offset()) == (cpu.stride(), cpu.storage_offset())
    assert dev.data_ptr() - dev.storage_offset() * dev.element_size() == ptr, "same storage as before"
    assert torch.equal(dev.cpu(), cpu)
    dev.contiguous().add_(10)  # a copy where the strides say so, the tensor itself where they do not
    cpu.contiguous().add_(10)
    assert torch.equal(dev.cpu(), cpu)
    dev.mul_(2)
    cpu.mul_(2)
    assert torch.equal(dev.cpu(), cpu)
    assert torch.equal(dev.reshape(-1).cpu(), cpu.reshape(-1))


def test_as_strided_of_a_view_with_another_dtype_names_the_limit() -> None:
    z = torch.randn(4, dtype=torch.complex64).to("tpu")
    with pytest.raises(NotImplementedError, match="as_strided"):
        torch.view_as_real(z).as_strided((2,), (1,))


def test_assigning_data_takes_the_new_value_and_shares_it() -> None:
    p = torch.nn.Parameter(torch.arange(6.0).view(2, 3).to("tpu"))
    p.data = p.data.t()
    assert p.stride() == (1, 3)
    assert torch.equal(p.detach().cpu(), torch.arange(6.0).view(2, 3).t())
    assert p.is_leaf and p.requires_grad
    x = torch.ones(2, 2, device="tpu")
    p.data = x
    x.add_(1)  # p.data = x shares x's storage, as on CUDA
    assert torch.equal(p.detach().cpu(), torch.full((2, 2), 2.0))
    (p * 3).sum().backward()
    assert torch.equal(p.grad.cpu(), torch.full((2, 2), 3.0))
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        p.data = torch.zeros(2, 2)
