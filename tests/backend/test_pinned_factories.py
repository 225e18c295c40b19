"""The factory wrappers behind ``pin_memory=True``: they cover every factory of the pinned torch, and they stay
invisible to callers that do not pin (compiled graphs included)."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.backend import pinned_factories


def _public_ops_with_pin_memory(owner: object) -> set[str]:
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        name = schema.name.removeprefix("aten::")
        if schema.name.startswith("aten::") and not name.startswith("_") and name in vars(owner):
            if any(a.name == "pin_memory" for a in schema.arguments):
                names.add(name)
    return names


def test_every_factory_with_pin_memory_is_wrapped() -> None:
    assert _public_ops_with_pin_memory(torch) | {"tensor"} == set(pinned_factories.FACTORIES)
    assert _public_ops_with_pin_memory(torch.Tensor) == set(pinned_factories.METHODS)
    for owner, names in ((torch, pinned_factories.FACTORIES), (torch.Tensor, pinned_factories.METHODS)):
        for name in names:
            assert hasattr(getattr(owner, name), "_tpu_original"), name


def test_tensor_methods_pin_host_results_only() -> None:
    host = torch.ones(2)
    assert host.new_empty(3, pin_memory=True).is_pinned() and not host.new_zeros(3).is_pinned()
    dev = torch.ones(2, device="tpu")
    assert dev.new_full((2,), 3.0).device.type == "tpu"


def test_wrappers_keep_names_docs_and_results() -> None:
    assert torch.zeros.__name__ == "zeros" and "zeros" in (torch.zeros.__doc__ or "")
    torch.manual_seed(0)
    a = torch.randn(3, 4)
    torch.manual_seed(0)
    b = torch.randn(3, 4, pin_memory=True)
    assert torch.equal(a, b) and b.is_pinned() and not a.is_pinned()


def test_device_factories_are_not_marked() -> None:
    t = torch.zeros(3, device="tpu")
    assert t.device.type == "tpu" and torch.equal(t.cpu(), torch.zeros(3))


@pytest.mark.slow  # 3.5 s: torch.compile
def test_compiled_code_calling_factories_keeps_one_graph() -> None:
    def step(x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(3, device=x.device) + torch.arange(3, device=x.device) + x.new_zeros(3)

    want = torch.tensor([1.0, 2.0, 3.0])
    assert torch.equal(torch.compile(step, fullgraph=True)(torch.ones(3)), want)
    got = torch.compile(step, fullgraph=True, backend="tpu")(torch.ones(3, device="tpu"))
    assert torch.equal(got.cpu(), want)


def test_torchscript_still_compiles_factories_as_builtins() -> None:
    def fill(x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(3) + torch.arange(3) + x.new_zeros(3)

    assert torch.equal(torch.jit.script(fill)(torch.ones(3)), torch.tensor([1.0, 2.0, 3.0]))


def test_device_context_still_places_factories() -> None:
    with torch.device("tpu"):
        assert torch.arange(3).device.type == "tpu" and torch.zeros(2).device.type == "tpu"
    assert torch.zeros(2).device.type == "cpu"


def test_fx_traces_factories_by_name() -> None:
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.zeros(x.shape[0]) + torch.zeros_like(x)

    traced = torch.fx.symbolic_trace(Net())
    assert "torch.zeros(" in traced.code and torch.equal(traced(torch.ones(2)), torch.ones(2))
