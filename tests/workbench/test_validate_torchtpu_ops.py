"""tpu-bench validate lists, per overload, the ops a run dispatched on the device that TorchTPU 0.2.0 lacks."""

from __future__ import annotations

import sys
import textwrap

import pytest

pytest.importorskip("transformers", reason="tpu-bench validate needs the validate extra (transformers)")

from tpu_workbench.bench.validate import report, runner

NETS = textwrap.dedent("""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            mid = h.median(dim=-1, keepdim=True).values  # absent from the TorchTPU 0.2.0 wheel
            return torch.einsum("ij,ij->i", h, h) + mid.squeeze(-1)  # einsum: decomposed above the device

    def make():
        return Net(), (torch.randn(3, 4),)
""")


def test_validate_names_an_op_torchtpu_lacks_and_not_a_composite_one(tmp_path, monkeypatch):
    (tmp_path / "median_nets.py").write_text(NETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        res = runner.validate(user_model="median_nets:make", device="tpu", check_generate=False)
    finally:
        sys.modules.pop("median_nets", None)
    assert res["status"] == "pass", res.get("error")
    ops = res["device_ops"]
    assert ops["absent_on_torchtpu"] == ["aten::median.dim"]
    assert ops["missing_here"] == []
    assert "aten::einsum" not in ops["overloads"] and "aten::bmm" in ops["overloads"]
    source = {"device": "tpu", "platform": "p", "device_name": "tpu", "emulated": True, "date": "d"}
    recs = [report.record_for(res, source, 1.0, {})]
    s = report.summarise(recs)
    assert s["absent_on_torchtpu"] == {"aten::median.dim": ["median_nets:make"]}
    assert "| aten::median.dim | absent on TorchTPU 0.2.0 | median_nets:make |" in report.markdown(recs)
    assert report.summarise([])["device_overloads"] == 0
