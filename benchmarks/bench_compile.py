"""GPT-style decoder training step: tokens/s for torch eager cpu, inductor cpu, tpu eager (strict and fused), tpu compiled.

    python benchmarks/bench_compile.py [--steps 3] [--batch 4] [--layers 6] [--dim 384] [--json out.json]

Also measures this machine's fp32 matmul peak (GEMM microbenchmark, best of torch cpu and jax cpu)
and the compiled step's achieved FLOP/s against it.  FLOP convention: training step = 3 x forward;
forward = 2 x (matmul parameters) x tokens + attention 4 x layers x seq x dim x tokens (QK^T and AV,
causal work counted in full), embeddings excluded.  The "tpu" device here is XLA:CPU through JAX,
not a TPU.  The first (compiling) step is timed separately from the steady-state steps.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc, self.out = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, h: int, n: int, seq: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def step_flops(model: GPT, batch: int, seq: int, layers: int, dim: int) -> float:
    mm_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    tokens = batch * seq
    fwd = 2 * mm_params * tokens + 4 * layers * seq * dim * tokens
    return 3.0 * fwd


def _sync(device: str, model: nn.Module, loss: torch.Tensor) -> float:
    if device == "tpu":
        import jax

        from tpu_workbench.backend.tensor import value

        jax.block_until_ready([value(p) for p in model.parameters()])
    return float(loss.detach().cpu())


def run_mode(name: str, device: str, compiled: str | None, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    model = GPT(args.vocab, args.dim, args.heads, args.layers, args.seq).to(device)
    # capturable: the optimizer state (AdamW's step count) lives on the device, so the compiled optimizer
    # step is one executable; inductor handles CPU state itself.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True, capturable=compiled == "tpu")
    fwd: Callable[..., torch.Tensor] = model
    opt_step: Callable[[], Any] = opt.step
    if compiled is not None:  # compiled modes compile the model and the optimizer step
        fwd = torch.compile(model, backend=compiled)
        opt_step = torch.compile(opt.step, backend=compiled)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    tgt = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        loss = fwd(idx, tgt)
        loss.backward()
        opt_step()
        return _sync(device, model, loss)

    stats0 = None
    if compiled == "tpu":
        import tpu_workbench.backend.compile as bc

        bc.reset_stats()
    t0 = time.perf_counter()
    first_loss = step()
    first = time.perf_counter() - t0
    if compiled == "tpu":
        stats0 = bc.stats()
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    best = min(times)
    tokens = args.batch * args.seq
    flops = step_flops(model, args.batch, args.seq, args.layers, args.dim)
    rec: dict[str, Any] = {
        "mode": name,
        "first_step_s": first,
        "step_s_median": med,
        "step_s_samples": times,
        "step_s_min": best,
        "tokens_per_s": tokens / med,
        "tokens_per_s_best": tokens / best,
        "achieved_flops": flops / med,
        "first_loss": first_loss,
    }
    if stats0 is not None:
        rec["compile_stats_after_first_step"] = stats0
        rec["compile_stats_end"] = bc.stats()
    return rec


def gemm_peak(n: int = 2048, reps: int = 5) -> dict[str, float]:
    """fp32 matmul FLOP/s on this machine: torch cpu and jax cpu (jit), best of ``reps``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_time(lambda: a @ b) for _ in range(reps))
    out = {"torch_cpu": 2 * n**3 / best}
    import jax
    import jax.numpy as jnp

    ja, jb = jnp.asarray(a.numpy()), jnp.asarray(b.numpy())
    mm = jax.jit(lambda x, y: x @ y)
    mm(ja, jb).block_until_ready()
    best = min(_time(lambda: mm(ja, jb).block_until_ready()) for _ in range(reps))
    out["jax_cpu"] = 2 * n**3 / best
    out["peak"] = max(out.values())
    return out


def _time(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--eager-steps", type=int, default=2, help="steps for the slow tpu-eager mode")
    p.add_argument(
        "--modes",
        default="cpu_eager,cpu_inductor,tpu_eager,tpu_fused,tpu_compiled",
        help="comma list of: cpu_eager, cpu_inductor, tpu_eager (strict), tpu_fused (fused eager, "
        "DEFER_AND_FUSE), tpu_compiled",
    )
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    model = GPT(args.vocab, args.dim, args.heads, args.layers, args.seq)
    n_params = sum(q.numel() for q in model.parameters())
    import jax

    print(
        f"host: {platform.node()} cpus={os.cpu_count()} torch={torch.__version__} jax={jax.__version__} "
        f"torch_threads={torch.get_num_threads()}"
    )
    print(
        f"model: GPT decoder {n_params / 1e6:.1f}M params, layers={args.layers} dim={args.dim} "
        f"heads={args.heads} vocab={args.vocab}; batch={args.batch} x seq={args.seq}; fp32; AdamW"
    )
    print("device 'tpu' = XLA:CPU via JAX (not a TPU)")
    if hasattr(os, "getloadavg"):
        print(f"load average at start: {os.getloadavg()[0]:.2f} (a shared machine inflates every figure)")
    peak = gemm_peak()
    print(
        f"GEMM 2048^3 fp32: torch cpu {peak['torch_cpu'] / 1e9:.1f} GFLOP/s, jax cpu "
        f"{peak['jax_cpu'] / 1e9:.1f} GFLOP/s -> peak {peak['peak'] / 1e9:.1f} GFLOP/s"
    )
    flops = step_flops(model, args.batch, args.seq, args.layers, args.dim)
    print(f"FLOPs per training step (convention above): {flops / 1e9:.1f} GFLOP")

    table = {
        "cpu_eager": ("cpu", None),
        "cpu_inductor": ("cpu", "inductor"),
        "tpu_eager": ("tpu", None),
        "tpu_fused": ("tpu", None),
        "tpu_compiled": ("tpu", "tpu"),
    }
    results = []
    for name in args.modes.split(","):
        device, compiled = table[name]
        a = argparse.Namespace(**vars(args))
        if name == "tpu_eager":
            a.steps, a.warmup = args.eager_steps, 0
        if (
            name == "tpu_fused"
        ):  # a graph compiles the third time it is seen: two warm-up steps after the first
            a.warmup = max(args.warmup, 2)
            with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
                rec = run_mode(name, device, compiled, a)
        else:
            rec = run_mode(name, device, compiled, a)
        rec["flop_utilisation"] = rec["achieved_flops"] / peak["peak"]
        results.append(rec)
        print(
            f"{name:13s} first step {rec['first_step_s']:7.2f} s | step {rec['step_s_median'] * 1e3:8.1f} ms "
            f"(median of {len(rec['step_s_samples'])}, min {rec['step_s_min'] * 1e3:.1f}) | "
            f"{rec['tokens_per_s']:8.0f} tok/s (best {rec['tokens_per_s_best']:.0f}) | "
            f"{rec['achieved_flops'] / 1e9:6.1f} GFLOP/s = {100 * rec['flop_utilisation']:5.1f}% of GEMM peak"
            f" | loss {rec['first_loss']:.4f}",
            flush=True,
        )
        if "compile_stats_end" in rec:
            print(f"{'':13s} compile stats: {rec['compile_stats_end']}")
    by = {r["mode"]: r for r in results}
    if "tpu_fused" in by:
        tf = by["tpu_fused"]["tokens_per_s"]
        for ref in ("cpu_eager", "tpu_eager"):
            if ref in by:
                print(f"tpu_fused / {ref}: {tf / by[ref]['tokens_per_s']:.2f}x on medians")
    if "tpu_compiled" in by:
        tc, tcb = by["tpu_compiled"]["tokens_per_s"], by["tpu_compiled"]["tokens_per_s_best"]
        for ref in ("cpu_inductor", "tpu_eager", "tpu_fused", "cpu_eager"):
            if ref in by:
                print(
                    f"tpu_compiled / {ref}: {tc / by[ref]['tokens_per_s']:.2f}x on medians, "
                    f"{tcb / by[ref]['tokens_per_s_best']:.2f}x on best steps"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"args": vars(args), "gemm": peak, "flops_per_step": flops, "results": results}, f, indent=1
            )


if __name__ == "__main__":
    main()
