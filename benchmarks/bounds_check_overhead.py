"""What the refusals cost (backend/refusals.py): each checked op timed with its check and without it.

For every op that reads its index values on the host (embedding, index_add_, index_copy_, index_fill_, take,
one_hot, multinomial, repeat_interleave) and for the in-place integer cast check, the op runs ``--reps`` times
in strict eager on "tpu" (XLA:CPU on a machine without a TPU), first as shipped, then with the check replaced
by a no-op; the printed ratio is the checked time over the unchecked one (median of ``--rounds``).

    python benchmarks/bounds_check_overhead.py [--reps 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from tpu_workbench.backend import composite, dispatch, refusals


def _cases() -> dict[str, tuple[list, Callable[[], object]]]:
    d = "tpu"
    w = torch.randn(1000, 64).to(d)
    idx = torch.randint(0, 1000, (256,)).to(d)
    x = torch.zeros(1000, 64).to(d)
    src = torch.ones(256, 64).to(d)
    probs = torch.rand(32, 100).to(d)
    counts = torch.randint(0, 3, (256,)).to(d)
    ints = torch.zeros(256, dtype=torch.long).to(d)
    aten = torch.ops.aten
    return {
        "embedding": ([aten.embedding.default], lambda: F.embedding(idx, w)),
        "index_add_": ([aten.index_add_.default], lambda: x.index_add_(0, idx, src)),
        "index_copy_": ([aten.index_copy_.default], lambda: x.index_copy_(0, idx[:64].unique(), src[: idx[:64].unique().numel()])),
        "index_fill_": ([aten.index_fill_.int_Scalar], lambda: x.index_fill_(0, idx, 1.0)),
        "take": ([aten.take.default], lambda: w.take(idx)),
        "one_hot": (["one_hot"], lambda: F.one_hot(idx, 1000)),
        "multinomial": ([aten.multinomial.default], lambda: torch.multinomial(probs, 1)),
        "repeat_interleave": ([aten.repeat_interleave.Tensor], lambda: torch.repeat_interleave(counts)),
        "long.add_(1) (in-place cast check)": (["inplace"], lambda: ints.add_(1)),
    }  # fmt: skip


def _time(fn: Callable[[], object], reps: int) -> float:
    out = fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    if isinstance(out, torch.Tensor):
        out.cpu()
    return (time.perf_counter() - t0) / reps


def _without(ops: list, fn: Callable[[], object], reps: int) -> float:
    """Time ``fn`` with the checks of ``ops`` switched off (plans rebuilt without them), then restore."""
    saved_checks = dict(refusals._CHECKS)
    saved_inplace = dispatch._inplace_refusal
    saved_one_hot = composite.check_one_hot
    try:
        for op in ops:
            if op == "one_hot":
                composite.check_one_hot = lambda t, n: n
            elif op == "inplace":
                dispatch._inplace_refusal = lambda f: None
            else:
                refusals._CHECKS.pop(op, None)
        dispatch._PLANS.clear()
        return _time(fn, reps)
    finally:
        refusals._CHECKS.clear()
        refusals._CHECKS.update(saved_checks)
        dispatch._inplace_refusal = saved_inplace
        composite.check_one_hot = saved_one_hot
        dispatch._PLANS.clear()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    print(f"{'op':38s} {'checked us':>11s} {'unchecked us':>13s} {'ratio':>6s}")
    for name, (ops, fn) in _cases().items():
        on, off = [], []
        for _ in range(a.rounds):
            dispatch._PLANS.clear()
            on.append(_time(fn, a.reps))
            off.append(_without(ops, fn, a.reps))
        c, u = statistics.median(on) * 1e6, statistics.median(off) * 1e6
        print(f"{name:38s} {c:11.1f} {u:13.1f} {c / u:6.2f}")


if __name__ == "__main__":
    main()
