"""Process launch: ``xmp.spawn``, ``torch_xla.launch`` and ``xmp.MpModelWrapper``."""

from __future__ import annotations

import libcst as cst

from ._util import arg, code, expr
from ._xla import LOCAL_RANK
from .base import Rule, register

XMP = "torch_xla.distributed.xla_multiprocessing"


def _launch(ctx, orig, node, qname: str, rule: Rule) -> cst.BaseExpression | None:
    fn, args = arg(node, 0, "fn"), arg(node, 1, "args")
    if fn is None or any(a.star for a in node.args):
        return None
    api = ctx.qname(arg(orig, 0, "fn").value)
    if api is not None and api.startswith(("torch_xla.", "torch.")):
        # launch(xm.xla_device): the launched function is an API some rule rewrites; calling it here would
        # need a second pass, so it is left for a human
        ctx.flag(
            orig,
            f"`{qname.rsplit('.', 1)[1]}({api.replace('torch_xla.core.xla_model.', 'xm.')})` launches "
            "a torch_xla API: launch your own function with torchrun",
            code=rule.code,
        )
        return None
    if args is None:
        rest = ""
    elif isinstance(args.value, cst.Tuple):
        rest = "".join(f", {code(e.value)}" for e in args.value.elements)
    else:
        rest = f", *{code(args.value)}"
    nprocs = arg(node, 2, "nprocs")
    note = (
        f" (nprocs={code(nprocs.value)}: pass it to torchrun --nproc_per_node)" if nprocs is not None else ""
    )
    ctx.report(
        orig,
        f"`{qname.rsplit('.', 1)[1]}(fn, args)` -> `fn(LOCAL_RANK, *args)`: launch with "
        f"`torchrun --nproc_per_node=N` after `python -m torch.tpu.distributed`{note}",
        code=rule.code,
        outcome="warned",
    )
    ctx.need_import("os")
    return expr(f"{code(fn.value)}({LOCAL_RANK}{rest})")


@register
class XmpSpawn(Rule):
    code = "TPU801"
    name = "xmp-spawn"
    family = "xla_spawn"
    outcome = "warned"
    summary = (
        "Rewrite xmp.spawn(fn, args=(...)) to fn(int(os.environ.get('LOCAL_RANK', 0)), ...) for torchrun."
    )
    rationale = (
        "TorchTPU runs one process per device under torchrun (after `python -m torch.tpu.distributed` "
        "exports its launch environment); launched plainly the script runs as a single process."
    )
    before = (
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
        "xmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n"
    )
    after = f"import os\n\n_mp_fn({LOCAL_RANK}, flags)\n"
    calls = frozenset({f"{XMP}.spawn"})

    def call(self, ctx, orig, node, qname):
        return _launch(ctx, orig, node, qname, self)


@register
class TorchXlaLaunch(Rule):
    code = "TPU802"
    name = "torch-xla-launch"
    family = "xla_spawn"
    outcome = "warned"
    summary = "Rewrite torch_xla.launch(fn, args=(...)) to fn(int(os.environ.get('LOCAL_RANK', 0)), ...)."
    rationale = "torch_xla.launch already used LOCAL_RANK under torchrun; without torchrun the script runs one process."
    before = "import torch_xla\n\ntorch_xla.launch(_mp_fn, args=(cfg,))\n"
    after = f"import os\n\n_mp_fn({LOCAL_RANK}, cfg)\n"
    calls = frozenset({"torch_xla.launch", "torch_xla.torch_xla.launch"})

    def call(self, ctx, orig, node, qname):
        return _launch(ctx, orig, node, qname, self)


@register
class MpModelWrapper(Rule):
    code = "TPU803"
    name = "mp-model-wrapper"
    family = "xla_spawn"
    outcome = "warned"
    summary = "Rewrite xmp.MpModelWrapper(model) to model."
    rationale = (
        "It shared CPU weights between forked processes; with torchrun each process builds its own model."
    )
    before = (
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\nWRAPPED = xmp.MpModelWrapper(model)\n"
    )
    after = "WRAPPED = model\n"
    calls = frozenset({f"{XMP}.MpModelWrapper"})

    def call(self, ctx, orig, node, qname):
        m = arg(node, 0, "model")
        if m is None:
            return None
        ctx.report(orig, "`xmp.MpModelWrapper(model)` -> `model`", code=self.code, outcome="warned")
        return m.value
