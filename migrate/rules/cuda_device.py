"""CUDA device strings, ``.cuda()``, ``.is_cuda``, integer devices and checkpoint ``map_location``.

The device-string literals are rewritten everywhere (see :mod:`._literal`); the contextual rules here
report the ones that meet outside values (comparisons, command-line options) as warnings, so a reader
checks the values that come from the CLI or config files.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from .._sparse import SPARSE_CONSTRUCTORS, dotted, sparse_source
from .._walk import every_node
from ..project import facts_for
from ._helpers import RESTORE_LOCATION
from ._literal import (
    ARGPARSE_CODE,
    CLI_CHOICES,
    COMPARISON_CODE,
    DEVICE_WORDS,
    DICT_KEY_CODE,
    ORDINAL_SLOT,
    LiteralRule,
    accelerator_name,
    accepted_values,
    creates_group,
    cuda_only_functions,
    device_call_key,
    walk_code,
)
from ._util import append_elements, code, expr, kwarg, separator, set_kwarg, string_body, with_body
from .base import Context, Rule, register
from .cuda_api import host_helpers


@register
class CudaDeviceLiteral(LiteralRule):
    code = "TPU101"
    name = "cuda-device-string"
    family = "cuda_device"
    summary = (
        "Rewrite the device strings 'cuda' and 'cuda:0' to 'tpu'/'tpu:0'; a run-time ordinal (f'cuda:{rank}', "
        "'cuda:{}'.format(i), 'cuda:%d' % i, torch.device('cuda', i)) to 'tpu'; flag 'cuda:1' and higher."
    )
    rationale = (
        "TorchTPU registers the device type 'tpu' and binds one device per process: a run-time ordinal "
        "chose this process's GPU, and on TorchTPU the process's own device is 'tpu' (another ordinal does "
        "not exist there); a literal 'cuda:1' places work on a second device of the same process, which "
        "needs a human (one process per device, or DTensor)."
    )
    before = 'import torch\n\n\ndef place(rank):\n    device = torch.device("cuda")\n    return device, f"cuda:{rank}"\n'
    after = 'import torch\n\n\ndef place(rank):\n    device = torch.device("tpu")\n    return device, "tpu"\n'
    pattern = re.compile(rf"cuda(?P<suffix>:(\d+|{ORDINAL_SLOT})?)?")
    replacement = "tpu"


@register
class DeviceComparison(Rule):
    code = COMPARISON_CODE
    name = "device-string-comparison"
    family = "cuda_device"
    outcome = "warned"
    summary = (
        "Rewrite device and backend strings inside comparisons, `in` tests and .startswith(), with a warning."
    )
    rationale = (
        "`'cuda' in device` or `device.type == 'cuda'` chooses autocast, pin_memory or fused-optimizer "
        "paths; rewriting only the definition would silently flip these branches."
    )
    requires = ("TPU101",)
    before = 'device = "cuda"\nif "cuda" in device:\n    pin = True\n'
    after = 'device = "tpu"\nif "tpu" in device:\n    pin = True\n'


#: A value in ``choices`` -> the one added beside it.
_CHOICE_ADDS = {"cuda": "tpu", "nccl": "tpu_dist"}


@register
class ArgparseDefault(Rule):
    code = ARGPARSE_CODE
    name = "argparse-device-default"
    family = "cuda_device"
    outcome = "warned"
    summary = (
        "Rewrite device/backend defaults of command-line options; add 'tpu' beside 'cuda' in their choices; "
        "keep the flag names."
    )
    rationale = (
        "A static tool cannot see values passed on the command line or by a configurator: the default "
        "is migrated, the old choices stay valid (the repository's launch scripts and CI still pass "
        "them) with the new value added, the flag names stay (renaming --cuda breaks launch scripts), and "
        "a warning says so."
    )
    requires = ("TPU101",)
    before = (
        "import argparse\n\np = argparse.ArgumentParser()\n"
        'p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])\n'
    )
    after = (
        "import argparse\n\np = argparse.ArgumentParser()\n"
        'p.add_argument("--device", default="tpu", choices=["cpu", "cuda", "tpu"])\n'
    )
    node_types = (cst.Call, cst.Comparison)

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        if isinstance(node, cst.Comparison):
            return self._accepted(ctx, orig, node)
        assert isinstance(node, cst.Call)
        if not isinstance(node.func, cst.Attribute):
            return None
        if node.func.attr.value == "Choice" and ctx.qname(orig.func) in CLI_CHOICES and node.args:  # type: ignore[union-attr]
            # @click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cuda"): as argparse's
            choices = node.args[0]
        elif node.func.attr.value != "add_argument":
            return None
        else:
            choices = kwarg(node, "choices")
        flags = [string_body(a.value) or "" for a in node.args if a.keyword is None]
        if any("accelerator" in f for f in flags):
            return None  # Lightning/Fabric's knob: its 'tpu' is torch_xla (TPU911 flags the Trainer)
        if choices is None or not isinstance(choices.value, (cst.List, cst.Tuple)):
            return None
        if _kept_with_a_test(ctx, orig):
            return None  # (its values stay with a device test kept as written: flow.fed_literals)
        bodies = [string_body(e.value) for e in choices.value.elements]
        add = [new for old, new in _CHOICE_ADDS.items() if old in bodies and new not in bodies]
        if "tpu_dist" in add and not creates_group(ctx.source_text):
            add.remove("tpu_dist")  # (a framework's backend option: its names are its own, see TPU401)
        if not add or not ctx.enabled("TPU101" if "tpu" in add else "TPU401"):
            return None
        template = next(e.value for e in choices.value.elements if string_body(e.value) is not None)
        new_elements = append_elements(choices.value.elements, [with_body(template, v) for v in add])  # type: ignore[arg-type]
        ctx.report(
            orig,
            f"added {', '.join(repr(v) for v in add)} to the choices of a command-line option (the "
            "old values stay valid for existing launch scripts)",
            code=self.code,
            outcome="warned",
        )
        grown = choices.value.with_changes(elements=new_elements)
        if choices.keyword is None:  # click.Choice([...])
            return node.with_changes(args=[choices.with_changes(value=grown), *node.args[1:]])
        return set_kwarg(node, "choices", grown)

    def _accepted(self, ctx: Context, orig: cst.CSTNode, node: cst.Comparison) -> cst.CSTNode | None:
        """``device not in {"auto", "cpu", "cuda", "gpu"}``: the values a setting accepts (anomalib's inferencer,
        fed by a command-line option whose choices gain 'tpu'): 'tpu' is added beside 'cuda', as to choices."""
        if not ctx.enabled("TPU101"):
            return None
        parts = [node.left, *(c.comparator for c in node.comparisons)]
        if accelerator_name(parts) is not None:
            return None  # (a framework's accelerator names: kept as written, see _literal)
        for i, part in enumerate(parts):
            if not isinstance(part, (cst.List, cst.Tuple, cst.Set)) or not accepted_values(node, part):
                continue
            bodies = [string_body(e.value) for e in part.elements]
            if "cuda" not in bodies or "tpu" in bodies:
                continue
            template = next(e.value for e in part.elements if string_body(e.value) == "cuda")
            grown = part.with_changes(elements=append_elements(part.elements, [with_body(template, "tpu")]))  # type: ignore[arg-type]
            ctx.report(
                orig,
                "added 'tpu' to the device names this test accepts (the old values stay valid for callers)",
                code=self.code,
                outcome="warned",
            )
            if i == 0:
                return node.with_changes(left=grown)
            comps = list(node.comparisons)
            comps[i - 1] = comps[i - 1].with_changes(comparator=grown)
            return node.with_changes(comparisons=comps)
        return None


def _kept_with_a_test(ctx: Context, call: cst.CSTNode) -> bool:
    """A literal of the original option is frozen: a device test kept as written reads the option's value
    (nnUNet's ``-device``), so its choices gain no 'tpu' either."""
    frozen = getattr(ctx, "frozen", ())
    return bool(frozen) and any(type(n) is cst.SimpleString and id(n) in frozen for n in walk_code(call))


def _a_flag(value: cst.BaseExpression) -> bool:
    """A truth value: ``True``/``False``, a test (``torch.cuda.is_available()``, ``not args.no_cuda``, ``a and b``)."""
    if type(value) is cst.Name:
        return value.value in ("True", "False")
    return type(value) in (cst.Call, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison)


def device_key(key: cst.BaseExpression | None) -> str | None:
    """A dict key's device type: ``"cuda"``, or ``torch.device("cuda")`` (shampoo's backend table)."""
    inner = device_call_key(key)
    return (
        string_body(inner if inner is not None else key)
        if isinstance(key, (cst.SimpleString, cst.Call))
        else None
    )


@register
class DeviceDictKey(Rule):
    code = DICT_KEY_CODE
    name = "device-keyed-dict"
    family = "cuda_device"
    outcome = "warned"
    summary = "Add a 'tpu' entry next to a 'cuda' key in a device-keyed dict (values: 'nccl' -> 'tpu_dist')."
    rationale = (
        "Tables such as timm's {'cuda': 'nccl', 'xpu': 'ccl'} map device types to settings; the right "
        "edit is to add a 'tpu' key, not to rename the 'cuda' one."
    )
    before = 'BACKENDS = {"cuda": "nccl", "cpu": "gloo"}\n'
    after = 'BACKENDS = {"cuda": "nccl", "cpu": "gloo", "tpu": "tpu_dist"}\n'
    node_types = (cst.Dict,)

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        assert isinstance(node, cst.Dict)
        keys = [device_key(e.key) if isinstance(e, cst.DictElement) else None for e in node.elements]
        if "cuda" not in keys or "tpu" in keys:
            return None
        el = node.elements[keys.index("cuda")]
        assert isinstance(el, cst.DictElement)
        value = el.value
        if _a_flag(value) and not any(k in DEVICE_WORDS for k in keys if k != "cuda"):
            return None  # {'cuda': True, 'lr': 1e-3}: an option "use CUDA", not a table keyed by device type
        if any(k is not None and k != "cuda" and k not in DEVICE_WORDS for k in keys):
            # {"python": ..., "torch": ..., "cuda": torch.cuda.get_rng_state()}: a record with a field named
            # cuda (OLMo's RNG state), not a table keyed by device type
            return None
        if string_body(value) == "nccl":
            value = with_body(value, "tpu_dist")  # type: ignore[arg-type]
        elif type(value) is cst.Attribute and value.attr.value == "NCCL":  # dist.Backend.NCCL
            value = cst.SimpleString('"tpu_dist"')
        if type(el.key) is cst.Call:  # {torch.device("cuda"): ...}
            inner = el.key.args[0]
            key = el.key.with_changes(args=[inner.with_changes(value=with_body(inner.value, "tpu"))])
        else:
            key = with_body(el.key, "tpu")  # type: ignore[arg-type]
        elements = list(node.elements)
        last = elements[-1]
        new = cst.DictElement(key=key, value=value, comma=last.comma)
        elements[-1] = last.with_changes(comma=separator(elements))  # a one-entry-per-line dict stays so
        ctx.report(
            orig,
            "added a 'tpu' entry next to 'cuda' in a device-keyed dict",
            code=self.code,
            outcome="warned",
        )
        return node.with_changes(elements=[*elements, new])


@register
class CudaMethod(Rule):
    code = "TPU105"
    name = "tensor-cuda-method"
    family = "cuda_device"
    summary = 'Rewrite `x.cuda()` / `x.cuda(i)` to `x.to("tpu")`, keeping non_blocking.'
    rationale = (
        "`.to` works for every device type; TorchTPU binds one device per process, so an explicit "
        "index is dropped (with a warning) instead of naming another process's chip."
    )
    before = "x = x.cuda()\nimages = images.cuda(args.gpu, non_blocking=True)\n"
    after = 'x = x.to("tpu")\nimages = images.to("tpu", non_blocking=True)\n'
    methods = frozenset({"cuda"})
    node_types = (cst.ClassDef, cst.FunctionDef)

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        """A top-level class or function that keeps one of the project's own-``cuda()`` objects on CUDA
        (torchdrug's ``test_device``: ``graph.cuda()``, then ``device.type == "cuda"``): its device names stay."""
        if ctx.enclosing_definitions()[:-1] or not _beside_own_cuda_object(ctx):
            return
        for n in every_node(node):
            if type(n) is cst.SimpleString and (string_body(n) or "").split(":")[0] == "cuda":
                ctx.claim_string(n, "", "rewritten", "", value=None)

    def method(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.BaseExpression | None:
        assert isinstance(node.func, cst.Attribute)
        if any(a.star for a in node.args):
            return None
        if (engine := _engine_owner(ctx, orig.func.value)) is not None:  # type: ignore[attr-defined]
            ctx.flag(
                orig,
                f"`.cuda()` on a {engine[0]}, which places its model itself ({engine[1]}: the CPU on a TPU "
                "host, TorchTPU's device depends on the framework): moved to 'tpu' by hand it would meet its "
                "batches on the framework's device; let the framework place it",
                code=self.code,
            )
            return None
        if (own := _own_placement(ctx, orig.func.value)) is not None:  # type: ignore[attr-defined]
            ctx.flag(
                orig,
                f'`{code(orig.func)}()` in a class that defines its own `{own}()`: as `.to("tpu")` it would '
                "call the class's own `to` (gpytorch's NNUtil.to recursed) or skip its `cuda`; port by hand "
                "(`super().to(...)` and what the method does besides)",
                code=self.code,
            )
            return None
        if (own_class := _own_cuda_object(ctx, orig.func.value)) is not None:  # type: ignore[attr-defined]
            ctx.flag(
                orig,
                f"`{code(orig.func)}()` calls the project's `{own_class}.cuda`, not the tensor method: `{own_class}` "
                "defines its own placement (its `to` may send every non-CPU device back to `cuda`); kept: give "
                f"`{own_class}` a TPU path, then move it with `.to('tpu')`",
                code=self.code,
            )
            return None
        fn = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
        if fn is not None and id(fn) in cuda_only_functions(ctx):
            return (
                None  # (axolotl's cutlass wrappers: the tensor goes to the CUDA-only stack the function runs)
            )
        if _beside_own_cuda_object(ctx):
            return None  # (torchdrug's tests: the inputs stay beside the graph they meet, whose `.cuda()` is flagged)
        if (function := _module_function(ctx, orig)) is not None:
            ctx.flag(
                orig,
                f"`{code(orig.func)}(...)` calls `{function}`, a function of an imported module (it takes the data, "
                "not a device index), not the tensor method: kept; port that function (or call its device-taking "
                "form with 'tpu') by hand",
                code=self.code,
            )
            return None
        if (guard := _on_gpu_guard(ctx)) is not None:
            ctx.flag(
                orig,
                f"`{code(orig.func)}()` runs only under `{guard}`, Lightning's `on_gpu` (device.type == 'cuda'): "
                "false on 'tpu', so this branch never runs there and what it moves back stays where the code "
                "before it left it; keep the device it was on (`device = self.device`) and move back with "
                "`.to(device)`",
                code=self.code,
            )
            return None
        keep = [
            a
            for a in node.args
            if a.keyword is not None and a.keyword.value in ("non_blocking", "memory_format")
        ]
        dropped = [a for a in node.args if a not in keep]
        target = cst.Arg(cst.SimpleString('"tpu"'))
        if _storage(node.func.value):
            # `lambda storage, loc: storage.cuda(i)` (a map_location): a storage's .to takes the device by keyword
            # only (d3rlpy's map_location raised TypeError on every load); the keyword suits a tensor too
            target = cst.Arg(
                cst.SimpleString('"tpu"'),
                keyword=cst.Name("device"),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
        args = [target, *[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in keep]]
        if dropped:
            ctx.report(
                orig,
                f'`.cuda({code(dropped[0].value)})` -> `.to("tpu")`: the process\'s own device is '
                "used (one TPU device per process)",
                code=self.code,
                outcome="warned",
            )
        else:
            ctx.report(orig, '`.cuda()` -> `.to("tpu")`', code=self.code)
        return node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)


#: What a ``.cuda(i)`` argument looks like when it is a device index (an int, a rank, a GPU id, a device).
_INDEX_LIKE = re.compile(r"(?i)^\d+$|rank|gpu|device|dev\b|local|ordinal|idx|index|id$|^i$|^d$")


def _module_function(ctx: Context, orig: cst.Call) -> str | None:
    """``utils.cuda(data)`` (torchdrug's helper that moves a nested container): the receiver is an imported name
    and the first argument is not a device index, so this is a module's function called ``cuda``."""
    positional = [a for a in orig.args if a.keyword is None and not a.star]
    if not positional or _INDEX_LIKE.search(code(positional[0].value).strip()):
        return None
    receiver = orig.func.value  # type: ignore[attr-defined]
    if type(receiver) is not cst.Name:
        return None
    qname = ctx.qname(orig.func)
    return qname if qname and not qname.startswith("torch.") else None


_ON_GPU = re.compile(r"\.on_gpu\b")


def _on_gpu_guard(ctx: Context) -> str | None:
    """The ``if`` test around this call when it reads Lightning's ``on_gpu`` (``device.type == "cuda"``), directly
    or through a name the function bound from it (ReAgent's ``was_on_gpu = self.on_gpu; self.cpu(); ...; if
    was_on_gpu: self.cuda()``): the test's code, else None."""
    body = None
    for stmt in reversed(ctx.statements()):
        if type(stmt) is not cst.If:
            continue
        test = code(stmt.test)  # type: ignore[attr-defined]
        if _ON_GPU.search(test):
            return test
        for name in re.findall(r"\b[A-Za-z_]\w*\b", test):
            if body is None:
                defs = [d for d in ctx.enclosing_definitions() if type(d) is cst.FunctionDef]
                body = code(defs[-1]) if defs else ""
            if "on_gpu" in body and re.search(rf"^\s*{name}\s*=\s*[\w.]+\.on_gpu\s*$", body, re.M):
                return test
    return None


def _engine_owner(ctx: Context, receiver: cst.BaseExpression) -> tuple[str, str] | None:
    """``Trainer(...).cuda()`` where ``Trainer`` is the project's class that builds an accelerate / DeepSpeed
    engine (migrate._host.engine_in) -> (class name, engine)."""
    if not (isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name)):
        return None
    name = receiver.func.value
    if not name[:1].isupper():  # (a class: its calls are read once per file, memoised)
        return None
    engine = host_helpers(ctx).engine_in(name)
    return (name, engine) if engine is not None else None


def _storage(value: cst.BaseExpression) -> bool:
    """A storage by its name (``storage``, ``untyped_storage``) or by the call that makes it (``t.untyped_storage()``)."""
    if isinstance(value, cst.Call):
        value = value.func
    last = (
        value.attr.value
        if isinstance(value, cst.Attribute)
        else value.value
        if isinstance(value, cst.Name)
        else ""
    )
    return "storage" in last.lower()


_OWN_IS_CUDA = re.compile(r"([A-Za-z_][\w.]*)\.is_cuda\s*=(?!=)")


@register
class IsCuda(Rule):
    code = "TPU106"
    name = "tensor-is-cuda"
    family = "cuda_device"
    summary = 'Rewrite `t.is_cuda` to `(t.device.type == "tpu")`.'
    rationale = (
        "`is_cuda` gates device-specific paths; on TorchTPU the device type is 'tpu'. The comparison "
        "works on every build, unlike the generated `is_tpu` property."
    )
    before = "if x.is_cuda:\n    pass\n"
    after = 'if (x.device.type == "tpu"):\n    pass\n'
    emits = ("torch.Tensor.device",)
    node_types = (cst.Attribute,)

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        assert isinstance(node, cst.Attribute) and isinstance(orig, cst.Attribute)
        if node.attr.value != "is_cuda" or ctx.is_target(orig) or ctx.qname(orig):
            return None
        own = ctx.scratch.get("own-is-cuda")
        if own is None:  # (once per file: a search per attribute is quadratic in the file's size)
            own = ctx.scratch["own-is-cuda"] = set(_OWN_IS_CUDA.findall(ctx.source_text))
        if code(node.value) in own:
            return None  # `self.is_cuda = ...`: the program's own attribute (its value is migrated where it is set)
        kept = ctx.scratch.get("cuda-guards", {}).get(id(orig))  # type: ignore[union-attr]
        if kept is not None:  # (see migrate.flow: what the test selects may be CUDA-only)
            ctx.flag(
                orig,
                f"`.is_cuda` kept: {kept}; test `.device.type` by hand if it means any accelerator",
                code=self.code,
            )
            return None
        ctx.report(orig, '`.is_cuda` -> `.device.type == "tpu"`', code=self.code)
        return expr(f'({code(node.value)}.device.type == "tpu")')


_INT_DEVICE_NAMES = frozenset(
    {
        "gpu",
        "gpu_id",
        "gpu_idx",
        "gpu_index",
        "local_rank",
        "rank",
        "device_id",
        "local_gpu",
        "cuda_id",
        "gpu_rank",
    }
)


#: torch's tensor factories (their device= keyword places the new tensor).
_FACTORIES = (
    *("tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "eye"),
    *("rand", "randn", "randint", "randperm", "zeros_like", "ones_like", "empty_like", "full_like"),
)


def _int_device(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    last = (
        node.attr.value
        if isinstance(node, cst.Attribute)
        else node.value
        if isinstance(node, cst.Name)
        else None
    )
    return last in _INT_DEVICE_NAMES


def _own_cuda_object(
    ctx: Context, receiver: cst.BaseExpression, within: cst.CSTNode | None = None
) -> str | None:
    """The project class (one defining its own ``cuda()``, migrate.project) that ``receiver`` is built from:
    ``data.Graph(...)``, ``data.Graph.from_dense(...)``, or a name (``self.<name>`` in its class) bound to one."""
    classes = facts_for(ctx.scratch, ctx.source_text).own_cuda_classes
    if not classes:
        return None
    value: cst.BaseExpression | None = receiver
    if type(receiver) is cst.Name or (
        type(receiver) is cst.Attribute
        and type(receiver.value) is cst.Name
        and receiver.value.value == "self"
    ):
        value = _bound_value(ctx, receiver, within)
    while type(value) is cst.Call:
        parts = set(re.findall(r"\w+", code(value.func)))
        if hit := sorted(parts & classes):
            return hit[0]
        value = value.func.value if type(value.func) is cst.Attribute else None  # `Graph.pack(gs).cuda()`
    return None


def _beside_own_cuda_object(ctx: Context) -> bool:
    """Whether the class (else the function) around this call also moves one of the project's own-``cuda()``
    objects with ``.cuda()``: that one is kept, so the tensors it meets stay on CUDA with it."""
    if not facts_for(ctx.scratch, ctx.source_text).own_cuda_classes:
        return False
    around = ctx.enclosing_definitions()
    scope = next((d for d in around if type(d) is cst.ClassDef), None) or (around[0] if around else None)
    if scope is None:
        return False
    cache = ctx.scratch.setdefault("own-cuda-scopes", {})
    if id(scope) not in cache:  # type: ignore[operator]
        cache[id(scope)] = any(  # type: ignore[index]
            type(n) is cst.Call
            and type(n.func) is cst.Attribute
            and n.func.attr.value == "cuda"
            and _own_cuda_object(ctx, n.func.value, scope) is not None
            for n in every_node(scope)
        )
    return cache[id(scope)]  # type: ignore[index]


def _bound_value(
    ctx: Context, target: cst.BaseExpression, within: cst.CSTNode | None = None
) -> cst.BaseExpression | None:
    """The value last bound to ``target`` (a name in its function or module, ``self.x`` in its class; in
    ``within`` where given)."""
    around = ctx.enclosing_definitions()
    if within is not None:
        scope: cst.CSTNode | None = within
    elif type(target) is cst.Attribute:
        scope = next((d for d in reversed(around) if type(d) is cst.ClassDef), None)
    else:
        scope = next((d for d in reversed(around) if type(d) is cst.FunctionDef), None) or ctx.module
    text = code(target)
    found = None
    walk = every_node if type(scope) is cst.ClassDef else walk_code  # (`self.x = ...` in its methods)
    for n in walk(scope) if scope is not None else ():
        if type(n) is cst.Assign and any(code(t.target) == text for t in n.targets):
            found = n.value
    return found


def _own_placement(ctx: Context, receiver: cst.BaseExpression) -> str | None:
    """``self.cuda()`` in a class that defines ``to`` or ``cuda`` itself: the name of that method, else None."""
    if not (type(receiver) is cst.Name and receiver.value == "self"):
        return None  # (super().cuda() is nn.Module's: its .to is the same)
    cls = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.ClassDef), None)
    if cls is None or type(cls.body) is not cst.IndentedBlock:
        return None
    own = {s.name.value for s in cls.body.body if type(s) is cst.FunctionDef}
    return next((m for m in ("to", "cuda") if m in own), None)


def _bound_to_a_device(ctx: Context, node: cst.BaseExpression) -> bool:
    """``gpu = torch.device("cuda")`` (or a string) in the same function or module: a device, not an ordinal
    (pyannote's notebook: ``pipeline.to(gpu)``, whose ``Pipeline.to`` takes a torch.device only); its literal
    is migrated where it is bound."""
    if type(node) is not cst.Name:
        return False
    around = ctx.enclosing_definitions()
    scope = around[-1] if around else ctx.module
    for n in walk_code(scope) if scope is not None else ():
        if (
            type(n) is cst.Assign
            and any(type(t.target) is cst.Name and t.target.value == node.value for t in n.targets)
            and (
                type(n.value) in (cst.SimpleString, cst.FormattedString)
                or (type(n.value) is cst.Call and ctx.qname(n.value.func) == "torch.device")
            )
        ):
            return True
    return False


@register
class IntegerDevice(Rule):
    code = "TPU107"
    name = "integer-device"
    family = "cuda_device"
    outcome = "warned"
    summary = 'Rewrite `.to(<int>)` / `.to(local_rank)` (an integer means CUDA) to `.to("tpu")`.'
    rationale = (
        "An integer device is implicitly a CUDA ordinal; it failed on other PrivateUse1 backends. "
        "Recognised: integer literals and variables named gpu, gpu_id, local_rank, rank, device_id ..."
    )
    before = "import torch\n\ntorch.cuda.set_device(local_rank)\nmodel = model.to(local_rank)\n"
    after = 'import torch\n\ntorch.cuda.set_device(local_rank)\nmodel = model.to("tpu")\n'
    methods = frozenset({"to"})
    # (a factory's device=rank is the same CUDA ordinal: VoiceCraft's trainer moved its batch with .to(rank) and
    # built the NaN flag it all-reduces with it by torch.tensor(..., device=self.rank))
    calls = frozenset(f"torch.{f}" for f in _FACTORIES)

    def call(self, ctx: Context, orig: cst.Call, node: cst.Call, qname: str) -> cst.BaseExpression | None:
        device = next((a for a in node.args if a.keyword is not None and a.keyword.value == "device"), None)
        if device is None or not _int_device(device.value) or _bound_to_a_device(ctx, device.value):
            return None
        ctx.report(
            orig,
            f'integer device `{code(device.value)}` -> "tpu" (the process\'s own device)',
            code=self.code,
            outcome="warned",
        )
        new = device.with_changes(value=cst.SimpleString('"tpu"'))
        return node.with_changes(args=[new if a is device else a for a in node.args])

    def method(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.BaseExpression | None:
        # (`.to(device=self.local_rank)` too: LMFlow's evaluator moves its batch so beside the factory's
        # `device=self.local_rank` this rule rewrites)
        first = next((a for a in node.args if a.keyword is not None and a.keyword.value == "device"), None)
        if first is None and (not node.args or node.args[0].keyword is not None or node.args[0].star):
            return None
        first = first or node.args[0]
        if not _int_device(first.value) or _bound_to_a_device(ctx, first.value):
            return None
        ctx.report(
            orig,
            f'integer device `{code(first.value)}` -> "tpu" (the process\'s own device)',
            code=self.code,
            outcome="warned",
        )
        new = first.with_changes(value=cst.SimpleString('"tpu"'))
        return node.with_changes(args=[new if a is first else a for a in node.args])


def _keeps_storage(fn: cst.Lambda) -> bool:
    """``lambda storage, loc: storage``: the load-to-CPU idiom (each storage stays where it was read, the CPU); no
    device logic to check (BingBert's models.py)."""
    params = fn.params.params
    return len(params) >= 1 and type(fn.body) is cst.Name and fn.body.value == params[0].name.value


@register
class MapLocationLambda(Rule):
    code = "TPU108"
    name = "map-location-callable"
    family = "cuda_device"
    outcome = "flagged"
    summary = (
        "Flag `torch.load(..., map_location=<lambda or function>)`; give a torch.load that has none the "
        "placement it had on CUDA (CUDA storages onto tpu, the rest as saved)."
    )
    rationale = (
        "A callable map_location (`lambda storage, loc: storage.cuda(gpu)`) encodes device logic a "
        "static tool cannot verify; string and device map_locations are rewritten by TPU101."
    )
    requires = ("TPU105",)
    before = "import torch\n\nckpt = torch.load(path, map_location=lambda s, loc: s.cuda(0))\n"
    after = (
        'import torch\n\n# TODO(tpu-migrate TPU108): map_location is a callable; use map_location="tpu" '
        'or "cpu" instead\nckpt = torch.load(path, map_location=lambda s, loc: s.to("tpu"))\n'
    )
    calls = frozenset({"torch.load", "torch.serialization.load"})

    def call(self, ctx: Context, orig: cst.Call, node: cst.Call, qname: str) -> cst.BaseExpression | None:
        ml = kwarg(orig, "map_location")
        positional = [a for a in orig.args if a.keyword is None]
        if ml is None and not self.flag_only and len(positional) == 1 and not any(a.star for a in orig.args):
            # a checkpoint saved on CUDA does not load where there is no CUDA; the helper keeps CUDA's placement
            # ("cpu" for everything would leave tensors used as loaded, an EMA shadow say, off the device)
            ctx.report(
                orig,
                "torch.load without map_location -> map_location=_tpu_restore_location (storages saved on CUDA "
                'load onto "tpu", the rest where they were saved, as on the CUDA machine)',
                code=self.code,
            )
            ctx.need_helper(RESTORE_LOCATION)
            arg = cst.Arg(
                cst.Name(RESTORE_LOCATION),
                keyword=cst.Name("map_location"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
            return node.with_changes(args=[*node.args[:1], arg, *node.args[1:]])
        if ml is not None and isinstance(ml.value, cst.Lambda) and not _keeps_storage(ml.value):
            ctx.flag(
                ml.value,
                'map_location is a callable; use map_location="tpu" or "cpu" instead',
                code=self.code,
            )
        return None


@register
class SparseToDevice(Rule):
    code = "TPU110"
    name = "sparse-tensor-to-device"
    family = "cuda_device"
    outcome = "flagged"
    summary = (
        "Flag a sparse tensor moved to the device (built in the file, or returned by a project function that "
        "builds one, as pygcn's load_data): TorchTPU has no sparse tensors."
    )
    rationale = (
        "TorchTPU 0.2.0's SparsePrivateUse1 fallback throws, so `adj.cuda()` migrated to `adj.to('tpu')` fails "
        "on a TPU where the CUDA run worked. Densifying (`adj.to_dense()` with torch.mm) is right for a small "
        "graph and out of memory for a large one, and other code may read the sparse layout: the choice is the "
        "user's, so the move is flagged (and still migrated)."
    )
    before = "import torch\n\nadj = torch.sparse_coo_tensor(i, v, (n, n))\nadj = adj.cuda()\n"
    after = (
        "import torch\n\nadj = torch.sparse_coo_tensor(i, v, (n, n))\n# TODO(tpu-migrate TPU110): `adj` is a "
        "sparse tensor (from `torch.sparse_coo_tensor(...)`): TorchTPU has no sparse tensors (moving one raises); "
        "move `adj.to_dense()` (torch.mm / torch.spmm take it) if it fits, or keep the sparse product on the CPU\n"
        'adj = adj.to("tpu")\n'
    )
    requires = ("TPU105",)
    node_types = (cst.Call,)

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        func = node.func  # type: ignore[attr-defined]
        if (
            type(func) is not cst.Attribute
            or func.attr.value not in ("cuda", "to")
            or type(func.value) is not cst.Name
        ):
            return
        receiver = func.value
        if func.attr.value == "to" and _dtype_only(node):  # type: ignore[arg-type]
            return  # (`.to(orig_dtype)` moves nothing)
        names = ctx.scratch.get("sparse-names")
        if names is None:  # (once per file, at its first move)
            names = ctx.scratch["sparse-names"] = self._sparse_names(ctx)
        scope = ".".join(d.name.value for d in ctx.enclosing_definitions())
        made = names.get((scope, receiver.value)) or names.get(("", receiver.value))  # type: ignore[union-attr]
        if made is not None:
            ctx.flag(
                node,
                f"`{receiver.value}` is a sparse tensor (from `{made}(...)`): TorchTPU has no "
                f"sparse tensors (moving one raises); move `{receiver.value}.to_dense()` (torch.mm / torch.spmm "
                "take it) if it fits, or keep the sparse product on the CPU",
                code=self.code,
            )

    def _sparse_names(self, ctx: Context) -> dict[tuple[str, str], str]:
        """(scope, name) the file binds to a sparse tensor -> the call that made it: a sparse constructor, or a
        project function returning one (at the sparse positions of its returned tuple). The scope is the dotted
        path of the enclosing defs ("" at module level): pytext's sparse ``x`` of one test is not the batch ``x``
        of another. Read from Python's tree of the whole file: a partial parse leaves statements no rule names
        as text."""
        returns = facts_for(ctx.scratch, ctx.source_text).sparse_returns
        text = ctx.source_text
        if "sparse" not in text and not any(f in text for f in returns):
            return {}
        tree = getattr(ctx, "source_tree", None)
        if tree is None:
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError):
                return {}
        names: dict[tuple[str, str], str] = {}
        todo: list[tuple[ast.AST, str]] = [(tree, "")]
        while todo:
            n, scope = todo.pop()
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and len(n.targets) == 1:
                found: dict[str, str] = {}
                _note(n, returns, found)
                names.update({(scope, k): v for k, v in found.items()})
            inner = f"{scope}.{n.name}".lstrip(".") if isinstance(n, _DEFS) else scope
            todo.extend((c, inner) for c in ast.iter_child_nodes(n))
        return names


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _note(node: ast.Assign, returns: dict[str, tuple[int, ...]], names: dict[str, str]) -> None:
    name = dotted(sparse_source(node.value).func)  # type: ignore[arg-type]
    last = name.rsplit(".", 1)[-1]
    legacy = ".sparse." in f".{name}" and last.endswith("Tensor")
    target = node.targets[0]
    if last in SPARSE_CONSTRUCTORS or legacy or returns.get(last) == ():
        if isinstance(target, ast.Name):
            names[target.id] = name
    elif (positions := returns.get(last)) and isinstance(target, (ast.Tuple, ast.List)):
        for i in positions:
            if i < len(target.elts) and isinstance(target.elts[i], ast.Name):
                names[target.elts[i].id] = name


def _dtype_only(call: cst.Call) -> bool:
    """``x.to(torch.float16)`` / ``x.to(orig_dtype)`` / ``x.to(dtype=...)``: a cast that names no device."""
    if any(a.keyword is not None and a.keyword.value == "device" for a in call.args):
        return False
    if not call.args:
        return True
    first = call.args[0]
    if first.keyword is not None:
        return first.keyword.value == "dtype"
    text = code(first.value)
    return "dtype" in text or text.startswith(
        ("torch.float", "torch.bfloat", "torch.half", "torch.int", "torch.long")
    )
