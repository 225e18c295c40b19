"""Compare an op or a model on "tpu" against the CPU: the one owner of that judgement.

Two users: ``backend/conformance.py`` (PyTorch's OpInfo samples, one op at a time: ``compare_outputs`` with
per-dtype tolerances, ``to_tpu`` to move a sample keeping its views) and ``tpu-bench validate``
(workbench/validate/runner.py: a whole model, float32, the tolerances below, float64 and rounding-noise
arbitration); both read the CPU rescues a run needed with ``fallback_counters``/``counter_diff``.

Model agreement (tier 2): the "tpu" run against the CPU run of the same seed, float32.

Tolerances are per tensor and relative to the tensor's own scale, because errors of a stack of layers grow
with the magnitude of what flows through them (an elementwise relative test fails on values that are
near zero by cancellation):

    forward outputs:      max|tpu - cpu| <= 1e-5 + 1e-4 * max|cpu|
    parameter gradients:  max|tpu - cpu| <= 1e-5 + 1e-3 * max|cpu|

Integer and boolean outputs must be equal; NaN/inf must sit at the same places. A tensor over its
tolerance is then judged against a float64 CPU run (see ``compare_all_fp64``): it passes only if the
device is no further from float64 than twice the CPU's own float32 error. One still over it passes only if
the device is within twice the CPU reference's own rounding noise, measured by Monte Carlo arithmetic
(the workbench's ``validate/rounding.py``): a near-tie that a different valid rounding flips.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private

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


# --------------------------------------------------------------------------- one op (OpInfo samples)
def op_tolerance(dtype: torch.dtype) -> dict:
    """assert_close tolerances for one op's output of ``dtype`` (exact for integers and booleans)."""
    if dtype in (torch.bfloat16,):
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype in (torch.float16,):
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype == torch.float32:
        return {"atol": 1e-4, "rtol": 1.3e-5 * 10}
    return {}


def compare_outputs(
    cpu_out: Any, tpu_out: Any, dtype: torch.dtype, meta_only: bool, ties: bool = False
) -> None:
    """Raise AssertionError where one op's "tpu" outputs (any pytree) differ from the CPU's: structure, device,
    shape, dtype, then values (unless ``meta_only``: random or uninitialised outputs). ``ties``: a (values,
    indices) pair whose index choice among equal values is unspecified: indices checked by shape and dtype."""
    c_leaves, c_spec = private.tree_flatten(cpu_out)
    t_leaves, t_spec = private.tree_flatten(tpu_out)
    if ties and len(c_leaves) == 2:
        compare_outputs(c_leaves[0], t_leaves[0], dtype, meta_only)
        compare_outputs(c_leaves[1], t_leaves[1], dtype, True)
        return
    if len(c_leaves) != len(t_leaves):
        raise AssertionError(f"output structure differs: {c_spec} vs {t_spec}")
    for c, t in zip(c_leaves, t_leaves, strict=True):
        if isinstance(c, torch.Tensor):
            if not isinstance(t, torch.Tensor):
                raise AssertionError(f"expected a tensor, got {type(t)}")
            if t.device.type != "tpu" and c.device.type == "cpu" and t.numel() > 0:
                raise AssertionError(f"output on {t.device}, expected tpu")
            tc = t.detach().cpu()
            if tc.shape != c.shape or tc.dtype != c.dtype:
                raise AssertionError(
                    f"shape/dtype {tuple(tc.shape)}/{tc.dtype} != {tuple(c.shape)}/{c.dtype}"
                )
            if not meta_only:
                torch.testing.assert_close(
                    tc,
                    c.detach(),
                    equal_nan=True,
                    check_device=False,
                    **op_tolerance(c.dtype if c.is_floating_point() else dtype),
                )
        elif isinstance(c, float) and isinstance(t, float):
            if not (math.isclose(c, t, rel_tol=1e-4, abs_tol=1e-5) or (math.isnan(c) and math.isnan(t))):
                raise AssertionError(f"{t} != {c}")
        elif not meta_only and isinstance(c, (int, bool)) and c != t:
            raise AssertionError(f"{t} != {c}")


def to_tpu(x: Any) -> Any:
    """A CPU tensor on "tpu" with its requires_grad; a view stays a view of its moved base (same strides and
    offset), so ops that care about storage see what they saw on the CPU. Other values pass through."""
    if isinstance(x, torch.Tensor):
        if x._base is not None:
            base = x._base.detach().to("tpu")
            if x.requires_grad and base.is_floating_point():
                base.requires_grad_()
            return base.as_strided(x.size(), x.stride(), x.storage_offset())
        t = x.detach().to("tpu")
        return t.requires_grad_(x.requires_grad) if x.requires_grad and t.is_floating_point() else t
    return x


# --------------------------------------------------------------------------- CPU rescues during a run
def fallback_counters() -> dict[str, dict[str, int]]:
    """The dispatcher's counts of ops rescued on the CPU (inside backward) and run by the CPU fallback."""
    try:
        from tpu_workbench.backend import dispatch  # lazy: jax
    except Exception:  # noqa: BLE001 - no JAX: nothing can be rescued
        return {"rescues": {}, "fallbacks": {}}
    return {"rescues": dict(dispatch.BACKWARD_RESCUES), "fallbacks": dict(dispatch.FALLBACK_COUNTS)}


def counter_diff(before: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """What ``fallback_counters`` gained since ``before``: {kind: {op: calls}}, empty kinds kept."""
    after = fallback_counters()
    return {
        kind: {k: v - before[kind].get(k, 0) for k, v in after[kind].items() if v != before[kind].get(k, 0)}
        for kind in after
    }
