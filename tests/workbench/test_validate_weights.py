"""Zero-initialised weight matrices are filled before the CPU/device comparison (tied router scores)."""

from __future__ import annotations

import torch

from tpu_workbench.bench.validate import weights


class TiedRouter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(8, 4, bias=False)
        self.norm = torch.nn.LayerNorm(8)
        torch.nn.init.zeros_(self.gate.weight)


def test_zero_gate_is_filled_and_norms_are_left() -> None:
    m = TiedRouter()
    assert weights.fill_zero_matrices(m) == ["gate.weight"]
    assert m.gate.weight.any() and torch.equal(m.norm.weight, torch.ones(8))
    scores = m.gate(torch.randn(3, 8))
    assert len(set(scores[0].tolist())) == 4  # no tie left to break


def test_filling_is_seeded() -> None:
    a, b = TiedRouter(), TiedRouter()
    weights.fill_zero_matrices(a)
    weights.fill_zero_matrices(b)
    assert torch.equal(a.gate.weight, b.gate.weight)
