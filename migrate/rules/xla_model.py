"""``torch_xla.core.xla_model`` (``xm``) and the top-level ``torch_xla`` API, legacy and modern dialects."""

from __future__ import annotations

import re

import libcst as cst

from . import _helpers
from ._literal import ORDINAL_SLOT, LiteralRule
from ._util import arg, code, expr, kwarg, stmts, unwrap_block
from ._xla import DIST_EMITS, LOCAL_RANK, RANK, WORLD, XM, needs, xm
from .base import Rule, register


def _src(node: cst.CSTNode | None) -> str:
    return code(node) if node is not None else ""


@register
class XlaDevice(Rule):
    code = "TPU501"
    name = "xla-device"
    family = "xla_model"
    summary = 'Rewrite xm.xla_device() / torch_xla.device() to torch.device("tpu") (an index is kept).'
    rationale = "TorchTPU exposes the native device 'tpu'; ordinals are local to the process."
    before = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
    after = 'import torch\n\ndevice = torch.device("tpu")\n'
    calls = xm("xla_device") | frozenset({"torch_xla.device", "torch_xla.torch_xla.device"})
    emits = ("torch.device",)

    def call(self, ctx, orig, node, qname):
        n = arg(node, 0, "n") if qname.endswith("xla_device") else arg(node, 0, "index")
        if kwarg(node, "devkind") is not None or any(a.star for a in node.args):
            ctx.flag(
                orig, 'xla_device(devkind=...) selects a device kind; use torch.device("tpu")', code=self.code
            )
            return None
        new = (
            f'torch.device("tpu", {code(n.value)})'
            if n is not None and _src(n.value) != "None"
            else 'torch.device("tpu")'
        )
        ctx.report(orig, f"`{qname}()` -> `{new}`", code=self.code)
        ctx.need_import("torch")
        return expr(new)

    node_types = (cst.Call,)

    def leave_node(self, ctx, orig, node):
        """``torch.device(xm.xla_device())`` -> ``torch.device("tpu")``, not ``torch.device(torch.device("tpu"))``."""
        f = orig.func
        if (
            not (type(f) is cst.Attribute and f.attr.value == "device")
            or len(node.args) != 1
            or node.args[0].keyword
        ):
            return None
        inner, inner_orig = node.args[0].value, orig.args[0].value
        if (
            not (isinstance(inner_orig, cst.Call) and ctx.qname(inner_orig.func) in self.calls)
            or not (isinstance(inner, cst.Call) and code(inner.func) == "torch.device")
            or ctx.qname(f) != "torch.device"
        ):
            return None
        return inner


@register
class XlaDeviceLiteral(LiteralRule):
    code = "TPU502"
    name = "xla-device-string"
    family = "xla_model"
    summary = "Rewrite the device strings 'xla' and 'xla:N' (and f'xla:{i}') to 'tpu'."
    rationale = (
        "torch.device('xla'), device='xla' and `t.device.type == 'xla'` become the native 'tpu' device."
    )
    before = 'import torch\n\nt = torch.zeros(2, device="xla")\n'
    after = 'import torch\n\nt = torch.zeros(2, device="tpu")\n'
    pattern = re.compile(rf"xla(?P<suffix>:(\d+|{ORDINAL_SLOT})?)?")
    replacement = "tpu"
    others = frozenset({"tpu"})  # the XLA path becomes the TPU path, unless the code has a 'tpu' one already
    keep_in_choices = False


@register
class IsXlaTensor(Rule):
    code = "TPU503"
    name = "is-xla-tensor"
    family = "xla_model"
    summary = 'Rewrite xm.is_xla_tensor(t) to (t.device.type == "tpu").'
    rationale = "The native device type is 'tpu'."
    before = "import torch_xla.core.xla_model as xm\n\nok = xm.is_xla_tensor(t)\n"
    after = 'ok = (t.device.type == "tpu")\n'
    calls = xm("is_xla_tensor")

    def call(self, ctx, orig, node, qname):
        t = arg(node, 0, "tensor")
        if t is None:
            return None
        ctx.report(orig, '`xm.is_xla_tensor(t)` -> `t.device.type == "tpu"`', code=self.code)
        return expr(f'({code(t.value)}.device.type == "tpu")')


@register
class XlaDeviceHw(Rule):
    code = "TPU504"
    name = "xla-device-hw"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite xm.xla_device_hw(dev) to torch.device(dev).type.upper(), xr.device_type() to 'TPU'."
    rationale = (
        "They returned 'TPU'/'GPU'/'CPU' for the XLA device; the native device type gives 'TPU' on TPU "
        "and 'CPU' on a CPU run, and a migrated script runs on 'tpu'. Branches on 'GPU' become dead code."
    )
    before = "import torch_xla.core.xla_model as xm\n\nhw = xm.xla_device_hw(device)\n"
    after = "import torch\n\nhw = torch.device(device).type.upper()\n"
    calls = xm("xla_device_hw") | frozenset({"torch_xla.runtime.device_type"})
    emits = ("torch.device",)

    def call(self, ctx, orig, node, qname):
        if qname == "torch_xla.runtime.device_type":
            if node.args:
                return None
            ctx.report(
                orig,
                "`xr.device_type()` -> `\"TPU\"` (the migrated script runs on 'tpu'; 'GPU'/'CPU' "
                "branches become dead)",
                code=self.code,
                outcome="warned",
            )
            return cst.SimpleString('"TPU"')
        d = arg(node, 0, "device")
        if d is None:
            return None
        ctx.report(
            orig,
            "`xm.xla_device_hw(dev)` -> `torch.device(dev).type.upper()` ('GPU' branches become dead)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        inner = code(d.value)
        already = isinstance(d.value, cst.Call) and inner.startswith(
            "torch.device("
        )  # (torch_xla.device() was)
        return expr(f"{inner if already else f'torch.device({inner})'}.type.upper()")


@register
class SupportedDevices(Rule):
    code = "TPU505"
    name = "xla-supported-devices"
    family = "xla_model"
    outcome = "warned"
    summary = 'Rewrite xm.get_xla_supported_devices() to [f"tpu:{i}" for i in range(torch.accelerator.device_count())].'
    rationale = "TorchTPU binds one device per process, so the list usually has one entry."
    before = "import torch_xla.core.xla_model as xm\n\ndevs = xm.get_xla_supported_devices()\n"
    after = 'import torch\n\ndevs = [f"tpu:{i}" for i in range(torch.accelerator.device_count())]\n'
    calls = xm("get_xla_supported_devices")
    emits = ("torch.accelerator.device_count",)

    def call(self, ctx, orig, node, qname):
        ctx.report(
            orig,
            "`xm.get_xla_supported_devices()` -> list of local 'tpu:i' devices",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return expr('[f"tpu:{i}" for i in range(torch.accelerator.device_count())]')


_SYNC = xm("mark_step") | frozenset({"torch_xla.sync", "torch_xla.torch_xla.sync"})


@register
class MarkStep(Rule):
    code = "TPU506"
    name = "mark-step"
    family = "xla_model"
    outcome = "warned"
    summary = "Delete xm.mark_step() / torch_xla.sync() and unwrap `with torch_xla.step():` (wait=True -> synchronize)."
    rationale = (
        "TorchTPU is eager: nothing has to cut the lazy graph. `.item()`/`.cpu()` materialise; "
        "torch.accelerator.synchronize() waits. Timing code that relied on the sync is warned about."
    )
    before = "import torch_xla.core.xla_model as xm\n\nfor b in data:\n    step(b)\n    xm.mark_step()\n"
    after = "for b in data:\n    step(b)\n"
    statements = _SYNC
    node_types = (cst.With,)
    emits = ("torch.accelerator.synchronize",)

    def statement(self, ctx, orig, node, qname, call, target):
        if target is not None or call is None:
            return None
        wait = kwarg(call, "wait")
        if wait is not None and _src(wait.value) != "False":
            ctx.report(
                orig,
                f"`{qname}(wait=...)` -> `torch.accelerator.synchronize()`",
                code=self.code,
                outcome="warned",
            )
            ctx.need_import("torch")
            return stmts("torch.accelerator.synchronize()\n")
        ctx.report(
            orig,
            f"removed `{qname}()` (TorchTPU is eager; use torch.accelerator.synchronize() to wait)",
            code=self.code,
            outcome="warned",
        )
        return cst.RemovalSentinel.REMOVE

    def leave_node(self, ctx, orig, node):
        assert isinstance(node, cst.With) and isinstance(orig, cst.With)
        keep = [
            it
            for it, o in zip(node.items, orig.items, strict=True)
            if not (
                isinstance(o.item, cst.Call)
                and ctx.qname(o.item.func) in ("torch_xla.step", "torch_xla.torch_xla.step")
                and o.asname is None
            )
        ]
        if len(keep) == len(node.items):
            return None
        ctx.report(
            orig, "unwrapped `with torch_xla.step():` (TorchTPU is eager)", code=self.code, outcome="warned"
        )
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=keep)
        return unwrap_block(node, node.body)


@register
class WaitDeviceOps(Rule):
    code = "TPU507"
    name = "wait-device-ops"
    family = "xla_model"
    summary = "Rewrite xm.wait_device_ops() to torch.accelerator.synchronize()."
    rationale = "Both block until the queued device work has finished."
    before = "import torch_xla.core.xla_model as xm\n\nxm.wait_device_ops()\n"
    after = "import torch\n\ntorch.accelerator.synchronize()\n"
    calls = xm("wait_device_ops")
    emits = ("torch.accelerator.synchronize",)

    def call(self, ctx, orig, node, qname):
        ctx.report(orig, "`xm.wait_device_ops()` -> `torch.accelerator.synchronize()`", code=self.code)
        ctx.need_import("torch")
        return expr("torch.accelerator.synchronize()")


def _simple(node: cst.BaseExpression) -> bool:
    """A name, attribute chain or plain subscript: safe to write twice (no side effects)."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Subscript) and not all(
            isinstance(s.slice, cst.Index)
            and isinstance(s.slice.value, (cst.Name, cst.Integer, cst.SimpleString))
            for s in node.slice
        ):
            return False
        node = node.value
    return isinstance(node, cst.Name)


_GRADS = _helpers.ALL_REDUCE_GRADIENTS


@register
class OptimizerStep(Rule):
    code = "TPU508"
    name = "optimizer-step"
    family = "xla_model"
    outcome = "warned"
    summary = (
        "Rewrite xm.optimizer_step(opt) to a gradient all-reduce + opt.step(); xm.reduce_gradients and "
        "xm._fetch_gradients to local replacements."
    )
    rationale = (
        "optimizer_step = reduce_gradients (all-reduce SUM x 1/world when world > 1) + opt.step(), with "
        "or without DDP; the all-reduce is written as a small local function so that no branch loses it. "
        "Under DDP the gradients are already averaged, and calling opt.step() alone is enough."
    )
    before = "import torch_xla.core.xla_model as xm\n\nxm.optimizer_step(opt)\n"
    after = (
        "import os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.DISTRIBUTED).source
        + "\n\n"
        + _helpers.helper(_GRADS).source
        + f"\n\n{_GRADS}(opt)\nopt.step()\n"
    )
    statements = xm("optimizer_step")
    calls = xm("reduce_gradients", "_fetch_gradients")
    emits = ("torch.distributed.all_reduce", "torch.distributed.init_process_group") + DIST_EMITS

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None:
            return None
        opt = arg(call, 0, "optimizer")
        groups = arg(call, 3, "groups")
        if (
            opt is None
            or any(a.star for a in call.args)
            or not _simple(opt.value)
            or (groups is not None and _src(groups.value) != "None")
        ):
            ctx.flag(
                orig,
                "xm.optimizer_step: write the gradient all-reduce and opt.step() by hand (replica "
                "groups, or an optimizer expression)",
                code=self.code,
            )
            return None
        oa = arg(call, 2, "optimizer_args")
        step = f"{code(opt.value)}.step({'**' + code(oa.value) if oa is not None else ''})"
        line = f"{code(target)} = {step}\n" if target is not None else f"{step}\n"
        ctx.report(
            orig,
            f"`xm.optimizer_step(opt)` -> `{_GRADS}(opt)` + `opt.step()` (xm.optimizer_step "
            "all-reduced the gradients; under DDP opt.step() alone is enough)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_GRADS)
        return stmts(f"{_GRADS}({code(opt.value)})\n{line}")

    def call(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        opt = arg(node, 0, "optimizer")
        groups = arg(node, 1, "groups")
        if (
            last == "optimizer_step"
            or opt is None
            or any(a.star for a in node.args)
            or (groups is not None and _src(groups.value) != "None")
        ):
            ctx.flag(
                orig,
                f"xm.{last} in this form (an expression, or replica groups): write the gradient "
                "all-reduce by hand",
                code=self.code,
            )
            return None
        helper = _GRADS if last == "reduce_gradients" else _helpers.FETCH_GRADIENTS
        ctx.report(
            orig,
            f"`xm.{last}(opt)` -> `{helper}(opt)` (a local replacement)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(helper)
        return expr(f"{helper}({code(opt.value)})")


@register
class WorldAndRank(Rule):
    code = "TPU509"
    name = "world-size-and-ordinal"
    family = "xla_model"
    summary = (
        "Rewrite xrt_world_size/world_size, get_ordinal/global_ordinal to local functions reading the "
        "process group (torchrun's WORLD_SIZE/RANK before it exists); local ordinals to LOCAL_RANK."
    )
    rationale = (
        "torch_xla knew the world before any process group: under torchrun, WORLD_SIZE and RANK say the "
        "same until init_process_group, and the process group after it (a plain run: 1 and 0)."
    )
    before = "import torch_xla.runtime as xr\n\nn = xr.world_size()\n"
    after = (
        "import os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.WORLD_SIZE).source
        + "\n\nn = "
        + WORLD
        + "\n"
    )
    _W = xm("xrt_world_size") | frozenset({"torch_xla.runtime.world_size"})
    _R = xm("get_ordinal") | frozenset({"torch_xla.runtime.global_ordinal"})
    _L = xm("get_local_ordinal") | frozenset({"torch_xla.runtime.local_ordinal"})
    calls = _W | _R | _L
    emits = DIST_EMITS

    def call(self, ctx, orig, node, qname):
        if node.args:
            return None  # (no argument in any torch_xla version: not this API)
        if qname in self._W:
            new = WORLD
        elif qname in self._R:
            new = RANK
        else:
            new = LOCAL_RANK
        ctx.report(orig, f"`{qname}()` -> `{new}`", code=self.code)
        needs(ctx, new)
        return expr(new)


@register
class IsMasterOrdinal(Rule):
    code = "TPU510"
    name = "is-master-ordinal"
    family = "xla_model"
    summary = "Rewrite xm.is_master_ordinal(local=True) to LOCAL_RANK == 0 (local=False: global rank == 0)."
    rationale = "Its default is local=True: the master of each host, not global rank 0."
    before = "import torch_xla.core.xla_model as xm\n\nif xm.is_master_ordinal():\n    save()\n"
    after = f"import os\n\nif {LOCAL_RANK} == 0:\n    save()\n"
    calls = xm("is_master_ordinal")
    emits = DIST_EMITS

    def call(self, ctx, orig, node, qname):
        local = arg(node, 0, "local")
        if local is not None and _src(local.value) not in ("True", "False"):
            ctx.flag(
                orig, "is_master_ordinal(local=<expr>): choose LOCAL_RANK or the global rank", code=self.code
            )
            return None
        new = (
            f"({RANK} == 0)" if local is not None and _src(local.value) == "False" else f"({LOCAL_RANK} == 0)"
        )
        if ctx.is_condition(orig):
            new = new[1:-1]
        ctx.report(orig, f"`xm.is_master_ordinal()` -> `{new}`", code=self.code)
        needs(ctx, new)
        return expr(new)


_DEVICE_API = ("torch_xla", "torch.cuda", "torch.backends.cuda")


def _holds_device_call(ctx, orig: cst.CSTNode, call: cst.Call) -> bool:
    """Whether a torch_xla / CUDA call of the original statement is still in its rewritten arguments ``call``
    (no rule rewrote it: it is left for a human, with a TODO)."""
    found = False
    now = code(call)

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            nonlocal found
            if type(node.func) in (cst.Name, cst.Attribute):
                q = ctx.qname(node.func) or ""
                found = found or (q.startswith(_DEVICE_API) and code(node) in now)
            return not found

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False  # qualified names are asked outside nested scopes only

        def visit_ListComp(self, node: cst.ListComp) -> bool:
            return False

        def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
            return False

    small = orig.body[0] if isinstance(orig, cst.SimpleStatementLine) else None
    before = getattr(small, "value", None)
    if isinstance(before, cst.Call):
        for a in before.args:
            a.value.visit(_Calls())
    return found


@register
class MasterPrint(Rule):
    code = "TPU511"
    name = "master-print"
    family = "xla_model"
    summary = "Rewrite xm.master_print(*args) to `if rank == 0: print(*args)` (local=True: LOCAL_RANK; fd, flush kept)."
    rationale = (
        "torch_xla printed on the global master only (default local=False); fd= becomes file= and "
        "flush= is kept. Keep TPU tensors out of the rank-0-only branch."
    )
    before = 'import torch_xla.core.xla_model as xm\n\nxm.master_print("done", flush=True)\n'
    after = (
        "import os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.RANK).source
        + f'\n\nif {RANK} == 0:\n    print("done", flush=True)\n'
    )
    statements = xm("master_print")
    emits = DIST_EMITS

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None or any(a.star == "**" for a in call.args):
            return None
        positional = [a for a in call.args if a.keyword is None]
        kws = {a.keyword.value: a for a in call.args if a.keyword is not None}
        local = kws.get("local")
        if (
            not positional
            or set(kws) - {"fd", "local", "flush"}
            or (local is not None and _src(local.value) not in ("True", "False"))
        ):
            return None
        cond = f"{LOCAL_RANK} == 0" if local is not None and _src(local.value) == "True" else f"{RANK} == 0"
        printed = [("*" if a.star else "") + code(a.value) for a in positional]
        if "fd" in kws:
            printed.append(f"file={code(kws['fd'].value)}")
        if "flush" in kws:
            printed.append(f"flush={code(kws['flush'].value)}")
        ctx.report(orig, "`xm.master_print(x)` -> `if rank == 0: print(x)`", code=self.code)
        needs(ctx, cond)
        if _holds_device_call(ctx, orig, call):
            # A call left for a human inside the printed values (xm.get_memory_info) gets its TODO above
            # the statement that holds it: with the print on the `if` line that is the `if` itself, and
            # the next run sees the TODO there (in an indented body it would be added again: no fixed point).
            return stmts(f"if {cond}: print({', '.join(printed)})\n")
        return stmts(f"if {cond}:\n    print({', '.join(printed)})\n")

    def call(self, ctx, orig, node, qname):
        ctx.flag(orig, "xm.master_print used as an expression: print on rank 0 by hand", code=self.code)
        return None


_TO_CPU = "torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, {obj})"


@register
class XmSave(Rule):
    code = "TPU512"
    name = "xm-save"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite xm.save(obj, path) to `if LOCAL_RANK == 0: torch.save(<obj moved to CPU>, path)`."
    rationale = (
        "xm.save moved tensors to the CPU and, by default, only the local master wrote. On multi-host "
        "runs with a shared file system check that one writer per host is what you want."
    )
    before = 'import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), "m.pt")\n'
    after = (
        "import os\nimport torch\n\nif "
        + LOCAL_RANK
        + " == 0:\n    torch.save("
        + _TO_CPU.format(obj="model.state_dict()")
        + ', "m.pt")\n'
    )
    statements = xm("save")
    emits = ("torch.save", "torch.utils._pytree.tree_map", "torch.Tensor")

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None or any(a.star for a in call.args):
            return None
        obj, path = arg(call, 0, "data"), arg(call, 1, "file_or_path")
        master_only, global_master = arg(call, 2, "master_only"), arg(call, 3, "global_master")
        if obj is None or path is None:
            return None
        if master_only is not None and _src(master_only.value) not in ("True", "False"):
            ctx.flag(  # FSDP: every rank saves its own shard when the flag says so
                call,
                f"`xm.save(..., master_only={code(master_only.value)})`: who saves is decided at run time (in "
                "sharded code every rank saves its shard); write `torch.save` of CPU tensors under that "
                "condition by hand",
                code=self.code,
            )
            return None
        save = f"torch.save({_TO_CPU.format(obj=code(obj.value))}, {code(path.value)})\n"
        if master_only is not None and _src(master_only.value) == "False":
            text = save
        else:
            cond = (
                f"{RANK} == 0"
                if global_master is not None and _src(global_master.value) == "True"
                else f"{LOCAL_RANK} == 0"
            )
            text = f"if {cond}:\n    {save}"
        ctx.report(
            orig,
            "`xm.save` -> `torch.save` of CPU tensors on the local master (check multi-host)",
            code=self.code,
            outcome="warned",
        )
        needs(ctx, text)
        return stmts(text)


_RENDEZVOUS = _helpers.RENDEZVOUS


@register
class Rendezvous(Rule):
    code = "TPU513"
    name = "rendezvous"
    family = "xla_model"
    summary = (
        "Rewrite xm.rendezvous(tag[, payload]) to a local replacement: a barrier that gathers every payload."
    )
    rationale = (
        "xm.rendezvous waited for every replica and returned their payloads; all_gather_object does "
        "both. The replacement creates torchrun's process group on first use, as torch_xla needed none."
    )
    before = 'import torch_xla.core.xla_model as xm\n\nxm.rendezvous("ckpt")\n'
    after = (
        "import os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.DISTRIBUTED).source
        + "\n\n"
        + _helpers.helper(_RENDEZVOUS).source
        + f'\n\n{_RENDEZVOUS}("ckpt")\n'
    )
    calls = xm("rendezvous")
    emits = ("torch.distributed.all_gather_object", "torch.distributed.init_process_group") + DIST_EMITS

    def call(self, ctx, orig, node, qname):
        tag, payload, replicas = arg(node, 0, "tag"), arg(node, 1, "payload"), arg(node, 2, "replicas")
        if (
            tag is None
            or any(a.star for a in node.args)
            or (replicas is not None and _src(replicas.value) not in ("[]", "None"))
        ):
            ctx.flag(
                orig,
                "xm.rendezvous with replicas: use torch.distributed.new_group + barrier by hand",
                code=self.code,
            )
            return None
        extra = f", {code(payload.value)}" if payload is not None else ""
        ctx.report(
            orig,
            f"`xm.rendezvous(...)` -> `{_RENDEZVOUS}(...)` (all_gather_object of the payloads)",
            code=self.code,
        )
        ctx.need_helper(_RENDEZVOUS)
        return expr(f"{_RENDEZVOUS}({code(tag.value)}{extra})")


_MESH = _helpers.MESH_REDUCE


@register
class MeshReduce(Rule):
    code = "TPU514"
    name = "mesh-reduce"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite xm.mesh_reduce(tag, data, fn) to a local replacement: all_gather_object + fn(list)."
    rationale = (
        "mesh_reduce gathers one Python value per process and reduces them with fn; data is copied to CPU."
    )
    before = 'import numpy as np\nimport torch_xla.core.xla_model as xm\n\nacc = xm.mesh_reduce("acc", acc, np.mean)\n'
    after = (
        "import numpy as np\nimport os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.DISTRIBUTED).source
        + "\n\n"
        + _helpers.helper(_MESH).source
        + f'\n\nacc = {_MESH}("acc", acc, np.mean)\n'
    )
    calls = xm("mesh_reduce")
    emits = (
        "torch.distributed.all_gather_object",
        "torch.distributed.init_process_group",
        "torch.utils._pytree.tree_map",
        "torch.Tensor",
    ) + DIST_EMITS

    def call(self, ctx, orig, node, qname):
        tag, data, fn = arg(node, 0, "tag"), arg(node, 1, "data"), arg(node, 2, "reduce_fn")
        if tag is None or data is None or fn is None or any(a.star for a in node.args):
            return None
        ctx.report(
            orig,
            f"`xm.mesh_reduce` -> `{_MESH}` (all_gather_object + reduce)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_MESH)
        return expr(f"{_MESH}({code(tag.value)}, {code(data.value)}, {code(fn.value)})")


_REDUCE_NAMES = {
    "REDUCE_SUM": "sum",
    "REDUCE_MUL": "mul",
    "REDUCE_AND": "and",
    "REDUCE_OR": "or",
    "REDUCE_MIN": "min",
    "REDUCE_MAX": "max",
}
_ALL_REDUCE = _helpers.ALL_REDUCE


@register
class AllReduce(Rule):
    code = "TPU515"
    name = "xm-all-reduce"
    family = "xla_model"
    outcome = "warned"
    summary = (
        "Rewrite xm.all_reduce(op, t or [t...], scale) to a local replacement (a reduced copy of a tensor, "
        "a list reduced in place); xm.REDUCE_* to their strings."
    )
    rationale = (
        "xm.all_reduce returns a reduced clone for a tensor but works in place on a list, applies "
        "`scale` after the reduction and does nothing in a single process: the replacement keeps all "
        "three. Replica groups are flagged."
    )
    before = "import torch_xla.core.xla_model as xm\n\nloss = xm.all_reduce(xm.REDUCE_SUM, loss, scale=0.5)\n"
    after = (
        "import os\nimport torch\n\n\n"
        + _helpers.helper(_helpers.DISTRIBUTED).source
        + "\n\n"
        + _helpers.helper(_ALL_REDUCE).source
        + f'\n\nloss = {_ALL_REDUCE}("sum", loss, scale=0.5)\n'
    )
    calls = xm("all_reduce")
    refs = xm(*_REDUCE_NAMES)
    emits = (
        "torch.distributed.all_reduce",
        "torch.distributed.ReduceOp",
        "torch.distributed.init_process_group",
        "torch.Tensor",
        "torch.Tensor.clone",
        "torch.Tensor.mul_",
    ) + DIST_EMITS

    def call(self, ctx, orig, node, qname):
        op, inputs = arg(node, 0, "reduce_type"), arg(node, 1, "inputs")
        scale, groups = arg(node, 2, "scale"), arg(node, 3, "groups")
        if (
            op is None
            or inputs is None
            or any(a.star for a in node.args)
            or (groups is not None and _src(groups.value) not in ("None", "[]"))
        ):
            ctx.flag(
                orig,
                "xm.all_reduce with replica groups: use torch.distributed.new_group + all_reduce by hand",
                code=self.code,
            )
            return None
        extra = f", scale={code(scale.value)}" if scale is not None else ""
        ctx.report(
            orig,
            f"`xm.all_reduce` -> `{_ALL_REDUCE}` (a tensor: reduced copy; a list: in place)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_ALL_REDUCE)
        return expr(f"{_ALL_REDUCE}({code(op.value)}, {code(inputs.value)}{extra})")

    def ref(self, ctx, orig, node, qname):
        value = _REDUCE_NAMES[qname.rsplit(".", 1)[1]]
        ctx.report(
            orig, f'`xm.{qname.rsplit(".", 1)[1]}` -> `"{value}"` (the constant\'s value)', code=self.code
        )
        return cst.SimpleString(f'"{value}"')


@register
class XmCollectives(Rule):
    code = "TPU516"
    name = "xm-collectives"
    family = "xla_model"
    outcome = "flagged"
    summary = (
        "Flag xm.all_gather, reduce_scatter, all_to_all, collective_permute, send/recv, collective_broadcast."
    )
    rationale = (
        "Their torch.distributed counterparts (all_gather_into_tensor, reduce_scatter_tensor, "
        "all_to_all_single, broadcast) differ in shapes and in-place semantics."
    )
    before = "import torch_xla.core.xla_model as xm\n\ny = xm.all_gather(x)\n"
    after = (
        "import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU516): `xm.all_gather` -> use "
        "torch.distributed.all_gather_into_tensor (check shapes and in-place semantics)\ny = xm.all_gather(x)\n"
    )
    _MAP = {
        "all_gather": "all_gather_into_tensor",
        "reduce_scatter": "reduce_scatter_tensor",
        "all_to_all": "all_to_all_single",
        "collective_permute": "send/recv or all_to_all_single",
        "send": "send",
        "recv": "recv",
        "collective_broadcast": "broadcast",
        "all_gather_bucketized": "all_gather_into_tensor",
    }
    refs = xm(*_MAP)

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        ctx.flag(
            orig,
            f"`xm.{last}` -> use torch.distributed.{self._MAP[last]} (check shapes and in-place semantics)",
            code=self.code,
        )
        return None


@register
class AddStepClosure(Rule):
    code = "TPU517"
    name = "add-step-closure"
    family = "xla_model"
    summary = "Rewrite xm.add_step_closure(fn, args=(a, b)) to fn(a, b) (called inline: TorchTPU is eager)."
    rationale = "Closures ran after the lazy graph executed; in eager mode the values are ready now."
    before = "import torch_xla.core.xla_model as xm\n\nxm.add_step_closure(log, args=(step, loss))\n"
    after = "log(step, loss)\n"
    calls = xm("add_step_closure")

    def call(self, ctx, orig, node, qname):
        fn, args = arg(node, 0, "closure"), arg(node, 1, "args")
        if fn is None or any(a.star for a in node.args):
            return None
        if args is None:
            inner = ""
        elif isinstance(args.value, cst.Tuple):
            inner = ", ".join(code(e.value) for e in args.value.elements)
        else:
            inner = f"*{code(args.value)}"
        ctx.report(orig, "`xm.add_step_closure(fn, args)` -> `fn(*args)`", code=self.code)
        return expr(f"{code(fn.value)}({inner})")


@register
class RngState(Rule):
    code = "TPU518"
    name = "xla-rng"
    family = "xla_model"
    outcome = "warned"
    summary = (
        "Rewrite xm.set_rng_state(seed) / torch_xla.manual_seed(seed) to torch.manual_seed(seed); flag "
        "xm.get_rng_state() and a set_rng_state that restores a saved state."
    )
    rationale = (
        "torch.manual_seed seeds every device (the CPU generator too). xm.get_rng_state() is the device "
        "generator's current seed, saved for a resume: torch.initial_seed() is another value (the CPU's first "
        "seed), and TorchTPU's torch.tpu.get_rng_state raises on torch >= 2.13; restoring it with "
        "torch.manual_seed would also reseed the CPU generator a resume has just restored."
    )
    before = "import torch_xla.core.xla_model as xm\n\nxm.set_rng_state(42)\n"
    after = "import torch\n\ntorch.manual_seed(42)\n"
    calls = xm("set_rng_state", "get_rng_state") | frozenset(
        {"torch_xla.manual_seed", "torch_xla.torch_xla.manual_seed"}
    )
    emits = ("torch.manual_seed",)

    def call(self, ctx, orig, node, qname):
        if qname.endswith("get_rng_state"):
            ctx.flag(
                orig,
                "`xm.get_rng_state()` is the XLA generator's current seed (saved for a resume): TorchTPU has no "
                "portable read of the device generator's state (torch.tpu.get_rng_state raises on torch >= 2.13); "
                "save torch.random.get_rng_state() with the seed you set, or drop the field",
                code=self.code,
            )
            return None
        seed = arg(node, 0, "seed")
        if seed is None:
            return None
        if isinstance(seed.value, (cst.Subscript, cst.Attribute, cst.Call)) and qname.endswith(
            "set_rng_state"
        ):
            ctx.flag(
                orig,
                f"`{code(orig)[:60]}` restores a saved device generator state: torch.manual_seed would reseed "
                "every generator (the CPU's just restored too); restore the TPU generator by hand",
                code=self.code,
            )
            return None
        ctx.need_import("torch")
        ctx.report(
            orig, f"`{qname}` -> `torch.manual_seed` (seeds every device)", code=self.code, outcome="warned"
        )
        return expr(f"torch.manual_seed({code(seed.value)})")


@register
class XmMisc(Rule):
    code = "TPU519"
    name = "xm-no-equivalent"
    family = "xla_model"
    outcome = "flagged"
    summary = (
        "Flag xm APIs with no TorchTPU counterpart: get_memory_info, set_replication, "
        "send_cpu_data_to_device, get_stablehlo, other test utilities."
    )
    rationale = (
        "Memory statistics do not exist on TorchTPU; the others need .to(dev), torch.export or nothing."
    )
    before = "import torch_xla.core.xla_model as xm\n\ninfo = xm.get_memory_info(device)\n"
    after = (
        "import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU519): `xm.get_memory_info`: "
        "TorchTPU has no memory statistics\ninfo = xm.get_memory_info(device)\n"
    )
    _WHY = {
        "get_memory_info": "TorchTPU has no memory statistics",
        "set_replication": "not needed with torch.distributed",
        "send_cpu_data_to_device": "use .to(device) (torch.utils._pytree.tree_map for nested data)",
        "get_stablehlo": "use torch.export",
        "get_stablehlo_bytecode": "use torch.export",
    }
    refs = xm(*_WHY)
    ref_prefixes = ("torch_xla.test.test_utils", "torch_xla.utils.utils")

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        why = self._WHY.get(last, "torch_xla test/utility helper: vendor what you need")
        ctx.flag(orig, f"`{qname.replace(XM + '.', 'xm.')}`: {why}", code=self.code)
        return None


_TEST_UTILS = "torch_xla.test.test_utils"
_LOCAL = {
    f"{XM}.RateTracker": _helpers.RATE_TRACKER,
    f"{XM}.broadcast_master_param": _helpers.BROADCAST_MASTER_PARAM,
    "torch_xla.utils.utils.SampleGenerator": _helpers.SAMPLE_GENERATOR,
    f"{_TEST_UTILS}.print_training_update": _helpers.PRINT_TRAINING_UPDATE,
    f"{_TEST_UTILS}.print_test_update": _helpers.PRINT_TEST_UPDATE,
    f"{_TEST_UTILS}.now": _helpers.NOW,
    f"{_TEST_UTILS}.get_summary_writer": _helpers.GET_SUMMARY_WRITER,
    f"{_TEST_UTILS}.write_to_summary": _helpers.WRITE_TO_SUMMARY,
    f"{_TEST_UTILS}.close_summary_writer": _helpers.CLOSE_SUMMARY_WRITER,
}


@register
class XlaUtilities(Rule):
    code = "TPU520"
    name = "xla-utilities"
    family = "xla_model"
    outcome = "warned"
    summary = (
        "Rewrite xm.RateTracker, xm.broadcast_master_param, xu.SampleGenerator and the "
        "torch_xla.test.test_utils printers and summary writers to small local replacements."
    )
    rationale = (
        "The torch_xla training templates (MNIST, ImageNet) use them on every step; each is a few "
        "lines of plain torch, written once into the migrated file, so it no longer imports torch_xla. "
        "write_to_summary drops the XLA metrics (there are none)."
    )
    before = "import torch_xla.core.xla_model as xm\n\ntracker = xm.RateTracker()\n"
    after = (
        "import time\n\n\n"
        + _helpers.helper(_helpers.RATE_TRACKER).source
        + f"\n\ntracker = {_helpers.RATE_TRACKER}()\n"
    )
    refs = frozenset(_LOCAL)
    emits = (
        "torch.distributed.broadcast",
        "torch.distributed.init_process_group",
        "torch.no_grad",
    ) + DIST_EMITS

    def ref(self, ctx, orig, node, qname):
        local = _LOCAL[qname]
        ctx.report(
            orig,
            f"`{_short_name(qname)}` -> `{local}` (a local replacement)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(local)
        return cst.Name(local)


def _short_name(qname: str) -> str:
    return (
        qname.replace(XM + ".", "xm.")
        .replace(_TEST_UTILS + ".", "test_utils.")
        .replace("torch_xla.utils.utils.", "xu.")
    )


@register
class UnusedXlaImport(Rule):
    code = "TPU590"
    name = "unused-xla-import"
    family = "xla_model"
    summary = "Remove torch_xla / torch.cuda imports that are unused after the migration."
    requires = ("TPU501",)
    rationale = (
        "An import left behind would fail on a machine without torch_xla; only unused ones are removed, and "
        "torch_xla imports only when none is still used (one still used means the file still needs "
        "torch_xla, and its other imports may be there for their side effects)."
    )
    before = (
        "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
    )
    after = 'import torch\n\ndevice = torch.device("tpu")\n'
    # Implemented in migrate.source (a whole-module step after the rule pass).


@register
class UnknownXla(Rule):
    code = "TPU599"
    name = "unknown-torch-xla"
    family = "xla_model"
    outcome = "flagged"
    summary = "Flag any other torch_xla API, including hallucinated ones such as xm.xla_device_world_size() (never guessed)."
    rationale = "Mapping an unknown API by analogy produces code that looks right and is wrong."
    before = "import torch_xla.core.xla_model as xm\n\nn = xm.xla_device_world_size()\n"
    after = (
        "import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU599): `xm.xla_device_world_size` is "
        "not a known torch_xla API with a TorchTPU equivalent; port by hand\nn = xm.xla_device_world_size()\n"
    )
    ref_prefixes = ("torch_xla",)

    def ref(self, ctx, orig, node, qname):
        if ctx.is_known(qname, ctx.is_called(orig)):
            return None
        short = qname.replace(XM + ".", "xm.").replace("torch_xla.runtime.", "xr.")
        parts = qname.split(".")
        if any(p.startswith("_") and not p.startswith("__") for p in parts):
            if ctx.enabled("TPU904"):
                ctx.flag(orig, f"`{short}` is private torch_xla API; no TorchTPU equivalent", code="TPU904")
            return None
        if ctx.is_known(qname, True):
            ctx.flag(orig, f"`{short}` used as a value; rewrite its uses by hand", code=self.code)
        else:
            ctx.flag(
                orig,
                f"`{short}` is not a known torch_xla API with a TorchTPU equivalent; port by hand",
                code=self.code,
            )
        return None
