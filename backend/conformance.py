"""OpInfo conformance: run PyTorch's own ``op_db`` sample inputs on cpu and on tpu and compare.

The comparison itself is backend/comparison.py's (shared with ``tpu-bench validate``). Used by the fast slice in ``tests/backend/test_opinfo.py`` and by ``benchmarks/opinfo_full.py``.
Outcomes per (op, variant, dtype):
- ``pass``: every sample agreed with the CPU (values, shapes, dtypes; gradients too when checked);
- ``unsupported``: the tpu raised (NotImplementedError or another error) where the CPU did not. Honest:
  the user sees an error, never a wrong number;
- ``mismatch``: the tpu returned a different answer: a silent wrong answer, the outcome to drive to zero;
- ``skip``: no usable sample (the CPU itself rejects them, or the dtype is not supported by the op).
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import random as _rng
from tpu_workbench.backend.comparison import compare_outputs, counter_diff, fallback_counters, to_tpu

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
            for a in tree_map(to_tpu, args)
        )
        tkwargs = tree_map(to_tpu, kwargs)
        if isinstance(tkwargs.get("device"), (str, torch.device)):
            tkwargs["device"] = "tpu"
        before = fallback_counters()
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
        new = sorted(counter_diff(before)["rescues"])
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
            compare_outputs(cpu_out, tpu_out, dtype, rnd or gauge, name in _TIE_OPS)
            if gauge:
                compare_outputs(proc(cpu_out), proc(tpu_out), dtype, rnd)
            if grad:
                compare_outputs(list(cpu_g), list(tpu_g), dtype, rnd)
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
