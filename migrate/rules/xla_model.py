"""``torch_xla.core.xla_model`` (``xm``) and the top-level ``torch_xla`` API, legacy and modern dialects."""

from __future__ import annotations

import re

import libcst as cst

from ._literal import LiteralRule
from ._util import arg, code, expr, kwarg, stmts, string_body
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
            ctx.flag(orig, "xla_device(devkind=...) selects a device kind; use torch.device(\"tpu\")", code=self.code)
            return None
        new = f'torch.device("tpu", {code(n.value)})' if n is not None and _src(n.value) != "None" else \
            'torch.device("tpu")'
        ctx.report(orig, f"`{qname}()` -> `{new}`", code=self.code)
        ctx.need_import("torch")
        return expr(new)


@register
class XlaDeviceLiteral(LiteralRule):
    code = "TPU502"
    name = "xla-device-string"
    family = "xla_model"
    summary = "Rewrite the device strings 'xla' and 'xla:N' (and f'xla:{i}') to 'tpu'."
    rationale = "torch.device('xla'), device='xla' and `t.device.type == 'xla'` become the native 'tpu' device."
    before = 'import torch\n\nt = torch.zeros(2, device="xla")\n'
    after = 'import torch\n\nt = torch.zeros(2, device="tpu")\n'
    pattern = re.compile(r"xla(?P<suffix>:(\d+|\{\d*\}|%[ds])?)?")
    replacement = "tpu"


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
    summary = "Rewrite xm.xla_device_hw(dev) to torch.device(dev).type.upper()."
    rationale = ("It returned 'TPU'/'GPU'/'CPU' for the XLA device behind `dev`; the native device type gives "
                 "'TPU' on TPU and 'CPU' on a CPU run. Branches on 'GPU' become dead code.")
    before = "import torch_xla.core.xla_model as xm\n\nhw = xm.xla_device_hw(device)\n"
    after = "import torch\n\nhw = torch.device(device).type.upper()\n"
    calls = xm("xla_device_hw")
    emits = ("torch.device",)

    def call(self, ctx, orig, node, qname):
        d = arg(node, 0, "device")
        if d is None:
            return None
        ctx.report(orig, "`xm.xla_device_hw(dev)` -> `torch.device(dev).type.upper()` ('GPU' branches become dead)",
                   code=self.code, outcome="warned")
        ctx.need_import("torch")
        return expr(f"torch.device({code(d.value)}).type.upper()")


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
        ctx.report(orig, "`xm.get_xla_supported_devices()` -> list of local 'tpu:i' devices", code=self.code,
                   outcome="warned")
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
    rationale = ("TorchTPU is eager: nothing has to cut the lazy graph. `.item()`/`.cpu()` materialise; "
                 "torch.accelerator.synchronize() waits. Timing code that relied on the sync is warned about.")
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
            ctx.report(orig, f"`{qname}(wait=...)` -> `torch.accelerator.synchronize()`", code=self.code,
                       outcome="warned")
            ctx.need_import("torch")
            return stmts("torch.accelerator.synchronize()\n")
        ctx.report(orig, f"removed `{qname}()` (TorchTPU is eager; use torch.accelerator.synchronize() to wait)",
                   code=self.code, outcome="warned")
        return cst.RemovalSentinel.REMOVE

    def leave_node(self, ctx, orig, node):
        assert isinstance(node, cst.With) and isinstance(orig, cst.With)
        keep = [it for it, o in zip(node.items, orig.items, strict=True)
                if not (isinstance(o.item, cst.Call) and ctx.qname(o.item.func) in
                        ("torch_xla.step", "torch_xla.torch_xla.step") and o.asname is None)]
        if len(keep) == len(node.items):
            return None
        ctx.report(orig, "unwrapped `with torch_xla.step():` (TorchTPU is eager)", code=self.code, outcome="warned")
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=keep)
        body = node.body
        if not isinstance(body, cst.IndentedBlock):
            return None
        inner = list(body.body)
        inner[0] = inner[0].with_changes(leading_lines=[*node.leading_lines, *inner[0].leading_lines])
        return cst.FlattenSentinel(inner)


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


_ALL_REDUCE_GRADS = """if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
    for _group in {opt}.param_groups:
        for _p in _group["params"]:
            if _p.grad is not None:
                torch.distributed.all_reduce(_p.grad)
                _p.grad.div_(torch.distributed.get_world_size())
"""


@register
class OptimizerStep(Rule):
    code = "TPU508"
    name = "optimizer-step"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite xm.optimizer_step(opt) to opt.step(), with an explicit gradient all-reduce unless DDP/FSDP is used."
    rationale = ("optimizer_step = reduce_gradients (all-reduce SUM x 1/world when world > 1) + opt.step(). "
                 "Under DDP/FSDP gradients are already reduced; otherwise the all-reduce is written out.")
    before = "import torch_xla.core.xla_model as xm\n\nxm.optimizer_step(opt)\n"
    after = ("import torch\n\n" + _ALL_REDUCE_GRADS.format(opt="opt") + "opt.step()\n")
    statements = xm("optimizer_step")
    emits = DIST_EMITS + ("torch.distributed.all_reduce",)

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None:
            return None
        opt = arg(call, 0, "optimizer")
        if opt is None or any(a.star for a in call.args):
            return None
        oa = kwarg(call, "optimizer_args")
        step = f"{code(opt.value)}.step({'**' + code(oa.value) if oa is not None else ''})"
        line = f"{code(target)} = {step}\n" if target is not None else f"{step}\n"
        src = ctx.source_text
        if any(w in src for w in ("DistributedDataParallel", "fully_shard", "FullyShardedDataParallel")):
            ctx.report(orig, "`xm.optimizer_step(opt)` -> `opt.step()` (gradients are reduced by DDP/FSDP)",
                       code=self.code, outcome="warned")
            return stmts(line)
        ctx.report(orig, "`xm.optimizer_step(opt)` -> explicit gradient all-reduce + `opt.step()`; consider DDP",
                   code=self.code, outcome="warned")
        ctx.need_import("torch")
        return stmts(_ALL_REDUCE_GRADS.format(opt=code(opt.value)) + line)

    def call(self, ctx, orig, node, qname):
        ctx.flag(orig, "xm.optimizer_step inside an expression: write the gradient all-reduce and opt.step() "
                 "by hand", code=self.code)
        return None


@register
class WorldAndRank(Rule):
    code = "TPU509"
    name = "world-size-and-ordinal"
    family = "xla_model"
    summary = "Rewrite xrt_world_size/world_size, get_ordinal/global_ordinal, local ordinals to torch.distributed / LOCAL_RANK."
    rationale = ("Without an initialised process group the values are 1 and 0, like torch_xla in a single "
                 "process; the local ordinal is LOCAL_RANK as set by torchrun.")
    before = "import torch_xla.runtime as xr\n\nn = xr.world_size()\n"
    after = "import torch\n\nn = " + WORLD + "\n"
    _W = xm("xrt_world_size") | frozenset({"torch_xla.runtime.world_size"})
    _R = xm("get_ordinal") | frozenset({"torch_xla.runtime.global_ordinal"})
    _L = xm("get_local_ordinal") | frozenset({"torch_xla.runtime.local_ordinal"})
    calls = _W | _R | _L
    emits = DIST_EMITS

    def call(self, ctx, orig, node, qname):
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
            ctx.flag(orig, "is_master_ordinal(local=<expr>): choose LOCAL_RANK or the global rank", code=self.code)
            return None
        new = f"({RANK} == 0)" if local is not None and _src(local.value) == "False" else f"({LOCAL_RANK} == 0)"
        if ctx.is_condition(orig):
            new = new[1:-1]
        ctx.report(orig, f"`xm.is_master_ordinal()` -> `{new}`", code=self.code)
        needs(ctx, new)
        return expr(new)


@register
class MasterPrint(Rule):
    code = "TPU511"
    name = "master-print"
    family = "xla_model"
    summary = "Rewrite xm.master_print(x) to `if rank == 0: print(x)` (default local=False: global rank)."
    rationale = "torch_xla printed on the global master only; keep TPU tensors out of the rank-0-only branch."
    before = 'import torch_xla.core.xla_model as xm\n\nxm.master_print("done")\n'
    after = f'import torch\n\nif {RANK} == 0:\n    print("done")\n'
    statements = xm("master_print")
    emits = DIST_EMITS

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None or any(a.star for a in call.args):
            return None
        data = arg(call, 0, "data")
        fd = arg(call, 1, "fd")
        local = arg(call, 2, "local")
        if data is None:
            return None
        cond = f"{LOCAL_RANK} == 0" if local is not None and _src(local.value) == "True" else f"{RANK} == 0"
        if local is not None and _src(local.value) not in ("True", "False"):
            return None
        printed = code(data.value) + (f", file={code(fd.value)}" if fd is not None else "")
        ctx.report(orig, "`xm.master_print(x)` -> `if rank == 0: print(x)`", code=self.code)
        needs(ctx, cond)
        return stmts(f"if {cond}:\n    print({printed})\n")

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
    rationale = ("xm.save moved tensors to the CPU and, by default, only the local master wrote. On multi-host "
                 "runs with a shared file system check that one writer per host is what you want.")
    before = 'import torch_xla.core.xla_model as xm\n\nxm.save(model.state_dict(), "m.pt")\n'
    after = ("import os\nimport torch\n\nif " + LOCAL_RANK + " == 0:\n    torch.save(" +
             _TO_CPU.format(obj="model.state_dict()") + ', "m.pt")\n')
    statements = xm("save")
    emits = ("torch.save", "torch.utils._pytree.tree_map", "torch.Tensor")

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None or any(a.star for a in call.args):
            return None
        obj, path = arg(call, 0, "data"), arg(call, 1, "file_or_path")
        master_only, global_master = arg(call, 2, "master_only"), arg(call, 3, "global_master")
        if obj is None or path is None:
            return None
        save = f"torch.save({_TO_CPU.format(obj=code(obj.value))}, {code(path.value)})\n"
        if master_only is not None and _src(master_only.value) == "False":
            text = save
        else:
            cond = f"{RANK} == 0" if global_master is not None and _src(global_master.value) == "True" else \
                f"{LOCAL_RANK} == 0"
            text = f"if {cond}:\n    {save}"
        ctx.report(orig, "`xm.save` -> `torch.save` of CPU tensors on the local master (check multi-host)",
                   code=self.code, outcome="warned")
        needs(ctx, text)
        return stmts(text)


@register
class Rendezvous(Rule):
    code = "TPU513"
    name = "rendezvous"
    family = "xla_model"
    summary = "Rewrite xm.rendezvous(tag) to torch.distributed.barrier() (when a process group exists)."
    rationale = "A barrier is what the tag form does; the payload form exchanges data and is flagged."
    before = 'import torch_xla.core.xla_model as xm\n\nxm.rendezvous("ckpt")\n'
    after = "import torch\n\nif torch.distributed.is_initialized():\n    torch.distributed.barrier()\n"
    statements = xm("rendezvous")
    emits = ("torch.distributed.barrier", "torch.distributed.is_initialized")

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None:
            return None
        if arg(call, 1, "payload") is not None or arg(call, 2, "replicas") is not None:
            ctx.flag(orig, "xm.rendezvous with a payload exchanges data: use torch.distributed.all_gather_object",
                     code=self.code)
            return None
        ctx.report(orig, "`xm.rendezvous(tag)` -> `torch.distributed.barrier()`", code=self.code)
        ctx.need_import("torch")
        return stmts("if torch.distributed.is_initialized():\n    torch.distributed.barrier()\n")


_MESH = """if torch.distributed.is_initialized():
    _tpu_migrate_gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(_tpu_migrate_gathered, {data})
else:
    _tpu_migrate_gathered = [{data}]
"""


@register
class MeshReduce(Rule):
    code = "TPU514"
    name = "mesh-reduce"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite `x = xm.mesh_reduce(tag, data, fn)` to all_gather_object + fn(list)."
    rationale = "mesh_reduce gathers one Python value per process and reduces them with fn; data is copied to CPU."
    before = 'import numpy as np\nimport torch_xla.core.xla_model as xm\n\nacc = xm.mesh_reduce("acc", acc, np.mean)\n'
    after = "import numpy as np\nimport torch\n\n" + _MESH.format(data="acc") + "acc = np.mean(_tpu_migrate_gathered)\n"
    statements = xm("mesh_reduce")
    emits = ("torch.distributed.all_gather_object", "torch.distributed.get_world_size",
             "torch.distributed.is_initialized")

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or any(a.star for a in call.args):
            return None
        data, fn = arg(call, 1, "data"), arg(call, 2, "reduce_fn")
        if data is None or fn is None:
            return None
        result = f"{code(fn.value)}(_tpu_migrate_gathered)"
        tail = f"{code(target)} = {result}\n" if target is not None else f"{result}\n"
        ctx.report(orig, "`xm.mesh_reduce` -> `torch.distributed.all_gather_object` + reduce", code=self.code,
                   outcome="warned")
        ctx.need_import("torch")
        return stmts(_MESH.format(data=code(data.value)) + tail)


_REDUCE_OPS = {"REDUCE_SUM": "SUM", "REDUCE_MAX": "MAX", "REDUCE_MIN": "MIN", "REDUCE_MUL": "PRODUCT",
               "sum": "SUM", "max": "MAX", "min": "MIN", "mul": "PRODUCT"}


@register
class AllReduce(Rule):
    code = "TPU515"
    name = "xm-all-reduce"
    family = "xla_model"
    outcome = "warned"
    summary = "Rewrite `y = xm.all_reduce(op, t, scale)` (tensor: returns a new tensor) to clone + dist.all_reduce + mul_."
    rationale = ("xm.all_reduce returns a reduced clone for a tensor but works in place on a list, and does "
                 "nothing when world size is 1; the rewrite keeps the return-value form and flags the others.")
    before = "import torch_xla.core.xla_model as xm\n\nloss = xm.all_reduce(xm.REDUCE_SUM, loss, scale=0.5)\n"
    after = ("import torch\n\nloss = loss.clone()\nif torch.distributed.is_initialized():\n"
             "    torch.distributed.all_reduce(loss, op=torch.distributed.ReduceOp.SUM)\n    loss.mul_(0.5)\n")
    statements = xm("all_reduce")
    refs = xm("REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_MUL", "REDUCE_AND", "REDUCE_OR")
    emits = ("torch.distributed.all_reduce", "torch.distributed.ReduceOp", "torch.distributed.is_initialized",
             "torch.Tensor.clone", "torch.Tensor.mul_")

    def _op(self, ctx, node: cst.BaseExpression) -> str | None:
        q = ctx.qname(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        key = q.rsplit(".", 1)[1] if q and q.startswith(XM) else string_body(node)
        return _REDUCE_OPS.get(key or "")

    def statement(self, ctx, orig, node, qname, call, target):
        small = orig.body[0]
        ocall = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
        if call is None or target is None or not isinstance(ocall, cst.Call) or any(a.star for a in call.args):
            return self._flag(ctx, orig)
        op_arg, t = arg(ocall, 0, "reduce_type"), arg(call, 1, "inputs")
        scale = arg(call, 2, "scale")
        op = self._op(ctx, op_arg.value) if op_arg is not None else None
        if op is None or t is None or isinstance(t.value, (cst.List, cst.Tuple)) or arg(call, 3, "groups"):
            return self._flag(ctx, orig)
        tgt = code(target)
        text = (f"{tgt} = {code(t.value)}.clone()\nif torch.distributed.is_initialized():\n"
                f"    torch.distributed.all_reduce({tgt}, op=torch.distributed.ReduceOp.{op})\n")
        if scale is not None and _src(scale.value) not in ("1", "1.0"):
            text += f"    {tgt}.mul_({code(scale.value)})\n"
        ctx.report(orig, "`xm.all_reduce` -> clone + `torch.distributed.all_reduce` (no-op without a process group)",
                   code=self.code, outcome="warned")
        ctx.need_import("torch")
        return stmts(text)

    def _flag(self, ctx, orig):
        ctx.flag(orig, "xm.all_reduce on a list (in place) or with groups: use torch.distributed.all_reduce per "
                 "tensor, mind the in-place vs return-value split", code=self.code)
        return None

    def call(self, ctx, orig, node, qname):
        return self._flag(ctx, orig)

    def ref(self, ctx, orig, node, qname):
        return None


@register
class XmCollectives(Rule):
    code = "TPU516"
    name = "xm-collectives"
    family = "xla_model"
    outcome = "flagged"
    summary = "Flag xm.all_gather, reduce_scatter, all_to_all, collective_permute, send/recv, collective_broadcast."
    rationale = ("Their torch.distributed counterparts (all_gather_into_tensor, reduce_scatter_tensor, "
                 "all_to_all_single, broadcast) differ in shapes and in-place semantics.")
    before = "import torch_xla.core.xla_model as xm\n\ny = xm.all_gather(x)\n"
    after = ("import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU516): `xm.all_gather` -> use "
             "torch.distributed.all_gather_into_tensor (check shapes and in-place semantics)\ny = xm.all_gather(x)\n")
    _MAP = {"all_gather": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter_tensor",
            "all_to_all": "all_to_all_single", "collective_permute": "send/recv or all_to_all_single",
            "send": "send", "recv": "recv", "collective_broadcast": "broadcast",
            "reduce_gradients": "DDP or a loop of all_reduce + div_(world_size)",
            "all_gather_bucketized": "all_gather_into_tensor"}
    refs = xm(*_MAP)

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        ctx.flag(orig, f"`xm.{last}` -> use torch.distributed.{self._MAP[last]} (check shapes and in-place "
                 "semantics)", code=self.code)
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
    summary = "Rewrite xm.set_rng_state(s) / torch_xla.manual_seed(s) to torch.manual_seed(s); xm.get_rng_state() to torch.initial_seed()."
    rationale = "torch.manual_seed seeds every device (the CPU generator too)."
    before = "import torch_xla.core.xla_model as xm\n\nxm.set_rng_state(42)\n"
    after = "import torch\n\ntorch.manual_seed(42)\n"
    calls = xm("set_rng_state", "get_rng_state") | frozenset({"torch_xla.manual_seed", "torch_xla.torch_xla.manual_seed"})
    emits = ("torch.manual_seed", "torch.initial_seed")

    def call(self, ctx, orig, node, qname):
        ctx.need_import("torch")
        if qname.endswith("get_rng_state"):
            ctx.report(orig, "`xm.get_rng_state()` -> `torch.initial_seed()`", code=self.code, outcome="warned")
            return expr("torch.initial_seed()")
        seed = arg(node, 0, "seed")
        if seed is None:
            return None
        ctx.report(orig, f"`{qname}` -> `torch.manual_seed` (seeds every device)", code=self.code, outcome="warned")
        return expr(f"torch.manual_seed({code(seed.value)})")


@register
class XmMisc(Rule):
    code = "TPU519"
    name = "xm-no-equivalent"
    family = "xla_model"
    outcome = "flagged"
    summary = "Flag xm APIs with no TorchTPU counterpart: get_memory_info, broadcast_master_param, RateTracker, set_replication, send_cpu_data_to_device, test utilities."
    rationale = "Memory statistics do not exist on TorchTPU; the others need a small vendored utility or .to(dev)."
    before = "import torch_xla.core.xla_model as xm\n\nxm.broadcast_master_param(model)\n"
    after = ("import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU519): `xm.broadcast_master_param`: "
             "DDP broadcasts parameters at construction; otherwise torch.distributed.broadcast each parameter\n"
             "xm.broadcast_master_param(model)\n")
    _WHY = {"get_memory_info": "TorchTPU has no memory statistics",
            "broadcast_master_param": "DDP broadcasts parameters at construction; otherwise "
                                      "torch.distributed.broadcast each parameter",
            "RateTracker": "vendor a small rate tracker (time.perf_counter)",
            "set_replication": "not needed with torch.distributed",
            "send_cpu_data_to_device": "use .to(device) (torch.utils._pytree.tree_map for nested data)",
            "get_stablehlo": "use torch.export", "get_stablehlo_bytecode": "use torch.export"}
    refs = xm(*_WHY)
    ref_prefixes = ("torch_xla.test.test_utils", "torch_xla.utils.utils")

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        why = self._WHY.get(last, "torch_xla test/utility helper: vendor what you need")
        ctx.flag(orig, f"`{qname.replace(XM + '.', 'xm.')}`: {why}", code=self.code)
        return None


@register
class UnusedXlaImport(Rule):
    code = "TPU590"
    name = "unused-xla-import"
    family = "xla_model"
    summary = "Remove torch_xla / torch.cuda imports that are unused after the migration."
    requires = ("TPU501",)
    rationale = "An import left behind would fail on a machine without torch_xla; only unused ones are removed."
    before = "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
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
    after = ("import torch_xla.core.xla_model as xm\n\n# TODO(tpu-migrate TPU599): `xm.xla_device_world_size` is "
             "not a known torch_xla API with a TorchTPU equivalent; port by hand\nn = xm.xla_device_world_size()\n")
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
            ctx.flag(orig, f"`{short}` is not a known torch_xla API with a TorchTPU equivalent; port by hand",
                     code=self.code)
        return None
