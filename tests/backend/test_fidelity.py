"""The TorchTPU 0.2.0 op table kept as data, and the fidelity switch that refuses what the real device lacks."""

from __future__ import annotations

import json

import pytest
import torch

from tpu_workbench.backend import fidelity


def test_the_table_is_the_released_wheels_and_says_where_it_came_from():
    data = json.loads(fidelity.TABLE_FILE.read_text())
    assert data["version"] == "0.2.0" and data["count"] == len(data["overloads"]) == 674
    assert data["ops"] == len({o.split(".")[0] for o in data["overloads"]}) == 483
    assert "pip install" in data["how"]
    table = fidelity.torchtpu_table()
    assert "aten::addmm.out" in table and not any(
        n.startswith("aten::median") for n in table
    )  # median absent
    assert "addmm" in fidelity.torchtpu_op_names() and "median" not in fidelity.torchtpu_op_names()


def test_the_comparison_partitions_both_tables():
    res = fidelity.compare({"aten::addmm.out", "aten::median"})
    assert res["both"] == ["aten::addmm.out"] and res["only_ours"] == ["aten::median"]
    assert len(res["only_theirs"]) == 673
    ops = fidelity.compare({"aten::addmm", "aten::median"}, per_op=True)
    assert (
        ops["both"] == ["addmm"]
        and ops["only_ours"] == ["median"]
        and len(ops["only_theirs"]) == len(fidelity.torchtpu_op_names()) - 1
    )


@pytest.fixture
def strict():
    fidelity.set_fidelity(True)
    yield
    fidelity.set_fidelity(False)


def test_fidelity_mode_refuses_an_op_torchtpu_lacks_and_runs_one_it_has(strict):
    x = torch.arange(5.0).to("tpu")
    with pytest.raises(NotImplementedError, match="not registered by TorchTPU 0.2.0"):
        x.median()
    assert float((x + 1).sum().cpu()) == 15.0


def test_without_fidelity_the_op_runs():
    assert float(torch.arange(5.0).to("tpu").median().cpu()) == 2.0


def test_fidelity_mode_runs_a_linear_layer_whose_one_op_form_travels_under_a_cpu_schema(strict):
    """backend/composite.py runs linear as one op under mkldnn_linear's schema, which the wheel does not
    register; the wheel registers linear itself, so fidelity mode must not refuse it (it refused every model)."""
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4, requires_grad=True)
    tl = torch.nn.Linear(4, 3).to("tpu")
    tl.load_state_dict(lin.state_dict())
    tx = x.detach().to("tpu").requires_grad_()
    tl(tx).sum().backward()
    lin(x).sum().backward()
    torch.testing.assert_close(tx.grad.cpu(), x.grad)
    assert fidelity.torchtpu_status("aten::mkldnn_linear") == "registered"
