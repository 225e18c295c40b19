"""A small CNN image classifier: the non-LM workload (images/s rather than tokens/s)."""

from __future__ import annotations

import torch
from torch import nn

from tpu_workbench.bench.workloads.config import VisionConfig


def build_vision_model(cfg: VisionConfig, *, seed: int = 0) -> nn.Module:
    """conv3x3-ReLU-maxpool stages (no batch-norm: fewer ops a young backend must support)."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    cin = 3
    for cout in cfg.channels:
        layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        cin = cout
    side = cfg.image // 2 ** len(cfg.channels)
    layers += [nn.Flatten(), nn.Linear(cin * side * side, cfg.classes)]
    return nn.Sequential(*layers)
