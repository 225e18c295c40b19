"""Devices handed to libraries that place tensors themselves and do not know "tpu"."""

from __future__ import annotations

import libcst as cst

from . import _helpers
from ._util import arg, code, string_body
from .base import Rule, register


def _through_helper(
    ctx, orig: cst.Call, node: cst.Call, a: cst.Arg, helper: str, why: str, code_: str
) -> cst.Call:
    """``node`` with its argument ``a`` handed through the local ``helper(...)`` (added to the file), reported
    (warned) with ``why``."""
    ctx.report(orig, why, code=code_, outcome="warned")
    ctx.need_helper(helper)
    wrapped = cst.Call(func=cst.Name(helper), args=[cst.Arg(a.value)])
    return node.with_changes(args=[x.with_changes(value=wrapped) if x is a else x for x in node.args])


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
        why = (
            f"`{qname.rsplit('.', 1)[1]}(..., device={code(a.value)})`: safetensors rejects 'tpu'; loads on the "
            "CPU there (the model copies the weights onto its device)"
        )
        return _through_helper(ctx, orig, node, a, _helpers.SAFETENSORS_DEVICE, why, self.code)


#: torchsummary's summary(model, input_size, batch_size=-1, device="cuda"): the model and the device its example
#: input is built on ("cuda" where CUDA is there, else the CPU; any other name fails its assertion).
_SUMMARIES = frozenset({"torchsummary.summary", "torchsummary.torchsummary.summary"})


@register
class TorchSummary(Rule):
    code = "TPU111"
    name = "torchsummary-cpu-copy"
    family = "foreign_devices"
    outcome = "warned"
    summary = (
        "Summarize a CPU copy of a module on 'tpu' with torchsummary (it builds its example input on the CPU or "
        "CUDA only); its device argument is its own name and stays as written."
    )
    rationale = (
        "torchsummary.summary builds a random input with torch.cuda.FloatTensor where its device is 'cuda' and "
        "CUDA is there, else on the CPU, and asserts the device is 'cuda' or 'cpu': a model moved to 'tpu' meets a "
        "CPU input (rasbt's GAN notebooks), and a renamed device='tpu' fails the assertion. A local "
        "_tpu_cpu_copy(model) hands it a CPU copy of a module on 'tpu' (the same layers and parameter counts), "
        "and the module itself elsewhere."
    )
    before = (
        "from torchsummary import summary\n\n\ndef show(model):\n"
        "    summary(model, input_size=(100,), device='cuda')\n"
    )
    after = (
        "from torchsummary import summary\n\n\n"
        + _helpers.helper(_helpers.CPU_COPY).source
        + "\n\ndef show(model):\n    summary(_tpu_cpu_copy(model), input_size=(100,), device='cuda')\n"
    )
    calls = _SUMMARIES
    node_types = (cst.Call,)

    def visit_node(self, ctx, node):
        """Its device strings are torchsummary's names ('cuda' or 'cpu'): kept as written, silently."""
        if type(node) is cst.Call and ctx.qname(node.func) in _SUMMARIES:
            for a in node.args:
                if type(a.value) is cst.SimpleString and string_body(a.value) in ("cuda", "cpu"):
                    ctx.claim_string(a.value, "", "rewritten", "", value=None)

    def call(self, ctx, orig, node, qname):
        a = arg(node, 0, "model")
        if a is None or (type(a.value) is cst.Call and code(a.value.func) == _helpers.CPU_COPY):
            return None
        device = arg(node, 3, "device")
        if device is not None and type(device.value) is not cst.SimpleString:
            # a device from a variable: the program's (torchsummary's own repository, whose summary() takes any
            # torch device and builds the input there): handed on with the model as it is
            return None
        why = (
            f"`summary({code(a.value)}, ...)` -> `summary({_helpers.CPU_COPY}({code(a.value)}), ...)` (torchsummary "
            "builds its example input on the CPU or CUDA only: a CPU copy of a module on 'tpu')"
        )
        return _through_helper(ctx, orig, node, a, _helpers.CPU_COPY, why, self.code)
