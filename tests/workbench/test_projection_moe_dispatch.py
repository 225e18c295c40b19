"""Dropless MoE training (MaxText sparse_matmul): the token copies gathered into expert order and back, forward
and backward, cost HBM passes beyond the routing passes of the elementwise op (step._dropless_moe_passes)."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.projection import project
from tpu_workbench.bench.workloads.config import get_config


def _moe(phase: str = "train", capacity_factor: float | None = None, remat: str = "full"):
    return project(
        "TPU v7",
        "qwen3-235b-a22b",
        phase,
        256,
        "fsdp=256",
        batch=2,
        seq=4096,
        remat=remat,
        capacity_factor=capacity_factor,
        require_fit=False,
    )


def test_dropless_training_pays_the_dispatch_copies():
    rec = _moe()
    t = rec.extra["time_breakdown_s"]["moe_dispatch"]
    cfg = get_config("qwen3-235b-a22b")
    k = cfg.top_k
    # full remat: forward twice (5k + 1 each) + backward (7k + 3), minus the (2 + 2k) x (2 + 2) already counted
    elems = ((5 * k + 1) * 2 + (7 * k + 3) - (2 + 2 * k) * 4) * cfg.d_model
    hbm = 7370e9 * 0.8  # TPU v7 HBM x the default memory efficiency
    tokens = 2 * 4096
    assert t == pytest.approx(elems * tokens * cfg.n_layers * 2 / hbm, rel=0.02)


def test_no_dispatch_copies_with_capacity_or_outside_training():
    assert "moe_dispatch" not in _moe(capacity_factor=1.25).extra["time_breakdown_s"]
    assert "moe_dispatch" not in _moe("prefill").extra["time_breakdown_s"]
    dense = project("TPU v7", "llama3-70b", "train", 256, "fsdp=256", batch=2, seq=4096)
    assert "moe_dispatch" not in dense.extra["time_breakdown_s"]
