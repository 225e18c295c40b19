"""Break exact ties that a model's initialisation builds in, before the CPU/device comparison.

Some architectures initialise a weight matrix to zero (MoE router gates, zero-init output projections).
With a zero router every expert scores the same, and which experts ``topk`` then picks is implementation-
defined: the CPU, CUDA and XLA each break ties their own way, so a correct device "disagrees" with the CPU
for a reason that is not numerical at all. Filling such matrices with small seeded noise keeps the model
random (it is random-weight anyway) and makes every choice well defined on every device.
"""

from __future__ import annotations

import torch

NOISE_STD = 0.02  # the std most transformers configs use as initializer_range


def fill_zero_matrices(model: torch.nn.Module, seed: int = 0) -> list[str]:
    """Give every all-zero floating parameter with two or more dimensions seeded noise; returns their names."""
    gen = torch.Generator().manual_seed(seed)
    filled = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2 and p.is_floating_point() and p.numel() > 1 and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * NOISE_STD)
                filled.append(name)
    return filled
