"""A negative size is refused with CPU's RuntimeError on "tpu" too (XLA failed to build the program with an
MLIRError or a TypeError instead; found by `tpu-bench assess` on lucidrains/vector-quantize-pytorch, whose test
expects `repeat(-1)` to raise RuntimeError)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import tpu_workbench.backend  # noqa: F401  (registers "tpu")

SIZE_TAKERS = {
    "empty": lambda d, s: torch.empty(s, device=d),
    "zeros": lambda d, s: torch.zeros(s, device=d),
    "ones": lambda d, s: torch.ones(s, device=d),
    "full": lambda d, s: torch.full(s, 1.5, device=d),
    "randn": lambda d, s: torch.randn(s, device=d),
    "empty_strided": lambda d, s: torch.empty_strided(s, (1,) * len(s), device=d),
    "new_empty": lambda d, s: torch.ones(2, device=d).new_empty(s),
    "new_zeros": lambda d, s: torch.ones(2, device=d).new_zeros(s),
    "repeat": lambda d, s: torch.ones((1,) * len(s), device=d).repeat(s),
    "interpolate": lambda d, s: F.interpolate(torch.ones(1, 1, 4, device=d), size=s[:1]),
}


def _outcome(fn, device: str, sizes: tuple[int, ...]):
    try:
        return tuple(fn(device, sizes).shape)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    name=st.sampled_from(sorted(SIZE_TAKERS)),
    sizes=st.lists(st.integers(-3, 3), min_size=1, max_size=3).map(tuple),
)
def test_sizes_answer_as_cpu(name, sizes):
    fn = SIZE_TAKERS[name]
    cpu, tpu = _outcome(fn, "cpu", sizes), _outcome(fn, "tpu", sizes)
    assert cpu == tpu, (name, sizes, cpu, tpu)


@pytest.mark.parametrize("n", [-1, -5])
def test_eye_and_repeat_of_negative_counts_raise_cpus_error(n):
    with pytest.raises(RuntimeError, match="greater or equal to 0"):
        torch.eye(n, device="tpu")
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.tensor(5, device="tpu").repeat(n)


def test_expand_keeps_minus_one():
    assert torch.ones(1, 3, device="tpu").expand(4, -1).shape == (4, 3)
