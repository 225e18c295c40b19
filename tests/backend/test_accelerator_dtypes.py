"""Fast slice of the accelerator-dtype audit (benchmarks/accelerator_dtypes.py): where torch's CUDA kernels
accept a dtype its CPU kernels refuse, the device must accept it and compute the right answer.

An entry declared in the audit's KNOWN list must still be refused (so the list cannot rot); every other pair
in the slice must pass against the widened CPU reference.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys

import pytest
import torch

from tpu_workbench.backend.conformance import entry_name, op_db

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "accelerator_dtypes.py"


@functools.cache
def _audit_module():  # noqa: ANN202 - a module object
    spec = importlib.util.spec_from_file_location("accelerator_dtypes", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


SLICE = [
    ("histc", torch.int32), ("histc", torch.uint8), ("histc", torch.int64), ("abs", torch.bool),
    ("trace", torch.bool), ("nn.functional.softsign", torch.bool), ("round.decimals_3", torch.float16),
    ("polygamma.polygamma_n_1", torch.float16), ("nansum", torch.complex64), ("nanmean", torch.complex128),
    ("nn.functional.multi_margin_loss", torch.float16), ("nn.functional.avg_pool3d", torch.bfloat16),
    ("fft.rfft", torch.float16),
]  # fmt: skip


@functools.cache
def _entries() -> dict:
    return {entry_name(op): op for op in op_db()}


@pytest.mark.parametrize("name,dtype", SLICE, ids=[f"{n}-{str(d).replace('torch.', '')}" for n, d in SLICE])
def test_accelerator_dtype(name: str, dtype: torch.dtype) -> None:
    audit = _audit_module()
    op = _entries()[name]
    assert dtype in audit.accelerator_only_dtypes(op), (
        f"{name} {dtype} is no longer CUDA-only: update the slice"
    )
    r = audit.audit_entry(op, dtype, max_samples=3)
    if f"{r.entry}|{r.dtype}" in audit.KNOWN:
        assert r.status == "refused", (
            f"{name} {dtype} is declared known but now {r.status}: remove it from KNOWN"
        )
    else:
        assert r.status == "pass", f"{name} {dtype}: {r.status}: {r.detail}"


def test_audit_catches_a_wrong_output_dtype() -> None:
    """The comparison is not vacuous: an int64 result where the op keeps int32 is a mismatch."""
    audit = _audit_module()
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)  # reference computed in float64 for an int32 op
    wrong = torch.tensor([1, 2], dtype=torch.int64, device="tpu")
    with pytest.raises(AssertionError, match="dtype"):
        audit._compare(ref, wrong, torch.int32, torch.float64, None, False)
    audit._compare(ref, wrong.to(torch.int32), torch.int32, torch.float64, None, False)
