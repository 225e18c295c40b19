"""Outputs too large for a 64-bit byte count raise CPU's error instead of aborting the process inside XLA,
and gather/scatter indices outside [0, size) raise instead of being wrapped or dropped by JAX."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

_OVERFLOWS = r"""
import json, torch, backend
calls = {
    "empty": lambda d: torch.empty((1 << 62,), device=d),
    "zeros_2d": lambda d: torch.zeros(1 << 31, 1 << 31, device=d),
    "full": lambda d: torch.full((1 << 62,), 1.0, device=d),
    "randn": lambda d: torch.randn(1 << 62, device=d),
    "new_empty": lambda d: torch.zeros(3, device=d).new_empty((1 << 62,)),
    "repeat": lambda d: torch.randn(3, device=d).repeat(1 << 61),
    "arange": lambda d: torch.arange(1 << 62, device=d),
    "expand_contiguous": lambda d: torch.ones(3, device=d).expand(1 << 62, 3).contiguous(),
    "eye": lambda d: torch.eye(1 << 32, device=d),
    "interpolate": lambda d: torch.nn.functional.interpolate(torch.randn(1, 1, 2, 2, device=d),
                                                            size=(1 << 31, 1 << 31)),
}
out = {}
for name, call in calls.items():
    try:
        call("tpu")
        out[name] = None
    except Exception as e:
        out[name] = [type(e).__name__, str(e).split(chr(10))[0]]
print(json.dumps(out))
"""


@pytest.mark.slow  # 3.9 s subprocess
def test_outputs_that_overflow_a_byte_count_raise_instead_of_aborting() -> None:
    proc = subprocess.run([sys.executable, "-c", _OVERFLOWS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the child process died (rc={proc.returncode}): {proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out) == 10
    for name, err in out.items():
        assert err is not None, name
        assert err[0] == "RuntimeError" and "Storage size calculation overflowed" in err[1], (name, err)
    assert out["zeros_2d"][1].endswith("sizes=[2147483648, 2147483648]")  # CPU's own wording


def test_ordinary_sizes_pass_the_check() -> None:
    assert torch.arange(2, 8, 2, device="tpu").cpu().tolist() == [2, 4, 6]
    assert torch.eye(2, 3, device="tpu").shape == (2, 3)
    assert torch.randn(2, device="tpu").repeat(3, 2).shape == (3, 4)
    assert torch.linspace(0, 1, 5, device="tpu").shape == (5,)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, i: torch.gather(x, 0, i),
        lambda x, i: x.clone().scatter_(0, i, 1.0),
        lambda x, i: x.clone().scatter_add_(0, i, torch.ones(1, device=x.device)),
        lambda x, i: x.clone().scatter_reduce_(0, i, torch.ones(1, device=x.device), "amax"),
    ],
    ids=["gather", "scatter_value", "scatter_add", "scatter_reduce"],
)
@pytest.mark.parametrize("bad", [-1, 10])
def test_gather_and_scatter_refuse_indices_outside_the_dimension_as_cpu_does(call, bad) -> None:
    messages = []
    for dev in ("cpu", "tpu", "tpu", "tpu"):  # repeated: the check must survive the cached executable
        x = torch.zeros(3, device=dev)
        with pytest.raises(RuntimeError) as err:
            call(x, torch.tensor([bad], device=dev))
        messages.append(str(err.value))
    assert len(set(messages)) == 1, messages
    assert f"index {bad} is out of bounds for dimension 0 with size 3" in messages[0]


@pytest.mark.parametrize("n", [3, (1 << 16) + 5])  # read on the host / by the jitted min-max kernel
@pytest.mark.parametrize("bad", [-100, 70])
def test_embedding_refuses_an_index_outside_the_table_on_both_bound_paths(n, bad) -> None:
    table = torch.nn.Embedding(64, 4)
    idx = torch.zeros(n, dtype=torch.long)
    idx[n // 2] = bad
    messages = []
    for dev in ("cpu", "tpu"):
        with pytest.raises(IndexError) as err:
            torch.nn.functional.embedding(idx.to(dev), table.weight.detach().to(dev))
        messages.append(str(err.value))
    assert all("out of range" in m for m in messages), messages


def test_growing_indices_read_their_bounds_without_compiling_a_kernel_per_length(monkeypatch) -> None:
    """A sampling loop grows its token ids by one per step: the bounds of a small index tensor are read on the
    host, so no min-max program is compiled per length."""
    from tpu_workbench.backend import refusals

    def no_kernel(name):
        raise AssertionError(f"{name} kernel used for a small index tensor")

    monkeypatch.setattr(refusals, "_kernel", no_kernel)
    weight = torch.randn(65, 8, device="tpu")
    ids = torch.zeros(1, 1, dtype=torch.long, device="tpu")
    for step in range(5):
        out = torch.nn.functional.embedding(ids, weight)
        assert out.shape == (1, step + 1, 8)
        ids = torch.cat([ids, torch.full((1, 1), step + 1, device="tpu")], dim=1)
