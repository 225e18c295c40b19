"""Tier-2 agreement: the "tpu" run against the CPU run of the same seed, float32.

Tolerances are per tensor and relative to the tensor's own scale, because errors of a stack of layers grow
with the magnitude of what flows through them (an elementwise relative test fails on values that are
near zero by cancellation):

    forward outputs:      max|tpu - cpu| <= 1e-5 + 1e-4 * max|cpu|
    parameter gradients:  max|tpu - cpu| <= 1e-5 + 1e-3 * max|cpu|

Integer and boolean outputs must be equal; NaN/inf must sit at the same places. A tensor over its
tolerance is then judged against a float64 CPU run (see ``compare_all_fp64``): it passes only if the
device is no further from float64 than twice the CPU's own float32 error. One still over it passes only if
the device is within twice the CPU reference's own rounding noise, measured by Monte Carlo arithmetic
(see :mod:`tpu_workbench.bench.validate.rounding`): a near-tie that a different valid rounding flips.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

FORWARD_RTOL, FORWARD_ATOL = 1e-4, 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-3, 1e-5
TOLERANCES = {
    "forward": {"rtol": FORWARD_RTOL, "atol": FORWARD_ATOL},
    "gradients": {"rtol": GRAD_RTOL, "atol": GRAD_ATOL},
}


def tensor_leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """(path, tensor) for every tensor in a model output (ModelOutput, dict, tuple, list); caches and
    other objects are skipped."""
    if isinstance(obj, torch.Tensor):
        yield prefix or "output", obj
    elif isinstance(obj, dict):  # ModelOutput is an OrderedDict of its non-None fields
        for key, value in obj.items():
            yield from tensor_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from tensor_leaves(value, f"{prefix}.{i}" if prefix else str(i))


def probe_loss(outputs: Any) -> torch.Tensor | None:
    """A scalar that depends on every floating output that carries gradient: mean of squares, summed."""
    terms = [
        (t if t.dtype == torch.float64 else t.float()).pow(2).mean()  # float64 stays (the arbitration run)
        for _, t in tensor_leaves(outputs)
        if t.is_floating_point() and t.requires_grad and t.numel() > 0
    ]
    if not terms:
        return None
    return torch.stack([t.to(terms[0].device) for t in terms]).sum()


@dataclass
class Mismatch:
    name: str
    max_abs: float
    scale: float
    limit: float
    detail: str = ""

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "max_abs_err": self.max_abs,
            "ref_scale": self.scale,
            "limit": self.limit,
            "detail": self.detail,
        }


def compare_tensor(
    name: str, got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float
) -> tuple[float, Mismatch | None]:
    """Share of the tolerance used (max|Δ| / limit: at most 1 passes) and a Mismatch when over it."""
    got = got.detach().cpu()
    ref = ref.detach().cpu()
    if got.shape != ref.shape:
        return float("inf"), Mismatch(
            name, float("inf"), 0.0, 0.0, f"shape {tuple(got.shape)} vs {tuple(ref.shape)}"
        )
    if not ref.is_floating_point() and not ref.is_complex():
        equal = bool(torch.equal(got.to(ref.dtype), ref))
        return (0.0 if equal else float("inf")), (
            None if equal else Mismatch(name, float("inf"), 0.0, 0.0, "integer values differ")
        )
    if ref.is_complex():
        got, ref = torch.view_as_real(got.to(ref.dtype)), torch.view_as_real(ref)
    got, ref = got.double(), ref.double()
    finite = torch.isfinite(ref)
    if not torch.equal(finite, torch.isfinite(got)) or not torch.equal(
        got[~finite].nan_to_num(0, 1, -1), ref[~finite].nan_to_num(0, 1, -1)
    ):
        return float("inf"), Mismatch(name, float("inf"), 0.0, 0.0, "NaN/inf at different places")
    if ref.numel() == 0 or not finite.any():
        return 0.0, None
    diff = (got[finite] - ref[finite]).abs().max().item()
    scale = ref[finite].abs().max().item()
    limit = atol + rtol * scale
    return diff / limit, (Mismatch(name, diff, scale, limit) if diff > limit else None)


def compare_all(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], rtol: float, atol: float) -> dict:
    """Compare two name->tensor maps; names missing on one side are mismatches."""
    result = compare_all_fp64(got, ref, {}, rtol, atol)
    del result["passed_vs_float64"]  # nothing to arbitrate with
    return result


# --------------------------------------------------------------------------- float64 arbitration
# A tensor over the tolerance is judged once more against a float64 CPU run of the same model, the way
# torch._dynamo.utils.same(fp64_ref=...) judges compiled results: the device passes when its error against
# float64 is at most FP64_MULTIPLIER times the CPU float32 run's own error against float64 (+ atol / 10).
# That separates rounding noise (gradients that are analytically zero, such as a bias before a norm or a
# key bias under softmax, are pure rounding at the scale of their neighbours) from wrong answers.
FP64_MULTIPLIER = 2.0


def _fp64_verdict(
    name: str, got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None, atol: float, bad: Mismatch
) -> Mismatch | None:
    if ref64 is None:
        return bad
    ref64 = ref64.detach().cpu()
    if ref64.shape != ref.shape or (
        not ref.is_floating_point() and not torch.equal(ref64.to(ref.dtype), ref)
    ):
        bad.detail = (bad.detail + "; " if bad.detail else "") + (
            "ill-conditioned: the CPU's own float32 and float64 runs disagree too"
        )
        return bad
    if got.shape != ref.shape or not ref.is_floating_point() or not torch.isfinite(ref).all():
        return bad
    r64 = ref64.double()
    e_dev = (got.detach().cpu().double() - r64).abs().max().item()
    e_ref = (ref.double() - r64).abs().max().item()
    if e_dev <= FP64_MULTIPLIER * e_ref + atol / 10:
        return None
    bad.detail = (
        bad.detail + "; " if bad.detail else ""
    ) + f"vs float64: tpu {e_dev:.3g}, cpu float32 {e_ref:.3g}"
    if e_ref > bad.limit:  # the CPU's own float32 run would fail this tolerance against float64
        bad.detail += (
            "; ill-conditioned: the CPU's own float32 error against float64 is over the tolerance too"
        )
    return bad


NOISE_MULTIPLIER = 2.0


def _noise_verdict(band: float | None, bad: Mismatch) -> Mismatch | None:
    """None when the device's distance from the CPU run is within NOISE_MULTIPLIER x the CPU run's own
    Monte Carlo rounding band for this tensor."""
    if band is None or not math.isfinite(bad.max_abs) or bad.max_abs > NOISE_MULTIPLIER * band:
        if band is not None:
            bad.detail = (bad.detail + "; " if bad.detail else "") + f"cpu rounding noise {band:.3g}"
        return bad
    return None


def compare_all_fp64(
    got: dict[str, torch.Tensor],
    ref: dict[str, torch.Tensor],
    ref64: dict[str, torch.Tensor],
    rtol: float,
    atol: float,
    noise: dict[str, float] | None = None,
) -> dict:
    """As :func:`compare_all`, with every tensor over the tolerance arbitrated against ``ref64``, then
    against the CPU run's rounding noise band ``noise`` (name -> max-abs spread); the names that passed
    only that way are listed under ``"passed_vs_float64"`` and ``"passed_vs_rounding_noise"``."""
    mismatches: list[Mismatch] = []
    rescued: list[str] = []
    within_noise: list[str] = []
    worst = 0.0
    for name, r in ref.items():
        if name not in got:
            mismatches.append(Mismatch(name, float("inf"), 0.0, 0.0, "missing in the tpu run"))
            continue
        rel, bad = compare_tensor(name, got[name], r, rtol, atol)
        worst = max(worst, rel)
        if bad:
            verdict = _fp64_verdict(name, got[name], r, ref64.get(name), atol, bad)
            if verdict is None:
                rescued.append(name)
            elif noise is not None and _noise_verdict(noise.get(name), verdict) is None:
                within_noise.append(name)
            else:
                mismatches.append(verdict)
    for name in got:
        if name not in ref:
            mismatches.append(Mismatch(name, float("inf"), 0.0, 0.0, "missing in the cpu run"))
    return {
        "ok": not mismatches,
        "compared": len(ref),
        "worst_tol_used": worst,
        "mismatches": [m.as_dict() for m in mismatches[:8]],
        "n_mismatches": len(mismatches),
        "passed_vs_float64": rescued,
        **({"passed_vs_rounding_noise": within_noise} if noise is not None else {}),
    }
