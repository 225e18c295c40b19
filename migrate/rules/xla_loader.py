"""``torch_xla.distributed.parallel_loader`` (``pl``): MpDeviceLoader and ParallelLoader."""

from __future__ import annotations

import libcst as cst

from ._helpers import DEVICE_LOADER, helper
from ._util import arg, code, expr
from .base import Rule, register

PL = "torch_xla.distributed.parallel_loader"
HELPER = DEVICE_LOADER
HELPER_SOURCE = helper(DEVICE_LOADER).source


def _wrap(ctx, loader: cst.BaseExpression, device: cst.BaseExpression) -> cst.BaseExpression:
    ctx.need_helper(HELPER)
    return expr(f"{HELPER}({code(loader)}, {code(device)})")


@register
class MpDeviceLoader(Rule):
    code = "TPU701"
    name = "mp-device-loader"
    family = "xla_loader"
    outcome = "warned"
    summary = (
        "Rewrite pl.MpDeviceLoader(loader, dev) to a small re-iterable wrapper that moves each batch to dev."
    )
    rationale = (
        "MpDeviceLoader moved batches to the device (and synced every few batches); it never sharded "
        "data. The added `_TpuDeviceLoader` keeps len() and re-iteration across epochs; use a "
        "DistributedSampler for sharding."
    )
    before = (
        "import torch_xla.distributed.parallel_loader as pl\n\ntrain = pl.MpDeviceLoader(loader, device)\n"
    )
    after = "import torch\n\n\n" + HELPER_SOURCE + "\n\ntrain = _TpuDeviceLoader(loader, device)\n"
    calls = frozenset({f"{PL}.MpDeviceLoader"})
    emits = ("torch.utils._pytree.tree_map", "torch.Tensor", "torch.Tensor.to")

    def call(self, ctx, orig, node, qname):
        loader, dev = arg(node, 0, "loader"), arg(node, 1, "device")
        if loader is None or dev is None:
            return None
        extra = [
            a for a in node.args if a.keyword is not None and a.keyword.value not in ("loader", "device")
        ]
        ctx.report(
            orig,
            "`pl.MpDeviceLoader` -> `_TpuDeviceLoader` (moves batches to the device; "
            f"{'options dropped: ' + ', '.join(a.keyword.value for a in extra) if extra else 'no sharding'})",
            code=self.code,
            outcome="warned",
        )
        return _wrap(ctx, loader.value, dev.value)


@register
class ParallelLoader(Rule):
    code = "TPU702"
    name = "parallel-loader"
    family = "xla_loader"
    outcome = "warned"
    summary = (
        "Rewrite pl.ParallelLoader(loader, [dev]).per_device_loader(dev) to _TpuDeviceLoader(loader, dev)."
    )
    rationale = "Same as TPU701 for the older two-step form; other uses of ParallelLoader are flagged."
    before = (
        "import torch_xla.distributed.parallel_loader as pl\n\n"
        "for x, y in pl.ParallelLoader(loader, [device]).per_device_loader(device):\n    pass\n"
    )
    after = (
        "import torch\n\n\n" + HELPER_SOURCE + "\n\nfor x, y in _TpuDeviceLoader(loader, device):\n    pass\n"
    )
    calls = frozenset({f"{PL}.ParallelLoader"})
    methods = frozenset({"per_device_loader"})
    node_types = (cst.Call,)
    emits = MpDeviceLoader.emits

    def visit_node(self, ctx, node):
        f = node.func
        if (
            isinstance(f, cst.Attribute)
            and f.attr.value == "per_device_loader"
            and isinstance(f.value, cst.Call)
            and ctx.qname(f.value.func) == f"{PL}.ParallelLoader"
        ):
            ctx.scratch.setdefault(self.code, set()).add(id(f.value))  # type: ignore[union-attr]

    def call(self, ctx, orig, node, qname):
        if id(orig) in ctx.scratch.get(self.code, set()):  # type: ignore[operator]
            return None
        ctx.flag(
            orig,
            "pl.ParallelLoader without .per_device_loader(dev): iterate the DataLoader and move "
            "batches with .to(device)",
            code=self.code,
        )
        return None

    def method(self, ctx, orig, node):
        assert isinstance(orig.func, cst.Attribute) and isinstance(node.func, cst.Attribute)
        inner_orig = orig.func.value
        if not isinstance(inner_orig, cst.Call) or id(inner_orig) not in ctx.scratch.get(self.code, set()):
            return None
        inner = node.func.value
        assert isinstance(inner, cst.Call)
        loader, dev = arg(inner, 0, "loader"), arg(node, 0, "device")
        if loader is None or dev is None:
            return None
        ctx.report(
            orig,
            "`pl.ParallelLoader(...).per_device_loader(dev)` -> `_TpuDeviceLoader(loader, dev)`",
            code=self.code,
            outcome="warned",
        )
        return _wrap(ctx, loader.value, dev.value)
