"""Tiny models and synthetic batches in the shape popular training scripts use (a char GPT, a small CNN).

Sizes are kept minimal so that each idiom test compiles a handful of XLA programs and finishes in seconds.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, CTX = 16, 8


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A two-block causal LM with tied embeddings; `forward(idx, targets)` returns (logits, loss)."""

    def __init__(self, d: int = 16, heads: int = 2, layers: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(CTX, d)
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class TinyMLP(nn.Module):
    """The cheapest model that still has the usual pieces (Linear, LayerNorm, dropout slot, a loss)."""

    def __init__(self, d_in: int = 6, d: int = 12, classes: int = 3, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d), nn.LayerNorm(d), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(d, classes))  # fmt: skip

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.net(x)
        return logits, None if targets is None else F.cross_entropy(logits, targets)


class TinyCNN(nn.Module):
    """Conv + BatchNorm + pooling classifier (has int64 `num_batches_tracked` buffers, as ResNets do)."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )  # fmt: skip
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def token_batches(n: int, batch: int = 4, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` (x, y) next-token batches on the CPU, drawn from a private generator (the global RNG is untouched)."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, VOCAB, (n * batch * CTX + 1,), generator=g)
    out = []
    for i in range(n):
        start = i * batch * CTX
        x = data[start : start + batch * CTX].view(batch, CTX)
        y = data[start + 1 : start + batch * CTX + 1].view(batch, CTX)
        out.append((x, y))
    return out


def vector_batches(n: int, batch: int = 8, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, 6, generator=g), torch.randint(0, 3, (batch,), generator=g)) for _ in range(n)
    ]


def image_batches(n: int, batch: int = 4, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, 1, 8, 8, generator=g), torch.randint(0, 4, (batch,), generator=g))
        for _ in range(n)
    ]


def to(batch: tuple[torch.Tensor, ...], device: str) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(device) for t in batch)


def assert_losses_close(got: list[float], want: list[float], rel: float = 1e-4) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert abs(a - b) <= rel * max(1.0, abs(b)), f"step {i}: {a} vs {b}\n got  {got}\n want {want}"


def train_losses(model: nn.Module, opt: torch.optim.Optimizer, batches, device: str = "tpu") -> list[float]:
    """The plain loop of a training script: forward (the model returns logits and loss), backward, step, zero
    the gradients; the losses as Python floats."""
    losses = []
    for x, y in batches:
        _, loss = model(x.to(device), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses
