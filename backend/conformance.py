"""OpInfo conformance: run PyTorch's own ``op_db`` sample inputs on cpu and on tpu and compare.

Used by the fast slice in ``tests/backend/test_opinfo.py`` and by ``benchmarks/opinfo_full.py``.
Outcomes per (op, variant, dtype):
- ``pass``: every sample agreed with the CPU (values, shapes, dtypes; gradients too when checked);
- ``unsupported``: the tpu raised (NotImplementedError or another error) where the CPU did not. Honest:
  the user sees an error, never a wrong number;
- ``mismatch``: the tpu returned a different answer: a silent wrong answer, the outcome to drive to zero;
- ``skip``: no usable sample (the CPU itself rejects them, or the dtype is not supported by the op).
"""

from __future__ import annotations

import json
import math
import pathlib
from dataclasses import dataclass
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import dispatch as _d
from tpu_workbench.backend import random as _rng

tree_flatten, tree_map = private.tree_flatten, private.tree_map

KNOWN_UNSUPPORTED_FILE = pathlib.Path(__file__).with_name("opinfo_known_unsupported.json")

# Random or uninitialised outputs: compared on shape and dtype only.
_META_ONLY = (
    "rand",
    "normal",
    "bernoulli",
    "dropout",
    "multinomial",
    "empty",
    "uniform",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "poisson",
    "randperm",
    "new_empty",
)


@dataclass
class Outcome:
    op: str
    dtype: str
    status: str
    samples: int = 0
    detail: str = ""

    @property
    def key(self) -> str:
        return f"{self.op}|{self.dtype}"


def op_db() -> list:
    return private.op_db()


def entry_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def load_known_unsupported() -> dict[str, str]:
    if KNOWN_UNSUPPORTED_FILE.exists():
        return json.loads(KNOWN_UNSUPPORTED_FILE.read_text())
    return {}


def _to_tpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        if x._base is not None:
            # keep the sample's storage relationship: move the base, re-take the same view on the device
            base = x._base.detach().to("tpu")
            if x.requires_grad and base.is_floating_point():
                base.requires_grad_()
            return base.as_strided(x.size(), x.stride(), x.storage_offset())
        t = x.detach().to("tpu")
        return t.requires_grad_(x.requires_grad) if x.requires_grad and t.is_floating_point() else t
    return x


def _tol(dtype: torch.dtype) -> dict:
    if dtype in (torch.bfloat16,):
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype in (torch.float16,):
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype == torch.float32:
        return {"atol": 1e-4, "rtol": 1.3e-5 * 10}
    return {}


# (values, indices) ops whose index choice among equal values is unspecified: the indices are checked by
# shape and dtype, the values exactly.
_TIE_OPS = (
    "topk",
    "sort",
    "kthvalue",
    "mode",
    "median",
    "nanmedian",
    "msort",
    "argsort",
    "max.reduction_with_dim",
    "min.reduction_with_dim",
    "cummax",
    "cummin",
    "argmax",
    "argmin",
)


# Decompositions whose factors are unique only up to a sign/phase per vector (eigenvectors, singular vectors):
# LAPACK builds (torch's MKL, JAX's OpenBLAS/scipy) may pick different, equally valid signs. As PyTorch's own
# test_compare_cpu does, their outputs are compared after the sample's gauge-invariant
# ``output_process_fn_grad`` (e.g. |V|, U @ Vh), and gradients are taken of that processed output (as gradcheck
# does); the raw outputs are still checked for shape and dtype.
_GAUGE_OPS = ("linalg.eigh", "svd", "linalg.svd")


def _compare(cpu_out: Any, tpu_out: Any, dtype: torch.dtype, meta_only: bool, ties: bool = False) -> None:
    c_leaves, c_spec = tree_flatten(cpu_out)
    t_leaves, t_spec = tree_flatten(tpu_out)
    if ties and len(c_leaves) == 2:
        _compare(c_leaves[0], t_leaves[0], dtype, meta_only)
        _compare(c_leaves[1], t_leaves[1], dtype, True)
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
                    **_tol(c.dtype if c.is_floating_point() else dtype),
                )
        elif isinstance(c, float) and isinstance(t, float):
            if not (math.isclose(c, t, rel_tol=1e-4, abs_tol=1e-5) or (math.isnan(c) and math.isnan(t))):
                raise AssertionError(f"{t} != {c}")
        elif not meta_only and isinstance(c, (int, bool)) and c != t:
            raise AssertionError(f"{t} != {c}")


def _grads(out: Any, inputs: list[torch.Tensor]) -> list[Any]:
    leaves = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if not leaves or not inputs:
        return []
    total = sum((o.float().sum() if o.numel() else o.float().sum()) for o in leaves)
    return list(torch.autograd.grad(total, inputs, allow_unused=True))


def run_entry(op: Any, dtype: torch.dtype, max_samples: int = 8, check_grad: bool = True) -> Outcome:
    """Run up to ``max_samples`` samples of one OpInfo entry on cpu and tpu and classify the outcome."""
    name = entry_name(op)
    res = Outcome(name, str(dtype).replace("torch.", ""), "skip")
    if dtype not in op.supported_dtypes("cpu"):
        res.detail = "dtype not supported by the op on cpu"
        return res
    meta_only = any(k in op.name for k in _META_ONLY)
    grad = check_grad and dtype == torch.float32 and op.supports_autograd and not meta_only
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=grad))[:max_samples]
    except Exception as exc:  # noqa: BLE001 - the op's own sample generator failed on this torch
        res.detail = f"sample_inputs failed: {exc!r}"[:300]
        return res
    done = 0
    for s in samples:
        args = (s.input, *s.args)
        kwargs = dict(s.kwargs)
        gauge = name in _GAUGE_OPS and callable(getattr(s, "output_process_fn_grad", None))
        proc = s.output_process_fn_grad if gauge else (lambda out: out)
        try:
            torch.manual_seed(0)
            cpu_out = op(*args, **kwargs)
            cpu_in = [
                x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor) and x.requires_grad
            ]
            cpu_g = _grads(proc(cpu_out), cpu_in) if grad else []
        except Exception:  # noqa: BLE001 - the CPU rejects this sample: nothing to compare
            continue
        targs = tuple(
            "tpu"
            if (isinstance(a, str) and a == "cpu") or (isinstance(a, torch.device) and a.type == "cpu")
            else a
            for a in tree_map(_to_tpu, args)
        )
        tkwargs = tree_map(_to_tpu, kwargs)
        if isinstance(tkwargs.get("device"), (str, torch.device)):
            tkwargs["device"] = "tpu"
        rescued = dict(_d.BACKWARD_RESCUES)
        draws = _rng.draws
        try:
            torch.manual_seed(0)
            tpu_out = op(*targs, **tkwargs)
            tpu_in = [
                x
                for x in tree_flatten((targs, tkwargs))[0]
                if isinstance(x, torch.Tensor) and x.requires_grad
            ]
            tpu_g = _grads(proc(tpu_out), tpu_in) if grad else []
        except Exception as exc:  # noqa: BLE001
            res.status = "unsupported"
            res.detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            return res
        new = sorted(k for k, v in _d.BACKWARD_RESCUES.items() if rescued.get(k, 0) != v)
        if new:
            res.status = "unsupported"
            res.detail = "backward needed the CPU: " + ", ".join(new)[:250]
            return res
        if name == "argsort" and not kwargs.get("stable", False):
            # an unstable sort may order equal values either way (torch CPU's std::sort does): compare the
            # values the indices pick, which are unique, not the indices
            dim = args[1] if len(args) > 1 else kwargs.get("dim", -1)
            cpu_out, tpu_out = torch.gather(args[0], dim, cpu_out), torch.gather(targs[0], dim, tpu_out)
        try:
            rnd = meta_only or _rng.draws != draws  # random ops ran: compare shapes and dtypes only
            _compare(cpu_out, tpu_out, dtype, rnd or gauge, name in _TIE_OPS)
            if gauge:
                _compare(proc(cpu_out), proc(tpu_out), dtype, rnd)
            if grad:
                _compare(list(cpu_g), list(tpu_g), dtype, rnd)
        except Exception as exc:  # noqa: BLE001
            res.status = "mismatch"
            res.detail = f"sample {done}: {exc}".replace("\n", " ")[:400]
            return res
        done += 1
    res.samples = done
    if done:
        res.status = "pass"
    else:
        res.detail = res.detail or "no sample ran on cpu"
    return res
