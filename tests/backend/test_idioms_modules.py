"""Module-level idioms around the model: recurrent language models (LSTM/GRU, packed batches), a sparse
buffer moved to the device, a second .to() under a live graph, device-context init, EMA copies."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class RNNLM(nn.Module):
    """word_language_model's shape: embedding -> dropout -> multi-layer RNN -> tied decoder."""

    def __init__(self, kind: str, vocab: int = 20, d: int = 8, layers: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab, d)
        self.rnn = getattr(nn, kind)(d, d, layers, dropout=dropout)
        self.decoder = nn.Linear(d, vocab)
        self.decoder.weight = self.encoder.weight

    def forward(self, x: torch.Tensor, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


def _detach(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(_detach(v) for v in h)


def _lm_losses(kind: str, device: str) -> list[float]:
    torch.manual_seed(0)
    model = RNNLM(kind).to(device)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 20, (4 * 6 + 1, 3), generator=g)
    hidden = None
    losses = []
    for i in range(0, 4 * 6, 6):  # truncated BPTT: the hidden state is carried, its graph cut
        x, y = data[i : i + 6].to(device), data[i + 1 : i + 7].to(device)
        model.zero_grad()
        out, hidden = model(x, hidden)
        hidden = _detach(hidden)
        loss = F.cross_entropy(out.view(-1, 20), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-5.0)
        losses.append(loss.item())
    return losses


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_language_model_trains_like_cpu(kind: str) -> None:
    cpu, tpu = _lm_losses(kind, "cpu"), _lm_losses(kind, "tpu")
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_packed_bidirectional_lstm_classifier_matches_cpu() -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 4, 2])

    def run(module: nn.Module, device: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
        module.zero_grad()
        packed = pack_padded_sequence(x.to(device), lengths, batch_first=True, enforce_sorted=True)
        out, (h, _) = module(packed)
        padded, got_lengths = pad_packed_sequence(out, batch_first=True)
        assert got_lengths.tolist() == lengths.tolist()
        (padded.sum() + h.sum()).backward()
        return padded.detach().cpu(), [p.grad.cpu() for p in module.parameters()]

    want, want_grads = run(lstm, "cpu")
    got, got_grads = run(copy.deepcopy(lstm).to("tpu"), "tpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class GraphConv(nn.Module):
    """A GCN layer keeping its normalised adjacency as a sparse COO buffer (pytorch/examples gcn)."""

    def __init__(self, adj: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("adj", adj)
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(self.adj, self.lin(x))


def test_sparse_buffer_moves_to_the_device_and_back() -> None:
    idx = torch.tensor([[0, 1, 2, 2], [1, 0, 2, 0]])
    adj = torch.sparse_coo_tensor(idx, torch.tensor([0.5, 0.5, 1.0, 0.25]), (3, 3))
    torch.manual_seed(0)
    model = GraphConv(adj)
    x = torch.randn(3, 3)
    want = model(x)
    want.sum().backward()
    want_grad = model.lin.weight.grad.clone()
    model.zero_grad()
    model.to("tpu")
    assert model.adj.is_sparse and model.adj.device.type == "tpu"
    got = model(x.to("tpu"))
    got.sum().backward()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model.lin.weight.grad.cpu(), want_grad, rtol=1e-6, atol=1e-6)
    back = model.adj.cpu()
    assert back.is_sparse and torch.equal(back.to_dense(), adj.to_dense())
    assert torch.equal(model.adj.coalesce().indices().cpu(), adj.coalesce().indices())


def test_second_to_under_a_live_graph_is_a_no_op() -> None:
    conv = nn.Conv2d(1, 2, 3).to("tpu")
    weight = conv.weight
    loss = conv(torch.randn(1, 1, 5, 5, device="tpu")).sum()
    assert conv.to("tpu") is conv and conv.to(torch.device("tpu:0")) is conv
    assert conv.weight is weight
    loss.backward()
    assert conv.weight.grad is not None and conv.weight.grad.device.type == "tpu"


def test_device_context_and_default_device_build_on_the_device() -> None:
    with torch.device("tpu"):
        lin = nn.Linear(3, 2)
        assert torch.arange(3).device.type == "tpu"
    assert lin.weight.device.type == "tpu" and torch.arange(3).device.type == "cpu"
    torch.set_default_device("tpu")
    try:
        assert nn.Linear(2, 2).bias.device.type == "tpu"
    finally:
        torch.set_default_device(None)
    assert torch.zeros(1).device.type == "cpu"


def test_ema_copy_tracks_the_model() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).to("tpu")
    ema = copy.deepcopy(model).requires_grad_(False)
    assert all(p.device.type == "tpu" for p in ema.parameters())
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
        ema_params, params = list(ema.parameters()), list(model.parameters())
        torch._foreach_lerp_(ema_params, params, 0.25)  # timm / diffusers style EMA update
    for e, p in zip(ema.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(e.cpu(), (p - 0.75).cpu(), rtol=1e-6, atol=1e-6)
    swa = torch.optim.swa_utils.AveragedModel(model)
    swa.update_parameters(model)
    assert int(swa.n_averaged) == 1 and next(swa.parameters()).device.type == "tpu"


def test_dtype_casts_of_a_device_model() -> None:
    model = nn.Linear(3, 3).to("tpu")
    assert model.bfloat16().weight.dtype == torch.bfloat16
    assert model.half().weight.dtype == torch.float16
    assert model.float().weight.dtype == torch.float32
    assert model.to("tpu", torch.bfloat16).weight.device.type == "tpu"


def test_moving_a_model_whose_cpu_outputs_are_still_alive() -> None:
    """A notebook runs the model on the CPU, keeps the loss, then moves the model: CUDA moves it in place;
    here the autograd graph pins the CPU parameters, so new ones are made, tied weights stay tied, and the
    user is told to build optimizers afterwards."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied, as in language models
    model = torch.nn.Sequential(emb, head)
    ids = torch.tensor([[1, 2, 3]])
    cpu_loss = model(ids).sum()  # its graph holds the parameters
    with pytest.warns(UserWarning, match="live autograd graph"):
        model.to("tpu")
    assert model[0].weight is model[1].weight and model[0].weight.device.type == "tpu"
    torch.testing.assert_close(model(ids.to("tpu")).sum().cpu(), cpu_loss.detach())
    cpu_loss.backward()  # the CPU graph is intact


@pytest.mark.parametrize("convert", ["half", "bfloat16", "double", "to(float16)"])
def test_a_module_converted_after_it_moved_computes_in_the_new_dtype(convert: str) -> None:
    """``model.to("tpu").half()``: Module._apply assigns ``param.data = converted`` (PyTorch's set_data, no
    dispatch): the parameter objects stay, and their arrays must follow the new dtype, as on CUDA."""
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    dev = copy.deepcopy(cpu).to("tpu")
    params_before = list(dev.parameters())
    apply = {
        "half": lambda m: m.half(),
        "bfloat16": lambda m: m.bfloat16(),
        "double": lambda m: m.double(),
        "to(float16)": lambda m: m.to(torch.float16),
    }[convert]
    apply(cpu)
    apply(dev)
    assert all(a is b for a, b in zip(params_before, dev.parameters(), strict=True))
    dtype = next(cpu.parameters()).dtype
    x = torch.randn(3, 4).to(dtype)
    for p in dev.parameters():
        assert p.dtype == dtype and p.detach().cpu().dtype == dtype
    tol = (
        {} if dtype == torch.float64 else {"atol": 1e-2, "rtol": 1e-2}
    )  # (16-bit: rounding differs per kernel)
    torch.testing.assert_close(dev(x.to("tpu")).detach().cpu(), cpu(x).detach(), **tol)
    opt = torch.optim.SGD(dev.parameters(), lr=0.1)
    dev(x.to("tpu")).float().sum().backward()
    opt.step()
    assert all(p.grad.dtype == dtype for p in dev.parameters())
