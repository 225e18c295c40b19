"""Eager per-op latency: "tpu" (this backend) vs torch CPU vs raw JAX, in one run.

    python benchmarks/bench_eager.py [--repeats 2000] [--json]

Each figure is the median over ``--repeats`` timed calls (after warm-up) of one op followed by nothing
else; for JAX and tpu the loop ends with a block_until_ready so dispatch cannot run ahead unmeasured (the
per-op figure includes that amortised wait). Ops: small add (8x8), small matmul (8x8 @ 8x8), layer_norm
(8x64).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F


def _time(fn: Callable[[], object], sync: Callable[[object], None], repeats: int, inner: int = 50) -> dict:
    for _ in range(20):
        out = fn()
    sync(out)
    samples = []
    for _ in range(max(1, repeats // inner)):
        t0 = time.perf_counter()
        for _ in range(inner):
            out = fn()
        sync(out)
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return {"median_us": statistics.median(samples), "min_us": min(samples),
            "p90_us": sorted(samples)[int(0.9 * (len(samples) - 1))], "samples": len(samples)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2000)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    import jax
    import jax.numpy as jnp

    import backend

    backend.register()
    results = {}
    torch.manual_seed(0)
    xc, wc = torch.randn(8, 8), torch.randn(8, 8)
    lc = torch.randn(8, 64)
    gc, bc = torch.ones(64), torch.zeros(64)
    xt, wt, lt, gt, bt = (t.to("tpu") for t in (xc, wc, lc, gc, bc))
    xj, wj, lj, gj, bj = (jnp.asarray(t.numpy()) for t in (xc, wc, lc, gc, bc))

    @jax.jit
    def jax_ln(x, g, b):  # noqa: ANN001, ANN202
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    def nosync(o: object) -> None:
        return None

    def jsync(o: object) -> None:
        jax.block_until_ready(o)

    def tsync(o: object) -> None:
        from backend.tensor import value

        jax.block_until_ready(value(o))

    cases = {
        "add 8x8": (lambda: xc + wc, lambda: xt + wt, lambda: jnp.add(xj, wj)),
        "matmul 8x8": (lambda: xc @ wc, lambda: xt @ wt, lambda: jnp.matmul(xj, wj)),
        "layer_norm 8x64": (lambda: F.layer_norm(lc, (64,), gc, bc), lambda: F.layer_norm(lt, (64,), gt, bt),
                            lambda: jax_ln(lj, gj, bj)),
    }
    for name, (fc, ft, fj) in cases.items():
        results[name] = {
            "torch_cpu": _time(fc, nosync, a.repeats),
            "tpu": _time(ft, tsync, a.repeats),
            "raw_jax": _time(fj, jsync, a.repeats),
        }
    meta = {"device": torch.tpu.get_device_name(), "torch": torch.__version__, "jax": jax.__version__,
            "python": platform.python_version(), "machine": platform.machine(), "repeats": a.repeats}
    if a.json:
        print(json.dumps({"meta": meta, "results": results}, indent=1))
        return 0
    print(f"eager per-op latency, median us ({meta['device']}, torch {meta['torch']})")
    print(f"{'op':18} {'tpu':>10} {'torch cpu':>10} {'raw jax':>10}")
    for name, r in results.items():
        print(f"{name:18} {r['tpu']['median_us']:10.1f} {r['torch_cpu']['median_us']:10.1f} "
              f"{r['raw_jax']['median_us']:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
