"""The literal-rewriting machinery shared by the device-string rules (TPU101, TPU401, TPU502).

String rewrites are not local: a script may set ``device = "cuda"`` and later test ``"cuda" in
device``. A literal rule therefore rewrites matching literals everywhere, and the contextual rules
(comparisons, command-line options, device-keyed dicts) only decide how each one is reported.
"""

from __future__ import annotations

import os
import re
from typing import ClassVar

import libcst as cst

from .._foreign import third_party
from .._walk import child_nodes
from ..flow import cuda_state
from ..project import facts_for
from . import _helpers
from ._util import code, literals, mentions, string_body, with_body
from .base import Context, Rule
from .cuda_api import DEVICE_LIMITED_LIBRARIES, cuda_only_module, device_limited, imported_modules
from .frameworks import framework_knob_strings

_ARGPARSE_METHODS = frozenset({"add_argument", "set_defaults"})
#: Other command-line parsers' options (their defaults are the program's, as argparse's) and choice types.
CLI_OPTIONS = frozenset({"click.option", "click.argument", "typer.Option", "typer.Argument"})
CLI_CHOICES = frozenset({"click.Choice"})
_COMPARE_METHODS = frozenset({"startswith", "endswith"})
COMPARISON_CODE = "TPU102"
#: An indented import of a library with CPU and CUDA kernels only (a cheap test before walking functions).
#: Libraries whose objects hold a program's own settings (a device stored there is the program's, migrated).
_SETTINGS_LIBRARIES = frozenset(
    {
        "omegaconf",
        "hydra",
        "yaml",
        "easydict",
        "ml_collections",
        "addict",
        "munch",
        "box",
        "attrdict",
        "dotmap",
    }
)
#: Other array frameworks: a function importing one (skrl's JAX config class, beside its PyTorch one) names that
#: framework's devices ("cuda:0" is jax.devices("cuda")[0] there), not torch's.
_OTHER_FRAMEWORKS = ("jax", "jaxlib", "flax", "tensorflow", "paddle", "mindspore", "mxnet", "cupy")


def _keeps_device_names(mod: str) -> bool:
    """Importing ``mod`` makes a function's device strings another library's (CUDA-only kernels, another
    framework)."""
    return device_limited(mod) or mod.split(".")[0] in _OTHER_FRAMEWORKS


_LIMITED_IMPORT_WORDS = re.compile(
    r"(?m)^[ \t]+(?:import|from)[ \t]+(?:"
    + "|".join(
        sorted({re.escape(m.split(".")[0]) for m in DEVICE_LIMITED_LIBRARIES} | set(_OTHER_FRAMEWORKS))
    )
    + r")\b"
)
ARGPARSE_CODE = "TPU103"
#: A call that creates a process group (a method so named, OpenRLHF's vLLM ``WorkerWrap.init_process_group(...,
#: backend="nccl")`` for ray's collectives, is a definition: it creates none by its name).
_CREATES_GROUP = re.compile(r"^(?![ \t]*#).*?(?<!def )\b(?:init_process_group|new_group)\s*\(", re.M)


def _text_only(node: cst.CSTNode) -> cst.SimpleString | None:
    """The plain literal an f-string without placeholders equals (``f"cuda"`` is ``"cuda"``), else None."""
    if not isinstance(node, cst.FormattedString) or not node.parts:
        return None
    if not all(isinstance(p, cst.FormattedStringText) for p in node.parts):
        return None
    text = "".join(p.value for p in node.parts)  # type: ignore[union-attr]
    prefix = node.start[:-1].replace("f", "").replace("F", "")
    quote = node.start[-1]
    if "{" in text or "}" in text or "\\" in text or quote in text or node.end != quote:
        return None
    return cst.SimpleString(f"{prefix}{quote}{text}{quote}")


def creates_group(source: str) -> bool:
    """Whether the file creates a process group itself (else a backend name is a framework's data); the local
    replacements tpu-migrate added (which create one on demand) do not count."""
    found = len(_CREATES_GROUP.findall(source))
    if found:
        for h in _helpers.all_helpers():
            if f"def {h.name}(" in source or f"class {h.name}" in source:
                found -= len(_CREATES_GROUP.findall(h.source))
    return found > 0


DICT_KEY_CODE = "TPU104"


#: Device/backend names of other accelerators: a function that names one of them dispatches on the device
#: type (framework internals, multi-device ladders), and its 'cuda'/'nccl' names the CUDA path.
OTHER_DEVICES = frozenset(
    {"xla", "tpu", "npu", "hpu", "xpu", "mlu", "musa", "sdaa", "neuron", "hccl", "ccl", "xccl", "tpu_dist"}
)
_WORDS = "|".join(sorted(OTHER_DEVICES | {"cuda", "nccl"}, key=len, reverse=True))
_QUOTED = re.compile(rf"""['"]({_WORDS})(?::\d+)?['"]""")
#: The ordinal slot of a device-string template filled at run time: '{}', '{0}', '{rank}', '{:d}', '{0:d}' (.format)
#: and '%d' / '%s' / '%i' (%); every form of the same run-time ordinal (hifi-gan wrote 'cuda:{:d}'.format(rank)).
ORDINAL_SLOT = r"\{\w*(?::d)?\}|%[dis]"


#: A TODO line tpu-migrate wrote (its text quotes device names: they are not the program's).
_OWN_TODO = re.compile(r"^[ \t]*# TODO\(tpu-migrate [^\n]*$", re.M)


def _names_in(ctx: Context, node: cst.CSTNode) -> frozenset[str]:
    """Quoted device/backend names in a def or class (cached per file)."""
    cache: dict[int, frozenset[str]] = ctx.scratch.setdefault("literal-scopes", {})  # type: ignore[assignment]
    found = cache.get(id(node))
    if found is None:
        found = cache[id(node)] = frozenset(_QUOTED.findall(_OWN_TODO.sub("", code(node))))
    return found


def _is_accelerator_class(node: cst.CSTNode) -> bool:
    """A framework's accelerator class: named as one (``CUDAAccelerator``) or built on one (``(Accelerator)``);
    not a class that only mentions the word (xtuner's ``RayAcceleratorWorker`` sets up process groups)."""
    if not isinstance(node, cst.ClassDef):
        return False
    return node.name.value.lower().endswith("accelerator") or any(
        "accelerator" in code(b.value).lower() for b in node.bases
    )


def _is_enum_class(node: cst.CSTNode) -> bool:
    """``class RNGType(BaseEnum)``, ``class Device(str, Enum)``: its string values are keys."""
    return isinstance(node, cst.ClassDef) and any("enum" in code(b.value).lower() for b in node.bases)


def kept_reason(ctx: Context, body: str, others: frozenset[str]) -> str | None:
    """Why a device literal must be flagged, not rewritten, in the code around it (None: rewrite it).

    Inside a framework's accelerator class the name is a registry key (renaming 'cuda' to 'tpu' collides with
    the framework's own TPU accelerator), as it is inside an Enum; in a def that names other accelerators the literal is one branch of
    a dispatch on the device type (renaming it duplicates or steals the TPU branch).
    """
    if ctx.scratch.get("literal-others") is None:
        ctx.scratch["literal-others"] = bool(_QUOTED.search(ctx.source_text)) and any(
            w in ctx.source_text for w in OTHER_DEVICES
        )
    scopes = ctx.enclosing_definitions()
    if any(_is_accelerator_class(s) for s in scopes):
        return f"'{body}' is a device name inside an accelerator class (a registry key)"
    if any(_is_enum_class(s) for s in scopes):
        return (
            f"'{body}' is the value of an Enum member (a key: renamed, two members such as CUDA and XLA "
            "would share one value and become aliases)"
        )
    if not ctx.scratch["literal-others"]:
        return None
    fn = next((s for s in reversed(scopes) if isinstance(s, cst.FunctionDef)), None)
    if fn is None:
        return None
    seen = sorted(_names_in(ctx, fn) & others)
    if seen:
        return (
            f"'{body}' is one branch of code that dispatches on the device type (it also names "
            f"{', '.join(repr(w) for w in seen)})"
        )
    return None


#: Words that name a device type or a process-group backend (anything else in a display is a name list).
DEVICE_WORDS = frozenset(
    {
        "cpu",
        "cuda",
        "mps",
        "meta",
        "xla",
        "tpu",
        "xpu",
        "npu",
        "hpu",
        "mlu",
        "musa",
        "sdaa",
        "neuron",
        "ipu",
        "mtia",
        "gpu",
        "auto",
        "lazy",
        "vulkan",
        "privateuseone",
        "nccl",
        "gloo",
        "mpi",
        "ucc",
        "hccl",
        "ccl",
        "xccl",
        "tpu_dist",
        "openxla",
        "inductor",
        "eager",
        "aot_eager",
        "cudagraphs",
    }
)
_ATTRIBUTE_BUILTINS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
#: Mapping methods whose first argument is a key (``d.get("cuda")`` reads data, like ``d["cuda"]``).
_KEY_METHODS = frozenset({"get", "pop", "setdefault"})
#: Words a list of accepted device values holds beside device names (not devices themselves).
_ACCEPTED_ALIASES = frozenset({"auto", "gpu"})


def accepted_values(cmp: cst.Comparison, display: cst.List | cst.Tuple | cst.Set) -> bool:
    """``device not in {"auto", "cpu", "cuda", "gpu"}``: a membership test against the values a setting accepts
    (aliases such as 'auto' or 'gpu' beside device names)."""
    return any(type(c.operator) in (cst.In, cst.NotIn) for c in cmp.comparisons) and bool(
        {string_body(e.value) for e in display.elements} & _ACCEPTED_ALIASES
    )


_ENV_READS = frozenset({"os.environ.get", "os.getenv", "os.environ.__getitem__"})


def _name_list(display: cst.List | cst.Tuple | cst.Set) -> bool:
    """``{"contiguous", "cuda", "half", "to"}``: a display of strings holding an identifier that is no device or
    backend lists method or attribute names; its 'cuda' is a name too. A display that also holds other values
    (EasyOCR's test inputs ``[polys, 64, '', 'greedy', 5, 'cuda']``, a call's arguments) is a record, not a list of
    names."""
    if any(type(e.value) is not cst.SimpleString for e in display.elements):
        return False
    bodies = (string_body(e.value) for e in display.elements)
    return any(b is not None and b.isidentifier() and b not in DEVICE_WORDS for b in bodies)


_ERROR_NAMES = frozenset({"e", "err", "error", "exc", "exception", "ex"})


def _error_text(node: cst.CSTNode) -> bool:
    """``str(e)``, ``str(err).lower()``, ``repr(exc)``: the text of an exception (a CUDA error says 'cuda')."""
    while (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("lower", "upper", "strip")
    ):
        node = node.func.value
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value in ("str", "repr")
        and len(node.args) == 1
        and isinstance(node.args[0].value, cst.Name)
        and node.args[0].value.value.lower() in _ERROR_NAMES
    )


#: Calls whose string arguments are parts of a file path (Deformable-DETR's setup.py globs its ``src/cuda``
#: folder): a "cuda" among them names a folder, never a device.
_PATH_CALLS = frozenset(
    {"os.path.join", "glob.glob", "glob.iglob", "pathlib.Path", "pathlib.PurePath", "os.path.exists"}
)


def _device_built(ctx: Context, node: cst.FormattedString) -> bool:
    """``f"cuda{idx}"`` with no colon is a device only where its statement builds one from it (esm's
    ``torch.device(f'cuda{device_idx}' if use_cuda else 'cpu')``), and has no other part."""
    stmt = ctx.statement()
    return len(node.parts) == 2 and stmt is not None and "torch.device(" in code(stmt)


#: Keywords that name another runtime's execution provider, never a torch device (wenet's ONNX benchmark:
#: ``provider="cuda"``, compared with "cuda" where the session is made).
_PROVIDER_KEYWORDS = frozenset({"provider", "providers", "execution_provider", "execution_providers"})


#: String methods that keep a value's origin (``sys.argv[1].lower()``).
_TEXT_METHODS = frozenset({"lower", "upper", "strip", "casefold", "lstrip", "rstrip"})


def _external(ctx: Context, node: cst.CSTNode, seen: frozenset[str] = frozenset()) -> bool:
    """A value read from outside the file: ``os.environ[...]``, ``os.getenv(...)``, ``cfg["device"]``, or the text
    of an exception. ``seen``: the names already followed (LitServe's ``accelerator = accelerator.lower()`` binds a
    name to itself)."""
    if isinstance(node, cst.Call):
        if (  # opt['datasets']['train'].get('prefetch_mode'): a key of a nested config mapping
            type(node.func) is cst.Attribute
            and node.func.attr.value == "get"
            and type(node.func.value) is cst.Subscript
            and node.args
            and string_body(node.args[0].value) is not None
        ):
            return _external(ctx, node.func.value, seen)
        if type(node.func) is cst.Attribute and node.func.attr.value in _TEXT_METHODS:
            return _external(ctx, node.func.value, seen)  # sys.argv[1].lower(): the same outside text
        return ctx.qname(node.func) in _ENV_READS or _error_text(node)
    if isinstance(
        node, cst.Name
    ):  # a local read once from outside: `mode = cfg.get('mode')` ... `mode == 'cuda'`
        if node.value in seen:
            return False
        value = _only_binding(ctx, node.value)
        return value is not None and _external(ctx, value, seen | {node.value})
    if isinstance(node, cst.Subscript):
        if ctx.qname(node.value) in ("os.environ", "sys.argv"):
            return True  # (RVC's extract_f0.py: `mode = sys.argv[1].lower()`, a mode its launcher passes)
        return (
            len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
            and string_body(node.slice[0].slice.value) is not None
        )
    return False


#: A flag that means "use the accelerator" (``use_cuda``, ``args.gpu``), not CUDA-only state.
_ACCELERATOR_FLAG = re.compile(r"(?i)(?:use_|with_|enable_|is_|on_|no_)?(?:cuda|gpus?)")
#: The qualified name of an OpenMMLab config's constructor: mmcv's or mmengine's ``Config`` (or a copy of mmcv).
_OPENMMLAB_CONFIG = re.compile(r"(?:^|\.)(?:mmcv|mmengine)(?:\.\w+)*\.Config(?:\.fromfile|\.fromstring)?$")
#: ``from mmcv import Config`` (or mmcv.utils, mmengine.config, a vendored mmcv), or ``import mmcv``.
_OPENMMLAB_CONFIG_IMPORT = re.compile(
    r"(?m)^\s*from\s+[\w.]*\b(?:mmcv|mmengine)\b[\w.]*\s+import\s+[^\n]*\bConfig\b|^\s*import\s+(?:mmcv|mmengine)\b"
)


def _only_binding(ctx: Context, name: str) -> cst.BaseExpression | None:
    """The value of the one assignment of ``name`` in the enclosing function, else None (one walk per function:
    the table of its plain ``x = value`` bindings, a name bound any other way marked None)."""
    fn = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
    if fn is None:
        return None if ctx.enclosing_definitions() else _module_binding(ctx, name)
    tables = ctx.scratch.setdefault("local-bindings", {})
    table = tables.get(id(fn))  # type: ignore[union-attr]
    if table is None:
        table = {}
        for n in walk_code(fn.body):
            if type(n) is cst.Assign:
                for t in n.targets:
                    if type(t.target) is cst.Name:
                        key = t.target.value
                        table[key] = n.value if key not in table else None
            elif type(n) in (cst.AugAssign, cst.AnnAssign, cst.For) and type(n.target) is cst.Name:  # type: ignore[union-attr]
                table[n.target.value] = None  # type: ignore[union-attr]
        tables[id(fn)] = table  # type: ignore[index]
    return table.get(name)


def _module_binding(ctx: Context, name: str) -> cst.BaseExpression | None:
    """The value of the one top-level ``name = value`` line of the file (RVC's ``mode = sys.argv[1].lower()``),
    read from the text: the partial parse may not hold that statement. Else None."""
    table = ctx.scratch.get("module-bindings")
    if table is None:
        table = ctx.scratch["module-bindings"] = {}
        for m in _TOP_ASSIGN.finditer(ctx.source_text):
            table[m.group(1)] = m.group(2) if m.group(1) not in table else None  # type: ignore[index]
    text = table.get(name)  # type: ignore[union-attr]
    if not text:
        return None
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return None


#: A one-line assignment of a name at the top level: ``mode = sys.argv[1].lower()``.
_TOP_ASSIGN = re.compile(r"(?m)^([A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*([^\n#]+?)[ \t]*(?:#.*)?$")


def _negated_cuda_check(ctx: Context, node: cst.BaseExpression) -> cst.Call | None:
    """The ``torch.cuda.is_available()`` call of ``not torch.cuda.is_available()`` (or of ``torch.cuda.device_count()
    == 0`` / ``< 1``), else None."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = node.expression
        if type(inner) is cst.Call and ctx.qname(inner.func) == "torch.cuda.is_available":
            return inner
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and type(node.left) is cst.Call:
        op, right = node.comparisons[0].operator, node.comparisons[0].comparator
        if ctx.qname(node.left.func) == "torch.cuda.device_count" and type(right) is cst.Integer:
            if (type(op) is cst.Equal and right.value == "0") or (
                type(op) is cst.LessThan and right.value == "1"
            ):
                return node.left
    return None


def _compared_strings(node: cst.BaseExpression) -> list[cst.SimpleString]:
    """The strings a test compares with: ``x == "cuda"``, ``"cuda" in (a, b)``, ``x.startswith("cuda")``."""
    if isinstance(node, cst.Comparison):
        parts = [node.left, *(c.comparator for c in node.comparisons)]
        found = [p for p in parts if type(p) is cst.SimpleString]
        for p in parts:
            if isinstance(p, (cst.Tuple, cst.List, cst.Set)):
                found += [e.value for e in p.elements if type(e.value) is cst.SimpleString]
        return found
    if (
        isinstance(node, cst.Call)
        and type(node.func) is cst.Attribute
        and node.func.attr.value == "startswith"
        and node.args
        and type(node.args[0].value) is cst.SimpleString
    ):
        return [node.args[0].value]
    return []


#: A patch target naming torch.cuda in a string (``patch("pkg.mod.torch.cuda.is_available")``).
_TEST_DEF = re.compile(r"test_|_test$")


def _arg_uses(body: cst.CSTNode, name: str) -> int:
    """How many times ``name`` is passed as a call's argument itself in ``body``."""
    return sum(
        1
        for n in walk_code(body)
        if type(n) is cst.Call
        for a in n.args
        if type(a.value) is cst.Name and a.value.value == name
    )


def _raises_at_end(node: cst.If) -> bool:
    """The if/elif chain ends in ``else: raise ...`` (a name it does not know is an error)."""
    rest = node.orelse
    while isinstance(rest, cst.If):
        rest = rest.orelse
    if not isinstance(rest, cst.Else):
        return False
    last = rest.body.body[-1] if rest.body.body else None
    return type(last) is cst.SimpleStatementLine and type(last.body[0]) is cst.Raise


def _device_name_test(test: cst.BaseExpression) -> str | None:
    """The name a test compares with 'cuda' (``d.startswith("cuda")``, ``d == "cuda"``), else None."""
    if (
        type(test) is cst.Call
        and type(test.func) is cst.Attribute
        and test.func.attr.value == "startswith"
        and type(test.func.value) is cst.Name
        and len(test.args) == 1
        and string_body(test.args[0].value) == "cuda"
    ):
        return test.func.value.value
    if (
        type(test) is cst.Comparison
        and type(test.left) is cst.Name
        and len(test.comparisons) == 1
        and type(test.comparisons[0].operator) is cst.Equal
        and string_body(test.comparisons[0].comparator) == "cuda"
    ):
        return test.left.value
    return None


def _beside_cuda(
    ctx: Context, orig: cst.CSTNode, node: cst.List | cst.Tuple | cst.Set, rule: str
) -> cst.CSTNode:
    """The list with 'tpu' right after 'cuda' (the same quotes; the new element takes 'cuda''s comma)."""
    elements: list[cst.BaseElement] = []
    for e in node.elements:
        if string_body(e.value) == "cuda":  # type: ignore[attr-defined]
            quote = e.value.value[0]  # type: ignore[attr-defined]
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            elements += [
                e.with_changes(comma=comma),
                e.with_changes(value=cst.SimpleString(f"{quote}tpu{quote}")),
            ]
        else:
            elements.append(e)
    ctx.report(orig, "the device names that answer True get 'tpu' beside 'cuda' (the rest raise)", code=rule)
    return node.with_changes(elements=elements)


def _tpu_branch(ctx: Context, orig: cst.If, node: cst.If, name: str, rule: str) -> cst.If:
    ctx.report(orig, f"`{name}` naming 'tpu' gets its own answer beside CUDA's (the rest raise)", code=rule)
    ctx.need_import("torch")
    branch = cst.If(
        test=cst.parse_expression(f'{name}.startswith("tpu")'),
        body=cst.IndentedBlock(
            [cst.SimpleStatementLine([cst.Return(cst.parse_expression(_helpers.TPU_PRESENT))])]
        ),
        orelse=node.orelse,
    )
    return node.with_changes(orelse=branch)


_CUDA_PATCH_TARGET = re.compile(r"""["']((?:[\w]+\.)*torch\.cuda\.\w+)["']""")


#: A test's patch of a torch.cuda function, by name or by object (``monkeypatch.setattr(torch.cuda, "is_available",
#: ...)``, ``mocker.patch("torch.cuda.is_available")``, ``@patch.object(torch.cuda, "device_count")``).
_CUDA_SETATTR = re.compile(
    r"""(?:setattr|patch)\(\s*["']((?:\w+\.)*torch\.cuda\.\w+)["']|(?:setattr|patch\.object)\(\s*torch\.cuda\s*,\s*["'](\w+)["']"""
)


def _mocked_cuda(ctx: Context) -> str | None:
    """The torch.cuda function a test file patches by name, else None. (Module-wide context: the whole
    file's text, read once per file.)"""
    if "mocked-cuda" not in ctx.scratch:
        m = _CUDA_PATCH_TARGET.search(getattr(ctx, "source_text", ""))
        ctx.scratch["mocked-cuda"] = m.group(1) if m else None
    return ctx.scratch["mocked-cuda"]  # type: ignore[return-value]


_CUDA_TESTS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})


def _branches_of(node: cst.If) -> list[cst.CSTNode]:
    return [node.body] + ([node.orelse] if node.orelse is not None else [])


def device_call_key(key: cst.BaseExpression | None) -> cst.SimpleString | None:
    """The string of a ``torch.device("cuda")`` dict key, else None."""
    if (
        type(key) is cst.Call
        and code(key.func) == "torch.device"
        and len(key.args) == 1
        and key.args[0].keyword is None
        and type(key.args[0].value) is cst.SimpleString
    ):
        return key.args[0].value
    return None


def _device_choice(value: cst.BaseExpression) -> cst.SimpleString | None:
    """The device literal of ``torch.device``'s first argument: ``"cuda"``, or the first branch of ``"cuda" if
    ok else "cpu"`` (whose ordinal argument then goes with it: the CPU's index means nothing either)."""
    if isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.SimpleString):
        value = value.body
    return value if isinstance(value, cst.SimpleString) else None


def _unresolved_cuda_check(ctx: Context, test: cst.BaseExpression) -> str | None:
    """The text of a ``<name>.cuda.is_available()`` call in ``test`` whose name resolves to no import: a parameter
    of a def around it (a marimo cell's ``def _(torch):``), or, in a file with ``from ... import *``, a name the
    file binds nowhere (ElegantRL's ``th``, from a module the repository does not hold), else None."""
    params = {
        p.name.value
        for s in ctx.statements()
        if type(s) is cst.FunctionDef
        for p in (*s.params.params, *s.params.posonly_params, *s.params.kwonly_params)  # type: ignore[attr-defined]
    }
    if mentions(ctx, "import *") and "cuda" in code(test):
        table = getattr(ctx, "table", None)
        params |= {
            n.value
            for n in _names_under(test)
            if table is not None and not table.lookup(n.value, list(getattr(ctx, "_scopes", [])))[0]
        }
    if not params:
        return None
    todo: list[cst.CSTNode] = [test]
    while todo:
        n = todo.pop()
        if (
            type(n) is cst.Call
            and type(n.func) is cst.Attribute
            and n.func.attr.value == "is_available"
            and type(n.func.value) is cst.Attribute
            and n.func.value.attr.value == "cuda"
            and type(n.func.value.value) is cst.Name
            and n.func.value.value.value in params
            and ctx.qname(n.func) is None
        ):
            return code(n)
        todo.extend(child_nodes(n))
    return None


def _names_under(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []
    todo = [node]
    while todo:
        n = todo.pop()
        if type(n) is cst.Name:
            out.append(n)  # type: ignore[arg-type]
        todo.extend(child_nodes(n))
    return out


def _sets_device_map(node: cst.CSTNode) -> bool:
    """The code writes a device_map: ``x["device_map"] = ...``, ``device_map = ...`` or ``f(device_map=...)``."""
    for n in walk_code(node):
        if type(n) is cst.Arg and n.keyword is not None and n.keyword.value == "device_map":
            return True
        if type(n) is cst.AssignTarget:
            t = n.target
            if type(t) is cst.Name and t.value == "device_map":
                return True
            if type(t) is cst.Subscript and any(
                type(e.slice) is cst.Index and string_body(e.slice.value) == "device_map" for e in t.slice
            ):
                return True
    return False


#: Calls whose second positional argument (or ``name=``) is an attribute's name.
_ATTRIBUTE_NAME_CALLS = frozenset({"setattr", "getattr", "hasattr", "delattr"})


def _keep_attribute_names(ctx: Context, node: cst.Call) -> None:
    """``monkeypatch.setattr(torch.version, "cuda", "13.2")``, ``getattr(torch, "cuda")``: the string names an
    attribute, not a device; renamed, the call raises AttributeError or reads another object. Kept silently."""
    f = node.func
    name = f.value if type(f) is cst.Name else f.attr.value if type(f) is cst.Attribute else ""
    if name not in _ATTRIBUTE_NAME_CALLS and not (type(f) is cst.Attribute and name == "object"):
        return  # (`mock.patch.object(torch, "cuda")` too)
    positional = [a for a in node.args if a.keyword is None and not a.star]
    named = [a for a in node.args if a.keyword is not None and a.keyword.value == "name"]
    for a in positional[1:2] + named:
        if type(a.value) is cst.SimpleString:
            ctx.claim_string(a.value, "", "rewritten", "", value=None)


def _string_choices(value: cst.BaseExpression) -> list[cst.SimpleString] | None:
    """The literals a value is one of (``"cuda"``, ``"cuda" if ok else "cpu"``), or None for any other value."""
    if type(value) is cst.SimpleString:
        return [value]  # type: ignore[list-item]
    if type(value) is cst.IfExp:
        body, orelse = _string_choices(value.body), _string_choices(value.orelse)  # type: ignore[attr-defined]
        return None if body is None or orelse is None else body + orelse
    return None


def _functions_importing_limited(ctx: Context) -> frozenset[int]:
    """ids of the functions whose body (nested ones included) imports a library with CPU and CUDA kernels only,
    found in one walk of the module (each function walked on its own was quadratic in the nesting)."""
    found = ctx.scratch.get("limited-import-functions")
    if found is None:
        out: set[int] = set()
        todo: list[tuple[cst.CSTNode, tuple[int, ...]]] = [(ctx.module, ())] if ctx.module is not None else []
        while todo:
            n, fns = todo.pop()
            t = type(n)
            if t is cst.Import or t is cst.ImportFrom:
                if any(_keeps_device_names(m) for m in imported_modules(n)):  # type: ignore[arg-type]
                    out.update(fns)
                continue
            # (a class defined in a function is its own program part: skrl's config builds a PyTorch, a JAX and
            # a Warp class in one __init__, and only the Warp one imports warp)
            inner = (*fns, id(n)) if t is cst.FunctionDef else () if t is cst.ClassDef else fns
            todo.extend((c, inner) for c in child_nodes(n))
        found = ctx.scratch["limited-import-functions"] = frozenset(out)
    return found  # type: ignore[return-value]


#: An import inside a block (a function's, mostly): ``    import cutlass``, ``    from triton import jit``.
_INDENTED_IMPORT = re.compile(r"^[ \t]+(?:import|from)[ \t]+([\w.]+)", re.M)


def cuda_only_functions(ctx: Context) -> frozenset[int]:
    """ids of the functions that run a CUDA-only stack wherever they run: their body imports one outside any
    ``try`` or ``if`` (axolotl's cutlass wrappers: ``def _helpers(): import cutlass ...``), or calls a name the file imports
    from a project module built on one (``ext = load_ext()``, the package building ``.cu`` sources), or calls a
    function of this file that does (``_helpers()``). Their device strings and ``.cuda()`` are that stack's."""
    found = ctx.scratch.get("cuda-only-functions")
    if found is not None:
        return found  # type: ignore[return-value]
    path = getattr(ctx, "path", None)
    facts = facts_for(ctx.scratch, ctx.source_text)
    key = os.path.abspath(path) if path else ""
    imported_names = facts.cuda_only_names.get(key, {})
    nested = facts.nested_cuda_only.get(key, {})
    if (
        not imported_names
        and not nested
        and not any(cuda_only_module(m.group(1), path) for m in _INDENTED_IMPORT.finditer(ctx.source_text))
    ):
        found = ctx.scratch["cuda-only-functions"] = frozenset()  # (no function of this file can be one)
        return found
    direct: set[int] = set()
    calls: dict[int, set[str]] = {}
    by_name: dict[str, int] = {}
    todo: list[tuple[cst.CSTNode, int | None, bool]] = [(ctx.module, None, False)] if ctx.module else []
    while todo:
        n, fn, guarded = todo.pop()
        t = type(n)
        if t is cst.FunctionDef:
            by_name.setdefault(n.name.value, id(n))  # type: ignore[attr-defined]
            fn, guarded = id(n), False
        elif t is cst.Try or t is cst.If or t is cst.IfExp:
            guarded = (
                True  # (an optional path: LLaMA2-Accessory's `if args.quant: from ...quant import quantize`)
            )
        elif fn is not None and not guarded and (t is cst.Import or t is cst.ImportFrom):
            mods = imported_modules(n)  # type: ignore[arg-type]
            rel = (
                "." * len(n.relative) + (code(n.module) if n.module else "") if t is cst.ImportFrom else None
            )  # type: ignore[attr-defined]
            if any(cuda_only_module(m, path) for m in mods) or (rel is not None and rel in nested):
                direct.add(fn)
            continue
        elif fn is not None and t is cst.Call and type(n.func) is cst.Name:  # type: ignore[attr-defined]
            name = n.func.value  # type: ignore[attr-defined]
            if name in imported_names and not guarded:
                direct.add(fn)
            if not guarded:
                calls.setdefault(fn, set()).add(name)
        todo.extend((c, fn, guarded) for c in child_nodes(n))
    out = set(direct)
    grown = True
    while grown:
        grown = False
        for fn, names in calls.items():
            if fn not in out and any(by_name.get(m) in out for m in names):
                out.add(fn)
                grown = True
    found = ctx.scratch["cuda-only-functions"] = frozenset(out)
    return found


def _file_has(ctx: Context, pattern: re.Pattern[str]) -> bool:
    """Whether the file's text matches ``pattern``, searched once per file (rules ask per function: searching
    the whole text each time is quadratic in the file's size; a big file's group passes share the answer)."""
    key = ("file-has", pattern.pattern)
    found = ctx.text_memo.get(key)
    if found is None:
        found = ctx.text_memo[key] = pattern.search(ctx.source_text) is not None
    return bool(found)


#: A subscript compared with a device or backend literal (``out["device"] == "cuda"``; every LiteralRule's
#: pattern starts with one of these words): a cheap text test before a test's round-trip walk
#: (LiteralRule._data_round_trip).
_SUBSCRIPT_COMPARED = re.compile(
    r"\][\s)\\]*(?:[=!<>]=|[<>]|\bin\b|\bnot\s+in\b|\bis\b(?:\s+not\b)?)[\s(\\]*[rRbBuU]*['\"](?:cuda|nccl|xla)"
)


def walk_code(node: cst.CSTNode):
    """Every node of ``node`` outside nested definitions (they run elsewhere)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if n is node or not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            todo.extend(child_nodes(n))


#: A membership test of a name against a display that holds a device word: ``impl in ['ref', 'cuda']``.
_SELECTOR_LIST = re.compile(r"""\bin\s*[\[({][^\])}\n]*['"](?:cuda|xla|nccl)['"]""")
#: A keyword argument named for the GPU (use_gpu=, cuda=, on_gpu=): a switch of code out of sight.
_GPU_SWITCH = re.compile(r"(?i)gpu|cuda")


#: A name for a framework's accelerator setting (LitServe's ``accelerator``, ``self._accelerator``).
_ACCELERATOR_NAME = re.compile(r"(?i)^_*accelerator(?:_name|_type)?$")


def accelerator_name(parts: list[cst.CSTNode]) -> str | None:
    """The name of a comparison's operand that holds a framework's accelerator setting, else None."""
    for p in parts:
        last = p.attr.value if type(p) is cst.Attribute else p.value if type(p) is cst.Name else None
        if last is not None and _ACCELERATOR_NAME.match(last):
            return code(p)
    return None


def _tested_strings(value: cst.CSTNode):
    """The literals a device test inside ``value`` compares with: ``d == "cuda"``, ``d.startswith("cuda")``
    (through ``not``, ``and``/``or`` and parentheses)."""
    todo = [value]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.Comparison):
            for part in (n.left, *(c.comparator for c in n.comparisons)):
                yield from _walk_strings(part)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.args:
            if n.func.attr.value in _COMPARE_METHODS:
                yield from _walk_strings(n.args[0].value)
        elif isinstance(n, cst.UnaryOperation):
            todo.append(n.expression)
        elif isinstance(n, cst.BooleanOperation):
            todo += [n.left, n.right]


def _walk_strings(node: cst.CSTNode):
    """Literal strings directly in ``node`` or in list/tuple/set displays inside it."""
    if isinstance(node, cst.SimpleString):
        yield node
    elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for el in node.elements:
            yield from _walk_strings(el.value)


#: Libraries whose ``device=`` argument is a torch device, passed on to torch as it is (their ``device_map=``
#: is their own vocabulary and stays flagged).
TORCH_DEVICE_LIBRARIES = frozenset(
    {"transformers", "diffusers", "timm", "sentence_transformers", "peft", "trl", "kornia", "einops"}
)


def _chosen_strings(node: cst.CSTNode):
    """Literal strings a value can be: itself, both branches of ``a if c else b``, both sides of and/or,
    the elements of a display, the values of a dict."""
    if isinstance(node, cst.IfExp):
        yield from _chosen_strings(node.body)
        yield from _chosen_strings(node.orelse)
    elif isinstance(node, cst.BooleanOperation):
        yield from _chosen_strings(node.left)
        yield from _chosen_strings(node.right)
    elif isinstance(node, cst.Dict):  # device_map={"": "cuda:0"}
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                yield from _chosen_strings(el.value)
    else:
        yield from _walk_strings(node)


#: Words of code that walks a TorchScript graph (device constants are matched there as text).
_GRAPH_WORDS = re.compile(r"findAllNodes|findNode\(|inlined_graph|prim::|\.graph\.nodes\(")


def _at_import_time(ctx: Context, node: cst.CSTNode) -> bool:
    """``node`` runs whenever its module is imported: in a parameter default of the innermost def, in a class
    body, or in a statement of the module's own body (not inside an ``if``/``for``/``try``) of a file that is
    not a script (no ``__main__`` block, no ``parse_args()`` at module level: a script's top level runs as
    the program, whose CUDA code needed the device anyway)."""
    defs = ctx.enclosing_definitions()
    if defs and type(defs[-1]) is cst.FunctionDef:
        return any(n is node for n in walk_code(defs[-1].params))  # (not inside a lambda default)
    if defs:
        return True
    if len(ctx.statements()) != 1:
        return False
    return not mentions(ctx, "__main__") and not _file_has(ctx, _SCRIPT_ARGS)


#: What only NCCL's branch of a program can hold (device_ids, CUDA streams, NCCL_ variables, its own group).
_NCCL_OWN = re.compile(r"device_ids|[Ss]tream|NCCL|nccl|ProcessGroupNCCL|cuda_graph|CUDAGraph")

#: A module-level ``args = parser.parse_args()``: the file is a script.
_SCRIPT_ARGS = re.compile(r"^[^\s#].*\.parse(?:_known)?_args\(", re.M)


def _conditional(ctx: Context, node: cst.CSTNode) -> bool:
    """``node`` is evaluated only when a test holds (a branch of ``x if test else y``, the right side of an
    ``and``/``or``): ``torch.device("tpu") if torch.accelerator.is_available() else ...`` builds it only where a
    device is there, as it was."""
    stmts = ctx.statements()
    path: list[cst.CSTNode] = []

    def find(n: cst.CSTNode) -> bool:
        path.append(n)
        if n is node or any(find(c) for c in child_nodes(n)):
            return True
        path.pop()
        return False

    if not stmts or not find(stmts[-1]):
        return False
    for parent, child in zip(path, path[1:], strict=False):
        if type(parent) is cst.IfExp and child is not parent.test:
            return True
        if type(parent) is cst.BooleanOperation and child is parent.right:
            return True
    return False


#: Literal GPU ordinals in a file's text: 'cuda:3', .cuda(3), torch.device('cuda', 3), set_device(3)
_LITERAL_ORDINALS = re.compile(
    r"""["'](?:cuda|xla):(\d+)["']|\.cuda\(\s*(?:device\s*=\s*)?(\d+)\s*\)|device\(\s*["']cuda["']\s*,\s*(\d+)\s*\)"""
    r"|set_device\(\s*(\d+)\s*\)"
)
#: Several devices in one process however written: run-time ordinals, device lists, data/model parallel wrappers
_MANY_DEVICES = re.compile(
    r"""cuda:(?:%|\{)|["']cuda:["']\s*\+|device_ids|DataParallel|device_count\(\)|\.to\(\s*\d|gpu_ids"""
)


def _sole_ordinal(ctx: Context) -> int | None:
    """The one GPU ordinal a file names, where it names it once and nothing suggests several devices
    (``torch.device("cuda:3" if torch.cuda.is_available() else "cpu")`` in a one-GPU notebook: the author's free
    GPU, which on TorchTPU is the process's own "tpu"); else None."""
    if "sole-ordinal" not in ctx.scratch:
        text = ctx.source_text
        found = [int(next(g for g in m.groups() if g is not None)) for m in _LITERAL_ORDINALS.finditer(text)]
        # once: a second mention (an assertion reading it back, a second placement) is data to keep in step
        many = len(found) != 1 or _MANY_DEVICES.search(text) is not None
        ctx.scratch["sole-ordinal"] = None if many else found[0]
    return ctx.scratch["sole-ordinal"]  # type: ignore[return-value]


#: pytest's test-case makers: their device strings are cases handed to the test, not a device for pytest
_TEST_CASES = frozenset(
    {
        "pytest.mark.parametrize",
        "pytest.param",
        "parameterized.parameterized_class",
        "parameterized.parameterized",
        "parameterized.parameterized.expand",
        "parameterized.param",
        # the `parametrize` package (xtuner's tests: `@parametrize.parametrize("device,tol", [("cuda", 1e-2)])`)
        # and absl's parameterized test cases
        "parametrize.parametrize",
        "absl.testing.parameterized.parameters",
        "absl.testing.parameterized.named_parameters",
        "absl.testing.parameterized.product",
    }
)


class LiteralRule(Rule):
    """Shared machinery: a regex on string bodies, a replacement, and the contextual claims."""

    pattern: ClassVar[re.Pattern[str]]
    replacement: ClassVar[str]
    what: ClassVar[str] = "device string"
    #: Device names whose presence in the same def means this literal is one branch of a device dispatch.
    others: ClassVar[frozenset[str]] = OTHER_DEVICES
    #: Keep the literal in argparse ``choices`` (launch scripts and CI pass it) and add the new value beside it.
    keep_in_choices: ClassVar[bool] = True
    #: Flag, never rewrite, the literal in comparisons (a backend test gates code for that backend only).
    flag_compared: ClassVar[bool] = False
    #: A word every literal of this rule holds (a cheap per-file text test before a walk).
    word: ClassVar[str] = ""
    node_types = (
        cst.SimpleString,
        cst.FormattedString,
        cst.Comparison,
        cst.IfExp,
        cst.Call,
        cst.DictElement,
        cst.List,
        cst.Tuple,
        cst.Set,
        cst.Subscript,
        cst.BinaryOperation,
        cst.FunctionDef,
        cst.If,
        cst.With,
        cst.BooleanOperation,
        cst.Assign,
        cst.AnnAssign,
        cst.Param,
    )

    def _autocast_device_expression(self, ctx: Context, call: cst.Call) -> None:
        """``torch.autocast(device_type="cuda" if not mps else "mps", dtype=torch.float16)`` (tortoise-tts): a device
        chosen by an expression, which TPU301 cannot turn into its import-safe TPU autocast; renamed alone, the
        'tpu' branch kept float16 and raised on a CPU-only host even when disabled. Kept (CUDA's autocast switches
        itself off where there is no GPU) and flagged."""
        if ctx.qname(call.func) not in (
            "torch.autocast",
            "torch.amp.autocast",
            "torch.amp.autocast_mode.autocast",
        ):
            return
        first = call.args[0] if call.args and call.args[0].keyword is None else None
        dev = first or next(
            (a for a in call.args if a.keyword is not None and a.keyword.value == "device_type"), None
        )
        if dev is None or type(dev.value) in (cst.SimpleString, cst.Name, cst.Attribute):
            return
        for n in walk_code(dev.value):
            if type(n) is cst.SimpleString and self.new_body(string_body(n)) is not None:
                ctx.claim_string(
                    n,
                    self.code,
                    "flagged",
                    f"{self.what} '{string_body(n)}' is chosen by an expression as autocast's device: kept (CUDA's "
                    "autocast switches itself off where there is no GPU); for TPU autocast, choose 'tpu' with "
                    "dtype=torch.bfloat16 where torch.accelerator.current_accelerator() is a TPU",
                    value=None,
                )

    def _literal_type_choices(
        self, orig: cst.AnnAssign | cst.Param, node: cst.AnnAssign | cst.Param
    ) -> cst.CSTNode | None:
        """``device_type: Literal["cpu", "cuda", "mps"] = "cuda"`` (nerfstudio's machine config, read by tyro): the
        default renamed to 'tpu' must be one of the type's choices, or the CLI refuses its own default; the
        renamed value joins the ``Literal`` (its "cuda" stays: other code may still pass it)."""
        before = orig.value if type(orig) is cst.AnnAssign else orig.default  # type: ignore[union-attr]
        after = node.value if type(node) is cst.AnnAssign else node.default  # type: ignore[union-attr]
        annotation = node.annotation
        if (
            annotation is None
            or type(before) is not cst.SimpleString
            or type(after) is not cst.SimpleString
            or before.value == after.value
            or type(annotation.annotation) is not cst.Subscript
        ):
            return None
        sub = annotation.annotation
        if code(sub.value).rsplit(".", 1)[-1] != "Literal":
            return None
        bodies = [string_body(e.slice.value) for e in sub.slice if isinstance(e.slice, cst.Index)]
        new = string_body(after)
        if new in bodies or string_body(before) not in bodies:
            return None
        last = sub.slice[-1]
        added = cst.SubscriptElement(
            cst.Index(after.with_changes(value=before.value.replace(string_body(before) or "", new or "", 1)))
        )
        elements = [
            *sub.slice[:-1],
            last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            added,
        ]
        return node.with_changes(
            annotation=annotation.with_changes(annotation=sub.with_changes(slice=elements))
        )

    def _beside_cuda_state(self, ctx: Context, node: cst.BooleanOperation) -> None:
        """``use_cuda_graph and device == "cuda"`` (GPT-SoVITS' inference_webui: the branch builds a CUDA graph
        runner): a device test and-ed with CUDA-only state gates CUDA's own path; renamed, a TPU host would take
        it. Kept and flagged (a flag meaning "use the GPU", ``use_cuda``/``use_gpu``, is not such state)."""
        leaves = [
            o.value if type(o) is cst.Name else o.attr.value
            for o in (node.left, node.right)
            if type(o) is cst.Name or type(o) is cst.Attribute
        ]
        state = next((w for w in leaves if cuda_state(w) and not _ACCELERATOR_FLAG.fullmatch(w)), None)
        if state is None:
            return
        for o in (node.left, node.right):
            for s in _tested_strings(o):
                if self.new_body(string_body(s)) is not None:
                    ctx.claim_string(
                        s,
                        COMPARISON_CODE,
                        "flagged",
                        f"{self.what} '{string_body(s)}' is tested together with `{state}` (CUDA-only state): "
                        "the branch is CUDA's own path; kept; give the TPU its own branch if it needs one",
                        value=None,
                    )

    def _missing_cuda_request(self, ctx: Context, node: cst.BooleanOperation) -> None:
        """``device == "cuda" and not torch.cuda.is_available()`` (skorch's get_map_location falls back to the CPU
        for a net saved on CUDA; its tests skip the 'cuda' case they parametrize): the question is whether CUDA
        was asked for where it is missing, and on a TPU host the answer is still yes. Renamed, both sides would
        ask about 'tpu' instead: the fallback is lost and the 'cuda' case runs. Both kept, the check flagged."""
        if self.replacement != "tpu" or not isinstance(node.operator, cst.And):
            return
        sides, todo = [], [node]
        while todo:
            n = todo.pop()
            if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, cst.And) and not n.lpar:
                todo += [n.right, n.left]
            else:
                sides.append(n)
        guards = [g for side in sides if (g := _negated_cuda_check(ctx, side)) is not None]
        if not guards:
            return
        asked = [
            s
            for side in sides
            if _negated_cuda_check(ctx, side) is None
            for s in _compared_strings(side)
            if self.new_body(string_body(s)) is not None and (string_body(s) or "").startswith("cuda")
        ]
        if not asked:
            return
        for s in asked:
            ctx.claim_string(s, "", "rewritten", "", value=None)
        keep = ctx.scratch.setdefault("cuda-guards", {})
        for g in guards:
            keep[id(g)] = (  # type: ignore[index]
                f"it asks whether {string_body(asked[0])!r} was requested where CUDA is missing "
                "(a fallback or a skip that still holds on a TPU host); kept with the 'cuda' it compares"
            )

    def _support_table(self, ctx: Context, node: cst.If) -> None:
        """A predicate that answers per device name and raises for a name it does not know (lerobot's
        ``is_torch_device_available``: ``if d.startswith("cuda"): return torch.cuda.is_available() ... else:
        raise ValueError("Unknown device")``; ``is_amp_available``: ``if d in ["cuda", "xpu", "cpu"]: return
        True ... else: raise``). The migration hands such code 'tpu' (the program's defaults, a device picker):
        it gets its own answer, a TPU test beside CUDA's, or 'tpu' beside 'cuda' in the list that answers True.
        (A table that already names 'tpu', a second run's input, keeps its 'cuda' without a word.)"""
        if not _raises_at_end(node):
            return
        body = node.body.body
        single = body[0].body[0] if len(body) == 1 and type(body[0]) is cst.SimpleStatementLine else None
        if type(single) is not cst.Return or single.value is None:
            return
        test = node.test
        if (  # `if d in ["cuda", "xpu", "cpu"]: return True`
            type(test) is cst.Comparison
            and len(test.comparisons) == 1
            and type(test.comparisons[0].operator) is cst.In
            and type(test.comparisons[0].comparator) in (cst.List, cst.Tuple, cst.Set)
            and code(single.value) == "True"
        ):
            table = test.comparisons[0].comparator
            names = [e.value for e in table.elements]  # type: ignore[attr-defined]
            cuda = [v for v in names if string_body(v) == "cuda"]
            if cuda:
                if not any(string_body(v) == "tpu" for v in names):
                    ctx.scratch.setdefault("support-lists", set()).add(id(table))  # type: ignore[union-attr]
                ctx.claim_string(cuda[0], "", "rewritten", "", value=None)  # (kept: 'tpu' goes beside it)
            return
        name = _device_name_test(test)
        value = single.value
        if name is None or type(value) is not cst.Call or ctx.qname(value.func) != "torch.cuda.is_available":
            return
        if f'{name}.startswith("tpu")' not in code(node):
            ctx.scratch.setdefault("support-ladders", {})[id(node)] = name  # type: ignore[index]
        # CUDA's own answer for the name 'cuda' stays CUDA's, without a TODO (the TPU one is the branch added)
        ctx.scratch.setdefault("cuda-answers", set()).add(id(value))  # type: ignore[union-attr]
        for n in walk_code(test):  # (kept: the TPU branch goes beside it, no TODO asks for one)
            if type(n) is cst.SimpleString and string_body(n) == "cuda":
                ctx.claim_string(n, "", "rewritten", "", value=None)

    def _default_for_another_library(self, ctx: Context, node: cst.FunctionDef) -> None:
        """``def __init__(self, name, device="cuda"): self.model = whisperx.load_model(name, device)`` (VoiceCraft's
        predictor): a parameter's default read only as an argument of another library's calls is that library's
        device name (faster-whisper takes cpu/cuda/auto): kept and flagged, like the same literal written there."""
        params = [*node.params.params, *node.params.kwonly_params]
        defaults = {
            p.name.value: p.default
            for p in params
            if type(p.default) is cst.SimpleString and self.new_body(string_body(p.default)) is not None
        }
        if not defaults:
            return
        uses = {name: 0 for name in defaults}
        handed: dict[str, set[str]] = {name: set() for name in defaults}
        local = {  # `from whisperx import load_model` inside the function: names the module table lacks
            (a.asname.name.value if a.asname else a.name.value): f"{code(n.module)}.{code(a.name)}"
            for n in walk_code(node.body)
            if type(n) is cst.ImportFrom
            and n.module is not None
            and not n.relative
            and type(n.names) is not cst.ImportStar
            for a in n.names
            if type(a.name) is cst.Name and (a.asname is None or type(a.asname.name) is cst.Name)
        }
        for n in walk_code(node.body):
            if type(n) is cst.Name and n.value in uses:
                uses[n.value] += 1
            elif type(n) is cst.Call:
                callee = ctx.qname(n.func) or (local.get(n.func.value) if type(n.func) is cst.Name else None)
                foreign = (
                    third_party(callee, ctx.path)
                    and (callee or "").split(".")[0] not in TORCH_DEVICE_LIBRARIES
                )
                for a in n.args:
                    if type(a.value) is cst.Name and a.value.value in handed:
                        handed[a.value.value].add(callee if foreign else "")
        for name, default in defaults.items():
            callees = handed[name]
            if uses[name] and len(callees) and "" not in callees and sum(1 for _ in callees) <= uses[name]:
                if _arg_uses(node.body, name) == uses[name]:
                    ctx.claim_string(
                        default,
                        self.code,
                        "flagged",
                        f"{self.what} '{string_body(default)}' is the default of `{name}`, read only by "
                        f"`{sorted(callees)[0]}`, a library that is not torch: its device names are its own; "
                        "kept: give it a device it supports (often 'cpu') or its own TPU option",
                        value=None,
                    )

    def _data_round_trip(self, ctx: Context, node: cst.FunctionDef) -> None:
        """A test that hands ``{"device": "cuda"}`` to the code under test and asserts it reads ``== "cuda"`` back
        from the result (lerobot's pipeline overrides): the string is the test's data, stored and compared, not
        a placement; renamed on one side only, the assert fails on every machine. Kept on both sides. So is a
        keyword argument named as the key read back (Megatron's ``HyperCommGrid(..., backend="nccl")`` and
        ``assert kwargs["backend"] == "nccl"`` on the mocked call)."""
        keys: set[str] = set()
        compared = False
        for c in walk_code(node.body):
            if (
                type(c) is cst.Comparison
                and type(c.left)
                is cst.Subscript  # (read back from a result mapping: `.device.type` is a test)
                and any(
                    type(t.comparator) is cst.SimpleString
                    and self.new_body(string_body(t.comparator)) is not None
                    for t in c.comparisons
                )
            ):
                compared = True
                keys.update(
                    string_body(e.slice.value) or "" for e in c.left.slice if type(e.slice) is cst.Index
                )
        if not compared:
            return
        for n in walk_code(node.body):
            if type(n) is cst.DictElement:
                value: cst.BaseExpression = n.value
            elif type(n) is cst.Arg and n.keyword is not None and n.keyword.value in keys:
                value = n.value
            else:
                continue
            if type(value) is cst.SimpleString and self.new_body(string_body(value)) is not None:
                ctx.claim_string(
                    value,
                    COMPARISON_CODE,
                    "flagged",
                    f"{self.what} '{string_body(value)}' is data this test hands on and then compares as read "
                    "back: kept on both sides",
                    value=None,
                )

    def _patched_cuda_function(self, ctx: Context, fn: cst.FunctionDef) -> None:
        """``monkeypatch.setattr(torch.cuda, "is_available", lambda: flag)`` in a test function (doctr's CLI tests,
        then ``assert resolve(value) == torch.device("cuda:0" if flag else "cpu")``): the function tests what the
        code does with CUDA under the patch, as the patched ``with`` block does; its device names are kept."""
        m = _CUDA_SETATTR.search(code(fn))
        if m is None:
            return
        target = m.group(1) or f"torch.cuda.{m.group(2)}"
        self._keep_patched(
            ctx,
            fn.body,
            f"in a test that patches `{target}`",
            " (patch torch.accelerator's answer where that code now asks it)",
        )

    def _keep_patched(self, ctx: Context, body: cst.CSTNode, where: str, advice: str = "") -> None:
        """Keep (flagged) every device name in ``body``, code that tests what its subject does with CUDA."""
        for n in walk_code(body):
            if type(n) is cst.SimpleString and self.new_body(string_body(n)) is not None:
                ctx.claim_string(
                    n,
                    COMPARISON_CODE,
                    "flagged",
                    f"{self.what} '{string_body(n)}' is used {where}: it tests what the code does with CUDA; "
                    f"kept, migrate the test with the code it patches{advice}",
                    value=None,
                )

    def _patched_cuda_block(self, ctx: Context, node: cst.With) -> None:
        """``with patch("torch.cuda.is_available", return_value=False): get_safe_torch_device("cuda")``: the block
        tests what the code under test does with CUDA (lerobot's test_device_utils): its device names are the
        test's subject, kept as written (renamed, the expected ValueError never comes)."""
        target = next(
            (
                m.group(1)
                for item in node.items
                for n in walk_code(item.item)
                if type(n) is cst.SimpleString and (m := _CUDA_PATCH_TARGET.fullmatch(n.value))
            ),
            None,
        )
        if target is None:
            return
        self._keep_patched(ctx, node.body, f"inside a block that patches `{target}`")

    def _default_branch(self, ctx: Context, node: cst.If) -> None:
        """``if is_xpu_available(): x.to("xpu") else: x.to("cuda")``: the test picks another accelerator and the
        plain ``else`` is the default path, the one a TPU host takes; its CUDA literals are that path's device,
        not one branch of a dispatch (the dispatch rule would keep them, and the TPU host would run 'cuda')."""
        if any(ctx.qname(c.func) in _CUDA_TESTS for c in walk_code(node.test) if type(c) is cst.Call):
            # `elif torch.cuda.is_available(): model.to("cuda")`: the branch of a check that TPU201 migrates (or
            # keeps, with its region frozen): its literals follow the check, not the dispatch rule
            body = [
                n
                for n in walk_code(node.body)
                if type(n) is cst.SimpleString and self.new_body(string_body(n))
            ]
            ctx.scratch.setdefault("literal-default-branch", set()).update(id(n) for n in body)  # type: ignore[union-attr]
            return
        if not isinstance(node.orelse, cst.Else) or not _helpers.OTHER_ACCELERATOR.search(code(node.test)):
            return
        mine = [
            n
            for n in walk_code(node.orelse.body)
            if type(n) is cst.SimpleString and self.new_body(string_body(n))
        ]
        theirs = any(
            type(n) is cst.SimpleString and self.new_body(string_body(n)) for n in walk_code(node.body)
        )
        if mine and not theirs:
            default: set[int] = ctx.scratch.setdefault("literal-default-branch", set())  # type: ignore[assignment]
            default.update(id(n) for n in mine)

    def _placement_test(self, ctx: Context, node: cst.If) -> None:
        """``if device != "cuda": kwargs["device_map"] = {"": device}``: the literal says which device
        accelerate's automatic placement (device_map="auto") can fill, not which device to use; renamed, "tpu"
        would take the automatic path, which places on CUDA or the CPU (never 'tpu'), while the inputs go to
        'tpu' (LLaVA's load_pretrained_model). Kept and flagged."""
        # The test's device strings first (a few nodes): only then walk both branches for a device_map write
        # (every `if` of a file, nested ones again and again, was walked for nothing before).
        strings = self._tested_literals(node.test)
        if not strings or not any(_sets_device_map(b) for b in _branches_of(node)):
            return
        for s in strings:
            ctx.claim_string(
                s,
                COMPARISON_CODE,
                "flagged",
                f"'{string_body(s)}' here picks accelerate's automatic placement (device_map='auto'), which "
                "fills CUDA or the CPU, never 'tpu': kept, so that 'tpu' takes the explicit placement",
                value=None,
            )

    def _tested_literals(self, test: cst.BaseExpression) -> list[cst.SimpleString]:
        """The strings of this rule's vocabulary that a comparison test holds (none for another kind of test)."""
        if type(test) is not cst.Comparison:
            return []
        return [
            p
            for part in (test.left, *(c.comparator for c in test.comparisons))
            for p in _walk_strings(part)
            if self.new_body(string_body(p)) is not None
        ]

    def _plain_backend_branch(self, ctx: Context, node: cst.Comparison) -> bool:
        """``if backend == "nccl":`` whose equal branch holds nothing of NCCL's own (device_ids, streams, NCCL_
        variables): it picks the GPU path of the program (picotron's set_device + device choice), or a gloo
        group for CPU tensors NCCL cannot reduce (GroundingDINO's), both of which the TPU backend needs as
        well; renamed with the backend that reaches it (kept, the CPU device or WORLD group is chosen on TPU)."""
        stmt = ctx.statement()
        if type(stmt) is not cst.If or stmt.test is not node or len(node.comparisons) != 1:
            return False
        equal = type(node.comparisons[0].operator) is cst.Equal
        branch = stmt.body if equal else stmt.orelse
        return branch is None or _NCCL_OWN.search(code(branch)) is None

    def _placement_choice(self, ctx: Context, node: cst.IfExp) -> None:
        """``device_map = {"": device.index if device.type == "cuda" else device.type}`` (AutoGPTQ): the test
        chooses what accelerate reads, and an integer there is a CUDA ordinal; renamed, "tpu" would hand
        accelerate (and safetensors) ordinal 0, which is CUDA's. Kept and flagged, as for an ``if``."""
        strings = self._tested_literals(node.test)
        stmt = ctx.statement() if strings else None
        if stmt is None or type(stmt) is not cst.SimpleStatementLine or not _sets_device_map(stmt):
            return
        for s in strings:
            ctx.claim_string(
                s,
                COMPARISON_CODE,
                "flagged",
                f"'{string_body(s)}' here chooses what goes into accelerate's device_map, which reads an "
                "integer as a CUDA ordinal and never places on 'tpu': kept; load without device_map and move the "
                "model with .to('tpu')",
                value=None,
            )

    def _keep_unresolved_choice(self, ctx: Context, node: cst.If | cst.IfExp, check: str) -> None:
        """``"cuda" if torch.cuda.is_available() else "cpu"`` where ``torch`` is not a module this file imports
        (a marimo cell's parameter, handed over by the cell that imports torch: rainbow-is-all-you-need): the
        check is not recognised, so it stays CUDA's; the 'cuda' it chooses renamed alone would pick 'tpu' on a
        CUDA host and the CPU on a TPU one. Kept with its check, and flagged once."""
        todo: list[cst.CSTNode] = [node.body]
        said = False
        while todo:
            n = todo.pop()
            if (
                type(n) is cst.FormattedString
                and n.parts  # type: ignore[attr-defined]
                and type(n.parts[0]) is cst.FormattedStringText  # type: ignore[attr-defined]
                and self.new_body(n.parts[0].value.split(":")[0]) is not None  # type: ignore[attr-defined]
            ):
                # f"cuda:{gpu_id}": kept with its check as the plain literal is (see the FormattedString leave)
                ctx.scratch.setdefault("kept-fstrings", {})[id(n)] = (  # type: ignore[index]
                    ""
                    if said
                    else f"'{n.parts[0].value}...' is chosen by `{check}`, whose name this file does not import: "  # type: ignore[attr-defined]
                    "kept with its check; migrate both together (torch.accelerator.is_available() and 'tpu')"
                )
                said = True
            if type(n) is cst.SimpleString and self.new_body(string_body(n)) is not None:
                ctx.claim_string(
                    n,
                    "" if said else self.code,
                    "rewritten" if said else "flagged",
                    ""
                    if said
                    else (
                        f"'{string_body(n)}' is chosen by `{check}`, whose name this file does not import (a "
                        "notebook cell's parameter?): kept with its check; migrate both together "
                        "(torch.accelerator.is_available() and 'tpu')"
                    ),
                    value=None,
                )
                said = True
            todo.extend(child_nodes(n))

    def _keep_for_a_limited_import(self, ctx: Context, fn: cst.FunctionDef, always: bool = False) -> None:
        """A function that imports a library with CPU and CUDA kernels only (LTSF-Linear's Pyraformer: `import
        tvm` in the function that builds a kernel for `target=device`, after `assert device in ['cpu', 'cuda']`):
        its device strings are that library's targets. Kept as written; TPU211 flags the import."""
        nodes: list[cst.CSTNode] = [fn.body]
        imports_limited = always  # (or a function running a CUDA-only stack: cuda_only_functions)
        strings: list[cst.SimpleString] = []
        while nodes:
            n = nodes.pop()
            t = type(n)
            if t is cst.Import or t is cst.ImportFrom:
                imports_limited = imports_limited or any(_keeps_device_names(m) for m in imported_modules(n))
                continue
            if t is cst.SimpleString and self.new_body(string_body(n)) is not None:
                strings.append(n)  # type: ignore[arg-type]
            elif (
                t is cst.FormattedString
                and n.parts  # type: ignore[attr-defined]
                and type(n.parts[0]) is cst.FormattedStringText  # type: ignore[attr-defined]
                and self.new_body(n.parts[0].value.split(":")[0]) is not None  # type: ignore[attr-defined]
            ):
                strings.append(n)  # type: ignore[arg-type]  # (f"cuda:{local_rank}": rl_games' warp env)
            if t is not cst.ClassDef:
                nodes.extend(child_nodes(n))
        for s in strings if imports_limited else ():
            ctx.claim_string(s, "", "rewritten", "", value=None)

    def _foreign_object_device(self, ctx: Context, node: cst.Assign) -> None:
        """``cfg = parse_env_cfg(...)`` then ``cfg.sim.device = f"cuda:{rank}"`` (skrl's Isaac Lab loader): the device
        of an object another library built and reads (Isaac Lab's simulator takes 'cpu' or 'cuda:N'), not torch's.
        Kept and flagged."""
        value = node.value
        if not (
            len(node.targets) == 1
            and type(node.targets[0].target) is cst.Attribute
            and node.targets[0].target.attr.value == "device"
            and type(value) in (cst.SimpleString, cst.FormattedString)
        ):
            return
        root = node.targets[0].target.value
        while type(root) is cst.Attribute:
            root = root.value
        if type(value) is cst.SimpleString:
            ours = self.new_body(string_body(value)) is not None
        else:
            first = value.parts[0] if value.parts else None  # type: ignore[attr-defined]
            ours = (
                type(first) is cst.FormattedStringText
                and self.new_body(first.value.split(":")[0]) is not None
            )
        if type(root) is not cst.Name or not ours:
            return
        scope = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
        todo: list[cst.CSTNode] = (
            [scope.body if scope is not None else ctx.module] if (scope or ctx.module) else []
        )
        maker = None
        while todo and maker is None:
            n = todo.pop()
            if (
                type(n) is cst.Assign
                and type(n.value) is cst.Call
                and any(type(t.target) is cst.Name and t.target.value == root.value for t in n.targets)
                and third_party(q := ctx.qname(n.value.func), getattr(ctx, "path", None))
                and (q or "").split(".")[0] not in _SETTINGS_LIBRARIES
            ):
                maker = code(n.value.func)
            elif type(n) not in (cst.FunctionDef, cst.ClassDef) or n is scope:
                todo.extend(child_nodes(n))
        if maker is None:
            return
        why = (
            f"the device of `{code(node.targets[0].target)}`, an object `{maker}` (another library) built and reads: "
            "kept as that library's device name; give it the device it supports on a TPU host ('cpu') by hand"
        )
        if type(value) is cst.SimpleString:
            ctx.claim_string(value, self.code, "flagged", why)  # type: ignore[arg-type]
        else:
            ctx.scratch.setdefault("kept-fstrings", {})[id(value)] = (self.code, why)  # type: ignore[index]

    def _prefix_cut_by_length(self, ctx: Context, node: cst.Call) -> None:
        """``if d.startswith("cuda:"): d = int(d[5:])`` (axolotl's NVML helper): the code cuts the prefix off by
        its length, so a renamed prefix ('tpu:' is one shorter) would leave a stray character for int() to
        refuse. Kept and flagged."""
        prefix = node.args[0].value
        body = string_body(prefix) if type(prefix) is cst.SimpleString else None
        if body is None or self.new_body(body.rstrip(":")) is None:
            return
        fn = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
        if fn is None:
            return
        subject = code(node.func.value)  # type: ignore[attr-defined]
        todo: list[cst.CSTNode] = [fn.body]
        while todo:
            n = todo.pop()
            todo.extend(child_nodes(n))
            if not (type(n) is cst.Subscript and len(n.slice) == 1 and code(n.value) == subject):
                continue
            cut = n.slice[0].slice
            if (
                type(cut) is cst.Slice
                and type(cut.lower) is cst.Integer
                and cut.lower.evaluated_value == len(body)
            ):
                ctx.claim_string(
                    prefix,  # type: ignore[arg-type]
                    self.code,
                    "flagged",
                    f"'{body}' is tested as a prefix and cut off by its length (`{code(n)}`): kept, a renamed "
                    f"prefix would cut the wrong characters; read the index with torch.device({subject}).index "
                    "by hand",
                )
                return

    def _keep_graph_strings(self, ctx: Context, fn: cst.FunctionDef) -> None:
        """A function that walks a TorchScript/FX graph matches node kinds and device constants by their text:
        renaming 'cuda' there changes which nodes it patches, not the device. Kept and flagged."""
        todo: list[cst.CSTNode] = [fn.body]
        while todo:
            n = todo.pop()
            if type(n) is cst.SimpleString and self.new_body(string_body(n)) is not None:
                ctx.claim_string(
                    n,
                    self.code,
                    "flagged",
                    f"'{string_body(n)}' is matched against a TorchScript graph (findAllNodes, prim:: constants): "
                    "kept; patch the graph for the TPU device by hand, or script/trace on 'tpu'",
                    value=None,
                )
            todo.extend(child_nodes(n))

    def data_reason(self, ctx: Context) -> str | None:
        """Why this file's literals are data for some other consumer and must stay as written, or None."""
        return None

    def new_body(self, body: str | None) -> str | None:
        if body is None:
            return None
        m = self.pattern.fullmatch(body)
        return None if m is None else self.replacement + (m.group("suffix") or "")

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        t = type(node)
        if t is cst.BinaryOperation:
            if (left := self._concatenated_ordinal(node)) is not None:  # type: ignore[arg-type]
                ctx.scratch.setdefault("ordinal-concat", set()).add(id(left))  # type: ignore[union-attr]
            elif self.replacement == "tpu" and (held := self._named_device_concat(ctx, node)):  # type: ignore[arg-type]
                ctx.scratch.setdefault("named-ordinal-concat", {})[id(node)] = held  # type: ignore[index]
            return
        if t is cst.SimpleString or t is cst.FormattedString:
            return  # (left, not visited: see leave_node)
        if t is cst.Call and node.args:
            if type(node.func) is cst.Attribute and node.func.attr.value == "startswith":  # type: ignore[attr-defined]
                self._prefix_cut_by_length(ctx, node)  # type: ignore[arg-type]
            self._gpu_switch_args(ctx, node)  # type: ignore[arg-type]
            if self.code == "TPU101" and mentions(ctx, "autocast"):
                self._autocast_device_expression(ctx, node)  # type: ignore[arg-type]
            self._project_enum_args(ctx, node)  # type: ignore[arg-type]
            _keep_attribute_names(ctx, node)  # type: ignore[arg-type]
            if mentions(ctx, "torch.testing._internal"):
                self._torch_harness_args(ctx, node)  # type: ignore[arg-type]
        if (t is cst.If or t is cst.IfExp) and (check := _unresolved_cuda_check(ctx, node.test)):  # type: ignore[union-attr]
            self._keep_unresolved_choice(ctx, node, check)  # type: ignore[arg-type]
        if t is cst.If:
            self._placement_test(ctx, node)  # type: ignore[arg-type]
            self._default_branch(ctx, node)  # type: ignore[arg-type]
            if self.code == "TPU101":
                self._support_table(ctx, node)  # type: ignore[arg-type]
            return
        if t is cst.IfExp:
            self._placement_choice(ctx, node)  # type: ignore[arg-type]
            return
        if t is cst.With:
            if mentions(ctx, "patch"):
                self._patched_cuda_block(ctx, node)  # type: ignore[arg-type]
            return
        if t is cst.FunctionDef:
            if _file_has(ctx, _CUDA_SETATTR):
                self._patched_cuda_function(ctx, node)  # type: ignore[arg-type]
            if _file_has(ctx, _GRAPH_WORDS) and _GRAPH_WORDS.search(code(node)):
                self._keep_graph_strings(ctx, node)
            if _file_has(ctx, _SELECTOR_LIST):
                self._keep_selector_values(ctx, node)  # type: ignore[arg-type]
            if _TEST_DEF.match(node.name.value) and _file_has(ctx, _SUBSCRIPT_COMPARED):  # type: ignore[attr-defined]
                self._data_round_trip(ctx, node)  # type: ignore[arg-type]
            self._default_for_another_library(ctx, node)  # type: ignore[arg-type]
            if self.code == "TPU101" and "accelerator" in node.name.value.lower():  # type: ignore[attr-defined]
                self._accelerator_returns(ctx, node)  # type: ignore[arg-type]
            if self.code == "TPU101" and mentions(ctx, "accelerator"):
                for p in (*node.params.params, *node.params.kwonly_params):  # type: ignore[attr-defined]
                    if p.default is not None and _ACCELERATOR_NAME.match(p.name.value):
                        # sam2's Trainer(accelerator="cuda") with `if accelerator == "cuda": ... else: raise`: the
                        # default is one of the names its comparisons keep
                        self._keep_accelerator_names(ctx, [p.default], f"the default of `{p.name.value}`")
            if _file_has(ctx, _LIMITED_IMPORT_WORDS) and id(node) in _functions_importing_limited(ctx):
                self._keep_for_a_limited_import(ctx, node)  # type: ignore[arg-type]
            elif self.code == "TPU101" and id(node) in cuda_only_functions(ctx):
                self._keep_for_a_limited_import(ctx, node, always=True)  # type: ignore[arg-type]
            if self.flag_compared:
                word = ctx.scratch.get(f"word-{self.code}")
                if word is None:
                    word = ctx.scratch[f"word-{self.code}"] = self.word in ctx.source_text
                if word:
                    self._keep_compared_defaults(ctx, node)  # type: ignore[arg-type]
            return
        if t is cst.BooleanOperation:
            if mentions(ctx, "is_available") or mentions(ctx, "device_count"):
                self._missing_cuda_request(ctx, node)  # type: ignore[arg-type]
            if type(node.operator) is cst.And:  # type: ignore[attr-defined]
                self._beside_cuda_state(ctx, node)  # type: ignore[arg-type]
            return
        if t is cst.Comparison:
            parts = [node.left, *(c.comparator for c in node.comparisons)]
            for part in parts:  # `device == torch.device("cuda")`: built on every host that runs the test
                if type(part) is cst.Call and ctx.qname(part.func) == "torch.device":  # type: ignore[attr-defined]
                    ctx.scratch.setdefault("compared-devices", set()).add(id(part))  # type: ignore[union-attr]
            if not ctx.enabled(COMPARISON_CODE):
                return
            if self.code == "TPU101" and (named := accelerator_name(parts)) is not None:
                self._keep_accelerator_names(ctx, parts, f"compared with `{named}`")
                return
            external = any(_external(ctx, p) for p in parts)
            if self.flag_compared and any(
                type(p) is cst.SimpleString and self.new_body(string_body(p)) is not None for p in parts
            ):
                # torchtune: `assert get_distributed_backend("cuda") == "nccl"`: the backend compared is kept,
                # so the device the call maps to it is kept too (renamed, the call answers 'tpu_dist')
                for p in parts:
                    for a in p.args if type(p) is cst.Call else ():
                        for lit in _walk_strings(a.value):
                            ctx.claim_string(lit, "", "rewritten", "", value=None)
            for part in parts:
                if isinstance(part, (cst.List, cst.Tuple, cst.Set)) and accepted_values(node, part):
                    for (
                        e
                    ) in part.elements:  # anomalib: `if device not in {"auto", "cpu", "cuda", "gpu"}: raise`
                        if isinstance(e.value, cst.SimpleString) and self.new_body(string_body(e.value)):
                            # kept: callers passing it stay valid; TPU103 adds 'tpu' beside it, as to choices
                            ctx.claim_string(e.value, "", "rewritten", "", value=None)
                    continue
                if isinstance(part, (cst.List, cst.Tuple, cst.Set)) and (
                    self.others & {string_body(e.value) for e in part.elements} or _name_list(part)
                ):
                    continue  # `d in ("cuda", "xla")`, `name in {"cuda", "half"}`: the display decides (below)
                for s in _walk_strings(part):
                    if (
                        self.flag_compared
                        and s is part
                        and self.new_body(string_body(s)) is not None
                        and all(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in node.comparisons)
                        and not self._plain_backend_branch(ctx, node)
                    ):
                        ctx.claim_string(
                            s,
                            COMPARISON_CODE,
                            "flagged",
                            f"{self.what} '{string_body(s)}' in a comparison gates "
                            f"{string_body(s).upper()}-specific code (device_ids, streams): kept; give "
                            f"'{self.replacement}' its own branch if it needs one",
                            value=None,
                        )
                    elif self.new_body(string_body(s)) is not None and (target := _mocked_cuda(ctx)):
                        ctx.claim_string(
                            s,
                            COMPARISON_CODE,
                            "flagged",
                            f"{self.what} '{string_body(s)}' is compared in a file that mocks `{target}`: it checks "
                            "what the code under test does on CUDA (that code may keep its CUDA branch); kept, "
                            "migrate the test with the code it patches",
                            value=None,
                        )
                    elif external and self.new_body(string_body(s)) is not None:
                        ctx.claim_string(
                            s,
                            COMPARISON_CODE,
                            "flagged",
                            f"{self.what} '{string_body(s)}' is compared with a value from outside the "
                            "file (environment, command line, config mapping, an error message): kept; migrate "
                            "that value and this test together",
                            value=None,
                        )
                    else:
                        self._claim(ctx, s, COMPARISON_CODE, "compared")
        elif t is cst.Call and (knobs := framework_knob_strings(ctx, node)):
            for s in knobs:  # a framework's own device switch: flagged by its rule, never rewritten
                ctx.claim_string(s, "", "rewritten", "", value=None)
        elif t is cst.Call and (ctx.qname(node.func) or "") in CLI_OPTIONS:
            # @click.option("--device", default="cuda"): a command-line parser, like argparse; the program
            # reads the value (model.to(device)), so its default is migrated and its old choices stay
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "default" and ctx.enabled(ARGPARSE_CODE):
                    for s in _walk_strings(a.value):
                        self._claim(ctx, s, ARGPARSE_CODE, "used as a command-line default")
        elif t is cst.Call and (ctx.qname(node.func) or "") in CLI_CHOICES:
            for a in node.args:  # the old choices stay valid (TPU103 adds the new one)
                for s in _walk_strings(a.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)
        elif t is cst.Call and (ctx.qname(node.func) or "") in _PATH_CALLS:
            for a in node.args:  # os.path.join(ext_dir, "cuda", "*.cu"): a folder's name, not a device
                for s in _walk_strings(a.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)
        elif t is cst.Call and any(
            a.keyword is not None and a.keyword.value in _PROVIDER_KEYWORDS for a in node.args
        ):
            for a in node.args:  # run(..., provider="cuda"): an ONNX Runtime execution provider's name
                if a.keyword is not None and a.keyword.value in _PROVIDER_KEYWORDS:
                    for s in _walk_strings(a.value):
                        ctx.claim_string(s, "", "rewritten", "", value=None)
        elif t is cst.Call and type(node.func) is cst.Name and _autocast_alias(ctx, node.func.value):
            # stable diffusion's `precision_scope = autocast if opt.precision == "autocast" else nullcontext` ...
            # `with precision_scope("cuda"):`: 'tpu' there is bfloat16 (NumPy cannot hold its outputs) and raises
            # without TorchTPU; kept, a TPU host runs the block in float32 (CUDA's autocast switches itself off)
            for a in node.args[:1]:
                for s in _walk_strings(a.value):
                    if self.new_body(string_body(s)) is not None:
                        ctx.claim_string(
                            s,
                            self.code,
                            "flagged",
                            f"`{node.func.value}` is torch.autocast here (or a no-op): its '{string_body(s)}' is "
                            "autocast's device type, kept (a TPU host runs the block in float32); for mixed "
                            "precision on TPU use torch.autocast('tpu', dtype=torch.bfloat16) and cast outputs "
                            "to float before .numpy()",
                            value=None,
                        )
        elif t is cst.Call and third_party(ctx.qname(node.func), getattr(ctx, "path", None)):
            self._keep_foreign_args(ctx, node)
        elif t is cst.Call:
            if type(node.func) is cst.Name and node.func.value in _ATTRIBUTE_BUILTINS and len(node.args) >= 2:
                name = node.args[1].value  # getattr(t, "cuda"): an attribute name
                if isinstance(name, cst.SimpleString):
                    ctx.claim_string(name, "", "rewritten", "", value=None)
                return
            if type(node.func) is not cst.Attribute:
                return
            method = node.func.attr.value
            if method in _KEY_METHODS and node.args and isinstance(node.args[0].value, cst.SimpleString):
                # data.get("cuda", {}): a key into data, as data["cuda"] (anomalib reads CUDA's version.json)
                ctx.claim_string(node.args[0].value, "", "rewritten", "", value=None)
            if (
                method == "device"
                and len(node.args) == 2
                and (first := _device_choice(node.args[0].value)) is not None
                and self.pattern.fullmatch(string_body(first) or "-")
                and ctx.qname(node.func) == "torch.device"
            ):
                self._device_with_index(ctx, node)
                return
            if method in _COMPARE_METHODS and node.args and ctx.enabled(COMPARISON_CODE):
                for s in _walk_strings(node.args[0].value):
                    self._claim(ctx, s, COMPARISON_CODE, f"tested with .{method}()")
            elif method in _ARGPARSE_METHODS and ctx.enabled(ARGPARSE_CODE):
                flags = [string_body(a.value) or "" for a in node.args if a.keyword is None]
                if any("accelerator" in f for f in flags):  # Lightning/Fabric's knob: its 'tpu' is torch_xla
                    for a in node.args:
                        for s in _walk_strings(a.value) if a.keyword is not None else ():
                            ctx.claim_string(s, "", "rewritten", "", value=None)
                    return
                for a in node.args:
                    if a.keyword is not None and a.keyword.value == "dest":
                        for s in _walk_strings(a.value):  # dest="cuda" names the attribute args.cuda: a name
                            ctx.claim_string(s, "", "rewritten", "", value=None)
                    elif a.keyword is not None and a.keyword.value == "choices" and self.keep_in_choices:
                        for s in _walk_strings(a.value):  # old values stay valid; TPU103 adds the new one
                            if self.new_body(string_body(s)) is not None:
                                ctx.claim_string(s, "", "rewritten", "", value=None)
                    elif (
                        a.keyword is not None
                        and a.keyword.value in ("default", "choices", "const")
                        or (method == "set_defaults" and a.keyword is not None)
                    ):
                        for s in _walk_strings(a.value):
                            self._claim(ctx, s, ARGPARSE_CODE, "used as a command-line default")
        elif t is cst.List or t is cst.Tuple or t is cst.Set:
            # ["cpu", "cuda", "xla"]: the display lists device types side by side; renaming 'cuda' would give a
            # second 'tpu' entry
            if not any(type(e.value) is cst.SimpleString for e in node.elements):
                return
            bodies = {string_body(e.value) for e in node.elements}
            if _name_list(node):
                # {"contiguous", "cuda", "half", "to"}: method or attribute names, not devices
                for e in node.elements:
                    if isinstance(e.value, cst.SimpleString):
                        ctx.claim_string(e.value, "", "rewritten", "", value=None)
                return
            seen = sorted(b for b in bodies & self.others if b)
            if seen:
                for e in node.elements:
                    if (
                        isinstance(e.value, cst.SimpleString)
                        and self.new_body(string_body(e.value)) is not None
                    ):
                        same = [w for w in seen if w in ("xla", "tpu", "tpu_dist", self.replacement)]
                        why = (
                            f"renaming it would give a second '{self.replacement}' entry"
                            if same
                            else f"the list names device types side by side; add '{self.replacement}' to it where "
                            "this code supports it"
                        )
                        ctx.claim_string(
                            e.value,
                            self.code,
                            "flagged",
                            f"{self.what} '{string_body(e.value)}' is listed beside "
                            f"{', '.join(repr(w) for w in seen)}: kept ({why})",
                            value=None,
                        )
        elif t is cst.Assign:
            if mentions(ctx, "Config"):
                self._openmmlab_config_device(ctx, node)  # type: ignore[arg-type]
            if self.code == "TPU101" and mentions(
                ctx, ".device ="
            ):  # (after it: its own claim is the precise one)
                self._foreign_object_device(ctx, node)  # type: ignore[arg-type]
        elif t is cst.Subscript:
            # cfg["xla"], results["cuda"]: a key into data, not a device (the data still says "xla")
            for el in node.slice:
                if isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.SimpleString):
                    ctx.claim_string(el.slice.value, "", "rewritten", "", value=None)
        elif (
            t is cst.DictElement
            and self.new_body(string_body(node.key)) is not None
            and "cuda" not in (string_body(node.key) or "")
        ):
            ctx.claim_string(node.key, "", "rewritten", "", value=None)  # type: ignore[arg-type]  # a key: data
        elif t is cst.DictElement and (
            type(node.key) is cst.BinaryOperation
            or (
                type(node.key) is cst.Call
                and type(node.key.func) is cst.Attribute
                and node.key.func.attr.value == "format"
            )
        ):
            # EasyOCR's `map_location = {"cuda:%d" % 0: "cuda:%d" % gpu}`: a key built from a device literal names
            # where the data was (a saved location), as a plain "cuda:0" key does: kept; its value is migrated
            key = node.key
            template = key.left if type(key) is cst.BinaryOperation else getattr(key.func, "value", None)  # type: ignore[attr-defined]
            if type(template) is cst.SimpleString and "cuda" in (string_body(template) or ""):
                ctx.claim_string(template, "", "rewritten", "", value=None)
        elif t is cst.DictElement and (inner := device_call_key(node.key)) is not None:
            if self.new_body(string_body(inner)) is not None and "cuda" in (string_body(inner) or ""):
                # {torch.device("cuda"): dist.Backend.NCCL}: as below, TPU104 adds a torch.device("tpu") entry
                ctx.claim_string(inner, "", "rewritten", "", value=None)
                for s in _walk_strings(node.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)
        elif t is cst.DictElement:
            if self.new_body(string_body(node.key)) is not None and "cuda" in (string_body(node.key) or ""):
                # {"cuda": "nccl"} maps device types: keep the entry, TPU104 adds a "tpu" one.
                ctx.claim_string(node.key, "", "rewritten", "", value=None)  # type: ignore[arg-type]
                for s in _walk_strings(node.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)

    def _openmmlab_config_device(self, ctx: Context, node: cst.Assign) -> None:
        """``cfg.device = 'cuda'`` on an OpenMMLab config (mmcv's or mmengine's ``Config``, or a copy of mmcv
        carried in the tree): the framework reads it (mmseg's ``train_segmentor`` -> ``build_dp``/``build_ddp``,
        whose device tables know cuda, cpu, mlu, npu, ipu), so 'tpu' there fails in the framework (InternVL's
        segmentation/train.py): kept and flagged."""
        if type(node.value) is not cst.SimpleString or self.new_body(string_body(node.value)) is None:
            return
        for t in node.targets:
            target = t.target
            if type(target) is cst.Attribute:
                leaf = target.attr.value
            elif type(target) is cst.Subscript and len(target.slice) == 1:
                leaf = string_body(getattr(target.slice[0].slice, "value", None)) or ""
            else:
                continue
            root = target.value
            while type(root) in (cst.Attribute, cst.Subscript):
                root = root.value  # type: ignore[attr-defined]
            if leaf != "device" or type(root) is not cst.Name or not self._openmmlab_config(ctx, root):
                continue
            ctx.claim_string(
                node.value,
                self.code,
                "flagged",
                f"'{string_body(node.value)}' is stored in an OpenMMLab config (`{code(target)}`): the framework "
                "dispatches on it (build_dp/build_ddp and its runners know cuda, cpu, mlu, npu, ipu; 'tpu' fails "
                "there); kept: run the framework's CPU path or port the training loop to move model and batches "
                "to 'tpu' yourself",
                value=None,
            )
            return

    @staticmethod
    def _openmmlab_config(ctx: Context, root: cst.Name) -> bool:
        """``root`` is an OpenMMLab ``Config``: its one binding is ``Config.fromfile(...)``/``Config(...)``
        of mmcv or mmengine (or a vendored mmcv), or it is named cfg/config in a file importing that Config."""
        value = _only_binding(ctx, root.value)
        if type(value) is cst.Call:
            return _OPENMMLAB_CONFIG.search(ctx.qname(value.func) or "") is not None
        return (
            root.value in ("cfg", "config") and _OPENMMLAB_CONFIG_IMPORT.search(ctx.source_text) is not None
        )

    def _keep_foreign_args(self, ctx: Context, call: cst.Call) -> None:
        """Device names handed to a third-party library (``isaacgymenvs.make(sim_device="cuda:0")``,
        ``from_pretrained(device_map="cuda")``) are its vocabulary: renaming them moves nothing to the TPU."""
        callee = code(call.func)
        if ctx.qname(call.func) in _TEST_CASES:
            self._keep_test_cases(ctx, call, callee)
            return
        torch_native = (ctx.qname(call.func) or "").split(".")[0] in TORCH_DEVICE_LIBRARIES
        for a in call.args:
            if torch_native and a.keyword is not None and a.keyword.value == "device":
                continue  # pipeline(..., device="cuda:0"): handed to torch.device as it is
            if (
                torch_native
                and a.keyword is not None
                and a.keyword.value == "device_map"
                and type(a.value) is cst.SimpleString
                and self.new_body(string_body(a.value)) is not None
            ):
                continue  # from_pretrained(device_map="cuda"): transformers makes it {"": torch.device("cuda")}
            v = a.value
            if (
                a.keyword is not None
                and "device"
                in a.keyword.value  # (a consumer's option, not data: pytest.param(torch.device(...)))
                and type(v) is cst.Call
                and ctx.qname(v.func) == "torch.device"
                and v.args
                and type(v.args[0].value) is cst.SimpleString
                and self.new_body(string_body(v.args[0].value)) is not None
            ):
                # Pipeline(device=torch.device("cuda")) (l2cs, efficientvit's gaze demo): a torch device, but the
                # library reads it with its own rules (anything but 'cpu' is a CUDA ordinal there)
                where = f"{a.keyword.value}=" if a.keyword is not None else "an argument"
                ctx.claim_string(
                    v.args[0].value,
                    self.code,
                    "flagged",
                    f"`{code(v)}` is handed to `{callee}` ({where}), a library that is not torch: it may read "
                    "any device but the CPU as CUDA; kept: check what it supports (often 'cpu') or its TPU option",
                    value=None,
                )
                continue
            if isinstance(a.value, (cst.FormattedString, cst.Call, cst.BinaryOperation)):
                # f"cuda:{rank}" / "cuda:{}".format(rank) as device_map=: the library's name, like "cuda"
                where = f"{a.keyword.value}=" if a.keyword is not None else "an argument"
                ctx.scratch.setdefault("foreign-ordinals", {})[id(a.value)] = (  # type: ignore[index]
                    f"{self.what} with a run-time ordinal is handed to `{callee}` ({where}), a library that is "
                    "not torch: its device names are its own; kept: give it a device it supports (often 'cpu') "
                    "or its own TPU option"
                )
                v = a.value
                template = (
                    v.func.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) else None
                )
                template = v.left if isinstance(v, cst.BinaryOperation) else template
                if isinstance(template, cst.SimpleString):
                    ctx.claim_string(template, "", "rewritten", "", value=None)  # kept with its ordinal
            for s in _chosen_strings(a.value):
                body = string_body(s)
                if self.new_body(body) is not None:
                    where = f"{a.keyword.value}=" if a.keyword is not None else "an argument"
                    advice = (
                        # accelerate's InitProcessGroupKwargs(backend="nccl") (CogVideo): handed on to
                        # torch.distributed by the library, on the device the library itself picks
                        "it may hand the name on to torch.distributed on a device it picks itself; kept as "
                        "written: use 'tpu_dist' where that device is 'tpu', 'gloo' where it is the CPU"
                        if self.what == "process-group backend"
                        else "its device names are its own; kept: give it a device it supports (often 'cpu') "
                        "or its own TPU option"
                    )
                    ctx.claim_string(
                        s,
                        self.code,
                        "flagged",
                        f"{self.what} '{body}' is handed to `{callee}` ({where}), a library that is not torch: "
                        + advice,
                        value=None,
                    )

    def _keep_test_cases(self, ctx: Context, call: cst.Call, callee: str) -> None:
        """``@pytest.mark.parametrize("device", ["cpu", "cuda"])``: pytest hands each case to the test, whose own
        skip (``if device == "cuda" and not torch.cuda.is_available()``) turns the CUDA case off where CUDA is
        not; renamed alone, the case and its skip would disagree. Kept, with what to add instead. The first
        argument names the test's parameters (habitat's ``parametrize("cuda", [True, False])``): kept silently."""
        names_first = ctx.qname(call.func) == "pytest.mark.parametrize"
        values = [
            string_body(s)
            for i, a in enumerate(call.args)
            if not (
                names_first
                and (
                    (i == 0 and a.keyword is None)
                    or (a.keyword is not None and a.keyword.value == "argnames")
                )
            )
            for s in _chosen_strings(a.value)
        ]
        one_case = (ctx.qname(call.func) or "").endswith(".param")  # (pytest.param: one case of a list)
        if not one_case and not any((b or "").split(":")[0] in _OTHER_DEVICE_CASES for b in values):
            # xtuner's model tests: `("cuda", 1, False, ...)` is every case, no CPU alternative: the test is a CUDA
            # test whose body moves to 'tpu' with it; kept alone, the case asked for NCCL beside 'tpu' tensors
            for i, a in enumerate(call.args):
                if names_first and (
                    (i == 0 and a.keyword is None)
                    or (a.keyword is not None and a.keyword.value == "argnames")
                ):
                    for s in _walk_strings(a.value):
                        ctx.claim_string(s, "", "rewritten", "", value=None)
                    continue
                for s in _chosen_strings(a.value):  # every case, a row with other strings too (a name list)
                    if (new := self.new_body(string_body(s))) is not None:
                        ctx.claim_string(
                            s,
                            self.code,
                            "rewritten",
                            f"{self.what} '{string_body(s)}' -> '{new}' (a test case of `{callee}`; every case is "
                            "CUDA's: the test moves with its body)",
                        )
            return
        for i, a in enumerate(call.args):
            if names_first and (
                (i == 0 and a.keyword is None) or (a.keyword is not None and a.keyword.value == "argnames")
            ):
                for s in _walk_strings(a.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)
                continue
            for s in _chosen_strings(a.value):
                body = string_body(s)
                if self.new_body(body) is not None:
                    ctx.claim_string(
                        s,
                        self.code,
                        "flagged",
                        f"{self.what} '{body}' is a test case of `{callee}`: kept (the test still runs it where "
                        "CUDA is); add a 'tpu' case that is skipped unless "
                        "torch.accelerator.current_accelerator() is a TPU",
                        value=None,
                    )

    def _foreign_ordinal(self, ctx: Context, orig: cst.CSTNode) -> bool:
        """A run-time ordinal string handed to a third-party library: flagged once, kept as written."""
        why = ctx.scratch.get("foreign-ordinals", {}).pop(id(orig), None)  # type: ignore[union-attr]
        if why is None:
            return False
        ctx.flag(orig, why, code=self.code)
        return True

    def _keep_selector_values(self, ctx: Context, fn: cst.FunctionDef) -> None:
        """``def bias_act(..., impl='cuda')`` with ``assert impl in ['ref', 'cuda']``: the name chooses between
        implementations ('cuda' is the CUDA kernel's name, kept in the name list); renaming its default and
        its tests to 'tpu' fails that membership test on every call. Every literal of such a name (found
        anywhere in the module: ``filter2d(..., impl='cuda')`` hands it on to ``upfirdn2d``) in a parameter
        default or a comparison is kept; the device test beside it (``x.device.type == 'cuda'``) decides
        whether the kernel runs."""
        names = ctx.scratch.get("selector-names")
        if names is None:
            module = getattr(ctx, "module", None)
            names = ctx.scratch["selector-names"] = self._selector_names(module if module is not None else fn)
        if not names:
            return
        todo: list[cst.CSTNode] = [fn]
        while todo:
            n = todo.pop()
            if isinstance(n, cst.Param) and n.name.value in names and n.default is not None:
                for s in _walk_strings(n.default):
                    ctx.claim_string(s, "", "rewritten", "", value=None)
            elif isinstance(n, cst.Comparison):
                parts = [n.left, *(c.comparator for c in n.comparisons)]
                if any(isinstance(p, cst.Name) and p.value in names for p in parts):
                    for p in parts:
                        for s in _walk_strings(p):
                            ctx.claim_string(s, "", "rewritten", "", value=None)
            todo.extend(child_nodes(n))

    def _keep_compared_defaults(self, ctx: Context, fn: cst.FunctionDef) -> None:
        """``def __init__(self, backend="nccl"): ... assert backend == "nccl"`` (nanotron): a comparison this rule
        keeps (``flag_compared``) keeps the literals that reach its name in the same function, a parameter's
        default or an assignment; renamed alone, the default fails the kept test on every call. A comparison
        that only chooses a branch (``codecs = make() if backend == "nccl" else None``, torchrec's golden
        training) keeps nothing: its NCCL-only branch is simply not taken on TPU, while the same ``backend``
        handed to init_process_group must be 'tpu_dist'."""
        names: set[str] = set()
        nodes: list[cst.CSTNode] = []
        branch_tests: set[int] = set()
        todo: list[cst.CSTNode] = [fn]
        while todo:
            n = todo.pop()
            nodes.append(n)
            if type(n) in (cst.If, cst.IfExp, cst.While):
                branch_tests.update(id(c) for c in walk_code(n.test))  # type: ignore[attr-defined]
            if isinstance(n, cst.Comparison) and isinstance(n.left, cst.Name) and id(n) not in branch_tests:
                if any(
                    self.new_body(string_body(s)) is not None
                    for c in n.comparisons
                    for s in _walk_strings(c.comparator)
                ):
                    names.add(n.left.value)
            todo.extend(child_nodes(n))
        if not names:
            return
        for n in nodes:
            if isinstance(n, cst.Param) and n.name.value in names and n.default is not None:
                value: cst.CSTNode | None = n.default
            elif isinstance(n, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value in names for t in n.targets
            ):
                value = n.value
            else:
                continue
            for s in _walk_strings(value):
                if self.new_body(string_body(s)) is not None:
                    ctx.claim_string(s, "", "rewritten", "", value=None)

    def _selector_names(self, root: cst.CSTNode) -> frozenset[str]:
        """Names tested for membership in a display of names that holds a device word (``impl in ['ref',
        'cuda']``): implementation selectors, not devices."""
        names: set[str] = set()
        todo: list[cst.CSTNode] = [root]
        while todo:
            n = todo.pop()
            if isinstance(n, cst.Comparison) and isinstance(n.left, cst.Name) and len(n.comparisons) == 1:
                c = n.comparisons[0]
                display = c.comparator
                if (
                    isinstance(c.operator, (cst.In, cst.NotIn))
                    and isinstance(display, (cst.List, cst.Tuple, cst.Set))
                    and _name_list(display)
                    and any(self.new_body(string_body(e.value)) is not None for e in display.elements)
                ):
                    names.add(n.left.value)
            todo.extend(child_nodes(n))
        return frozenset(names)

    def _keep_accelerator_names(self, ctx: Context, parts: list[cst.CSTNode], where: str) -> None:
        """LitServe's ``_Connector``: ``accelerator in ("cpu", "cuda", "mps")``, ``self._accelerator == "cuda"``,
        ``return "cuda"`` from ``_choose_gpu_accelerator_backend``: a framework's own accelerator names ("gpu",
        "mps", "auto" beside them), not torch devices. Renamed, its documented ``accelerator="cuda"`` broke and its
        "tpu" counted NVIDIA GPUs. Kept, and flagged once a file."""
        for part in parts:
            for s in literals(part) if not isinstance(part, cst.Call) else ():
                if self.new_body(string_body(s)) is None:
                    continue
                first = "accelerator-names" not in ctx.scratch
                ctx.scratch["accelerator-names"] = True
                ctx.claim_string(
                    s,
                    COMPARISON_CODE if first else "",
                    "flagged" if first else "rewritten",
                    f"{self.what} '{string_body(s)}' is a framework's accelerator name ({where}), not a torch "
                    "device: kept; give the framework its own 'tpu' accelerator by hand (in Lightning it means "
                    "torch_xla)"
                    if first
                    else "",
                    value=None,
                )

    def _accelerator_returns(self, ctx: Context, fn: cst.FunctionDef) -> None:
        """``return "cuda"`` from a function named for choosing an accelerator (see _keep_accelerator_names)."""
        for n in walk_code(fn.body):
            if type(n) is cst.Return and n.value is not None:
                self._keep_accelerator_names(ctx, [n.value], f"returned by `{fn.name.value}`")

    def _torch_harness_args(self, ctx: Context, call: cst.Call) -> None:
        """``self.create_pg("cuda")`` in a test class built on torch's internal harness
        (``torch.testing._internal.common_distributed.DistributedTestBase``, mmengine's hook tests): the harness
        maps device names to backends itself and knows cuda/hpu/xpu/cpu only ('tpu' gets a gloo group). Kept,
        flagged."""
        f = call.func
        if not (type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value == "self"):
            return
        cls = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.ClassDef), None)
        if cls is None or not any(
            (ctx.qname(b.value) or "").startswith("torch.testing._internal") for b in cls.bases
        ):
            return
        for a in call.args:
            for s in _chosen_strings(a.value):
                if self.new_body(string_body(s)) is not None:
                    ctx.claim_string(
                        s,
                        self.code,
                        "flagged",
                        f"{self.what} '{string_body(s)}' is handed to `{code(f)}` of torch's internal test "
                        f"harness (`{code(cls.bases[0].value)}`), which maps only cuda/hpu/xpu/cpu to backends: "
                        "kept; give the TPU its own setup by hand",
                        value=None,
                    )

    def _gpu_switch_args(self, ctx: Context, call: cst.Call) -> None:
        """``PerceptualLoss(use_gpu=device.startswith("cuda"))``: a device test handed to a switch named for the
        GPU. Renamed, it says yes on TPU, and the code behind the switch (out of sight: CUDA ordinals,
        DataParallel, CUDA kernels) takes its GPU path there. Kept, so that the switch stays off, and flagged."""
        for a in call.args:
            if a.keyword is None or not _GPU_SWITCH.search(a.keyword.value):
                continue
            for s in _tested_strings(a.value):
                if self.new_body(string_body(s)) is None:
                    continue
                ctx.claim_string(
                    s,
                    COMPARISON_CODE,
                    "flagged",
                    f"{self.what} '{string_body(s)}' is tested for `{code(call.func)[:40]}({a.keyword.value}=...)`, "
                    "a switch named for the GPU: renamed, it would turn that GPU path on for TPU in code out of "
                    "this file's sight; kept (the switch stays off on TPU); pass what that code should do there",
                    value=None,
                )

    def _project_enum_args(self, ctx: Context, call: cst.Call) -> None:
        """``nanotron_timer("step", "cuda")`` where the project types that parameter with an enum whose member
        is ``CUDA = "cuda"`` (migrate.project): the string is the enum's value (``TimerType("cuda")``), and the
        member is kept, so a renamed value no longer parses. Kept and flagged."""
        f = call.func
        if type(f) is cst.Name:
            name = f.value
        elif type(f) is cst.Attribute and ctx.qname(f):  # `timers.nanotron_timer(...)`, not `obj.method(...)`
            name = f.attr.value
        else:
            return
        params = facts_for(ctx.scratch, ctx.source_text).enum_params.get(name)
        if not params or third_party(ctx.qname(f), getattr(ctx, "path", None)):
            return
        positional = []
        for a in call.args:
            if a.keyword is not None or a.star:
                break
            positional.append(a)
        keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
        for p in params:
            a = keywords.get(p.name)
            if a is None and p.position is not None and p.position < len(positional):
                a = positional[p.position]
            for s in literals(a.value) if a is not None else ():
                body = string_body(s)
                if body in p.values and self.new_body(body) is not None:
                    ctx.claim_string(
                        s,
                        self.code,
                        "flagged",
                        f"'{body}' is passed as `{p.name}` of `{name}`, which the project types with its enum "
                        f"`{p.enum}` (a member has the value '{body}'): it is that member's value, not a device "
                        "here; kept (renamed, the enum would not parse it); add the 'tpu' path by hand",
                        value=None,
                    )

    def _claim(self, ctx: Context, s: cst.SimpleString, claim_code: str, how: str) -> None:
        new = self.new_body(string_body(s))
        if new is None:
            return
        if claim_code == ARGPARSE_CODE:
            if re.fullmatch(r"\w+:0*[1-9]\d*", string_body(s) or "") and self.replacement == "tpu":
                # ElegantRL's `--device cuda:1`: 'tpu:1' does not exist in a process (one device each); the
                # default means "a GPU of this host", on TorchTPU the process's own
                new = self.replacement
                ctx.scratch.setdefault("cli-ordinals", set()).add(id(s))  # type: ignore[union-attr]
                msg = (
                    f"{self.what} '{string_body(s)}' -> '{new}' in a command-line option (TorchTPU binds one "
                    "device per process: 'tpu:1' would not exist); launch scripts and configs may still pass "
                    "the old value"
                )
                ctx.claim_string(s, claim_code, "warned", msg)
                return
            msg = (
                f"{self.what} '{string_body(s)}' -> '{new}' in a command-line option; flag names are kept, "
                "but launch scripts and configs may still pass the old value"
            )
        else:
            msg = (
                f"{self.what} '{string_body(s)}' -> '{new}' {how}; make sure the value it is compared "
                "with is migrated too (config files, CLI)"
            )
        ctx.claim_string(s, claim_code, "warned", msg)

    def _device_with_index(self, ctx: Context, node: cst.Call) -> None:
        """``torch.device("cuda", i)``: index 0 stays; a literal above 0 names another device of this process
        (flagged); a run-time index chose this process's GPU, and on TorchTPU that is the process's own 'tpu'."""
        index = node.args[1].value
        literal = _device_choice(node.args[0].value)
        if isinstance(index, cst.Integer):
            if int(index.value, 0) > 0:
                ctx.claim_string(
                    literal,  # type: ignore[arg-type]
                    self.code,
                    "flagged",  # type: ignore[arg-type]
                    f"torch.device('{string_body(literal)}', {index.value}) names another "
                    "device of this process; TorchTPU binds one device per process: place the work by "
                    "hand (one process per device, or DTensor)",
                    value=None,
                )
            return
        ctx.claim_string(  # the index is dropped in leave_node (_drop_runtime_index), like f"cuda:{i}"
            literal,  # type: ignore[arg-type]
            self.code,
            "warned",
            f"torch.device('{string_body(literal)}', {code(index)}) -> torch.device("  # type: ignore[arg-type]
            f"'{self.replacement}') (one device per process: the ordinal chose this process's GPU; a kept "
            "ordinal above 0 raises where the launcher sets no LOCAL_RANK, e.g. mp.spawn workers)",
            value=None,
        )

    def _import_time_device(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.Call | None:
        """``torch.device("cuda")`` evaluated when the module is imported (module or class level, a parameter
        default, outside the ``__main__`` block): ``torch.device("tpu")`` there fails every import where
        TorchTPU is not loaded (a CPU-only test run, a CUDA box), where CUDA's device object could be built
        anywhere; ``_tpu_device()`` builds "tpu" on a TPU and CUDA's as written elsewhere (glide's attr
        defaults)."""
        # (nnUNet's `device=torch.device('cuda', 0)` parameter default: the literal ordinal 0 as "cuda:0")
        zero = (
            len(node.args) == 2
            and type(node.args[1].value) is cst.Integer
            and node.args[1].value.value == "0"
        )
        if not (
            (len(node.args) == 1 or zero)
            and node.args[0].keyword is None
            and type(node.args[0].value) is cst.SimpleString
            and type(orig.args[0].value) is cst.SimpleString
            and (m := re.fullmatch(r"tpu(?::(0))?", string_body(node.args[0].value) or "")) is not None
            and (string_body(orig.args[0].value) or "").startswith("cuda")
            and ctx.qname(orig.func) == "torch.device"
            and (
                (_at_import_time(ctx, orig) and not _conditional(ctx, orig))
                # stablediffusion's `if device == torch.device("cuda"):` in a function a CPU-only run calls:
                # torch.device("tpu") raises there without TorchTPU; CUDA's object compared unequal
                or id(orig) in ctx.scratch.get("compared-devices", ())  # type: ignore[operator]
            )
        ):
            return None
        ctx.need_helper(_helpers.IMPORT_TIME_DEVICE)
        return cst.Call(
            func=cst.Name(_helpers.IMPORT_TIME_DEVICE),
            args=[cst.Arg(cst.Integer("0"))] if m.group(1) or zero else [],
        )

    def _drop_runtime_index(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.Call | None:
        """``torch.device("cuda", i)`` whose string became the replacement: ``torch.device("tpu")``. One rule
        for every form of a run-time ordinal (f"cuda:{i}", "cuda:{}".format(i), .cuda(i), .to(i) lose it too):
        the process's own device is valid on every rank under any launcher; tpu:<i> only where LOCAL_RANK == i
        (measured, /work/wt/mread.notes.md)."""
        if not (
            isinstance(orig.func, cst.Attribute)
            and orig.func.attr.value == "device"
            and len(orig.args) == 2 == len(node.args)
            # (sample-factory's `torch.device("cuda", index=i)`: the keyword form is the same ordinal)
            and (orig.args[1].keyword is None or orig.args[1].keyword.value == "index")
            and not isinstance(orig.args[1].value, cst.Integer)
            and (was := _device_choice(orig.args[0].value)) is not None
            and (now := _device_choice(node.args[0].value)) is not None
            and string_body(now) == self.replacement
            and string_body(was) != self.replacement
            and ctx.qname(orig.func) == "torch.device"
        ):
            return None
        return node.with_changes(args=[node.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])

    def _named_device_concat(self, ctx: Context, node: cst.BinaryOperation) -> list[cst.SimpleString]:
        """``self.map_location + ":" + str(gpu_id)`` (TorchServe's handlers), where every value the name is given
        in its function (a ``self.`` attribute: in its class) is a device literal this rule renames or 'cpu':
        those literals, else []. Renamed alone, the name builds 'tpu:None' or 'tpu:<rank>', which TorchTPU
        refuses (one device per process); the ordinal is dropped with it (see leave_node)."""
        left = node.left
        if not (
            isinstance(node.operator, cst.Add)
            and type(left) is cst.BinaryOperation
            and isinstance(left.operator, cst.Add)
            and type(left.right) is cst.SimpleString
            and string_body(left.right) == ":"
            and type(left.left) in (cst.Name, cst.Attribute)
            and type(node.right) not in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
        ):
            return []
        target = code(left.left)
        defs = ctx.enclosing_definitions()
        kind = cst.ClassDef if target.startswith(("self.", "cls.")) else cst.FunctionDef
        scope = next((d for d in reversed(defs) if type(d) is kind), None) or ctx.module
        if scope is None:
            return []
        found: list[cst.SimpleString] = []
        todo: list[cst.CSTNode] = [scope]
        while todo:
            n = todo.pop()
            todo.extend(child_nodes(n))
            if type(n) is cst.Assign and any(code(t.target) == target for t in n.targets):  # type: ignore[attr-defined]
                choices = _string_choices(n.value)  # type: ignore[attr-defined]
                if choices is None:
                    return []  # (a value from elsewhere: the ordinal may be needed)
                found += choices
            elif (
                type(n) in (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr) and code(n.target) == target
            ):  # type: ignore[attr-defined]
                return []
            elif type(n) is cst.Param and n.name.value == target:  # type: ignore[attr-defined]
                return []  # (a parameter: its value comes from the caller)
            elif type(n) is cst.AsName and code(n.name) == target:  # type: ignore[attr-defined]
                return []
            elif type(n) in (cst.Global, cst.Nonlocal) and any(a.name.value == target for a in n.names):  # type: ignore[attr-defined]
                return []
        bodies = [string_body(f) or "" for f in found]
        renamed = [f for f, b in zip(found, bodies, strict=True) if self.new_body(b) == self.replacement]
        if not renamed or any(self.new_body(b) != self.replacement and b != "cpu" for b in bodies):
            return []
        return renamed

    def _concatenated_ordinal(self, node: cst.BinaryOperation) -> cst.SimpleString | None:
        """``"cuda:" + str(rank)``: the literal of a device template completed at run time, else None."""
        if (
            isinstance(node.operator, cst.Add)
            and isinstance(node.left, cst.SimpleString)
            and not isinstance(node.right, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
            and (m := re.fullmatch(r"(\w+):", string_body(node.left) or "")) is not None
            and self.new_body(m.group(1)) is not None
        ):
            return node.left
        return None

    def _runtime_ordinal(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        """``'cuda:{}'.format(rank)`` / ``'cuda:%d' % rank``: this process's GPU -> ``'tpu'`` (one device per
        process on TorchTPU; another ordinal does not exist there)."""
        if (
            isinstance(orig, cst.Call)
            and isinstance(orig.func, cst.Attribute)
            and orig.func.attr.value == "format"
        ):
            template = orig.func.value
        elif isinstance(orig, cst.BinaryOperation) and isinstance(orig.operator, cst.Modulo):
            template = orig.left
        elif isinstance(orig, cst.BinaryOperation) and id(orig.left) in ctx.scratch.get("ordinal-concat", ()):
            # "cuda:" + str(rank) (ogb's pcqm4m): the same run-time ordinal, concatenated
            template = orig.left
        else:
            return None
        body = string_body(template)
        if isinstance(orig, cst.BinaryOperation) and isinstance(orig.operator, cst.Add):
            body = f"{body}%d" if body is not None and re.fullmatch(r"\w+:", body) else None
        m = re.fullmatch(rf"(\w+):({ORDINAL_SLOT})", body or "")
        if m is None or self.new_body(m.group(1)) is None or self._foreign_ordinal(ctx, orig):
            return None
        if id(template) in ctx.string_claims:
            return None
        ctx.report(
            orig,
            f"{self.what} '{body}' with a run-time ordinal -> '{self.replacement}' (one device per "
            "process: the ordinal chose this process's GPU)",
            code=self.code,
            outcome="warned",
        )
        quote = template.value[-1]  # type: ignore[attr-defined]
        return cst.SimpleString(f"{quote}{self.replacement}{quote}")

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        if type(orig) is cst.AnnAssign or type(orig) is cst.Param:
            return self._literal_type_choices(orig, node)  # type: ignore[arg-type]
        if type(orig) in (cst.List, cst.Tuple, cst.Set) and id(orig) in ctx.scratch.get("support-lists", ()):  # type: ignore[operator]
            return _beside_cuda(ctx, orig, node, self.code)  # type: ignore[arg-type]
        if type(orig) is cst.If and id(orig) in ctx.scratch.get("support-ladders", {}):  # type: ignore[operator]
            return _tpu_branch(ctx, orig, node, ctx.scratch["support-ladders"][id(orig)], self.code)  # type: ignore[index,arg-type]
        if isinstance(orig, cst.Call) and isinstance(node, cst.Call) and self.replacement == "tpu":
            lazy = self._import_time_device(ctx, orig, node)
            if lazy is not None:
                return lazy
        if isinstance(orig, cst.Call) and isinstance(node, cst.Call) and len(orig.args) == 2:
            dropped = self._drop_runtime_index(ctx, orig, node)
            if dropped is not None:
                return dropped
        if type(orig) is cst.BinaryOperation and id(orig) in ctx.scratch.get("named-ordinal-concat", {}):  # type: ignore[operator]
            held = ctx.scratch["named-ordinal-concat"][id(orig)]  # type: ignore[index]
            if not any(id(lit) in ctx.string_claims for lit in held):
                ctx.report(
                    orig,
                    f"`{code(orig.left.left)} + ':' + ...` -> `{code(orig.left.left)}`: it holds a device this rule "  # type: ignore[attr-defined]
                    f"renames to '{self.replacement}'; TorchTPU binds one device per process (no ordinal)",
                    code=self.code,
                    outcome="warned",
                )
                return node.left.left  # type: ignore[attr-defined]
        if isinstance(orig, (cst.Call, cst.BinaryOperation)):
            return self._runtime_ordinal(ctx, orig, node)
        if isinstance(orig, cst.FormattedString) and (plain := _text_only(node)) is not None:
            node = plain  # f"cuda": no placeholder, the same literal as "cuda" (guided-diffusion's dev())
        if id(orig) in ctx.scratch.get("ordinal-concat", ()) and id(orig) not in ctx.string_claims:
            return None  # (the concatenation around it is rewritten as a whole: _runtime_ordinal)
        if isinstance(orig, (cst.SimpleString, cst.FormattedString)) and isinstance(node, cst.SimpleString):
            new = self.new_body(string_body(node))
            if new is None:
                return None
            ordinal = re.fullmatch(r"\w+:(\d+)", string_body(node) or "")
            compared = ctx.string_claims.get(id(orig), ("",))[0] == COMPARISON_CODE  # (as in a placement)
            sole = (
                ordinal is not None
                and (string_body(node) or "").startswith("cuda:")  # (torch_xla's 'xla:1' is another device)
                and id(orig) not in ctx.string_claims
                and self.replacement == "tpu"
                and _sole_ordinal(ctx) == int(ordinal.group(1)) > 0
            )
            if sole:
                new = self.replacement
            elif ordinal and int(ordinal.group(1)) > 0 and (id(orig) not in ctx.string_claims or compared):
                ctx.flag(
                    orig,
                    f"{self.what} '{string_body(node)}' names another device of this process; TorchTPU "
                    "binds one device per process: place the work by hand (one process per device, or DTensor)",
                    code=self.code,
                )
                return None
            claim = ctx.string_claims.get(id(orig))
            if claim is not None:
                claim_code, outcome, message, value = claim
                if value is not None:  # another rule (e.g. TPU403) owns this literal
                    return None
                if not claim_code:  # kept on purpose (dict keys)
                    return None
            if claim is not None and claim[1] == "flagged":  # (first: the dispatch test below would see, on a
                ctx.flag(orig, claim[2], code=claim[0])  # second run, the 'tpu' names the first one wrote)
                ctx.keep_branch()
                return None
            body = string_body(node) or ""
            default = id(orig) in ctx.scratch.get("literal-default-branch", ())  # type: ignore[operator]
            reason = (
                None
                if default
                else kept_reason(ctx, body.split(":")[0], self.others) or self.data_reason(ctx)
            )
            if reason is not None:
                # (a name translated at run time elsewhere needs no path of its own: data_reason says where)
                todo = (
                    "kept as written"
                    if "at run time" in reason
                    else f"kept; add the '{self.replacement}' path by hand"
                )
                ctx.flag(orig, f"{reason}: {todo}", code=self.code)
                ctx.keep_branch()  # (when the literal is in an if's test, that if's body is CUDA's branch)
                return None
            if claim is not None:
                ctx.report(orig, claim[2], code=claim[0], outcome=claim[1])
                if id(orig) in ctx.scratch.get("cli-ordinals", ()):  # type: ignore[operator]
                    return with_body(node, self.replacement)
            elif sole:
                ctx.report(
                    orig,
                    f"{self.what} '{string_body(node)}' -> '{new}' (the file's only GPU ordinal: it picked one GPU "
                    "of the author's machine; TorchTPU binds one device per process)",
                    code=self.code,
                    outcome="warned",
                )
            else:
                ctx.report(orig, f"{self.what} '{string_body(node)}' -> '{new}'", code=self.code)
            return with_body(node, new)
        if (
            isinstance(node, cst.FormattedString)
            and (
                kept := ctx.scratch.get("kept-fstrings", {}).get(id(orig))  # type: ignore[union-attr]
            )
            is not None
        ):
            if isinstance(kept, tuple):  # (a rule's own: the other literal rules leave it)
                kept = kept[1] if kept[0] == self.code else ""
            if kept:
                ctx.flag(orig, kept, code=self.code)
            return None
        if isinstance(node, cst.FormattedString) and len(node.parts) >= 2:
            first = node.parts[0]
            if isinstance(first, cst.FormattedStringText):
                m = re.fullmatch(r"(cuda|xla):?", first.value)
                if m and not first.value.endswith(":") and not _device_built(ctx, node):
                    m = None  # (f"cuda{i}_results": a name; esm's torch.device(f'cuda{device_idx}'), idx ":0")
                if m and self.new_body(m.group(1)) is not None:
                    if self._foreign_ordinal(ctx, orig):
                        return None
                    if (claim := ctx.string_claims.get(id(orig))) is not None and not claim[0]:
                        return None  # kept on purpose (a CPU-or-CUDA-only library's device)
                    if len(node.parts) == 2 and isinstance(node.parts[1], cst.FormattedStringExpression):
                        # f"cuda:{local_rank}": the ordinal picked this process's GPU; TorchTPU binds one device
                        # per process (its own is "tpu", another ordinal does not exist there)
                        ctx.report(
                            orig,
                            f"{self.what} f'{first.value}{{...}}' -> '{self.replacement}' (one device "
                            "per process: the ordinal chose this process's GPU)",
                            code=self.code,
                            outcome="warned",
                        )
                        quote = node.start.lstrip("fFrR")
                        return cst.SimpleString(f"{quote}{self.replacement}{quote}")
                    ctx.report(
                        orig, f"{self.what} f'{first.value}...' -> f'{self.replacement}:...'", code=self.code
                    )
                    return node.with_changes(
                        parts=[first.with_changes(value=f"{self.replacement}:"), *node.parts[1:]]
                    )
        return None


#: Devices a parametrized test offers beside CUDA (its 'cuda' case is then one of several, with its own skip).
_OTHER_DEVICE_CASES = frozenset({"cpu", "mps", "xpu", "meta", "hpu", "npu", "xla", "tpu"})

_AUTOCAST_NAMES = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
    }
)


def _autocast_alias(ctx: Context, name: str) -> bool:
    """``name`` is bound, in the enclosing function or the module, to torch's autocast (alone or as one branch of
    a conditional: ``autocast if opt.precision == "autocast" else nullcontext``)."""
    defs = [d for d in ctx.statements() if type(d) is cst.FunctionDef]
    scope = defs[-1] if defs else ctx.module
    cache = ctx.scratch.setdefault("autocast-aliases", {})
    found = cache.get(id(scope))  # type: ignore[union-attr]
    if found is None:
        found = set()
        todo: list[cst.CSTNode] = [scope.body if type(scope) is cst.FunctionDef else scope]  # type: ignore[union-attr]
        while todo:
            n = todo.pop()
            if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda) and n is not scope:
                continue
            if type(n) is cst.Assign and len(n.targets) == 1 and type(n.targets[0].target) is cst.Name:  # type: ignore[attr-defined]
                refs = [n.value, *(([n.value.body, n.value.orelse]) if type(n.value) is cst.IfExp else [])]  # type: ignore[attr-defined]
                if any(
                    type(r) in (cst.Name, cst.Attribute) and ctx.qname(r) in _AUTOCAST_NAMES for r in refs
                ):
                    found.add(n.targets[0].target.value)  # type: ignore[attr-defined]
                continue
            todo.extend(child_nodes(n))
        cache[id(scope)] = found  # type: ignore[index]
    return name in found
