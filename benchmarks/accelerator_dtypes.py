"""Accelerator-dtype audit: does "tpu" accept what CUDA accepts where torch's CPU kernels refuse it?

    python benchmarks/accelerator_dtypes.py [--only NAME,...] [--max-samples 4] [--json out.json]

For every OpInfo entry (PyTorch's ``op_db``), the dtypes in ``supported_dtypes("cuda")`` that are not in
``supported_dtypes("cpu")`` are run on "tpu" with the entry's own sample inputs. The reference is the CPU
computing the same samples in a wider dtype it supports (integers and bool in int64, then float64; float16 and
bfloat16 in float32, then float64), cast back: to the audited dtype when the op kept its input dtype, else to
the dtype the op promotes to (read from the op's meta kernel where it has one). ``nansum``/``nanmean`` of complex
inputs, which the CPU refuses in every dtype, are referenced by ``sum``/``mean`` over the non-NaN elements.
Random ops (rrelu, dropout ...) are compared by shape and dtype only. Tolerances: exact for integers and bool;
float16 atol = rtol = 1e-2; bfloat16 2e-2; float32 1e-4 / 1.3e-4; float64 1e-7. Forward values only.

Outcomes per (entry, dtype): ``pass``; ``refused`` (the device raised where CUDA accepts: the class of bug
this audit exists for); ``mismatch`` (a wrong answer); ``no-reference`` (the CPU could not compute any
sample in a wider dtype either); ``not-held`` (a dtype the device does not hold, e.g. complex32); ``skip``
(no samples); ``unverified`` (the device ran, but nothing on the CPU computes a reference). Exit status 1 if any
entry is refused or mismatched, unless it is listed in ``KNOWN`` below with the reason.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tpu_workbench import backend
from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import random as _rng
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.conformance import _META_ONLY, entry_name, op_db

# Dtypes the device does not hold (no JAX equivalent): reported, not run.
NOT_HELD = (torch.complex32,)

_FFT_HALF = (
    "torch's FFT front end refuses float16 for this device before dispatch ('Unsupported dtype Half'); "
    "CUDA's half FFT yields complex32, which the device does not hold"
)
_CUDA_KERNEL = (
    "a CUDA-only fused attention kernel (SDPA selects it on CUDA only); on tpu SDPA runs its math path"
)

# (entry|dtype) -> why the device does not (yet) do what CUDA does there.
KNOWN: dict[str, str] = {
    **{f"fft.{n}|float16": _FFT_HALF for n in ("fft", "fft2", "fftn", "hfft", "hfft2", "hfftn", "rfft", "rfft2",
                                                "rfftn", "ifft", "ifft2", "ifftn", "ihfft", "ihfft2", "ihfftn",
                                                "irfft", "irfft2", "irfftn")},
    "torch.ops.aten._flash_attention_forward|float16": _CUDA_KERNEL,
    "torch.ops.aten._efficient_attention_forward|float16": _CUDA_KERNEL,
    "torch.ops.aten._efficient_attention_forward|float32": _CUDA_KERNEL,
}  # fmt: skip

# Entries whose CPU kernel refuses the dtype in every width: a reference composed of ops the CPU has.
_COMPOSED = {
    "nansum": lambda x, *a, **k: torch.sum(torch.where(x.isnan(), torch.zeros((), dtype=x.dtype), x), *a, **k),
    "nanmean": lambda x, *a, **k: (torch.sum(torch.where(x.isnan(), torch.zeros((), dtype=x.dtype), x), *a, **k)
                                   / torch.sum(~x.isnan(), *a, **{n: v for n, v in k.items() if n != "dtype"})),
}  # fmt: skip

_WIDER = {
    "int": (torch.int64, torch.float64),
    "bool": (torch.int64, torch.float64),
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,),
    torch.float64: (torch.float64,),
    torch.complex64: (torch.complex128,),
    torch.complex128: (torch.complex128,),
}

_TOL = {
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
    torch.float32: {"atol": 1e-4, "rtol": 1.3e-4},
    torch.float64: {"atol": 1e-7, "rtol": 1e-7},
    torch.complex64: {"atol": 1e-4, "rtol": 1.3e-4},
    torch.complex128: {"atol": 1e-7, "rtol": 1e-7},
}


@dataclass
class Audit:
    entry: str
    dtype: str
    status: str
    samples: int = 0
    reference: str = ""
    detail: str = ""


def accelerator_only_dtypes(op: Any) -> list[torch.dtype]:
    """The dtypes CUDA supports for ``op`` and the CPU does not."""
    try:
        cuda, cpu = set(op.supported_dtypes("cuda")), set(op.supported_dtypes("cpu"))
    except Exception:  # noqa: BLE001 - an entry whose dtype declarations cannot be evaluated here
        return []
    return sorted(cuda - cpu, key=str)


def _wider(dtype: torch.dtype, cpu_ok: set) -> list[torch.dtype]:
    key = (
        "bool"
        if dtype is torch.bool
        else "int"
        if not (dtype.is_floating_point or dtype.is_complex)
        else dtype
    )
    cands = [d for d in _WIDER[key] if d in cpu_ok] or list(_WIDER[key])
    return cands


def _cast_tree(x: Any, src: torch.dtype, dst: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(dst) if x.dtype == src else x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast_tree(v, src, dst) for v in x)
    if isinstance(x, dict):
        return {k: _cast_tree(v, src, dst) for k, v in x.items()}
    return x


def _to_tpu(x: Any) -> Any:
    return private.tree_map(lambda t: t.detach().to("tpu") if isinstance(t, torch.Tensor) else t, x)


def _meta_dtypes(op: Any, args: tuple, kwargs: dict) -> list | None:
    """The output dtypes the op's meta kernel infers for these inputs (None when it has none)."""
    to_meta = lambda t: t.detach().to("meta") if isinstance(t, torch.Tensor) else t  # noqa: E731
    try:
        out = op(*private.tree_map(to_meta, args), **private.tree_map(to_meta, kwargs))
    except Exception:  # noqa: BLE001 - no meta kernel, or one that needs real data
        return None
    return [x.dtype if isinstance(x, torch.Tensor) else None for x in private.tree_flatten(out)[0]]


def _compare(
    ref: Any, out: Any, dtype: torch.dtype, wide: torch.dtype, expected: list | None, meta_only: bool
) -> None:
    r_leaves = private.tree_flatten(ref)[0]
    o_leaves = private.tree_flatten(out)[0]
    if len(r_leaves) != len(o_leaves):
        raise AssertionError(f"{len(o_leaves)} outputs, the reference has {len(r_leaves)}")
    if expected is not None and len(expected) != len(r_leaves):
        expected = None
    for i, (r, o) in enumerate(zip(r_leaves, o_leaves, strict=True)):
        if not isinstance(r, torch.Tensor):
            if r != o and not (isinstance(r, float) and r != r and o != o):
                raise AssertionError(f"{o!r} != {r!r}")
            continue
        if not isinstance(o, torch.Tensor):
            raise AssertionError(f"expected a tensor, got {type(o).__name__}")
        if o.device.type != "tpu" and o.numel():
            raise AssertionError(f"output on {o.device}")
        expect = expected[i] if expected is not None else (dtype if r.dtype == wide else r.dtype)
        oc = o.detach().cpu()
        if oc.dtype != expect or oc.shape != r.shape:
            raise AssertionError(
                f"dtype/shape {oc.dtype}/{tuple(oc.shape)}, expected {expect}/{tuple(r.shape)}"
            )
        if meta_only:
            continue
        rc = r.detach().to(expect)
        tol = _TOL.get(expect, {"atol": 0, "rtol": 0})
        if expect.is_floating_point or expect.is_complex:
            torch.testing.assert_close(oc, rc, equal_nan=True, **tol)
        elif not torch.equal(oc, rc):
            raise AssertionError(f"values differ: {oc.flatten()[:8].tolist()} vs {rc.flatten()[:8].tolist()}")


def audit_entry(op: Any, dtype: torch.dtype, max_samples: int = 4) -> Audit:
    """Run one (entry, accelerator-only dtype) pair on "tpu" against the widened CPU reference."""
    res = Audit(entry_name(op), str(dtype).replace("torch.", ""), "skip")
    if dtype in NOT_HELD:
        res.status, res.detail = "not-held", "the device has no such dtype"
        return res
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
    except Exception as exc:  # noqa: BLE001 - the entry's sample generator cannot build this dtype on the host
        res.detail = f"sample_inputs failed: {exc!r}"[:200]
        return res
    cpu_ok = set(op.supported_dtypes("cpu"))
    meta_only = any(k in op.name for k in _META_ONLY)
    ran = unverified = 0
    for s in samples:
        args, kwargs = (s.input, *s.args), dict(s.kwargs)
        ref, wide = None, None
        for w in _wider(dtype, cpu_ok):
            fn = _COMPOSED.get(op.name, op) if w.is_complex else op
            try:
                torch.manual_seed(0)
                ref = fn(*_cast_tree(args, dtype, w), **_cast_tree(kwargs, dtype, w))
                wide = w
                break
            except Exception:  # noqa: BLE001 - try the next wider dtype
                continue
        draws = _rng.draws
        try:
            torch.manual_seed(0)
            out = op(*_to_tpu(args), **_to_tpu(kwargs))
        except Exception as exc:  # noqa: BLE001
            res.status, res.detail = "refused", f"{type(exc).__name__}: {exc}".splitlines()[0][:240]
            return res
        if wide is None:
            unverified += 1
            continue
        res.reference = str(wide).replace("torch.", "")
        try:
            _compare(ref, out, dtype, wide, _meta_dtypes(op, args, kwargs), meta_only or _rng.draws != draws)
        except Exception as exc:  # noqa: BLE001
            res.status, res.detail = "mismatch", f"sample {ran}: {exc}".replace("\n", " ")[:300]
            return res
        ran += 1
    res.samples = ran
    if ran:
        res.status = "pass"
    elif unverified:
        res.status, res.detail = (
            "unverified",
            "the device ran every sample; the CPU has no reference in any width",
        )
    return res


def audit(only: set[str] | None = None, max_samples: int = 4) -> list[Audit]:
    out = []
    for op in op_db():
        if only is not None and op.name not in only and entry_name(op) not in only:
            continue
        for dt in accelerator_only_dtypes(op):
            out.append(audit_entry(op, dt, max_samples))
    return out


def _table(rows: list[Audit]) -> str:
    w = max([len(r.entry) for r in rows] + [5])
    lines = [f"{'entry':<{w}}  {'dtype':<10} {'status':<13} {'ref':<8} detail", "-" * (w + 60)]
    for r in rows:
        known = KNOWN.get(f"{r.entry}|{r.dtype}")
        detail = f"known: {known}" if known and r.status in ("refused", "mismatch") else r.detail
        lines.append(f"{r.entry:<{w}}  {r.dtype:<10} {r.status:<13} {r.reference:<8} {detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="comma-separated OpInfo names")
    p.add_argument("--max-samples", type=int, default=4)
    p.add_argument("--json", default=None, help="write the rows and provenance here")
    a = p.parse_args(argv)
    if a.max_samples < 1:
        p.error("--max-samples must be >= 1")
    backend.register()
    t0 = time.time()
    rows = audit(set(a.only.split(",")) if a.only else None, a.max_samples)
    took = time.time() - t0
    print(_table(rows))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    held = [r for r in rows if r.status != "not-held"]
    print(
        f"\n{len(rows)} (entry, dtype) pairs CUDA accepts and the CPU refuses; "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f"; of the {len(held)} the device holds: {counts.get('pass', 0)} pass"
    )
    print(
        f"measured: {platform.node()}, torch {torch.__version__}, jax {jax_module().__version__}, "
        f"{time.strftime('%Y-%m-%d')}, {took:.0f} s, max {a.max_samples} samples per pair"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {
                    "provenance": {
                        "kind": "measured",
                        "host": platform.node(),
                        "torch": torch.__version__,
                        "date": time.strftime("%Y-%m-%d"),
                        "seconds": round(took, 1),
                    },
                    "rows": [asdict(r) for r in rows],
                },
                f,
                indent=1,
            )
    bad = [r for r in rows if r.status in ("refused", "mismatch") and f"{r.entry}|{r.dtype}" not in KNOWN]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
