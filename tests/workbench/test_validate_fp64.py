"""Tier-2 arbitration against a float64 CPU run: rounding noise passes, wrong answers and ill-conditioned
discrete outputs do not."""

from __future__ import annotations

import torch

from tpu_workbench.backend import comparison as compare


def _noise_gradient() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A bias before batch norm: its true gradient is 0, and what float32 gives is rounding."""
    torch.manual_seed(0)
    x = torch.randn(64, 32, dtype=torch.float64)
    grads = {}
    for dtype in (torch.float64, torch.float32):
        b = torch.zeros(32, dtype=dtype, requires_grad=True)
        y = torch.nn.functional.batch_norm(x.to(dtype) + b, None, None, training=True)
        (y * torch.linspace(-1, 1, 32, dtype=dtype)).pow(2).sum().backward()
        grads[dtype] = b.grad
    noisy_device = grads[torch.float32] * 0.5  # another float32 rounding of the same zero
    return noisy_device, grads[torch.float32], grads[torch.float64]


def test_rounding_noise_of_a_zero_gradient_passes_vs_float64() -> None:
    dev, cpu32, cpu64 = _noise_gradient()
    plain = compare.compare_all({"b": dev}, {"b": cpu32}, rtol=1e-3, atol=1e-12)
    judged = compare.compare_all_fp64({"b": dev}, {"b": cpu32}, {"b": cpu64}, rtol=1e-3, atol=1e-12)
    assert not plain["ok"] and judged["ok"] and judged["passed_vs_float64"] == ["b"]


def test_a_wrong_answer_still_fails() -> None:
    ref = torch.linspace(0, 1, 10)
    judged = compare.compare_all_fp64({"y": ref + 0.1}, {"y": ref}, {"y": ref.double()}, rtol=1e-4, atol=1e-5)
    assert not judged["ok"] and "vs float64" in judged["mismatches"][0]["detail"]


def test_discrete_outputs_that_float64_changes_are_ill_conditioned() -> None:
    got, ref, ref64 = torch.zeros(3, 2), torch.zeros(4, 2), torch.zeros(5, 2)  # keypoints found: 3 / 4 / 5
    judged = compare.compare_all_fp64({"kp": got}, {"kp": ref}, {"kp": ref64}, rtol=1e-4, atol=1e-5)
    assert not judged["ok"] and "ill-conditioned" in judged["mismatches"][0]["detail"]


def _tier1(agreement: dict, **extra: object) -> dict:
    return {"status": "tier1", "agreement": agreement, **extra}


def test_failure_classes_name_random_draws_and_ill_conditioning() -> None:
    from tpu_workbench.bench.validate import classify

    bad = {"ok": False, "mismatches": [{"detail": "vs float64: tpu 1, cpu float32 0.1"}]}
    ill = {"ok": False, "mismatches": [{"detail": "shape (3,) vs (4,); ill-conditioned: the CPU's own ..."}]}
    ok = {"ok": True, "mismatches": []}
    assert (
        classify.classify(_tier1({"forward": bad, "gradients": ok})) == "numerical mismatch vs CPU (forward)"
    )
    assert classify.classify(_tier1({"forward": bad, "gradients": ok}, random_draws={"rand": 1})).startswith(
        "random draws in the forward (rand)"
    )
    assert classify.classify(_tier1({"forward": ill, "gradients": ok})).startswith("ill-conditioned outputs")


def test_random_draws_of_a_forward_are_counted() -> None:
    from tpu_workbench.bench.validate.randomness import count_random_draws

    masked = torch.nn.Linear(4, 4).eval()
    assert count_random_draws(lambda: masked(torch.ones(2, 4)))[1] == {}
    assert count_random_draws(lambda: masked(torch.ones(2, 4)) * torch.rand(2, 4))[1] == {"rand": 1}


def test_a_tensor_whose_cpu_float32_error_is_over_the_tolerance_is_named_ill_conditioned() -> None:
    ref64 = torch.linspace(0, 1, 10, dtype=torch.float64)
    ref = (ref64 + 0.01).float()  # the CPU's own float32 run is 1% off float64: over a 1e-4 tolerance
    judged = compare.compare_all_fp64({"g": ref + 0.05}, {"g": ref}, {"g": ref64}, rtol=1e-4, atol=1e-5)
    assert not judged["ok"] and "ill-conditioned" in judged["mismatches"][0]["detail"]
