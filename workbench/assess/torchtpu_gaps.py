"""ATen overloads a run used that the released TorchTPU 0.2.0 wheel cannot run on its device.

The judgement is ``tpu_workbench.backend.fidelity.torchtpu_status`` over the wheel's full PrivateUse1 table
(backend/torchtpu_0_2_0_ops.json: 674 overloads over 483 ops): an overload is a gap when no overload of its op is
registered and no composite kernel runs it. The best input is what reached the "tpu" device (the probe's
``device_ops``: ops decomposed above the device never arrive); the CPU run's op names are a fallback that can
name CPU-only kernels (``_scaled_dot_product_flash_attention_for_cpu``) a real TPU never sees. ``ctc_loss`` is
registered but aborts the process on the device (transformers' TPU CI, huggingface/transformers
utils/tpu_ci/backend_gaps.py), so it is listed too.
"""

from __future__ import annotations

from tpu_workbench.backend.fidelity import torchtpu_status

BROKEN_ON_TORCHTPU_020: dict[str, str] = {
    "aten::_ctc_loss": "registered but aborts the process on the device (transformers TPU CI gap)",
    "aten::_ctc_loss.Tensor": "registered but aborts the process on the device (transformers TPU CI gap)",
}
SOURCE = "TorchTPU 0.2.0's PrivateUse1 op table (backend/torchtpu_0_2_0_ops.json), per overload"


def gaps(ops: list[str]) -> list[dict]:
    """The overloads of ``ops`` (``aten::median.dim``; a bare op name is its default overload) that fail on
    TorchTPU 0.2.0, each with why."""
    out = []
    for op in ops:
        if op in BROKEN_ON_TORCHTPU_020:
            out.append({"op": op, "why": BROKEN_ON_TORCHTPU_020[op]})
        elif torchtpu_status(op) == "absent":
            out.append(
                {"op": op, "why": "not registered by the 0.2.0 wheel (no overload of the op, no composite)"}
            )
    return out
