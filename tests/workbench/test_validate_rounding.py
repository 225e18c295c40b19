"""Tier-2 arbitration by the CPU reference's own rounding noise (Monte Carlo arithmetic): a near-tie that a
different valid rounding flips passes; a wrong answer, even a small one, does not."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.backend import comparison as compare
from tpu_workbench.bench.validate import rounding


class _Kinked(torch.nn.Module):
    """Linear -> ReLU -> Linear whose first layer puts one ReLU input within rounding of zero."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(16, 8)
        self.fc2 = torch.nn.Linear(8, 4)
        self.x = torch.randn(3, 16)
        with torch.no_grad():  # move unit 0 of sample 0 to a few ulps above zero
            pre = self.fc1(self.x)[0, 0]
            self.fc1.bias[0] -= pre - 3e-8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _reference(model: torch.nn.Module, x: torch.Tensor) -> tuple[dict, dict]:
    out = model(x)
    out.pow(2).mean().backward()
    return {"y": out.detach()}, {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _flipped(model: _Kinked) -> dict:
    """The gradients another device computes when its rounding puts that ReLU input just below zero."""
    m = _Kinked()
    with torch.no_grad():
        m.fc1.bias[0] -= 6e-8
    return _reference(m, model.x)[1]


def test_a_relu_flip_at_rounding_level_is_within_the_noise_band() -> None:
    model = _Kinked()
    ref_out, ref_grads = _reference(model, model.x)
    dev_grads = _flipped(model)
    plain = compare.compare_all(dev_grads, ref_grads, compare.GRAD_RTOL, compare.GRAD_ATOL)
    assert not plain["ok"]  # one gradient element moved by its full size: over the tolerance
    _, band = rounding.noise_band(lambda m: _reference(m, model.x), model, ref_out, ref_grads)
    judged = compare.compare_all_fp64(dev_grads, ref_grads, {}, compare.GRAD_RTOL, compare.GRAD_ATOL, band)
    assert judged["ok"], judged
    assert judged["passed_vs_rounding_noise"]


def test_a_small_wrong_answer_is_outside_the_noise_band() -> None:
    model = _Kinked()
    ref_out, ref_grads = _reference(model, model.x)
    wrong = {n: g * (1 + 3e-3) for n, g in ref_grads.items()}  # a lowering 0.3% off
    _, band = rounding.noise_band(lambda m: _reference(m, model.x), model, ref_out, ref_grads)
    judged = compare.compare_all_fp64(wrong, ref_grads, {}, compare.GRAD_RTOL, compare.GRAD_ATOL, band)
    assert not judged["ok"]
    assert "cpu rounding noise" in judged["mismatches"][0]["detail"]


def test_a_well_conditioned_model_has_a_band_of_a_few_ulps() -> None:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 32)
    ref_out, ref_grads = _reference(model, x)
    band_out, band_grad = rounding.noise_band(lambda m: _reference(m, x), model, ref_out, ref_grads)
    scale = ref_out["y"].abs().max().item()
    assert 0 < band_out["y"] < 1e-5 * scale
    assert all(band_grad[n] < 1e-4 * ref_grads[n].abs().max().item() for n in band_grad)


def test_ties_in_topk_are_broken_in_random_order_and_indices_map_back() -> None:
    x = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    seen = set()
    for seed in range(8):
        with rounding.MonteCarloRounding(seed):
            values, indices = torch.topk(x, 3)
        assert values.tolist() == [1.0, 0.0, 0.0]
        assert indices[0].item() == 3 and torch.equal(x[indices], values)
        seen.add(tuple(indices.tolist()))
    assert len(seen) > 1  # the tied zeros came back in more than one order


def test_in_place_ops_views_and_integer_values_are_left_exact() -> None:
    with rounding.MonteCarloRounding(0):
        a = torch.full((4,), 0.1)
        a.add_(0.2)  # in place: must still write into `a`
        v = a.view(2, 2)
        grid = torch.arange(6, dtype=torch.float32) * 1.0  # integer-valued floats used as coordinates
        idx = grid.floor().long()
    assert v.data_ptr() == a.data_ptr()
    assert torch.equal(idx, torch.arange(6))
    assert torch.allclose(a, torch.full((4,), 0.3), rtol=1e-6, atol=0)


@pytest.mark.slow
def test_a_lowering_half_a_percent_off_still_fails_tier_2_on_a_real_model() -> None:
    """Negative control on a transformers model: gelu's backward 0.5% off on the device is far outside the
    CPU's rounding noise, so neither arbitration clears it."""
    pytest.importorskip("transformers")
    from tpu_workbench.backend import ops  # lazy: heavy (imports JAX)
    from tpu_workbench.backend.ops import registry  # lazy: heavy
    from tpu_workbench.bench.validate import runner  # lazy: heavy

    ops.load()
    op = torch.ops.aten.gelu_backward.default
    original = registry.REGISTRY[op]

    def off(g, x, *, approximate="none"):
        return original.fn(g, x, approximate=approximate) * 1.005

    registry.lower(op, jit=True, override="negative control in a test")(off)
    try:
        res = runner.validate("bert", check_generate=False, check_compile=False)
    finally:
        registry.lower(op, jit=original.jit, override="restored")(original.fn)
        registry.OVERRIDES.pop(op, None)
    grads = res["agreement"]["gradients"]
    assert res["tier1"] and not res["tier2"] and not grads["ok"]
    assert "cpu rounding noise" in grads["mismatches"][0]["detail"]


def test_a_model_that_draws_random_numbers_gets_no_noise_band() -> None:
    """Its reruns would spread by its own sampling, which is not rounding: nothing is cleared that way."""
    from tpu_workbench.bench.validate import runner  # lazy: heavy

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    ref_out, ref_grads = runner._forward_backward(model, (x,))
    got_out = {k: v + 1e-2 for k, v in ref_out.items()}  # what another generator's draws would give
    judged = runner._arbitrate(model, (x,), got_out, ref_out, ref_grads, ref_grads, draws=True)
    assert judged["rounding_noise"].startswith("not used")
    assert not judged["forward"]["ok"] and "passed_vs_rounding_noise" not in judged["forward"]
