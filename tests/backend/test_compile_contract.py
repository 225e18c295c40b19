"""TorchTPU 0.2.0's torch.compile behaviours (contract §15): backend "tpu" refuses ``dynamic=True`` and ``mode=``
with a clear error, and counts recompiles where users can read them."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench import backend  # noqa: F401 - registers the device
from tpu_workbench.backend import compile as tpu_compile


def _f(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_backend_tpu_refuses_mode(mode: str) -> None:
    with pytest.raises(ValueError, match="does not take mode="):
        torch.compile(_f, backend="tpu", mode=mode)


def test_backend_tpu_refuses_dynamic_true_and_keeps_false_by_default() -> None:
    with pytest.raises(ValueError, match="does not support dynamic=True"):
        torch.compile(_f, backend="tpu", dynamic=True)
    torch.compile(_f, backend="tpu", dynamic=False)  # accepted


def test_a_tpu_model_compiled_with_no_backend_refuses_them_too() -> None:
    m = torch.nn.Linear(2, 2).to("tpu")
    with pytest.raises(ValueError, match="mode="):
        torch.compile(m, mode="max-autotune")
    with pytest.raises(ValueError, match="dynamic=True"):
        torch.compile(m, dynamic=True)


def test_a_plain_function_with_a_mode_is_refused_when_its_graph_meets_tpu_inputs() -> None:
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x * 3, mode="max-autotune-no-cudagraphs")
    with pytest.raises(Exception, match="does not take mode="):
        fn(torch.ones(2, device="tpu"))


def test_the_recompile_counter_counts_a_new_shape_and_not_a_cache_hit() -> None:
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x + 1, backend="tpu")
    before = torch.tpu._get_cache_stats()["recompiles"]
    fn(torch.ones(3, device="tpu"))
    fn(torch.ones(3, device="tpu"))
    assert torch.tpu._get_cache_stats()["recompiles"] == before  # the first compile and a hit: none
    fn(torch.ones(5, device="tpu"))
    assert torch.tpu._get_cache_stats()["recompiles"] == before + 1
    assert tpu_compile.stats()["recompiles"] == torch.tpu._get_cache_stats()["recompiles"]


def test_backend_inductor_on_a_function_of_tpu_tensors_names_backend_tpu() -> None:
    torch._dynamo.reset()
    fn = torch.compile(lambda t: t + 1, backend="inductor")
    with pytest.raises(Exception, match="backend='tpu'"):
        fn(torch.arange(4.0, device="tpu"))
