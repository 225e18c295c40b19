"""ATen ops the released TorchTPU 0.2.0 wheel does not register for its device, as far as this project knows.

Source: shared/reference/torchtpu-contract.md §15 (the wheel's PrivateUse1 registrations read with
``torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")``: 674 overloads over 483 ops; named
absent: ``cholesky_ex``, anti-aliased bicubic resize, ``median``) and the gaps transformers' TPU CI records
(``cholesky_ex`` missing, ``ctc_loss`` aborting). The list is partial: an op not named here is not known to be
present, and the report says so.
"""

from __future__ import annotations

ABSENT_IN_TORCHTPU_020: dict[str, str] = {
    "aten::linalg_cholesky_ex": "not registered by the 0.2.0 wheel (contract §15; transformers TPU CI gap)",
    "aten::median": "not registered by the 0.2.0 wheel (contract §15)",
    "aten::nanmedian": "median family, not registered by the 0.2.0 wheel (contract §15)",
    "aten::_upsample_bicubic2d_aa": "anti-aliased bicubic resize, not registered by the 0.2.0 wheel (contract §15)",
    "aten::_ctc_loss": "registered but aborts on the device (transformers TPU CI gap, contract §15)",
}
SOURCE = "shared/reference/torchtpu-contract.md §15 (partial list: ops not named are not known to be present)"


def gaps(ops: list[str]) -> list[dict]:
    """The ops of ``ops`` (ATen names, with or without overload) that TorchTPU 0.2.0 is known to lack."""
    out = []
    for op in ops:
        base = op.split(".")[0]
        if base in ABSENT_IN_TORCHTPU_020:
            out.append({"op": op, "why": ABSENT_IN_TORCHTPU_020[base]})
    return out
