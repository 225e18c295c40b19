"""Eager speed on "tpu": per step and per ATen op, torch CPU eager vs "tpu" strict vs fused eager vs compiled.

    python benchmarks/bench_eager.py [--models gpt,llama,cnn] [--min-run-time 3] [--threads 1] [--json out.json]
    python benchmarks/bench_eager.py --ops          # the old per-op figures: small add / matmul / layer_norm

Workloads (fp32, synthetic data, one process):
- ``gpt``: a 2-layer GPT (d=64, 2 heads, T=32, batch 4, vocab 256) train step with AdamW (forward, backward,
  clip, optimizer);
- ``llama``: a tiny Hugging Face ``LlamaForCausalLM`` built from a config (2 layers, d=64) — forward only, and
  a train step with AdamW;
- ``cnn``: a small CNN with BatchNorm train step with SGD + momentum;
- ``varying``: an MLP train step whose batch size changes every step (graphs that never repeat: fused eager's
  fallback case; not in the default set).
Modes: ``cpu`` (torch eager on the CPU, ``--threads`` OpenMP threads), ``strict`` ("tpu", EagerMode.DEFER_NEVER),
``fused`` ("tpu", EagerMode.DEFER_AND_FUSE), ``compiled`` (``torch.compile(model, backend="tpu")`` with a
capturable optimizer step compiled too). Every step ends by reading the loss on the host (a real sync).

Timing: ``torch.utils.benchmark.Timer`` after three warm-up steps (fused and compiled modes compile during
warm-up; their compile cost is printed apart), the modes interleaved in rounds (``--rounds``) so that this shared
machine's slow spells fall on every mode alike. "ATen ops per step" is counted on the CPU run with
a TorchDispatchMode; µs/op = step time / that count. Ratios only mean something within one run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.benchmark import Timer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compile import GPT  # noqa: E402 - the same model as the compile benchmark


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def _gpt() -> tuple[nn.Module, Callable[[nn.Module, str], tuple]]:
    torch.manual_seed(0)
    model = GPT(256, 64, 2, 2, 32)
    g = torch.Generator().manual_seed(1)
    idx, tgt = torch.randint(0, 256, (4, 32), generator=g), torch.randint(0, 256, (4, 32), generator=g)
    return model, lambda m, dev: (m(idx.to(dev), tgt.to(dev)),)


def _llama() -> tuple[nn.Module, Callable[[nn.Module, str], tuple]]:
    from transformers import LlamaConfig, LlamaForCausalLM  # lazy: optional (transformers)

    cfg = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    return model, lambda m, dev: (m(input_ids=ids.to(dev), labels=ids.to(dev)).loss,)


def _cnn() -> tuple[nn.Module, Callable[[nn.Module, str], tuple]]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)
    return model, lambda m, dev: (F.cross_entropy(m(x.to(dev)), y.to(dev)),)


def _varying() -> tuple[nn.Module, Callable[[nn.Module, str], tuple]]:
    """An MLP train step whose batch size changes every step (a new shape each time, as data-dependent shapes
    give): fused eager must detect that its graphs never repeat and fall back, at most 10% slower than strict."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    g = torch.Generator().manual_seed(1)
    data = torch.randn(4096, 16, generator=g)
    sizes = itertools.cycle(
        range(8, 4000)
    )  # no batch size twice within a device run (the CPU runs may cycle)

    def loss_of(m: nn.Module, dev: str) -> tuple:
        n = next(sizes)
        x = data[:n].to(dev)
        return (m(x).square().mean(),)

    return model, loss_of


WORKLOADS = {"gpt": _gpt, "llama": _llama, "cnn": _cnn, "varying": _varying}


def _make_step(name: str, mode: str, train: bool) -> tuple[Callable[[], float], Callable[[], int]]:
    model, loss_of = WORKLOADS[name]()
    dev = "cpu" if mode == "cpu" else "tpu"
    model = model.to(dev)
    if not train:
        model.eval()
    fwd: Any = model
    if mode == "compiled":
        fwd = torch.compile(model, backend="tpu")
    params = list(model.parameters())
    opt: torch.optim.Optimizer | None = None
    opt_step: Callable[[], Any] = lambda: None  # noqa: E731
    if train:
        if name in ("cnn", "varying"):
            opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
        else:
            opt = torch.optim.AdamW(params, lr=1e-3, capturable=mode == "compiled")
        opt_step = torch.compile(opt.step, backend="tpu") if mode == "compiled" else opt.step

    def step() -> float:
        if not train:
            with torch.no_grad():
                return float(loss_of(fwd, dev)[0].cpu())
        opt.zero_grad(set_to_none=True)
        (loss,) = loss_of(fwd, dev)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt_step()
        return float(loss.detach().cpu())

    def count() -> int:
        c = _CountOps()
        with c:
            step()
        return c.n

    return step, count


def _eager_mode(mode: str) -> Any:
    import contextlib

    if mode == "fused":
        return torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)
    if mode in ("strict", "compiled"):
        return torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER)
    return contextlib.nullcontext()


def measure(name: str, train: bool, modes: list[str], min_run_time: float, rounds: int = 5) -> dict[str, Any]:
    """Every mode's step, timed in interleaved rounds: each round times a block of steps of every mode in turn
    (``torch.utils.benchmark.Timer``), so a slow spell of this shared machine slows every mode alike and the
    ratios within one run hold; the median over rounds is reported, with the rounds' spread (IQR)."""
    out: dict[str, Any] = {"workload": name, "train": train, "modes": {}, "rounds": rounds}
    step_cpu, count = _make_step(name, "cpu", train)
    step_cpu()
    out["aten_ops_per_step"] = count()
    steps: dict[str, Callable[[], float]] = {}
    blocks: dict[str, int] = {}
    for mode in modes:
        with _eager_mode(mode):
            step, _ = _make_step(name, mode, train)
            t0 = time.perf_counter()
            try:
                losses = [step(), step(), step()]  # fused eager compiles a graph the third time it sees it
            except Exception as exc:  # noqa: BLE001 - a mode that fails is reported, the others still run
                out.setdefault("failed", {})[mode] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                continue
            warm = time.perf_counter() - t0
            t1 = time.perf_counter()
            step()
            one = time.perf_counter() - t1
        steps[mode] = step
        blocks[mode] = max(1, int(min_run_time / rounds / max(one, 1e-6)))
        out["modes"][mode] = {"warmup_s": warm, "first_losses": losses, "samples_s": []}
    for _ in range(rounds):
        for mode, step in steps.items():
            with _eager_mode(mode):
                m = Timer(stmt="step()", globals={"step": step}).timeit(blocks[mode])
            out["modes"][mode]["samples_s"].append(m.mean)
    for mode, f in out["modes"].items():
        times = sorted(f["samples_s"])
        q1, q3 = times[len(times) // 4], times[(3 * len(times)) // 4]
        med = statistics.median(times)
        f.update(
            step_ms_median=med * 1e3,
            step_ms_iqr=(q3 - q1) * 1e3,
            samples=len(times) * blocks[mode],
            us_per_aten_op=med * 1e6 / out["aten_ops_per_step"],
        )
    return out


def _per_op(repeats: int) -> dict[str, Any]:
    """Single small ops: tpu strict vs torch cpu vs raw JAX (the figures the previous version printed)."""
    import jax
    import jax.numpy as jnp

    res: dict[str, Any] = {}
    xc, wc, lc = torch.randn(8, 8), torch.randn(8, 8), torch.randn(8, 64)
    gc, bc = torch.ones(64), torch.zeros(64)
    xt, wt, lt, gt, bt = (t.to("tpu") for t in (xc, wc, lc, gc, bc))
    xj, wj, lj = (jnp.asarray(t.numpy()) for t in (xc, wc, lc))
    jln = jax.jit(lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5))
    cases = {
        "add 8x8": (lambda: xc + wc, lambda: xt + wt, lambda: xj + wj),
        "matmul 8x8": (lambda: xc @ wc, lambda: xt @ wt, lambda: xj @ wj),
        "layer_norm 8x64": (
            lambda: F.layer_norm(lc, (64,), gc, bc),
            lambda: F.layer_norm(lt, (64,), gt, bt),
            lambda: jln(lj),
        ),
    }
    for name, (c, t, j) in cases.items():
        row = {}
        for label, fn, sync in (
            ("torch_cpu", c, lambda o: None),
            ("tpu", t, lambda o: float(o.sum().cpu())),
            ("raw_jax", j, lambda o: o.block_until_ready()),
        ):
            for _ in range(20):
                o = fn()
            sync(o)
            samples = []
            for _ in range(max(1, repeats // 50)):
                t0 = time.perf_counter()
                for _ in range(50):
                    o = fn()
                sync(o)
                samples.append((time.perf_counter() - t0) / 50 * 1e6)
            row[label] = statistics.median(samples)
        res[name] = row
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt,llama,cnn", help="comma list of: " + ", ".join(WORKLOADS))
    p.add_argument("--modes", default="cpu,strict,fused,compiled")
    p.add_argument("--min-run-time", type=float, default=3.0, help="seconds per mode, over all rounds")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (each times every mode once)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads for the cpu baseline")
    p.add_argument("--ops", action="store_true", help="only the single-op figures")
    p.add_argument("--repeats", type=int, default=2000, help="--ops: timed calls per op")
    p.add_argument("--json", type=Path, help="write the figures here too")
    a = p.parse_args(argv)
    from tpu_workbench import backend

    backend.register()
    torch.set_num_threads(a.threads)
    info = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "device": torch.tpu.get_device_name(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "load_1min": os.getloadavg()[0],
    }
    print(json.dumps(info))
    result: dict[str, Any] = {"info": info}
    if a.ops:
        result["ops"] = _per_op(a.repeats)
        for name, row in result["ops"].items():
            print(f"{name:16s} " + "  ".join(f"{k} {v:7.1f} us" for k, v in row.items()))
    else:
        modes = [m.strip() for m in a.modes.split(",") if m.strip()]
        rows = []
        for name in [m.strip() for m in a.models.split(",") if m.strip()]:
            for train in (False, True) if name == "llama" else (True,):
                r = measure(name, train, modes, a.min_run_time, a.rounds)
                rows.append(r)
                base = r["modes"].get("cpu", {}).get("step_ms_median")
                strict = r["modes"].get("strict", {}).get("step_ms_median")
                label = f"{name} {'train step' if train else 'forward'} ({r['aten_ops_per_step']} ATen ops)"
                print(label)
                for mode, f in r["modes"].items():
                    rel = f"  {f['step_ms_median'] / base:5.2f}x cpu" if base else ""
                    vs = (
                        f"  {strict / f['step_ms_median']:5.2f}x faster than strict"
                        if strict and mode != "strict"
                        else ""
                    )
                    print(
                        f"  {mode:9s} {f['step_ms_median']:9.2f} ms (IQR {f['step_ms_iqr']:.2f})  "
                        f"{f['us_per_aten_op']:7.1f} us/op  warm-up {f['warmup_s']:.1f} s{rel}{vs}"
                    )
                for mode, why in r.get("failed", {}).items():
                    print(f"  {mode:9s} FAILED: {why}")
        result["workloads"] = rows
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
