"""``torch_xla.runtime`` (``xr``), environment variables, eager mode, compile and profiler."""

from __future__ import annotations

import re

import libcst as cst

from ._calls import bind, rebind, same_args
from ._helpers import WORLD_SIZE, helper
from ._util import arg, code, drop_kwargs, expr, kwarg, string_body, with_body
from ._xla import DIST_EMITS, RANK, WORLD, needs
from .base import Rule, register


@register
class RuntimeDeviceCounts(Rule):
    code = "TPU601"
    name = "runtime-device-counts"
    family = "xla_runtime"
    outcome = "warned"
    summary = "Rewrite xr.global_runtime_device_count/process_count to the world size, addressable_device_count to torch.accelerator.device_count(), process_index to the rank."
    rationale = (
        "With one TPU device per process these coincide; under SPMD (one process, many devices) the "
        "meaning differs, hence the warning."
    )
    before = "import torch_xla.runtime as xr\n\nn = xr.global_runtime_device_count()\n"
    after = "import os\nimport torch\n\n\n" + helper(WORLD_SIZE).source + "\n\nn = " + WORLD + "\n"
    _MAP = {
        "global_runtime_device_count": WORLD,
        "global_device_count": WORLD,
        "process_count": WORLD,
        "addressable_device_count": "torch.accelerator.device_count()",
        "addressable_runtime_device_count": "torch.accelerator.device_count()",
        "local_device_count": "torch.accelerator.device_count()",
        "process_index": RANK,
    }
    calls = frozenset(f"torch_xla.runtime.{k}" for k in _MAP)
    emits = DIST_EMITS + ("torch.accelerator.device_count",)

    def call(self, ctx, orig, node, qname):
        new = self._MAP[qname.rsplit(".", 1)[1]]
        ctx.report(
            orig,
            f"`{qname}()` -> `{new}` (one device per process; SPMD meaning differs)",
            code=self.code,
            outcome="warned",
        )
        needs(ctx, new)
        return expr(new)


_ENV_NAME = re.compile(r"PJRT_DEVICE")


def _environ_key(ctx, node: cst.SimpleStatementLine) -> tuple[str | None, cst.SimpleString | None]:
    """`os.environ["K"] = v`, `os.environ.setdefault("K", v)`, `os.environ.pop("K", ...)` -> K."""
    small = node.body[0] if len(node.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        t = small.targets[0].target
        if isinstance(t, cst.Subscript) and ctx.qname(t.value) == "os.environ" and len(t.slice) == 1:
            idx = t.slice[0].slice
            if isinstance(idx, cst.Index) and isinstance(idx.value, cst.SimpleString):
                return string_body(idx.value), idx.value
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        c = small.value
        if (
            isinstance(c.func, cst.Attribute)
            and ctx.qname(c.func.value) == "os.environ"
            and c.func.attr.value in ("setdefault", "update", "pop")
            and c.args
            and isinstance(c.args[0].value, cst.SimpleString)
        ):
            return string_body(c.args[0].value), c.args[0].value
    return None, None


@register
class PjrtDeviceEnv(Rule):
    code = "TPU602"
    name = "pjrt-device-env"
    family = "xla_runtime"
    summary = 'Delete `os.environ["PJRT_DEVICE"] = ...` (and setdefault).'
    rationale = "TorchTPU finds its chips by a PCI scan; PJRT_DEVICE is not read."
    before = 'import os\n\nos.environ["PJRT_DEVICE"] = "TPU"\nx = 1\n'
    after = "import os\n\nx = 1\n"
    node_types = (cst.SimpleStatementLine,)

    def visit_node(self, ctx, node):
        key, _ = _environ_key(ctx, node)
        if key == "PJRT_DEVICE":
            ctx.claim_statement(node, self)
            ctx.suppress_current_statement()

    def statement(self, ctx, orig, node, qname, call, target):
        ctx.report(orig, "removed PJRT_DEVICE setting (TorchTPU finds devices by PCI scan)", code=self.code)
        return cst.RemovalSentinel.REMOVE


_XLA_ENV = {
    "XLA_USE_BF16": "use model.to(torch.bfloat16) or torch.autocast('tpu')",
    "XLA_DOWNCAST_BF16": "use model.to(torch.bfloat16) or torch.autocast('tpu')",
    "XLA_FLAGS": "XLA_FLAGS dumps still work on TorchTPU; other flags may not apply",
    "XLA_IR_DEBUG": "no TorchTPU equivalent",
    "XLA_HLO_DEBUG": "no TorchTPU equivalent",
    "PT_XLA_DEBUG": "no TorchTPU equivalent",
    "PT_XLA_DEBUG_LEVEL": "no TorchTPU equivalent",
    "XLA_USE_SPMD": "TorchTPU has no SPMD mode; use DTensor",
    "XRT_TPU_CONFIG": "XRT is gone; nothing to set",
    "TPU_NUM_DEVICES": "one device per process on TorchTPU",
    "TPU_PROCESS_ADDRESSES": "set by the launcher",
    "XLA_USE_32BIT_LONG": "no TorchTPU equivalent",
    "XLA_SAVE_TENSORS_FILE": "no TorchTPU equivalent",
    "XLA_METRICS_FILE": "no TorchTPU equivalent",
    "PJRT_DEVICE": "TorchTPU finds chips by PCI scan; delete it",
}


@register
class XlaEnvVar(Rule):
    code = "TPU603"
    name = "xla-env-var"
    family = "xla_runtime"
    outcome = "flagged"
    summary = (
        "Flag XLA/XRT debug and precision environment variables (XLA_USE_BF16, XLA_FLAGS, PT_XLA_DEBUG ...)."
    )
    rationale = "TorchTPU reads its own TORCH_TPU_* variables; precision knobs become explicit dtypes."
    before = 'import os\n\nos.environ["XLA_USE_BF16"] = "1"\n'
    after = (
        "import os\n\n# TODO(tpu-migrate TPU603): XLA_USE_BF16: use model.to(torch.bfloat16) or "
        'torch.autocast(\'tpu\')\nos.environ["XLA_USE_BF16"] = "1"\n'
    )
    node_types = (cst.SimpleString,)

    def leave_node(self, ctx, orig, node):
        body = string_body(orig)
        if body in _XLA_ENV and not (
            body == "PJRT_DEVICE" and ctx.enabled("TPU602") and ctx.in_claimed_statement()
        ):
            ctx.flag(orig, f"{body}: {_XLA_ENV[body]}", code=self.code)
        return None


@register
class EagerModeCall(Rule):
    code = "TPU604"
    name = "xla-eager-mode"
    family = "xla_runtime"
    summary = "Delete torch_xla.experimental.eager_mode(...) / torch_xla.runtime.eager_mode calls."
    rationale = "TorchTPU is eager by default."
    before = "import torch_xla\n\ntorch_xla.experimental.eager_mode(True)\nx = 1\n"
    after = "x = 1\n"
    statements = frozenset({"torch_xla.experimental.eager_mode", "torch_xla.experimental.eager.eager_mode"})

    def statement(self, ctx, orig, node, qname, call, target):
        if target is not None:
            return None
        ctx.report(orig, "removed eager_mode(...) (TorchTPU is eager by default)", code=self.code)
        return cst.RemovalSentinel.REMOVE


@register
class XlaCompile(Rule):
    code = "TPU605"
    name = "torch-xla-compile"
    family = "xla_runtime"
    outcome = "warned"
    summary = "Rewrite torch_xla.compile(fn) to torch.compile(fn)."
    rationale = (
        "torch_xla.compile traced a lazy region and synced; torch.compile picks the 'tpu' backend for "
        "TPU inputs. Semantics differ (graph breaks, recompiles), hence the warning."
    )
    before = "import torch_xla\n\nstep = torch_xla.compile(step)\n"
    after = "import torch\n\nstep = torch.compile(step)\n"
    calls = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
    refs = calls
    emits = ("torch.compile",)
    _OLD = (
        "f=None, full_graph=False, name=None, max_different_graphs=None, custom_compile_options=None, "
        "num_different_graphs_allowed=None"
    )
    _NEW = (
        "model=None, *, fullgraph=False, dynamic=None, backend='inductor', mode=None, options=None, name=None, "
        "disable=False, recompile_limit=None"
    )
    _DROP = frozenset({"max_different_graphs", "custom_compile_options", "num_different_graphs_allowed"})

    def call(self, ctx, orig, node, qname):
        args = rebind(node, self._OLD, self._NEW, {"f": "model", "full_graph": "fullgraph"}, drop=self._DROP)
        if args is None:
            ctx.flag(
                orig,
                "`torch_xla.compile(...)`: its arguments do not map onto torch.compile; port by hand",
                code=self.code,
            )
            return None
        dropped = sorted(n for n in (bind(node, self._OLD) or {}) if n in self._DROP)
        note = f"; dropped {', '.join(dropped)} (no torch.compile equivalent)" if dropped else ""
        ctx.report(
            orig,
            f"`torch_xla.compile(fn)` -> `torch.compile(fn)` (semantics differ: check graph breaks{note})",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        func = expr("torch.compile")
        return (
            node.with_changes(func=func) if same_args(node, args) else node.with_changes(func=func, args=args)
        )

    def ref(self, ctx, orig, node, qname):
        if ctx.is_called(orig):
            return None
        ctx.report(
            orig,
            "`torch_xla.compile` -> `torch.compile` (semantics differ: check graph breaks)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return expr("torch.compile")


@register
class OpenXlaBackend(Rule):
    code = "TPU606"
    name = "openxla-backend"
    family = "xla_runtime"
    summary = "Rewrite torch.compile(..., backend='openxla' | 'openxla_eval') to backend='tpu'."
    rationale = "TorchTPU registers the dynamo backend 'tpu'."
    before = 'import torch\n\nm = torch.compile(m, backend="openxla")\n'
    after = 'import torch\n\nm = torch.compile(m, backend="tpu")\n'
    node_types = (cst.Call, cst.SimpleString)

    def visit_node(self, ctx, node):
        if isinstance(node, cst.Call):
            if ctx.qname(node.func) in ("torch.compile", "torch._dynamo.optimize"):
                for a in node.args:
                    if (a.keyword is None or a.keyword.value == "backend") and string_body(a.value) in (
                        "openxla",
                        "openxla_eval",
                    ):
                        ctx.claim_string(
                            a.value,
                            self.code,
                            "rewritten",
                            f"compile backend '{string_body(a.value)}' -> 'tpu'",
                            value="tpu",
                        )

    def leave_node(self, ctx, orig, node):
        if not isinstance(node, cst.SimpleString):
            return None
        claim = ctx.string_claims.get(id(orig))
        if claim is None or claim[0] != self.code or claim[3] is None:
            return None
        ctx.report(orig, claim[2], code=self.code)
        return with_body(node, claim[3])


@register
class CompileOptions(Rule):
    code = "TPU608"
    name = "compile-options-tpu"
    family = "xla_runtime"
    outcome = "warned"
    summary = (
        "Drop torch.compile's mode= and dynamic=True, which TorchTPU's compile refuses; flag run-time values."
    )
    rationale = (
        "A migrated program compiles for the 'tpu' device, and TorchTPU 0.2.0 raises on `mode=` and `dynamic=True` "
        "(torchtpu-contract.md section 15). `mode` picks CUDA graphs / autotuning (speed only) and `dynamic=True` "
        "asks for shape-polymorphic graphs (without it shapes that change recompile, with the same results); a "
        "value known only at run time is flagged."
    )
    before = 'import torch\n\nm = torch.compile(m, backend="openxla", mode="max-autotune", dynamic=True)\n'
    after = 'import torch\n\nm = torch.compile(m, backend="tpu")\n'
    requires = ("TPU606",)
    calls = frozenset({"torch.compile"})

    def call(self, ctx, orig, node, qname):
        drop: set[str] = set()
        mode, dynamic = kwarg(node, "mode"), kwarg(node, "dynamic")
        backend = kwarg(node, "backend")
        if backend is not None and string_body(backend.value) == "inductor":
            # TorchTPU's compile raises on backend="inductor" with TPU inputs; with no backend it picks "tpu"
            # for them and inductor for any other device, as the line did before
            drop.add("backend")
        if mode is not None:
            if string_body(mode.value) is None and not (
                type(mode.value) is cst.Name and mode.value.value == "None"
            ):
                ctx.flag(
                    orig,
                    f"torch.compile(mode={code(mode.value)}): TorchTPU's compile refuses mode=; drop it for the "
                    "'tpu' device",
                    code=self.code,
                )
                return None
            drop.add("mode")
        if dynamic is not None:
            value = dynamic.value
            if type(value) is cst.Name and value.value == "True":
                drop.add("dynamic")
            elif not (type(value) is cst.Name and value.value in ("False", "None")):
                ctx.flag(
                    orig,
                    f"torch.compile(dynamic={code(value)}): TorchTPU's compile refuses dynamic=True; pass False/None "
                    "on the 'tpu' device (declare dimension ranges instead)",
                    code=self.code,
                )
                return None
        if not drop:
            return None
        ctx.report(
            orig,
            f"torch.compile: dropped {', '.join(f'{n}=' for n in sorted(drop))} (TorchTPU's compile refuses "
            "them; mode only tunes CUDA speed, without dynamic=True shapes that change recompile, and with no "
            "backend TPU inputs compile with 'tpu', others with inductor)",
            code=self.code,
            outcome="warned",
        )
        return drop_kwargs(node, drop)


@register
class XlaProfiler(Rule):
    code = "TPU607"
    name = "xla-profiler"
    family = "xla_runtime"
    outcome = "warned"
    summary = (
        "Rewrite xp.Trace(name)/xp.StepTrace(name) to torch.profiler.record_function(name), "
        "xp.start_server(port) to None; flag xp.trace and the rest."
    )
    rationale = (
        "TorchTPU registers a Kineto backend: torch.profiler records TPU activity (TpuProfilerConfig for "
        "XPlane). There is no profiler server to start (a capture is a torch.profiler.profile block), so "
        "the server handle becomes None and a warning says how to capture."
    )
    before = 'import torch_xla.debug.profiler as xp\n\nwith xp.Trace("fwd"):\n    y = model(x)\n'
    after = 'import torch\n\nwith torch.profiler.record_function("fwd"):\n    y = model(x)\n'
    calls = frozenset(
        {
            "torch_xla.debug.profiler.Trace",
            "torch_xla.debug.profiler.StepTrace",
            "torch_xla.debug.profiler.start_server",
        }
    )
    ref_prefixes = ("torch_xla.debug.profiler",)
    emits = ("torch.profiler.record_function",)

    def call(self, ctx, orig, node, qname):
        if qname.endswith("start_server"):
            ctx.report(
                orig,
                "`xp.start_server(port)` -> `None`: TorchTPU has no profiler server; capture with "
                "torch.profiler.profile(...) around the steps",
                code=self.code,
                outcome="warned",
            )
            return cst.Name("None")
        name = arg(node, 0, "name")
        if name is None:
            return None
        ctx.report(orig, f"`{qname}` -> `torch.profiler.record_function`", code=self.code, outcome="warned")
        ctx.need_import("torch")
        return expr(f"torch.profiler.record_function({code(name.value)})")

    def ref(self, ctx, orig, node, qname):
        if qname in self.calls and ctx.is_called(orig):
            return None
        ctx.flag(
            orig,
            f"`{qname}`: use torch.profiler.profile (TPU Kineto backend, TpuProfilerConfig)",
            code=self.code,
        )
        return None
