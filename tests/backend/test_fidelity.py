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


def test_the_switch_reads_its_environment_value_and_refuses_one_it_does_not_know():
    assert fidelity.parse_env("torchtpu-0.2.0") and fidelity.parse_env("1") and fidelity.parse_env(" ON ")
    assert not fidelity.parse_env("") and not fidelity.parse_env("0") and not fidelity.parse_env("off")
    for bad in ("torchtpu-0.3.0", "yes please", "2"):
        with pytest.raises(ValueError, match="TORCH_TPU_FIDELITY.*0.2.0"):
            fidelity.parse_env(bad)


def test_the_refusal_names_the_op_the_version_and_the_way_out(strict):
    x = torch.randn(4, 3).to("tpu")
    with pytest.raises(NotImplementedError) as err:
        x.kthvalue(2, dim=1)  # no list named it: the full table judges it
    msg = str(err.value)
    assert "aten::kthvalue" in msg and "TorchTPU 0.2.0" in msg and "set_fidelity(False)" in msg
    fidelity.set_fidelity(False)
    assert torch.equal(x.kthvalue(2, dim=1).values.cpu(), x.cpu().kthvalue(2, dim=1).values)


@pytest.mark.slow
def test_the_environment_variable_turns_it_on_in_a_fresh_process():
    import os
    import subprocess
    import sys

    code = (
        "import torch\n"
        "x = torch.arange(5.0, device='tpu')\n"
        "print(float((x + 1).sum().cpu()))\n"
        "try:\n    x.median()\nexcept NotImplementedError as e:\n    print('refused', 'TorchTPU 0.2.0' in str(e))\n"
    )
    env = {**os.environ, "TORCH_TPU_FIDELITY": "torchtpu-0.2.0"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-3:] == ["15.0", "refused", "True"]


def test_every_overload_of_a_registered_op_is_judged_present_and_only_unregistered_ops_absent():
    table = fidelity.torchtpu_table()
    assert all(fidelity.torchtpu_status(n) == "registered" for n in table)
    absent = 0
    for packet_name in sorted({n.removeprefix("aten::").split(".")[0] for n in table} | {"median", "erfc"}):
        packet = getattr(torch.ops.aten, packet_name, None)
        for ov in packet.overloads() if packet is not None else ():
            name = getattr(packet, ov).name()
            status = fidelity.torchtpu_status(name)
            if fidelity._op(name) in fidelity.torchtpu_op_names():
                assert status in ("registered", "sibling"), name
            else:
                absent += status == "absent"
    assert absent >= 4  # median, median.dim, erfc, erfc.out at least
