"""The fidelity switch as a ``torch.tpu`` setter (issue 33 item 4): ``torch.tpu.set_fidelity(True)`` makes the
device refuse an op TorchTPU 0.2.0 lacks, ``torch.tpu.fidelity_enabled()`` reads it, False runs the op again."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench import backend  # noqa: F401 - registers the device


def test_torch_tpu_set_fidelity_refuses_an_op_torchtpu_lacks_and_is_undone() -> None:
    x = torch.tensor([3.0, 1.0, 2.0], device="tpu")
    assert not torch.tpu.fidelity_enabled()
    torch.tpu.set_fidelity(True)
    try:
        assert torch.tpu.fidelity_enabled()
        with pytest.raises(NotImplementedError, match="TorchTPU 0.2.0"):
            x.median()
        assert (x + 1).cpu().tolist() == [4.0, 2.0, 3.0]  # an op the wheel registers still runs
    finally:
        torch.tpu.set_fidelity(False)
    assert not torch.tpu.fidelity_enabled()
    assert x.median().item() == 2.0
