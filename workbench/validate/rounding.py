"""The CPU reference's own rounding noise, measured by Monte Carlo arithmetic, so that tier 2 can tell a
different valid float32 rounding from a wrong answer.

A device (a GPU, a TPU, XLA on the CPU) sums in another order and fuses differently, so each of its float32
results is a *different rounding* of the same mathematics. Where the computation is ill-conditioned at the
point the tiny model sits (a ReLU input within rounding of zero, a threshold, a top-k near-tie, a
thresholded keypoint), a rounding difference flips a decision and moves a gradient element by its full
size. Neither run is wrong; float64 cannot arbitrate either, because float64 simply picks a side.

Monte Carlo arithmetic (Parker, Pierce & Eggert, 2000; the method of Verificarlo and CADNA) measures that:
re-run the CPU reference several times with every floating input of every ATen op perturbed by a random
relative amount of one float32 machine epsilon, and with ties in ``topk``/``sort`` broken in a random
order (the order of equal elements is unspecified there). The spread of those runs around the plain CPU
run is the reference's noise band. A device tensor over the tier-2 tolerance passes only when its distance
from the CPU run is within ``NOISE_MULTIPLIER`` times that band: a wrong lowering is orders of magnitude
outside it, while a flipped near-tie is inside it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SAMPLES = 8
EPSILON = 2.0**-23  # float32 machine epsilon: one unit in the last place, relative
NOISE_MULTIPLIER = 2.0  # as torch._dynamo.utils.same's float64 criterion
_TIE_OPS = {"topk": 2, "sort": 1}  # op packet -> position of its `dim` argument


def _mutates_or_aliases(func: Any) -> bool:
    """An op that writes into an argument or returns a view of one: perturbing a copy would change what
    it means, so its inputs are left alone."""
    schema = func._schema
    if schema.is_mutable:
        return True
    return any(r.alias_info is not None for r in schema.returns)


class MonteCarloRounding(TorchDispatchMode):
    """Perturbs every floating input of every non-aliasing ATen op by a relative ``epsilon`` x U(-1, 1),
    and breaks ties of ``topk``/``sort`` in a random order. Draws come from its own generator, so the
    model's random ops (seeded by the caller) draw what they drew in the reference run."""

    def __init__(self, seed: int, epsilon: float = EPSILON) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)
        self.epsilon = epsilon

    def _jitter(self, x: Any) -> Any:
        """``x`` with its non-integer elements moved by a relative epsilon x U(-1, 1). Integer values stay:
        arithmetic on them is exact in any order, and indices or sizes computed in floating point (a
        coordinate grid floored to an index) must not move."""
        if isinstance(x, (list, tuple)):
            return type(x)(self._jitter(v) for v in x)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.device.type != "cpu":
            return x
        if x.numel() == 0 or x.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            return x
        u = torch.rand(x.shape, generator=self.generator, dtype=torch.float64) * 2 - 1
        wide = x.double()
        u = torch.where(wide == wide.round(), 0.0, u)
        return (wide * (1 + self.epsilon * u)).to(x.dtype)

    def _shuffled_ties(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """topk/sort of a random permutation along ``dim``, with the indices mapped back."""
        x = args[0]
        position = _TIE_OPS[func.overloadpacket.__name__]
        dim = kwargs.get(
            "dim", args[position] if len(args) > position and isinstance(args[position], int) else -1
        )
        if x.dim() == 0 or x.shape[dim] < 2 or kwargs.get("stable"):
            return func(*args, **kwargs)
        perm = torch.randperm(x.shape[dim], generator=self.generator)
        values, indices = func(x.index_select(dim, perm), *args[1:], **kwargs)
        return values, perm[indices]

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in _TIE_OPS and func._schema.overload_name in ("", "default", "stable"):
            return self._shuffled_ties(func, args, kwargs)
        if _mutates_or_aliases(func):
            return func(*args, **kwargs)
        return func(*[self._jitter(a) for a in args], **{k: self._jitter(v) for k, v in kwargs.items()})


def noise_band(
    run_reference: Callable[[Any], tuple[dict, dict]],
    model: Any,
    ref_out: dict[str, torch.Tensor],
    ref_grads: dict[str, torch.Tensor],
    samples: int = SAMPLES,
) -> tuple[dict[str, float], dict[str, float]]:
    """Largest max-abs distance from the plain CPU run over ``samples`` Monte Carlo runs, per forward
    output and per parameter gradient. ``run_reference(model)`` runs forward + backward and returns
    (outputs, gradients) as the reference run does."""
    band_out: dict[str, float] = {}
    band_grad: dict[str, float] = {}
    for seed in range(samples):
        m = copy.deepcopy(model)
        m.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        with MonteCarloRounding(seed):
            out, grads = run_reference(m)
        for band, got, ref in ((band_out, out, ref_out), (band_grad, grads, ref_grads)):
            for name, r in ref.items():
                g = got.get(name)
                if g is None or r is None or g.shape != r.shape or not r.is_floating_point():
                    continue
                d = (
                    (g.double() - r.double()).nan_to_num(0.0, 0.0, 0.0).abs().max().item()
                    if r.numel()
                    else 0.0
                )
                band[name] = max(band.get(name, 0.0), d)
    return band_out, band_grad
