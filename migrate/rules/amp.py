"""Autocast and GradScaler: CUDA AMP implied fp16, TPU autocast is bf16, which makes the scaler moot."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

import libcst as cst

from .._walk import child_nodes
from ._calls import bind, rebind
from ._helpers import AMP_DEVICE, AUTOCAST, helper
from ._util import arg, code, expr, kwarg, literals, mentions, set_kwarg, string_body, with_body
from .base import Context, Rule, register

_FP16 = frozenset({"torch.float16", "torch.half"})
_FP32 = frozenset({"torch.float32", "torch.float"})
_CUDA_AMP = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
_XLA_AMP = frozenset({"torch_xla.amp.autocast", "torch_xla.amp.autocast_mode.autocast"})
_GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})


#: What shows that a file runs only with a GPU: it puts tensors on CUDA by name (`.cuda()`, `device="cuda"`).
_HARD_CODES_CUDA = re.compile(r"""\.cuda\(|['"]cuda(?::\d+)?['"]""")
#: What does not count as such: comments, and the device argument of an autocast-family call itself (the
#: autocast being migrated named 'cuda' only for autocast: stable-audio-tools' pretransforms).
_NOT_PLACEMENT = re.compile(
    r"""#[^\n]*|\b(?:autocast|custom_fwd|custom_bwd|GradScaler|is_autocast_enabled|get_autocast_dtype)\(\s*"""
    r"""(?:(?:[\w.]+\s*=\s*[\w.]+\s*,\s*)*device_type\s*=\s*|device\s*=\s*)?['"]cuda['"]"""
    r"""|\bpartial\(\s*[\w.]*autocast\s*,\s*['"]cuda['"]"""
)


@lru_cache(maxsize=32)
def _hard_codes_cuda(source: str) -> bool:
    return _HARD_CODES_CUDA.search(_NOT_PLACEMENT.sub("", source)) is not None


def _needs_portable(ctx: Context, orig: cst.CSTNode) -> bool:
    """Whether a rewrite onto "tpu" autocast must keep working where there is no TPU (see _portable)."""
    stmt = ctx.statement()
    decorator = type(stmt) in (cst.FunctionDef, cst.ClassDef) and any(
        d.decorator is orig or _within(d.decorator, orig) for d in stmt.decorators
    )
    # a function of a file that never puts tensors on CUDA by name: it runs wherever its caller does
    library = bool(ctx.enclosing_definitions()) and not _hard_codes_cuda(ctx.source_text)
    return decorator or library or _CPU_PATH.search(ctx.source_text) is not None


def _within(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    """``node`` is ``tree`` or inside it (``@torch.cuda.amp.custom_fwd(cast_inputs=...)``: the reference is the
    call's callee)."""
    return tree is node or any(_within(c, node) for c in child_nodes(tree))


#: What shows that a file also runs where there is no GPU: it names the CPU as a device, tests for CUDA, or takes
#: its device from the caller (cloneofsimo/lora's ``def train(..., device="cuda:0")``, run with ``--device cpu``).
_CPU_PATH = re.compile(
    r"""['"]cpu['"]|\bis_available\(\)|\.is_cuda\b|\bdevice\.type\b|\b(?:no|use)_(?:cuda|gpu)\b"""
    r"""|\bdevice\s*=\s*['"]cuda"""
)


def _portable(ctx: Context, orig: cst.Call, node: cst.Call) -> cst.Call:
    """``torch.autocast("tpu", **rest)`` as ``_tpu_autocast(**rest)`` where the code may run without a TPU: CUDA's
    autocast ran anywhere (switched off without a GPU) while "tpu" is a device type only where TorchTPU is set up,
    so a CPU-only run (tests, CPU inference) would raise at the autocast, or at import for a decorator. Also in
    a function or method of a file that names no device (a loss, a model layer: it runs wherever its caller does).
    Plain where the file has no CPU path otherwise (a CUDA-only script never ran without a GPU)."""
    if not _needs_portable(ctx, orig):
        return node
    positional = [a for a in node.args if a.keyword is None and not a.star]
    if any(a.star == "*" for a in node.args) or len(positional) > 4:
        return node
    names = ("device_type", "dtype", "enabled", "cache_enabled")  # torch.autocast's order
    rest = [
        a.with_changes(keyword=cst.Name(names[i]), equal=_EQ) if a.keyword is None and not a.star else a
        for i, a in enumerate(node.args)
        if not (i == 0 and a.keyword is None and not a.star) and not _is_device_kw(a)
    ]
    chosen = next((a for a in rest if a.keyword is not None and a.keyword.value == "dtype"), None)
    if chosen is not None:
        # the dtype chosen for TPU (bfloat16 for CUDA's float16) is the TPU branch's only: CUDA's autocast
        # elsewhere keeps the dtype as written (a V100 has no bfloat16 autocast)
        written = _written_dtype(ctx, orig)
        if written is None or (code(written) != code(chosen.value) and _dtype_is_fp16(ctx, written)):
            rest = [a.with_changes(keyword=cst.Name("tpu_dtype")) if a is chosen else a for a in rest]
            if written is not None:
                rest.append(cst.Arg(written, keyword=cst.Name("dtype"), equal=_EQ))
    ctx.need_helper(AUTOCAST)
    last = len(rest) - 1
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == last else a for i, a in enumerate(rest)]
    return node.with_changes(func=cst.Name(AUTOCAST), args=args)


def _written_dtype(ctx: Context, orig: cst.Call) -> cst.BaseExpression | None:
    """The dtype the original autocast call names (None: its default)."""
    qname = ctx.qname(orig.func) or ""
    if qname in _PARTIAL:
        given = kwarg(orig, "dtype")
        return given.value if given is not None else None
    if qname in _CUDA_AMP:
        bound = bind(orig, _CUDA_SIGNATURE) or {}
        return bound["dtype"].value if "dtype" in bound else None
    return _orig_value(orig, "dtype", 1)


_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
_PARTIAL = frozenset({"functools.partial"})


def _is_device_kw(a: cst.Arg) -> bool:
    return a.keyword is not None and a.keyword.value == "device_type"


def _dtype_is_fp16(ctx, node: cst.BaseExpression) -> bool:
    return ctx.qname(node) in _FP16 if isinstance(node, (cst.Attribute, cst.Name)) else False


@register
class Autocast(Rule):
    code = "TPU301"
    name = "autocast-to-tpu"
    family = "amp"
    outcome = "warned"
    summary = (
        'Rewrite torch.cuda.amp.autocast / torch_xla.amp.autocast to torch.autocast("tpu", dtype=torch.bfloat16); '
        "CUDA's autocast where the code also runs without a GPU to a local _tpu_autocast(...)."
    )
    rationale = (
        "torch.cuda.amp.autocast defaulted to float16; TPU autocast computes in bfloat16, so an fp16 "
        "request becomes bf16 and a warning says so. A device-type *variable* is left alone: its "
        "source literal is migrated once (TPU101)."
    )
    before = "import torch\n\nwith torch.cuda.amp.autocast():\n    y = model(x)\n"
    after = 'import torch\n\nwith torch.autocast("tpu", dtype=torch.bfloat16):\n    y = model(x)\n'
    calls = _CUDA_AMP | _XLA_AMP | _GENERIC | _PARTIAL
    emits = ("torch.autocast", "torch.bfloat16")

    def call(self, ctx, orig, node, qname):
        if qname in _PARTIAL:
            return self._partial(ctx, orig, node)
        if any(a.star for a in node.args):
            if qname in _CUDA_AMP or qname in _XLA_AMP:
                return self._unpacked(ctx, orig, node, qname)
            return None
        if qname in _CUDA_AMP or qname in _XLA_AMP:
            old = _CUDA_SIGNATURE if qname in _CUDA_AMP else _XLA_SIGNATURE
            args = rebind(
                node,
                old,
                _TORCH_SIGNATURE,
                drop=frozenset({"device"}),
                first=[cst.Arg(cst.SimpleString('"tpu"'))],
            )
            if args is None:
                ctx.flag(
                    orig,
                    f"`{qname}(...)`: its arguments do not map onto torch.autocast; port by hand",
                    code=self.code,
                )
                return None
            new = node.with_changes(func=expr("torch.autocast"), args=args)
            bound = bind(orig, old) or {}
            dtype = bound["dtype"].value if "dtype" in bound else None
            off = (
                "enabled" in bound
                and type(bound["enabled"].value) is cst.Name
                and bound["enabled"].value.value == "False"
            )
            # torch.cuda.amp.autocast defaults to float16; torch_xla's to the device's default (bf16 on TPU);
            # `autocast(enabled=False)` (a region forced to fp32) computes in no dtype at all: it gets none
            if not off and (
                (dtype is None and qname in _CUDA_AMP) or (dtype is not None and _dtype_is_fp16(ctx, dtype))
            ):
                new = set_kwarg(new, "dtype", expr("torch.bfloat16"))
                _note_bf16_region(ctx, orig)
                ctx.report(
                    orig,
                    f'`{qname}` (float16) -> `torch.autocast("tpu", dtype=torch.bfloat16)`: the '
                    "compute dtype changes from fp16 to bf16",
                    code=self.code,
                    outcome="warned",
                )
            else:
                ctx.report(orig, f'`{qname}` -> `torch.autocast("tpu")`', code=self.code, outcome="rewritten")
            ctx.need_import("torch")
            return _portable(ctx, orig, new) if qname in _CUDA_AMP else new
        # torch.autocast / torch.amp.autocast: the device literal is migrated by TPU101/TPU502.
        dev = arg(node, 0, "device_type")
        if dev is None:
            return None
        literal = string_body(dev.value)
        was_cuda = literal == "tpu" and (string_body(arg(orig, 0, "device_type").value) or "").startswith(
            "cuda"
        )
        # A device chosen at run time (device_type=self.device_type) is 'tpu' after the migration; where the file
        # has a GradScaler, TPU302 disables it, and fp16 autocast without loss scaling would underflow.
        runtime = literal is None and mentions(ctx, "GradScaler")
        if literal != "tpu" and not runtime:
            return None
        dt = arg(node, 1, "dtype")
        given = _orig_value(orig, "dtype", 1) or (dt.value if dt is not None else None)
        if was_cuda and isinstance(given, (cst.Attribute, cst.Name)) and ctx.qname(given) in _FP32:
            # lerobot's fastwam heads: CUDA's autocast upcast the region's inputs to float32; TPU autocast takes
            # bf16/fp16 only, warns and switches off, and a bf16 weight then meets an fp32 input
            ctx.flag(
                orig,
                "autocast to float32 has no TPU form (TPU autocast computes in bfloat16 or float16; asked for "
                "float32 it switches itself off and casts nothing): run the region with autocast disabled and "
                "cast its inputs (and weights) to float32 by hand",
                code=self.code,
            )
        off = (enabled := arg(orig, 2, "enabled")) is not None and code(enabled.value) == "False"
        if was_cuda and given is None and not off:
            # `torch.autocast("cuda")` computed in CUDA's default float16; TPU autocast's default is bfloat16
            _note_bf16_region(ctx, orig)
            ctx.report(
                orig,
                "autocast without a dtype: CUDA's default was float16, TPU's is bfloat16: numerics change; "
                "GradScaler is no longer needed",
                code=self.code,
                outcome="warned",
            )
        if dt is not None and _dtype_is_fp16(ctx, _orig_value(orig, "dtype", 1) or dt.value):
            why = (
                "on TPU"
                if literal == "tpu"
                else "(the device is chosen at run time, and the file's GradScaler is disabled for bf16)"
            )
            _note_bf16_region(ctx, orig)
            ctx.report(
                orig,
                f"autocast dtype float16 -> bfloat16 {why}: numerics change; GradScaler is no longer needed",
                code=self.code,
                outcome="warned",
            )
            if dt.keyword is None:
                node = node.with_changes(
                    args=[a.with_changes(value=expr("torch.bfloat16")) if a is dt else a for a in node.args]
                )
            else:
                node = set_kwarg(node, "dtype", expr("torch.bfloat16"))
            return _portable(ctx, orig, node) if was_cuda else node
        return _portable(ctx, orig, node) if was_cuda else None

    def _partial(self, ctx, orig: cst.Call, node: cst.Call) -> cst.Call | None:
        """``partial(autocast, "cuda", enabled=False)`` (vector-quantize-pytorch's fp32 regions): the autocast
        is made later, so the literal alone was renamed and a CPU-only run raised at every forward; where the code
        also runs without a TPU it is ``partial(_tpu_autocast, enabled=False)``."""
        if len(orig.args) < 2 or any(a.star or a.keyword for a in orig.args[:2]):
            return None
        if ctx.qname(orig.args[0].value) not in _GENERIC | _CUDA_AMP:
            return None
        if not (string_body(orig.args[1].value) or "").startswith("cuda"):
            return None
        inner = node.with_changes(func=node.args[0].value, args=node.args[1:])
        new = _portable(ctx, orig, inner)
        if new is inner:
            return None  # (plain "tpu": TPU101 renamed the literal)
        ctx.report(
            orig,
            f"`partial(autocast, '{string_body(orig.args[1].value)}', ...)` -> `partial({AUTOCAST}, ...)` "
            "(the code also runs without a TPU)",
            code=self.code,
            outcome="warned",
        )
        first = node.args[0].with_changes(value=cst.Name(AUTOCAST))
        if not new.args:
            first = first.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(args=[first, *new.args])

    def _unpacked(self, ctx, orig: cst.Call, node: cst.Call, qname: str) -> cst.Call | None:
        """``torch.cuda.amp.autocast(**kwargs)``: the dict holds autocast's own keywords (enabled, dtype,
        cache_enabled), which torch.autocast takes under the same names; left CUDA's, it is silently off on a TPU
        host while its twin queries (``is_autocast_enabled("tpu")``) say on. Positional or ``*args`` arguments
        do not map by name: flagged."""
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if any(a.star == "*" for a in node.args) or len(positional) > (qname in _XLA_AMP):
            ctx.flag(
                orig,
                f"`{qname}(...)` takes unpacked positional arguments: map them onto "
                'torch.autocast("tpu", ...) by hand',
                code=self.code,
            )
            return None
        kept = [
            a for a in node.args if a.star == "**" or (a.keyword is not None and a.keyword.value != "device")
        ]
        new = node.with_changes(func=expr("torch.autocast"), args=[cst.Arg(cst.SimpleString('"tpu"')), *kept])
        dtype = kwarg(orig, "dtype")
        if dtype is not None and _dtype_is_fp16(ctx, dtype.value):
            new = set_kwarg(new, "dtype", expr("torch.bfloat16"))
            _note_bf16_region(ctx, orig)
        spread = next(code(a.value) for a in node.args if a.star == "**")
        unnamed = (
            "the compute dtype changes from float16 to bfloat16"
            if qname in _CUDA_AMP
            else "TPU autocast's default (bfloat16) applies"
        )
        ctx.report(
            orig,
            f'`{qname}(**{spread[:40]})` -> `torch.autocast("tpu", **{spread[:40]})`: the dict\'s keys are '
            f"autocast's own; where it names no dtype, {unnamed}",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return _portable(ctx, orig, new) if qname in _CUDA_AMP else new


#: Tensor methods that keep a tensor's dtype (between a bf16 autocast output and its ``.numpy()``).
_SAME_DTYPE = frozenset(
    {
        "detach",
        "cpu",
        "clone",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "view",
        "reshape",
        "permute",
        "transpose",
        "flatten",
        "data",
        "T",
        "mT",
    }
)


def _note_bf16_region(ctx: Context, orig: cst.Call) -> None:
    """The names a ``with`` block assigns under an autocast this rule made bfloat16 (from CUDA's float16), by
    the function they are in: their tensors are bfloat16 now, which NumPy cannot hold (TPU306)."""
    stack = ctx.statements()
    block = next(
        (
            s
            for s in reversed(stack)
            if type(s) is cst.With and any(item.item is orig for item in s.items)  # type: ignore[attr-defined]
        ),
        None,
    )
    if block is None:
        return
    names: set[str] = set()
    todo: list[cst.CSTNode] = [block.body]
    while todo:
        n = todo.pop()
        if type(n) is cst.Assign and _float_valued(n.value):  # type: ignore[attr-defined]
            for t in n.targets:  # type: ignore[attr-defined]
                _assigned_names(t.target, names)
        elif type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        todo.extend(child_nodes(n))
    defs = [s for s in stack if type(s) is cst.FunctionDef]
    key = id(defs[-1]) if defs else 0
    ctx.scratch.setdefault("bf16-autocast-names", {}).setdefault(key, set()).update(names)  # type: ignore[union-attr]


#: Methods whose result is not a floating tensor of the autocast's dtype (indices, masks, casts, Python values).
_NOT_FLOAT = frozenset(
    {
        "argmax",
        "argmin",
        "argsort",
        "long",
        "int",
        "bool",
        "nonzero",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "topk",
        "sort",
        "max",
        "min",
        "item",
        "tolist",
        "size",
        "numel",
        "to",
        "type",
        "float",
        "double",
        "round",
    }
)


def _float_valued(value: cst.BaseExpression) -> bool:
    """A model's or function's output (``model(x)``, ``self.model(x)[0]``): computed under the autocast, in its
    dtype; not an index, a mask or a cast (``y.argmax(1)``, ``a > b``)."""
    while type(value) is cst.Subscript:
        value = value.value  # type: ignore[attr-defined]
    if type(value) is not cst.Call:
        return False
    func = value.func  # type: ignore[attr-defined]
    return type(func) is cst.Name or (type(func) is cst.Attribute and func.attr.value not in _NOT_FLOAT)


def _assigned_names(target: cst.BaseExpression, into: set[str]) -> None:
    if type(target) is cst.Name:
        into.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for e in target.elements:
            _assigned_names(e.value, into)


@register
class NumpyOfBf16(Rule):
    code = "TPU306"
    name = "numpy-of-bf16-autocast-output"
    family = "amp"
    outcome = "warned"
    summary = (
        "`x.detach().cpu().numpy()` of a value computed under an autocast that TPU301 made bfloat16 -> "
        "`x.detach().cpu().float().numpy()`."
    )
    rationale = (
        "CUDA's float16 autocast gave float16 outputs, which NumPy holds; the TPU's bfloat16 ones raise "
        "TypeError in .numpy() (LTSF-Linear's --use_amp test and predict loops). Only a value assigned in that "
        "autocast block and reaching .numpy() through dtype-keeping methods (detach, cpu, views) is cast: "
        "argmax indices and the like keep their dtype. .float() leaves a float32 tensor as it is."
    )
    before = (
        "import torch\n\n\ndef test(model, x):\n    with torch.cuda.amp.autocast():\n        y = model(x)\n"
        "    return y.detach().cpu().numpy()\n"
    )
    after = (
        "import torch\n"
        "\n"
        "\n"
        "def _tpu_autocast(tpu_dtype=None, **kwargs):\n"
        '    """Added by tpu-migrate: torch.autocast on "tpu" (in tpu_dtype where the migration chose one: bfloat16 for\n'
        "    CUDA's float16). CUDA's autocast also ran where there was no GPU (it switched itself off); \"tpu\" names a\n"
        "    device only where TorchTPU set one up, so elsewhere (a CPU-only or a Mac's run) this is CUDA's autocast as\n"
        '    written, in its own dtype, which switches itself off again (and leaves a CPU autocast around it alone)."""\n'
        '    if getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu":\n'
        "        if tpu_dtype is not None:\n"
        '            kwargs["dtype"] = tpu_dtype\n'
        '        return torch.autocast("tpu", **kwargs)\n'
        '    return torch.autocast("cuda", **kwargs)\n'
        "\n"
        "\n"
        "def test(model, x):\n"
        "    with _tpu_autocast(tpu_dtype=torch.bfloat16):\n"
        "        y = model(x)\n"
        "    return y.detach().cpu().float().numpy()\n"
    )
    requires = ("TPU301",)
    methods = frozenset({"numpy"})
    emits = ("torch.autocast", "torch.bfloat16", "torch.accelerator.current_accelerator")

    def method(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.BaseExpression | None:
        regions = ctx.scratch.get("bf16-autocast-names")
        if orig.args or type(node.func) is not cst.Attribute:
            return None
        if not regions and not _fed_from_fp16_autocast(ctx):
            return None
        root = _dtype_keeping_root(orig.func.value)  # type: ignore[attr-defined]
        if root is None:
            return None
        defs = [s for s in ctx.statements() if type(s) is cst.FunctionDef]
        if root in (regions or {}).get(id(defs[-1]) if defs else 0, ()):  # type: ignore[union-attr]
            why = f"`{root}` is computed under an autocast now bfloat16 (CUDA's was float16)"
        elif defs and (fed := _fed_from_fp16_autocast(ctx).get(defs[-1].name.value, {}).get(root)):
            why = f"`{root}` is handed `{fed}`, computed under an autocast now bfloat16 (CUDA's was float16)"
        else:
            return None
        ctx.report(
            orig,
            f"{why}, which NumPy cannot hold: `.numpy()` -> `.float().numpy()`",
            code=self.code,
            outcome="warned",
        )
        receiver = node.func.value
        return node.with_changes(
            func=node.func.with_changes(
                value=cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("float")))
            )
        )


def _fed_from_fp16_autocast(ctx: Context) -> dict[str, dict[str, str]]:
    """Functions of this module handed, as a positional argument, a value computed under a CUDA float16 autocast
    (TPU301 makes it bfloat16): {function: {parameter: the argument's code}}. instruct-pix2pix's dataset
    generator: ``with torch.autocast("cuda"): ...; x0 = x_samples_ddim[0]; to_pil(x0)``, and ``to_pil`` calls
    ``image.cpu().numpy()``. Read once per file from Python's tree; the function may come before the block."""
    key = "bf16-fed-params"
    if key not in ctx.scratch:
        ctx.scratch[key] = _fed_params(ctx.source_text)
    return ctx.scratch[key]  # type: ignore[return-value]


def _fed_params(source: str) -> dict[str, dict[str, str]]:
    if "autocast" not in source or ".numpy()" not in source:
        return {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    functions = {
        f.name: [a.arg for a in f.args.posonlyargs + f.args.args]
        for f in tree.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    out: dict[str, dict[str, str]] = {}
    for block in ast.walk(tree):
        if not isinstance(block, (ast.With, ast.AsyncWith)):
            continue
        if not any(_fp16_cuda_autocast(item.context_expr) for item in block.items):
            continue
        inside = [n for s in block.body for n in ast.walk(s)]
        names: set[str] = set()
        for _ in range(3):  # (an index of a value assigned further down in the walk: a few rounds settle it)
            for n in inside:
                if isinstance(n, ast.Assign) and _computed(n.value, names):
                    names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        for n in inside:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions:
                params = functions[n.func.id]
                for i, a in enumerate(n.args[: len(params)]):
                    if isinstance(a, ast.Name) and a.id in names:
                        out.setdefault(n.func.id, {})[params[i]] = a.id
    return out


def _fp16_cuda_autocast(call: ast.expr) -> bool:
    """``torch.autocast("cuda")`` / ``torch.cuda.amp.autocast()`` computing in float16 (TPU301 makes it bfloat16)."""
    if not isinstance(call, ast.Call):
        return False
    func = ast.unparse(call.func)
    if not func.endswith("autocast"):
        return False
    device = (
        call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
    )
    cuda = "cuda" in func or (isinstance(device, ast.Constant) and str(device.value).startswith("cuda"))
    kw = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
    fp16 = "dtype" not in kw or "float16" in kw["dtype"] or "half" in kw["dtype"]
    return cuda and fp16 and kw.get("enabled") != "False"


def _computed(value: ast.expr, names: set[str]) -> bool:
    """A value computed in the region: a call's result, or an expression (index, arithmetic) of one."""
    return isinstance(value, ast.Call) or any(
        isinstance(n, ast.Name) and n.id in names for n in ast.walk(value)
    )


def _dtype_keeping_root(value: cst.BaseExpression) -> str | None:
    """The name at the root of ``value`` when everything between keeps its dtype (methods of _SAME_DTYPE,
    subscripts), else None."""
    while True:
        t = type(value)
        if t is cst.Name:
            return value.value  # type: ignore[attr-defined]
        if t is cst.Subscript:
            value = value.value  # type: ignore[attr-defined]
        elif t is cst.Attribute and value.attr.value in _SAME_DTYPE:  # type: ignore[attr-defined]
            value = value.value  # type: ignore[attr-defined]
        elif (
            t is cst.Call
            and type(value.func) is cst.Attribute  # type: ignore[attr-defined]
            and value.func.attr.value in _SAME_DTYPE  # type: ignore[attr-defined]
        ):
            value = value.func.value  # type: ignore[attr-defined]
        else:
            return None


_CUDA_SIGNATURE = "enabled=True, dtype=torch.float16, cache_enabled=True"
_XLA_SIGNATURE = "device, enabled=True, dtype=None, cache_enabled=True"
_TORCH_SIGNATURE = "device_type, dtype=None, enabled=True, cache_enabled=None"


def _orig_value(orig: cst.Call, name: str, index: int) -> cst.BaseExpression | None:
    a = arg(orig, index, name)
    return a.value if a is not None else None


#: FSDP's scaler: its device (first parameter) defaults to "cuda"; it keeps its own class on TPU.
_SHARDED_SCALERS = frozenset(
    {
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    }
)
_SCALERS = frozenset(
    {
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch_xla.amp.GradScaler",
        "torch_xla.amp.grad_scaler.GradScaler",
        *_SHARDED_SCALERS,
    }
)


#: `autocast(..., dtype=<value>)` in a file's text (the value, up to the next comma or parenthesis).
_AUTOCAST_DTYPE = re.compile(r"autocast\((?:[^()]|\([^()]*\))*?\bdtype\s*=\s*([^,)]+)")
_FIXED_DTYPES = frozenset(
    {"torch.bfloat16", "torch.float32", "torch.float", "torch.float16", "torch.half", "None"}
)


def _runtime_autocast_dtype(ctx) -> str | None:
    """The first autocast dtype of the file that is not a literal torch dtype (``dtype=self.amp_dtype``), else
    None: with one, the dtype actually used is known only at run time and may be fp16."""
    key = "amp-runtime-dtype"
    if key not in ctx.scratch:
        found = (m.group(1).strip() for m in _AUTOCAST_DTYPE.finditer(ctx.source_text))
        ctx.scratch[key] = next((d for d in found if d not in _FIXED_DTYPES), None)
    return ctx.scratch[key]  # type: ignore[return-value]


#: An autocast call in a file's text (torch.autocast(, torch.cuda.amp.autocast(, autocast( imported), not get_autocast(.
_AUTOCAST_CALL = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*autocast\s*\(")
#: fp16 in code outside an autocast dtype= (a model cast to half, an fp16 mixed-precision policy).
_FP16_CODE = re.compile(r"\btorch\.(?:float16|half)\b|\.half\(\)")


def _scaler_dtype_unseen(ctx) -> str | None:
    """Why this file cannot show that every scaled loss is bf16 (so the scaler must stay on), else None. Reads the
    whole file's text (module-wide context: a partial parse must hand this rule the full text)."""
    key = "amp-scaler-unseen"
    if key not in ctx.scratch:
        text = ctx.source_text
        if _AUTOCAST_CALL.search(text) is None:
            why = "the file has no autocast: the dtype it scales is chosen in another module (fp16 there needs it)"
        elif _FP16_CODE.search(_AUTOCAST_DTYPE.sub("", text)) is not None:
            why = (
                "the file also computes in float16 outside autocast (torch.float16 / .half()), which needs it"
            )
        else:
            why = None
        ctx.scratch[key] = why
    return ctx.scratch[key]  # type: ignore[return-value]


def _literal_false(arg: cst.Arg | None) -> bool:
    return arg is not None and type(arg.value) is cst.Name and arg.value.value == "False"


@register
class GradScalerRule(Rule):
    code = "TPU302"
    name = "grad-scaler-disabled"
    family = "amp"
    outcome = "warned"
    summary = (
        'Rewrite GradScaler(...) to torch.amp.GradScaler("tpu", enabled=False) (kept as a no-op under bf16).'
    )
    rationale = (
        "bf16 has fp32's exponent range, so loss scaling is pointless; a disabled scaler keeps "
        "scaler.scale/step/update calls working unchanged. An explicit enabled= switch is turned off too where "
        "every autocast of the file runs bf16 (the old expression is named in the warning), and kept elsewhere "
        "(it must be False unless you really train in fp16). Disabled only where the file shows "
        "that every autocast becomes bf16: with no autocast in the file (the dtype is chosen in another module), "
        "a run-time autocast dtype, or fp16 used outside autocast, loss scaling stays on; a scaler for the CPU is "
        "left alone."
    )
    before = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    y = m(x)\n"
    after = (
        'import torch\n\nscaler = torch.amp.GradScaler("tpu", enabled=False)\n'
        "with torch.cuda.amp.autocast():\n    y = m(x)\n"  # (TPU301 makes this autocast bf16)
    )
    calls = _SCALERS
    emits = ("torch.amp.GradScaler",)

    def call(self, ctx, orig, node, qname):
        sharded = qname in _SHARDED_SCALERS
        takes_device = qname.startswith("torch.amp.") or sharded
        if any(a.star for a in node.args):
            return self._spread(ctx, orig, node, qname, takes_device)
        positional = [a for a in node.args if a.keyword is None]
        dev = (
            positional[0] if takes_device and positional else kwarg(node, "device") if takes_device else None
        )
        where = string_body(dev.value) if dev is not None else None
        if where is not None and where.split(":")[0] not in ("cuda", "xla", "tpu"):
            return None  # a scaler for the CPU (or another device) is not CUDA code
        if dev is not None and where is None and type(dev.value) is not cst.FormattedString:
            # skrl's agents: `torch.amp.GradScaler(device=self._device_type, ...)`, the variable their autocast
            # takes too: the scaler already follows the run's device ('tpu' there, 'cpu' on a CPU run)
            return None
        if (
            takes_device
            and dev is not None
            and where == "tpu"
            and (kwarg(node, "enabled") or _runtime_autocast_dtype(ctx) or _scaler_dtype_unseen(ctx))
        ):
            return None  # already migrated
        extra_positional = positional[1:] if takes_device else positional
        if extra_positional:
            ctx.flag(
                orig,
                'GradScaler with positional arguments: rewrite as torch.amp.GradScaler("tpu", enabled=False)',
                code=self.code,
            )
            return None
        kws = [
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for a in node.args
            if a.keyword is not None and a.keyword.value != "device"
        ]
        new = (
            # d2go: `ShardedGradScaler() if fsdp else GradScaler()`: both branches scale on the same device
            set_kwarg(node.with_changes(args=kws), "device", expr('"tpu"'))
            if sharded
            else node.with_changes(
                func=expr("torch.amp.GradScaler"), args=[cst.Arg(cst.SimpleString('"tpu"')), *kws]
            )
        )
        made = 'ShardedGradScaler(device="tpu"' if sharded else 'torch.amp.GradScaler("tpu"'
        runtime = _runtime_autocast_dtype(ctx)
        if kwarg(new, "enabled") is None and runtime is not None:
            # the autocast dtype is chosen at run time (it may be fp16): the scaler stays on, as written
            ctx.report(
                orig,
                f"GradScaler -> {made}): the file's autocast dtype `{runtime}` is chosen at "
                "run time, so loss scaling stays on (needed under fp16, a small cost under bf16)",
                code=self.code,
                outcome="warned",
            )
        elif kwarg(new, "enabled") is None and _scaler_dtype_unseen(ctx) is not None:
            ctx.report(
                orig,
                f"GradScaler -> {made}): loss scaling stays on: {_scaler_dtype_unseen(ctx)} "
                "(under bf16 it is a small cost; disable it there by hand)",
                code=self.code,
                outcome="warned",
            )
        elif kwarg(new, "enabled") is None:
            new = set_kwarg(new, "enabled", expr("False"))
            ctx.report(
                orig,
                f"GradScaler -> {made}, enabled=False): bf16 needs no loss scaling",
                code=self.code,
                outcome="warned",
            )
        elif (
            runtime is None
            and _scaler_dtype_unseen(ctx) is None
            and not _literal_false(kwarg(new, "enabled"))
        ):
            # dreamerv3's `GradScaler(enabled=use_amp)`, nerfstudio's `enabled=use_grad_scaler`: "use mixed
            # precision" switches, while every autocast of the file runs bf16 on TPU: kept on, the scaler scaled
            # bf16 losses with ops TorchTPU does not promise (_amp_foreach_non_finite_check_and_unscale_)
            was = code(kwarg(new, "enabled").value)
            new = set_kwarg(new, "enabled", expr("False"))
            ctx.report(
                orig,
                f"GradScaler -> {made}, enabled=False) (was enabled={was[:60]}): every autocast of this file runs "
                "bf16 on TPU, which needs no loss scaling",
                code=self.code,
                outcome="warned",
            )
        else:
            ctx.report(
                orig,
                f"GradScaler -> {made}, enabled={code(kwarg(new, 'enabled').value)})"
                ": under bf16 the scaler should be disabled",
                code=self.code,
                outcome="warned",
            )
        ctx.need_import("torch")
        return new

    def _spread(self, ctx, orig, node, qname, takes_device):
        """``GradScaler(**loss_scale)`` (mmcv's optimizer hook, beside ``GradScaler()`` and
        ``GradScaler(init_scale=...)``): CUDA's scaler takes no device, so the mapping holds scaler options only
        and the call moves with its twins, its ``enabled`` left to the mapping. A ``*args`` spread, or a spread
        into a scaler that takes a device, may carry the device: flagged, never left silently on CUDA's scaler."""
        first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if takes_device and first is not None and string_body(first.value) is not None:
            return None  # torch.amp.GradScaler("tpu", **kw) (migrated) or another device's scaler: not CUDA's
        xla = qname.startswith("torch_xla.")  # (its scaler takes use_zero_grad, which torch.amp's does not)
        if takes_device or xla or first is not None or any(a.star == "*" for a in node.args):
            ctx.flag(
                orig,
                "GradScaler built from a spread of arguments (they may name CUDA's device, or options torch.amp's "
                "scaler lacks); rewrite as "
                'torch.amp.GradScaler("tpu", ...) by hand',
                code=self.code,
            )
            return None
        ctx.report(
            orig,
            f'GradScaler -> torch.amp.GradScaler("tpu"): loss scaling as `{code(orig)}` says (the mapping decides '
            "`enabled`: under bf16 it can be off)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return node.with_changes(
            func=expr("torch.amp.GradScaler"), args=[cst.Arg(cst.SimpleString('"tpu"')), *node.args]
        )


@register
class SyncfreeOptimizers(Rule):
    code = "TPU303"
    name = "syncfree-optimizers"
    family = "amp"
    outcome = "warned"
    summary = "Rewrite torch_xla.amp.syncfree.SGD/Adam/AdamW to torch.optim.SGD/Adam/AdamW."
    rationale = (
        "The sync-free variants exist to avoid XLA graph breaks with a GradScaler; eager TPU needs neither."
    )
    before = "from torch_xla.amp import syncfree\n\nopt = syncfree.AdamW(params, lr=1e-3)\n"
    after = "import torch\n\nopt = torch.optim.AdamW(params, lr=1e-3)\n"
    refs = frozenset(f"torch_xla.amp.syncfree.{o}" for o in ("SGD", "Adam", "AdamW"))
    emits = ("torch.optim.SGD", "torch.optim.Adam", "torch.optim.AdamW")

    def ref(self, ctx, orig, node, qname):
        new = f"torch.optim.{qname.rsplit('.', 1)[1]}"
        ctx.report(orig, f"`{qname}` -> `{new}`", code=self.code, outcome="warned")
        ctx.need_import("torch")
        return expr(new)


_FP16_NAMES = {"float16": "bfloat16", "fp16": "bf16", "half": "bfloat16", "16-mixed": "bf16-mixed"}
_DEFAULT_IN_HELP = re.compile(r"(?i)(default\W{0,4})(float16|fp16|half|16-mixed)\b")


@register
class Fp16Default(Rule):
    code = "TPU304"
    name = "fp16-option-default"
    family = "amp"
    outcome = "warned"
    summary = (
        "Rewrite an fp16 default of a dtype/precision command-line option ('float16', 'fp16') to bf16 in a file "
        "that autocasts (elsewhere the option is the weights' dtype, and fp16 weights run on TPU)."
    )
    rationale = (
        "Scripts pick the AMP dtype from an option that defaults to float16 on GPUs; TPUs compute in "
        "bfloat16 and fp16 would need a GradScaler. The choices stay as they are."
    )
    before = (
        'import argparse\nimport torch\n\np = argparse.ArgumentParser()\np.add_argument("--dtype", '
        'default="float16", choices=["float32", "bfloat16", "float16"])\nargs = p.parse_args()\n'
        "with torch.autocast(device_type, dtype=getattr(torch, args.dtype)):\n    loss = model(x)\n"
    )
    after = (
        'import argparse\nimport torch\n\np = argparse.ArgumentParser()\np.add_argument("--dtype", '
        'default="bfloat16", choices=["float32", "bfloat16", "float16"])\nargs = p.parse_args()\n'
        "with torch.autocast(device_type, dtype=getattr(torch, args.dtype)):\n    loss = model(x)\n"
    )
    node_types = (cst.Call, cst.SimpleString)

    def visit_node(self, ctx, node):
        if (
            not isinstance(node, cst.Call)
            or not isinstance(node.func, cst.Attribute)
            or node.func.attr.value != "add_argument"
        ):
            return
        names = [string_body(a.value) or "" for a in node.args if a.keyword is None]
        if not any(w in n.lower() for n in names for w in ("dtype", "precision", "amp", "half", "fp16")):
            return
        d = kwarg(node, "default")
        body = string_body(d.value) if d is not None else None
        if body in _FP16_NAMES and not _AMP_IN_FILE.search(ctx.source_text):
            return  # no autocast or scaler here: the option sets the model's dtype (fp16 weights run on TPU)
        if body in _FP16_NAMES and not _accepts(ctx, node, _FP16_NAMES[body]):
            ctx.flag(
                node,
                f"option default '{body}' kept: nothing in this file accepts '{_FP16_NAMES[body]}' (no such "
                "choice, comparison or dtype lookup); add a bf16 path, then make it the default for TPU",
                code=self.code,
            )
        elif body in _FP16_NAMES:
            ctx.claim_string(
                d.value,
                self.code,
                "warned",
                f"option default '{body}' -> '{_FP16_NAMES[body]}' (TPU computes in bfloat16; "
                "the command line can still ask for fp16)",
                value=_FP16_NAMES[body],
            )
            h = kwarg(node, "help")
            text = string_body(h.value) if h is not None else None
            said = _DEFAULT_IN_HELP.search(text) if text else None
            if said and said.group(2) == body:  # the help text names the old default: it follows the new one
                new = text[: said.start(2)] + _FP16_NAMES[body] + text[said.end(2) :]
                ctx.claim_string(
                    h.value, self.code, "warned", "the option's help text follows its new default", value=new
                )

    def leave_node(self, ctx, orig, node):
        if not isinstance(node, cst.SimpleString):
            return None
        claim = ctx.string_claims.get(id(orig))
        if claim is None or claim[0] != self.code or claim[3] is None:
            return None
        ctx.report(orig, claim[2], code=self.code, outcome="warned")
        return with_body(node, claim[3])


#: What makes a dtype option an autocast dtype: the file autocasts or scales losses (else it is the weights').
_AMP_IN_FILE = re.compile(r"\bautocast\b|\bGradScaler\b|\bprecision\s*=|mixed_precision")


def _accepts(ctx, call: cst.Call, value: str) -> bool:
    """Whether the program can take ``value`` for the option: it is one of the ``choices``, the file names it as
    a literal (a comparison, a dict key), or the option is looked up as a torch dtype by name."""
    if value == "bf16-mixed":
        return True  # (Lightning's precision names: the Trainer takes it)
    choices = kwarg(call, "choices")
    if choices is not None:
        return value in {string_body(s) for s in literals(choices.value)}
    text = "\n".join(line for line in ctx.source_text.splitlines() if not line.lstrip().startswith("#"))
    if f"'{value}'" in text or f'"{value}"' in text:
        return True
    return value == "bfloat16" and re.search(r"getattr\(\s*torch\s*,", text) is not None


_CUSTOM = frozenset({f"torch.cuda.amp.{n}" for n in ("custom_fwd", "custom_bwd")}) | frozenset(
    {f"torch.cuda.amp.autocast_mode.{n}" for n in ("custom_fwd", "custom_bwd")}
)
#: Calls that already name CUDA as their device type: TPU101 renames the literal, which fails where there is no
#: TPU (kohya's `@torch.amp.custom_fwd(device_type="cuda")`: the decorated function raised when called on the CPU).
_NAMED = frozenset(
    {
        "torch.amp.custom_fwd",
        "torch.amp.custom_bwd",
        "torch.is_autocast_enabled",
        "torch.get_autocast_dtype",
        "torch.utils.checkpoint._get_autocast_kwargs",
    }
)
#: torch.utils.checkpoint's capture of the autocast state (``device_type="cuda"`` by default), which checkpoint
#: functions copied into projects save in forward and restore in backward (EasyContext's, CogVideo's): the restore
#: becomes TPU autocast, so the capture must read the same device's state.
_AUTOCAST_KWARGS = "torch.utils.checkpoint._get_autocast_kwargs"


def _named_device(orig: cst.Call) -> cst.Arg | None:
    first = orig.args[0] if orig.args and orig.args[0].keyword is None and not orig.args[0].star else None
    return first or kwarg(orig, "device_type")


_QUERIES = {
    "torch.is_autocast_enabled": 'torch.is_autocast_enabled("tpu")',
    "torch.get_autocast_gpu_dtype": 'torch.get_autocast_dtype("tpu")',
}


@register
class AutocastQueries(Rule):
    code = "TPU305"
    name = "autocast-queries"
    family = "amp"
    summary = (
        'Rewrite torch.cuda.amp.custom_fwd/custom_bwd to torch.amp.custom_fwd/custom_bwd(device_type="tpu"), '
        'torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() to their "tpu" forms (through a local '
        "_tpu_amp_device() where the code also runs without a TPU: decorators, libraries, CPU paths)."
    )
    rationale = (
        "Without a device these read CUDA's autocast state, which is never on under TPU autocast: a custom "
        "autograd Function would not cast its inputs and a model would take its fp32 path."
    )
    before = (
        "import torch\n\nclass F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
        "    def forward(ctx, x):\n        return x\n\non = torch.is_autocast_enabled()\n"
    )
    after = (
        "import torch\n\n\n"
        + helper(AMP_DEVICE).source
        + "\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    @torch.amp.custom_fwd(device_type=_tpu_amp_device())\n    def forward(ctx, x):\n        return x\n\n"
        'on = torch.is_autocast_enabled("tpu")\n'
    )
    refs = _CUSTOM
    calls = _CUSTOM | frozenset(_QUERIES) | _NAMED
    words = frozenset({"_get_autocast_kwargs"})
    emits = (
        "torch.amp.custom_fwd",
        "torch.amp.custom_bwd",
        "torch.is_autocast_enabled",
        "torch.get_autocast_dtype",
        "torch.accelerator.current_accelerator",  # (in the _tpu_amp_device helper)
    )

    def _named(self, ctx, orig: cst.Call, node: cst.Call, qname: str):
        """``custom_fwd(device_type="cuda")`` / ``is_autocast_enabled("cuda")``: CUDA's autocast named by a literal;
        where the code also runs without a TPU it names ``_tpu_amp_device()`` instead of a bare "tpu"."""
        given = _named_device(orig)
        if given is None or not (string_body(given.value) or "").startswith("cuda"):
            return None
        device = _device_type(ctx, orig)
        if device == '"tpu"':
            return None  # (TPU101 renames the literal)
        mine = _named_device(node)
        ctx.report(orig, f"`{qname}(...'cuda'...)` -> device type {device}", code=self.code)
        return node.with_changes(
            args=[a.with_changes(value=expr(device)) if a is mine else a for a in node.args]
        )

    def ref(self, ctx, orig, node, qname):
        if ctx.is_called(orig):
            return None
        last = qname.rsplit(".", 1)[1]
        device = _device_type(ctx, orig)
        ctx.report(orig, f"`{qname}` -> `torch.amp.{last}(device_type={device})`", code=self.code)
        ctx.need_import("torch")
        return expr(f"torch.amp.{last}(device_type={device})")

    def call(self, ctx, orig, node, qname):
        if qname in _NAMED and orig.args:
            return self._named(ctx, orig, node, qname)
        if qname == _AUTOCAST_KWARGS:
            if node.args:
                return None
            device = _device_type(ctx, orig)
            ctx.report(
                orig,
                f"`_get_autocast_kwargs()` (CUDA's state) -> `_get_autocast_kwargs({device})`",
                code=self.code,
            )
            return node.with_changes(args=[cst.Arg(expr(device))])
        if qname in _QUERIES:
            if node.args:  # (is_autocast_enabled(device_type) already names its device)
                return None
            if qname == "torch.is_autocast_enabled" and _guards_fp16_cast(ctx, orig):
                ctx.flag(
                    orig,
                    "`torch.is_autocast_enabled()` (CUDA's autocast, float16) guards a cast to float16: TPU autocast "
                    "is bfloat16, so asking the TPU's state would force float16 outputs into a bfloat16 model; kept "
                    "as CUDA's (off on the TPU: float32 outputs). To follow TPU autocast, cast to "
                    '`torch.get_autocast_dtype("tpu")` under `torch.is_autocast_enabled("tpu")`',
                    code=self.code,
                )
                return None
            new = _QUERIES[qname].replace('"tpu"', _device_type(ctx, orig))
            ctx.report(orig, f"`{qname}()` -> `{new}`", code=self.code)
            return expr(new)
        if any(a.star or a.keyword is None for a in node.args):
            ctx.flag(orig, f"`{qname}(...)` with positional arguments: port by hand", code=self.code)
            return None
        last = qname.rsplit(".", 1)[1]
        device = _device_type(ctx, orig)
        ctx.report(orig, f"`{qname}(...)` -> `torch.amp.{last}(device_type={device}, ...)`", code=self.code)
        ctx.need_import("torch")
        first = cst.Arg(
            expr(device),
            keyword=cst.Name("device_type"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        return node.with_changes(func=expr(f"torch.amp.{last}"), args=[first, *node.args])


_FP16_CAST = re.compile(r"\btorch\.(?:float16|half)\b|\.half\(\s*\)|[\"']float16[\"']")


def _guards_fp16_cast(ctx: Context, orig: cst.Call) -> bool:
    """The autocast query is (part of) an ``if`` / conditional test whose taken branch casts to float16
    (GPT-SoVITS' DoubleSwish: ``if x.dtype == torch.float16 or torch.is_autocast_enabled(): y = y.to(torch.float16)``)."""
    for stmt in reversed(ctx.statements()):
        if type(stmt) is cst.If and _within(stmt.test, orig):  # type: ignore[attr-defined]
            return _FP16_CAST.search(code(stmt.body)) is not None  # type: ignore[attr-defined]
    stmt = ctx.statement()
    return stmt is not None and _within(stmt, orig) and _FP16_CAST.search(code(stmt)) is not None


def _device_type(ctx, orig: cst.CSTNode) -> str:
    """``"tpu"``, or ``_tpu_amp_device()`` where the code also runs without a TPU (see _portable): a
    ``custom_fwd(device_type="tpu")`` decorator fails at import on a CPU-only machine (VoiceCraft's, CogVideo's
    autograd Functions), ``is_autocast_enabled("tpu")`` raises there, where CUDA's answered False."""
    if _needs_portable(ctx, orig):
        ctx.need_helper(AMP_DEVICE)
        return "_tpu_amp_device()"
    return '"tpu"'
