"""A plain-PyTorch decoder LM (dense or MoE) with a preallocated KV cache.

Written with elementary ops (matmul, softmax, masked_fill, index_add) rather than fused SDPA or
grouped-GEMM kernels so that it runs on every device, including the young "tpu" backend, and so that
``torch.utils.flop_counter`` sees every matmul it executes (it does not count CPU flash attention).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.workloads.config import DecoderConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim: int, max_seq: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables (max_seq, head_dim/2) for rotary embeddings, built on the CPU once."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (first half, second half) of the head dimension; x is (B, H, T, hd)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class KVCache:
    """Preallocated (B, H_kv, max_len, hd) buffers per layer; decode writes one position per step."""

    def __init__(self, cfg: DecoderConfig, batch: int, max_len: int, *, device, dtype):
        shape = (batch, cfg.n_kv_heads, max_len, cfg.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.max_len = max_len

    def nbytes(self, length: int) -> int:
        """Bytes of K and V read by one decode step attending over ``length`` positions."""
        k = self.k[0]
        per_layer = 2 * k.shape[0] * k.shape[1] * length * k.shape[3] * k.element_size()
        return per_layer * len(self.k)


class Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_heads * hd, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, cfg.d_model, bias=False)

    def forward(self, x, cos, sin, *, cache: KVCache | None = None, layer: int = 0, start: int = 0):
        b, t, _ = x.shape
        c = self.cfg
        q = self.wq(x).view(b, t, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            cache.k[layer][:, :, start : start + t] = k
            cache.v[layer][:, :, start : start + t] = v
            k = cache.k[layer][:, :, : start + t]
            v = cache.v[layer][:, :, : start + t]
        rep = c.n_heads // c.n_kv_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
        s = k.shape[2]
        if t > 1:
            # query i (absolute position start+i) may see keys 0..start+i
            mask = torch.ones(t, s, dtype=torch.bool, device=x.device).triu(start + 1)
            scores = scores.masked_fill(mask, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Top-k routed experts (softmax over the selected logits) plus always-on shared experts.

    Dropless: each expert runs exactly on the tokens routed to it (gather, matmul, index_add), so the
    executed FLOPs equal the analytic active-parameter count.
    """

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.top_k = cfg.top_k
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(cfg.d_model, cfg.moe_ffn_dim) for _ in range(cfg.n_experts))
        self.shared = (
            SwiGLU(cfg.d_model, cfg.moe_ffn_dim * cfg.n_shared_experts) if cfg.n_shared_experts else None
        )

    def forward(self, x):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        logits = self.router(flat)
        weights, chosen = logits.topk(self.top_k, dim=-1)
        weights = weights.softmax(-1)
        out = torch.zeros_like(flat)
        # Routing decisions are read on the host: data-dependent shapes, as in eager PyTorch MoE code.
        chosen_cpu = chosen.cpu()
        for e, expert in enumerate(self.experts):
            hit = (chosen_cpu == e).nonzero()
            if hit.numel() == 0:
                continue
            rows = hit[:, 0].to(x.device)
            slots = hit[:, 1].to(x.device)
            y = expert(flat.index_select(0, rows)) * weights[rows, slots].unsqueeze(-1)
            out = out.index_add(0, rows, y)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.reshape(shape)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.ffn = MoE(cfg) if cfg.is_moe else SwiGLU(cfg.d_model, cfg.ffn_dim)

    def forward(self, x, cos, sin, *, cache=None, layer=0, start=0):
        x = x + self.attn(self.attn_norm(x), cos, sin, cache=cache, layer=layer, start=start)
        return x + self.ffn(self.ffn_norm(x))


class Decoder(nn.Module):
    """Token ids (B, T) → logits (B, T, vocab). ``cache``/``start`` switch on incremental decoding."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor, *, cache: KVCache | None = None, start: int = 0) -> torch.Tensor:
        t = tokens.shape[1]
        cos = self.rope_cos[start : start + t].to(self.embed.weight.dtype)
        sin = self.rope_sin[start : start + t].to(self.embed.weight.dtype)
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, cache=cache, layer=i, start=start)
        return self.lm_head(self.norm(x))


def build_model(cfg: DecoderConfig, *, seed: int = 0) -> Decoder:
    """A freshly initialised model on the CPU (move it with ``.to(device)``); seeded for repeatability."""
    if cfg.window_layers:  # the runnable decoder attends causally to everything: never a silent other model
        raise WorkbenchError(
            f"{cfg.name}: sliding-window layers are modelled by the projection only; the runnable decoder "
            "has full causal attention in every layer"
        )
    if cfg.is_mla or cfg.dense_layers:  # nor latent attention or dense first layers: refuse, as above
        raise WorkbenchError(
            f"{cfg.name}: multi-head latent attention and dense first layers are modelled by the projection "
            "only; the runnable decoder has GQA attention and one MLP kind in every layer"
        )
    torch.manual_seed(seed)
    return Decoder(cfg)
