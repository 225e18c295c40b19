"""nn.LSTM / nn.GRU / nn.RNN on "tpu" against the CPU: forward outputs, final states and every gradient.

Covers what speech and word-language-model scripts use: several layers, bidirectional, batch_first,
projections, given initial states, packed and padded sequences (sorted or not), the cell modules, and
dropout between layers (exact with p=0; with p>0 reproducible under a seed and different from p=0).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tpu_workbench.backend import dispatch

TOL = {"atol": 2e-5, "rtol": 2e-5}


def _run(
    module: torch.nn.Module,
    x: torch.Tensor,
    device: str,
    lengths: list | None = None,
    hx: object = None,
    enforce_sorted: bool = True,
) -> tuple:
    xx = x.detach().clone().to(device).requires_grad_()
    inp = xx
    if lengths is not None:
        inp = pack_padded_sequence(
            xx, torch.tensor(lengths), batch_first=module.batch_first, enforce_sorted=enforce_sorted
        )
    if hx is not None:
        hx = tuple(h.to(device) for h in hx) if isinstance(hx, tuple) else hx.to(device)
    out, h = module(inp, hx)
    if lengths is not None:
        out, out_lengths = pad_packed_sequence(out, batch_first=module.batch_first)
        assert out_lengths.tolist() == list(lengths)
    hs = h if isinstance(h, tuple) else (h,)
    loss = (out * out).sum() + sum((t * torch.arange(t.numel(), device=device).view_as(t)).sum() for t in hs)
    loss.backward()
    return out, hs, xx.grad, [p.grad for p in module.parameters()]


def _compare(make: object, x: torch.Tensor, **kw: object) -> None:
    torch.manual_seed(0)
    cpu = make()
    tpu = copy.deepcopy(cpu).to("tpu")
    rescues = dict(dispatch.BACKWARD_RESCUES)
    a = _run(cpu, x, "cpu", **kw)
    b = _run(tpu, x, "tpu", **kw)
    assert dict(dispatch.BACKWARD_RESCUES) == rescues, "an op was re-run on the CPU during backward"
    assert b[0].device.type == "tpu"
    torch.testing.assert_close(b[0].cpu(), a[0], **TOL)
    for u, v in zip(a[1], b[1], strict=True):
        torch.testing.assert_close(v.cpu(), u, **TOL)
    torch.testing.assert_close(b[2].cpu(), a[2], **TOL)
    for (name, _), u, v in zip(cpu.named_parameters(), a[3], b[3], strict=True):
        torch.testing.assert_close(v.cpu(), u, **TOL, msg=lambda m, n=name: f"grad of {n}: {m}")


X = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(3))

slow = pytest.mark.slow
FAST = ("lstm-bidir", "gru-bidir-batch-first")  # the rest of the matrix takes 10-40 s each on 2 shared cores

CASES = {
    "lstm-2layer": lambda: torch.nn.LSTM(4, 5, num_layers=2),
    "lstm-bidir": lambda: torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True),
    "lstm-batch-first": lambda: torch.nn.LSTM(4, 5, batch_first=True),
    "lstm-proj": lambda: torch.nn.LSTM(4, 6, num_layers=2, proj_size=3, bidirectional=True),
    "lstm-no-bias": lambda: torch.nn.LSTM(4, 5, bias=False),
    "gru-2layer": lambda: torch.nn.GRU(4, 5, num_layers=2),
    "gru-bidir-batch-first": lambda: torch.nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
    "gru-no-bias": lambda: torch.nn.GRU(4, 5, bias=False),
    "rnn-tanh-bidir": lambda: torch.nn.RNN(4, 5, num_layers=2, bidirectional=True),
    "rnn-relu": lambda: torch.nn.RNN(4, 5, nonlinearity="relu"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=slow) for n in CASES])
def test_rnn_matches_cpu(name: str) -> None:
    _compare(CASES[name], X)


@slow
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_given_initial_state(kind: str) -> None:
    g = torch.Generator().manual_seed(5)
    h0 = torch.randn(4, 3, 5, generator=g)
    hx = (h0, torch.randn(4, 3, 5, generator=g)) if kind == "lstm" else h0
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    _compare(lambda: cls(4, 5, num_layers=2, bidirectional=True), X, hx=hx)


@slow
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("sorted_", [True, False], ids=["sorted", "unsorted"])
def test_packed_sequences(kind: str, sorted_: bool) -> None:
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
    lengths = [6, 4, 1] if sorted_ else [2, 6, 5]
    _compare(lambda: cls(4, 5, num_layers=2, bidirectional=True), X, lengths=lengths, enforce_sorted=sorted_)


@pytest.mark.slow
def test_packed_unsorted_lstm() -> None:
    _compare(lambda: torch.nn.LSTM(4, 5), X, lengths=[2, 6, 5], enforce_sorted=False)


@slow
def test_packed_batch_first_with_projection() -> None:
    x = X.transpose(0, 1).contiguous()
    _compare(
        lambda: torch.nn.LSTM(4, 6, proj_size=2, batch_first=True), x, lengths=[3, 6, 2], enforce_sorted=False
    )


def test_pack_refuses_unsorted_lengths_like_cpu() -> None:
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(X, torch.tensor([2, 6, 5]))
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(X.to("tpu"), torch.tensor([2, 6, 5]))


def test_pack_and_pad_round_trip() -> None:
    lengths = torch.tensor([6, 3, 2])
    cpu = pack_padded_sequence(X, lengths)
    tpu = pack_padded_sequence(X.to("tpu"), lengths)
    assert tpu.data.device.type == "tpu" and tpu.batch_sizes.device.type == "cpu"
    assert torch.equal(tpu.batch_sizes, cpu.batch_sizes)
    assert torch.equal(tpu.data.cpu(), cpu.data)
    padded, lens = pad_packed_sequence(tpu, padding_value=-1.0, total_length=8)
    ref, ref_lens = pad_packed_sequence(cpu, padding_value=-1.0, total_length=8)
    assert torch.equal(padded.cpu(), ref) and torch.equal(lens, ref_lens)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cell_modules(cell: str) -> None:
    torch.manual_seed(0)
    m = torch.nn.LSTMCell(4, 5) if cell == "lstm" else torch.nn.GRUCell(4, 5)
    mt = copy.deepcopy(m).to("tpu")
    x = torch.randn(3, 4)
    outs = []
    for mod, dev in ((m, "cpu"), (mt, "tpu")):
        xx = x.clone().to(dev).requires_grad_()
        h = None
        total = 0
        for _ in range(3):  # a hand-written time loop, as decoder scripts do
            h = mod(xx, h)
            total = total + (h[0].sum() + 2 * h[1].sum() if cell == "lstm" else h.sum())
        total.backward()
        outs.append((total.detach().cpu(), xx.grad.cpu(), [p.grad.cpu() for p in mod.parameters()]))
    torch.testing.assert_close(outs[1][0], outs[0][0], **TOL)
    torch.testing.assert_close(outs[1][1], outs[0][1], **TOL)
    for u, v in zip(outs[0][2], outs[1][2], strict=True):
        torch.testing.assert_close(v, u, **TOL)


@slow
def test_unbatched_input() -> None:
    _compare(lambda: torch.nn.GRU(4, 5, num_layers=2), X[:, 0])


@slow
def test_double_backward_through_gru_cell() -> None:
    """create_graph=True takes torch's differentiable cell backward (a composite), on the device."""
    torch.manual_seed(0)
    m = torch.nn.GRU(4, 3)
    mt = copy.deepcopy(m).to("tpu")
    res = []
    for mod, dev in ((m, "cpu"), (mt, "tpu")):
        x = X.clone().to(dev).requires_grad_()
        out, _ = mod(x)
        (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        gx.pow(2).sum().backward()
        res.append(mod.weight_hh_l0.grad.cpu())
    torch.testing.assert_close(res[1], res[0], **TOL)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_dropout_between_layers(kind: str) -> None:
    """p=0 is exact (covered above); p>0: seeded runs repeat, differ from p=0, and keep their shapes."""
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    torch.manual_seed(0)
    m = cls(4, 5, num_layers=3, dropout=0.5).to("tpu").train()
    x = X.to("tpu")
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        out, _ = m(x)
        out.sum().backward()
        runs.append((out.detach().cpu(), m.weight_ih_l1.grad.cpu().clone()))
        m.zero_grad()
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    m.dropout = 0.0
    plain, _ = m(x)
    assert plain.shape == runs[0][0].shape == (6, 3, 5)
    assert not torch.allclose(plain.detach().cpu(), runs[0][0])
    m.eval()
    m.dropout = 0.5
    evald, _ = m(x)
    torch.testing.assert_close(evald.detach().cpu(), plain.detach().cpu())  # no dropout in eval mode


def test_bfloat16_lstm_close_to_float32() -> None:
    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 5, num_layers=2)
    low = copy.deepcopy(m).to("tpu", torch.bfloat16)
    ref, _ = m.to("tpu")(X.to("tpu"))
    out, _ = low(X.to("tpu", torch.bfloat16))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), ref.detach().cpu(), atol=3e-2, rtol=3e-2)
