"""Devices handed to libraries that place tensors themselves and do not know "tpu"."""

from __future__ import annotations

import libcst as cst

from . import _helpers
from ._util import arg, code
from .base import Rule, register

#: safetensors' loaders that place what they load (their device argument: position, keyword); the tensors go
#: into a state dict or straight into a model, which is where they are copied onto the model's device.
_SAFETENSORS = {
    "safetensors.torch.load_file": (1, "device"),
    "safetensors.torch.load_model": (3, "device"),
}


@register
class SafetensorsDevice(Rule):
    code = "TPU109"
    name = "safetensors-device"
    family = "foreign_devices"
    outcome = "warned"
    summary = "Load safetensors on the CPU where the device handed to it is 'tpu' (it rejects that name)."
    rationale = (
        "safetensors.torch.load_file / load_model place tensors by their own device names (cpu, cuda, mps, "
        "xpu, npu, an ordinal): `device='tpu'` raises SafetensorError (device tpu is invalid). A device that "
        "comes from a variable is 'tpu' once the program is migrated, so it is handed through a local "
        "_tpu_safetensors_device(...) that gives 'cpu' for 'tpu' and anything else unchanged; load_state_dict "
        "and load_model copy the weights onto the model's device. A literal 'cuda' is flagged by TPU101."
    )
    before = (
        "from safetensors.torch import load_file\n\n\ndef load(model, path, device):\n"
        "    model.load_state_dict(load_file(path, device=device))\n"
    )
    after = (
        "from safetensors.torch import load_file\n\n\n"
        + _helpers.helper(_helpers.SAFETENSORS_DEVICE).source
        + "\n\ndef load(model, path, device):\n"
        "    model.load_state_dict(load_file(path, device=_tpu_safetensors_device(device)))\n"
    )
    calls = frozenset(_SAFETENSORS)

    def call(self, ctx, orig, node, qname):
        position, keyword = _SAFETENSORS[qname]
        a = arg(node, position, keyword)
        if a is None or not isinstance(a.value, (cst.Name, cst.Attribute, cst.Subscript)):
            return None
        ctx.report(
            orig,
            f"`{qname.rsplit('.', 1)[1]}(..., device={code(a.value)})`: safetensors rejects 'tpu'; loads on the "
            "CPU there (the model copies the weights onto its device)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_helpers.SAFETENSORS_DEVICE)
        wrapped = cst.Call(func=cst.Name(_helpers.SAFETENSORS_DEVICE), args=[cst.Arg(a.value)])
        args = [x.with_changes(value=wrapped) if x is a else x for x in node.args]
        return node.with_changes(args=args)
