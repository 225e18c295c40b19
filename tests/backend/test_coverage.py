"""Core ATen coverage is computed from the registry, and the backward-failure rescue is honest."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
import torch

from tpu_workbench.backend import coverage, dispatch
from tpu_workbench.backend.ops.registry import REGISTRY


def test_all_core_overloads_covered() -> None:
    r = coverage.report()
    c = r["counts"]
    assert r["core_overloads"] >= 190
    assert c["direct"] + c["decomposed"] + c["missing"] == r["core_overloads"]
    assert c["missing"] == 0, [o["op"] for o in r["ops"] if o["status"] == "missing"]
    assert c["direct"] > 150


def test_coverage_reads_the_registry() -> None:
    op = torch.ops.aten._cdist_forward.default
    saved = REGISTRY.pop(op)
    try:
        assert coverage.classify(op) == "missing"
    finally:
        REGISTRY[op] = saved
    assert coverage.classify(op) == "direct"


@pytest.mark.slow
def test_cli_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.backend.coverage", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data["counts"]) == {"direct", "decomposed", "missing"}
    assert len(data["ops"]) == data["core_overloads"]


def _without_lowering(op: object) -> Iterator[None]:
    """Take ``op``'s lowering out of the registry for the duration (the dispatcher's plans are dropped)."""
    from tpu_workbench.backend.ops import registry

    saved = REGISTRY.pop(op)
    for cb in registry._listeners:
        cb()
    try:
        yield
    finally:
        REGISTRY[op] = saved
        for cb in registry._listeners:
            cb()


def test_a_backward_op_without_lowering_raises_naming_it_unless_the_cpu_fallback_is_on() -> None:
    from tpu_workbench.backend import state

    op = torch.ops.aten._cdist_backward.default
    with contextlib.contextmanager(_without_lowering)(op):
        assert op not in REGISTRY and dispatch.decomposition_for(op) is None
        x = torch.randn(3, 4, requires_grad=True)
        xt = x.detach().to("tpu").requires_grad_()
        with pytest.raises(NotImplementedError, match="_cdist_backward"):
            torch.cdist(xt, xt * 2).sum().backward()
        was = state.cpu_fallback_enabled()
        state.set_cpu_fallback(True)
        try:
            before = dispatch.FALLBACK_COUNTS["aten::_cdist_backward"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.cdist(xt, xt * 2).sum().backward()
        finally:
            state.set_cpu_fallback(was)
        torch.cdist(x, x * 2).sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), x.grad)
        assert dispatch.FALLBACK_COUNTS["aten::_cdist_backward"] > before


def test_the_device_recording_reports_ops_torchtpu_lacks_and_not_composite_ones() -> None:
    x = torch.randn(6, 4).to("tpu")
    with coverage.recording() as counts:
        x.median()
        torch.linalg.cholesky_ex(torch.eye(3).to("tpu") * 2)
        torch.einsum("ij,ij->i", x, x)  # CompositeImplicitAutograd: decomposed above the device
        x + x
    r = coverage.device_ops(counts)
    assert r["absent_on_torchtpu"] == ["aten::linalg_cholesky_ex", "aten::median"]
    assert "aten::einsum" not in r["overloads"] and "aten::bmm" in r["overloads"]
    # per overload: the wheel registers add.out, so add.Tensor runs there (not absent)
    assert r["overloads"]["aten::add.Tensor"]["torchtpu_0_2_0"] == "sibling"
    assert r["missing_here"] == []
    assert "aten::median" in "\n".join(coverage.format_device_ops(r))
    # the recorder is gone afterwards: the device's handler is the dispatcher again
    with coverage.recording() as again:
        pass
    x.median()
    assert not again


def test_the_device_recording_names_an_op_this_backend_lacks() -> None:
    op = torch.ops.aten._cdist_forward.default
    with contextlib.contextmanager(_without_lowering)(op), coverage.recording() as counts:
        with pytest.raises(NotImplementedError):
            torch.ops.aten._cdist_forward.default(
                torch.randn(3, 2).to("tpu"), torch.randn(4, 2).to("tpu"), 2.0, None
            )
        r = coverage.device_ops(counts)
    assert r["missing_here"] == ["aten::_cdist_forward"]
    assert r["overloads"]["aten::_cdist_forward"]["torchtpu_0_2_0"] == "registered"


def test_a_one_op_linear_is_reported_as_linear_not_as_the_cpu_schema_it_travels_under() -> None:
    lin = torch.nn.Linear(4, 3).to("tpu")
    with coverage.recording() as counts:
        lin(torch.randn(5, 4).to("tpu"))
    assert "aten::mkldnn_linear" not in counts
    assert coverage.device_ops(counts)["absent_on_torchtpu"] == []
