"""Models train for 20 steps on tpu and cpu from the same seed: losses agree and decrease."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 20


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(p),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 32, d: int = 32, heads: int = 4, layers: int = 2, ctx: int = 16) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.layer(x).mean(1))


def _data(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    if kind == "mlp":
        return torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)
    if kind == "cnn":
        return torch.randn(8, 3, 12, 12, generator=g), torch.randint(0, 4, (8,), generator=g)
    if kind == "gpt":
        idx = torch.randint(0, 32, (4, 16), generator=g)
        return idx, torch.roll(idx, -1, 1)
    return torch.randn(8, 6, 32, generator=g), torch.randint(0, 4, (8,), generator=g)


def _train(kind: str, device: str, opt_name: str) -> list[float]:
    torch.manual_seed(0)
    model = {"mlp": MLP, "cnn": CNN, "gpt": GPT, "encoder": Encoder}[kind]().to(device)
    opt = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
        "adam": lambda p: torch.optim.Adam(p, lr=3e-3),
        "adamw": lambda p: torch.optim.AdamW(p, lr=3e-3, foreach=True),
    }[opt_name](model.parameters())
    x, y = (t.to(device) for t in _data(kind))
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    "kind,opt", [("mlp", "sgd"), ("mlp", "adam"), ("cnn", "sgd"), ("cnn", "adamw"), ("gpt", "adamw"),
                 ("encoder", "adam")]
)  # fmt: skip
def test_train_matches_cpu(kind: str, opt: str) -> None:
    cpu = _train(kind, "cpu", opt)
    tpu = _train(kind, "tpu", opt)
    assert all(math.isfinite(v) for v in tpu)
    assert tpu[-1] < tpu[0] * 0.9, tpu
    for a, b in zip(cpu, tpu, strict=True):
        assert abs(a - b) <= 2e-3 * max(1.0, abs(a)), (cpu, tpu)


def test_tied_weights_stay_tied_after_to() -> None:
    m = GPT().to("tpu")
    assert m.head.weight is m.tok.weight
    assert m.head.weight.device.type == "tpu"


def test_dropout_and_eval_mode() -> None:
    torch.manual_seed(0)
    m = CNN(p=0.5).to("tpu")
    x = torch.randn(2, 3, 12, 12, device="tpu")
    m.train()
    a, b = m(x), m(x)
    assert not torch.equal(a.cpu(), b.cpu())  # dropout masks differ between calls
    m.eval()
    torch.testing.assert_close(m(x).cpu(), m(x).cpu())
