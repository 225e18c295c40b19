"""Sparse COO tensors on "tpu": moved there and back, read, coalesced, densified, multiplied, saved."""

from __future__ import annotations

import io

import pytest
import torch

TPU = torch.device("tpu", 0)


def _sample() -> torch.Tensor:
    i = torch.tensor([[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]])
    v = torch.tensor([3.0, 4.0, 5.0, 1.0, -2.0])
    return torch.sparse_coo_tensor(i, v, (3, 3))


def test_to_device_and_back_keeps_indices_values_and_size() -> None:
    s = _sample()
    t = s.to("tpu")
    assert t.layout == torch.sparse_coo and t.device == TPU and t.shape == s.shape
    assert t._nnz() == 5 and t.sparse_dim() == 2 and t.dense_dim() == 0 and not t.is_coalesced()
    assert torch.equal(t._indices().cpu(), s._indices()) and torch.equal(t._values().cpu(), s._values())
    back = t.cpu()
    assert back.layout == torch.sparse_coo and torch.equal(back.to_dense(), s.to_dense())
    with pytest.raises(RuntimeError, match="uncoalesced"):
        t.indices()


def test_coalesce_and_to_dense_match_the_cpu() -> None:
    s, t = _sample(), _sample().to("tpu")
    cs, ct = s.coalesce(), t.coalesce()
    assert ct.is_coalesced()
    assert torch.equal(ct.indices().cpu(), cs.indices()) and torch.equal(ct.values().cpu(), cs.values())
    assert torch.equal(t.to_dense().cpu(), s.to_dense())


def test_sparse_times_dense_forward_and_backward() -> None:
    s = _sample()
    d = torch.randn(3, 4, requires_grad=True)
    dt = d.detach().to("tpu").requires_grad_()
    for fn in (torch.sparse.mm, torch.mm, torch.matmul):
        ref, got = fn(s, d), fn(s.to("tpu"), dt)
        assert torch.allclose(got.cpu(), ref, atol=1e-6)
    torch.sparse.mm(s, d).pow(2).sum().backward()
    torch.sparse.mm(s.to("tpu"), dt).pow(2).sum().backward()
    assert torch.allclose(dt.grad.cpu(), d.grad, atol=1e-5)


def test_scalar_ops_transpose_sum_add() -> None:
    s, t = _sample(), _sample().to("tpu")
    assert torch.equal((t * 2).to_dense().cpu(), (s * 2).to_dense())
    assert torch.equal((t / 2).to_dense().cpu(), (s / 2).to_dense())
    assert torch.equal((-t).to_dense().cpu(), (-s).to_dense())
    assert torch.equal(t.t().to_dense().cpu(), s.t().to_dense())
    assert torch.sparse.sum(t).item() == torch.sparse.sum(s).item()
    assert torch.equal((t + t).to_dense().cpu(), (s + s).to_dense())


def test_module_with_a_sparse_buffer_moves_and_trains() -> None:
    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("adj", _sample())
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(torch.sparse.mm(self.adj, x))

    torch.manual_seed(0)
    cpu = Graph()
    dev = Graph().to("tpu")
    dev.load_state_dict(cpu.state_dict())
    assert dev.adj.device == TPU and dev.adj.layout == torch.sparse_coo
    x = torch.randn(3, 3)
    cpu(x).sum().backward()
    dev(x.to("tpu")).sum().backward()
    assert torch.allclose(dev.lin.weight.grad.cpu(), cpu.lin.weight.grad, atol=1e-5)


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("map_location", [None, "cpu", "tpu"])
def test_save_load(map_location: str | None, weights_only: bool) -> None:
    buf = io.BytesIO()
    torch.save({"a": _sample().to("tpu")}, buf)
    buf.seek(0)
    got = torch.load(buf, map_location=map_location, weights_only=weights_only)["a"]
    assert got.layout == torch.sparse_coo
    assert got.device.type == ("cpu" if map_location == "cpu" else "tpu")
    assert torch.equal(got.to_dense().cpu(), _sample().to_dense())


def test_unsupported_op_names_itself() -> None:
    with pytest.raises(NotImplementedError, match="aten::exp.*sparse TPU"):
        _sample().to("tpu").exp()
