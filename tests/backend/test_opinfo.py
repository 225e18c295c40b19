"""Fast OpInfo slice: PyTorch's own op_db samples, cpu vs tpu (the full run: benchmarks/opinfo_full.py).

Strict policy: an entry passes, or it is declared in backend/opinfo_known_unsupported.json and must still
fail with an error (a declared entry that passes fails the suite, so the list cannot rot). A mismatch (a
silent wrong answer) always fails.
"""

from __future__ import annotations

import functools

import pytest
import torch

from tpu_workbench.backend.conformance import entry_name, load_known_unsupported, op_db, run_entry

SLICE = [
    "add", "sub", "mul", "div", "true_divide", "remainder", "fmod", "pow", "abs", "neg", "exp", "log", "sqrt",
    "rsqrt", "sin", "tanh", "sigmoid", "clamp", "where", "maximum", "eq", "lt", "logical_and", "bitwise_and",
    "sum", "mean", "amax", "argmax", "max", "var", "std", "cumsum", "sort", "topk",
    "matmul", "mm", "bmm", "addmm", "linalg.vector_norm",
    "cat", "stack", "view", "reshape", "permute", "transpose", "expand", "squeeze", "unsqueeze", "flip", "roll",
    "narrow", "select", "index_select", "gather", "scatter_add", "index_put", "masked_fill", "nonzero", "tril",
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.gelu", "nn.functional.relu",
    "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.cross_entropy", "nn.functional.embedding", "nn.functional.linear",
    "nn.functional.scaled_dot_product_attention", "nn.functional.batch_norm", "nn.functional.mse_loss",
    "arange", "full", "zeros", "ones_like", "linspace",
]  # fmt: skip
DTYPES = [torch.float32, torch.int64]
BF16_SLICE = [
    "add",
    "mul",
    "matmul",
    "softmax",
    "sum",
    "mean",
    "nn.functional.layer_norm",
    "nn.functional.conv2d",
    "nn.functional.gelu",
    "nn.functional.linear",
]

QUICK = {
    (name, torch.float32)
    for name in (
        "add",
        "div",
        "sum",
        "matmul",
        "softmax",
        "cat",
        "view",
        "where",
        "sort",
        "index_put",
        "nn.functional.conv2d",
        "nn.functional.layer_norm",
        "nn.functional.cross_entropy",
        "nn.functional.scaled_dot_product_attention",
    )
}


@functools.cache
def _entries() -> list:
    wanted = set(SLICE)
    return [op for op in op_db() if op.name in wanted or entry_name(op) in wanted]


def _by_name(name: str) -> list:
    return [op for op in _entries() if op.name == name or entry_name(op) == name]


def _cases() -> list:
    """(name, dtype) pairs, so that collecting the tests does not build PyTorch's op_db (seconds); the
    quick loop runs ``QUICK`` in float32, the full suite everything."""
    cases = [(name, dt) for name in SLICE for dt in DTYPES] + [(name, torch.bfloat16) for name in BF16_SLICE]
    return [pytest.param(name, dt, id=f"{name}-{str(dt).replace('torch.', '')}",
                         marks=() if (name, dt) in QUICK else pytest.mark.slow) for name, dt in cases]  # fmt: skip


@pytest.mark.parametrize("name,dtype", _cases())
def test_opinfo_slice(name: str, dtype: torch.dtype) -> None:
    known = load_known_unsupported()
    problems = []
    for op in _by_name(name):  # a name can hold several entries (max: reduction and binary forms)
        r = run_entry(op, dtype, max_samples=3)
        if r.status == "mismatch":
            problems.append(f"silent wrong answer: {r.detail}")
        elif r.key in known and r.status != "unsupported":
            problems.append(f"{r.key} is declared unsupported but now {r.status}: remove it")
        elif r.key not in known and r.status not in ("pass", "skip"):
            problems.append(f"{r.key}: {r.status}: {r.detail}")
    assert not problems, "\n".join(problems)


def test_slice_covers_the_list() -> None:
    found = {op.name for op in _entries()} | {entry_name(op) for op in _entries()}
    assert set(SLICE) <= found, set(SLICE) - found


def test_known_unsupported_sample_still_fails() -> None:
    known = load_known_unsupported()
    by_key = {
        f"{entry_name(op)}|{dt}": (op, getattr(torch, dt)) for op in op_db() for dt in ("float32", "int64")
    }
    sample = [k for k in sorted(known) if k in by_key][:: max(1, len(known) // 6)][:6]
    for key in sample:
        op, dt = by_key[key]
        r = run_entry(op, dt, max_samples=3)
        assert r.status == "unsupported", f"{key} is declared unsupported but now {r.status}: remove it"
