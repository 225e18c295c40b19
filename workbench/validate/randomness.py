"""Which random draws a model makes in its forward, so that a tier-2 difference they cause is named as such.

The CPU and the device have different generators (as the CPU and CUDA do): the same seed gives different
draws, so a model that samples in its forward (MAE's patch masking, VITS' duration noise, point sampling)
cannot agree with the CPU run number for number. A dispatch mode counts the random ATen ops of the CPU
reference run; a tier-2 failure of a model that made any is reported as that class, and still not a pass.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

RANDOM_OPS = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_",
    "uniform_", "bernoulli", "bernoulli_", "exponential_", "geometric_", "log_normal_", "cauchy_",
    "multinomial", "poisson", "random_", "native_dropout", "rrelu_with_noise",
})  # fmt: skip


class RandomDraws(TorchDispatchMode):
    """Counts random ATen ops (by packet name) run inside the block; dropout in eval mode is not one."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        if name in RANDOM_OPS and not (name == "native_dropout" and len(args) > 2 and args[2] is False):
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def count_random_draws(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, int]]:
    """Run ``fn`` and return its result with the random ops it ran."""
    with RandomDraws() as mode:
        out = fn(*args, **kwargs)
    return out, dict(mode.counts)
