"""Facts about the whole project a run migrates, read once before the files are migrated one by one.

Why: a rule sees one file, but some meanings are set in another one. Measured on held-out code (nanotron,
Megatron-DeepSpeed): ``nanotron_timer(name, "cuda")`` passes the value of the project's ``TimerType.CUDA`` enum
(renamed, ``TimerType("tpu")`` raises on the first step), and ``@require_torch_bf16``, imported from the
project's testing utilities, runs a test only where CUDA is (its body skips "test requires CUDA hardware ...").
The facts are read with Python's ``ast`` from the files whose text can hold them (a word test first), so a run
pays a few parses, not a second pass over the tree:

- :attr:`ProjectFacts.gates` - functions that skip a test unless CUDA is there (a CUDA-naming skip reason under
  a negative test, or ``skipUnless(<CUDA check>, reason)``): tests they decorate are CUDA's tests;
- :attr:`ProjectFacts.enum_params` - parameters typed or defaulted with a project ``Enum`` that has a
  device-named member (``CUDA = "cuda"``): a device string passed there is that enum's value, not a device.

A run installs its facts (:func:`installed`); each file adds its own (:func:`facts_for`), so one file migrated
alone sees what it defines itself.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import _sparse
from .discover import walk

#: Files bigger than this are not scanned (generated code holds no such helper; the scan stays cheap).
SCAN_BYTES = 2 << 20
#: An enum member's value that a device rule would rename.
_DEVICE_VALUE = re.compile(r"(?:cuda|gpu|nccl|xla)(?::\d+)?", re.I)
#: A skip reason that says CUDA or a GPU is needed.
#: A message that says CUDA or a GPU is needed (shared with the rules: migrate.rules.cuda_api).
NEEDS_CUDA = re.compile(r"\b(?:cuda|gpus?|nvidia)\b", re.I)
_SKIP_CALLS = frozenset({"skip", "SkipTest", "skipTest"})
_SKIP_UNLESS = frozenset({"skipUnless", "skip_unless"})
_SKIP_IF = frozenset({"skipIf", "skip_if", "skipif"})


@dataclass(frozen=True)
class EnumParam:
    """A parameter that takes a project enum's value: its position (``self`` not counted; None for
    keyword-only), its name, the enum and the enum's device-named values."""

    position: int | None
    name: str
    enum: str
    values: frozenset[str]


@dataclass(frozen=True)
class ProjectFacts:
    gates: frozenset[str] = frozenset()
    #: callee name (a function, a method, a class for its ``__init__``, an instance for its ``__call__``) ->
    #: the parameters that take a device-named enum's value
    enum_params: dict[str, tuple[EnumParam, ...]] = field(default_factory=dict)
    #: absolute path of a module that only CUDA-only files of the project import -> why (one importer named)
    cuda_only_helpers: dict[str, str] = field(default_factory=dict)
    #: absolute path of a module whose top-level imports load a CUDA-only project file -> the TODO that says so
    #: (it is still migrated: it runs on TPU once that file is ported)
    built_on_cuda_only: dict[str, str] = field(default_factory=dict)
    #: functions that answer whether a CUDA-only stack imports (llm-foundry's ``is_flash_v2_installed()``, and
    #: those that call one): a test skipped unless one answers True is a test of that stack
    probes: frozenset[str] = frozenset()
    #: the folder holding every file of the run ("" when migrating text alone): a CUDA library's folder inside it
    #: is a copy the project carries; the folder itself (the run is on that library's repository) is not
    tree: str = ""
    #: (name, path): a file that creates a process group with a backend read from data under that name (the last
    #: part of ``config.dist_backend``), whose call the migration wraps in _tpu_backend(...): a config's 'nccl'
    #: stored under the same name is translated there at run time
    groups_from_data: tuple[tuple[str, str], ...] = ()
    #: absolute path of a module whose imports (function-level too, through other project modules) reach a
    #: project file built on a CPU-or-CUDA-only library (whisperX's CLI -> transcribe.py -> asr.py, which
    #: imports faster_whisper) -> why: the device its checks choose may be handed to that library, which takes
    #: "cpu" or "cuda" only, so its checks are kept (see migrate.flow)
    reaches_device_limited: dict[str, str] = field(default_factory=dict)
    #: functions of the project that return sparse tensors -> the sparse positions of their returned tuple (()
    #: for one tensor): moving those to 'tpu' fails on TorchTPU (migrate._sparse)
    sparse_returns: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: modules the project builds from CUDA sources (setup.py's ``CUDAExtension(name="MultiScaleDeformableAttention",
    #: ...)``, ``cpp_extension.load(name="_raymarching", sources=[... ".cu"])``): importing one is importing a
    #: CUDA kernel, whatever its name (migrate.rules.cuda_api.cuda_only_module)
    cuda_extensions: frozenset[str] = frozenset()
    #: functions of the project's tests that only tests gated on CUDA call (torchmetrics'
    #: ``MetricTester.run_precision_test_gpu(device="cuda")``, called by every ``@skipif(not
    #: torch.cuda.is_available())`` test): they stay CUDA's with their callers, which the migration keeps whole
    cuda_test_helpers: frozenset[str] = frozenset()
    #: absolute path of a module -> the torch names it gets from ``from <project module> import *`` (ElegantRL's
    #: ``from methods.L2A.TNCO_local_search import *`` brings ``th``, that module's ``import torch as th``)
    star_names: dict[str, dict[str, str]] = field(default_factory=dict)
    #: classes of the project, not torch modules, that define their own ``cuda()`` (torchdrug's ``Graph``, whose
    #: ``to(device)`` sends every non-CPU device back to ``cuda``): ``obj.cuda()`` on one is the project's method
    own_cuda_classes: frozenset[str] = frozenset()
    #: absolute path of a module -> {a module it imports inside a function: why}, where that module is a project
    #: file built on a CUDA-only stack (LLaMA2-Accessory's demos: ``from accessory.util.quant import quantize``
    #: inside main, quant.py importing bitsandbytes): what follows that import runs where the stack does
    nested_cuda_only: dict[str, dict[str, str]] = field(default_factory=dict)
    #: absolute path of a module -> {a name it imports at top level from a project file built on a CUDA-only
    #: stack: that stack} (axolotl's marlin ``from . import load_ext``, the package building ``.cu`` sources)
    cuda_only_names: dict[str, dict[str, str]] = field(default_factory=dict)
    #: absolute paths of the modules whose top-level imports load, directly or through project files, a project
    #: file built on a CPU-or-CUDA-only library (DETA's configs -> its modeling package -> detectron2's
    #: batched_nms): the program they build runs on the CPU or CUDA only, so they are left as written
    loads_device_limited: frozenset[str] = frozenset()

    def merged(self, other: ProjectFacts) -> ProjectFacts:
        if not (
            other.gates
            or other.enum_params
            or other.cuda_only_helpers
            or other.built_on_cuda_only
            or other.probes
            or other.groups_from_data
            or other.reaches_device_limited
            or other.sparse_returns
            or other.cuda_extensions
            or other.cuda_test_helpers
            or other.star_names
            or other.own_cuda_classes
            or other.nested_cuda_only
            or other.cuda_only_names
            or other.loads_device_limited
        ):
            return self
        params = dict(self.enum_params)
        for k, v in other.enum_params.items():
            params[k] = tuple(dict.fromkeys((*params.get(k, ()), *v)))
        helpers = {**other.cuda_only_helpers, **self.cuda_only_helpers}
        built_on = {**other.built_on_cuda_only, **self.built_on_cuda_only}
        return ProjectFacts(
            self.gates | other.gates,
            params,
            helpers,
            built_on,
            self.probes | other.probes,
            self.tree or other.tree,
            tuple(dict.fromkeys((*self.groups_from_data, *other.groups_from_data))),
            {**other.reaches_device_limited, **self.reaches_device_limited},
            {**other.sparse_returns, **self.sparse_returns},
            self.cuda_extensions | other.cuda_extensions,
            self.cuda_test_helpers | other.cuda_test_helpers,
            {**other.star_names, **self.star_names},
            self.own_cuda_classes | other.own_cuda_classes,
            {**other.nested_cuda_only, **self.nested_cuda_only},
            {**other.cuda_only_names, **self.cuda_only_names},
            self.loads_device_limited | other.loads_device_limited,
        )


EMPTY = ProjectFacts()
_installed: ProjectFacts = EMPTY


@contextmanager
def installed(facts: ProjectFacts) -> Iterator[None]:
    """Make ``facts`` the run's facts while the block runs (the calling process or a worker)."""
    global _installed
    old, _installed = _installed, facts
    try:
        yield
    finally:
        _installed = old


def current() -> ProjectFacts:
    return _installed


#: A member assigned a device name (``CUDA = "cuda"``); a skip call whose reason names CUDA or a GPU.
_ENUM_WORDS = re.compile(r"""=\s*["'](?:cuda|gpu|nccl|xla)(?::\d+)?["']""", re.I)
_GATE_WORDS = re.compile(r"""(?i)skip\w*\((?:[^()'"]|\([^()]*\))*["'][^"'\n]*\b(?:cuda|gpus?|nvidia)\b""")


def _may_hold(text: str) -> tuple[bool, bool]:
    """(may define a device-named enum, may define a skip gate): text tests before any parse."""
    enum = "Enum" in text and _ENUM_WORDS.search(text) is not None
    return enum, "skip" in text and _GATE_WORDS.search(text) is not None


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _device_enums(tree: ast.Module) -> dict[str, frozenset[str]]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_last(b).endswith("Enum") for b in node.bases):
            values = frozenset(
                s.value.value
                for s in node.body
                if isinstance(s, ast.Assign)
                and isinstance(s.value, ast.Constant)
                and isinstance(s.value.value, str)
                and _DEVICE_VALUE.fullmatch(s.value.value)
            )
            if values:
                out[node.name] = values
    return out


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {_last(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _enum_params(tree: ast.Module, enums: dict[str, frozenset[str]]) -> dict[str, tuple[EnumParam, ...]]:
    out: dict[str, list[EnumParam]] = {}
    callables: dict[str, str] = {}  # class -> the key its instances are called by
    for owner, fn in _functions(tree):
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        shift = 1 if owner is not None and positional and positional[0].arg in ("self", "cls") else 0
        found = []
        params = [(i - shift, p, d) for i, (p, d) in enumerate(zip(positional, defaults, strict=True))]
        params += [(None, p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
        for pos, p, default in params:
            hit = (_names(p.annotation) | _names(default)) & enums.keys()
            for enum in sorted(hit):
                found.append(EnumParam(pos if pos is None or pos >= 0 else None, p.arg, enum, enums[enum]))
        if not found:
            continue
        key = fn.name
        if owner is not None and fn.name == "__init__":
            key = owner
        elif owner is not None and fn.name == "__call__":
            key = callables[owner] = f"{owner}()"
        out.setdefault(key, []).extend(found)
    for node in tree.body:  # `timer = Timers()` at module level: calling `timer(...)` runs Timers.__call__
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and (inst := callables.get(_last(node.value.func)))
        ):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).extend(out[inst])
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}


def _functions(tree: ast.Module) -> Iterator[tuple[str | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.walk(tree):
        body = node.body if isinstance(node, (ast.Module, ast.ClassDef)) else ()
        owner = node.name if isinstance(node, ast.ClassDef) else None
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield owner, s


def _cuda_reason(call: ast.Call) -> bool:
    return any(
        isinstance(c, ast.Constant) and isinstance(c.value, str) and NEEDS_CUDA.search(c.value)
        for a in [*call.args, *(k.value for k in call.keywords)]
        for c in ast.walk(a)
    )


def _skips_for_cuda(body: list[ast.stmt]) -> bool:
    """The block skips the test (``return unittest.skip(reason)(test)``, ``pytest.skip(reason)``, ``raise
    SkipTest(reason)``) with a reason that names CUDA or a GPU."""
    for s in body:
        value = s.exc if isinstance(s, ast.Raise) else getattr(s, "value", None)
        for call in (value, getattr(value, "func", None)):
            if isinstance(call, ast.Call) and _last(call.func) in _SKIP_CALLS and _cuda_reason(call):
                return True
    return False


def _when_missing(test: ast.expr) -> bool:
    """A test true when CUDA is missing: ``not x``, ``device != "cuda"``, ``count < n``, ``count == 0``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.BoolOp):
        return any(_when_missing(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Lt, ast.LtE)):
            return True
        if isinstance(op, ast.NotEq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return _DEVICE_VALUE.fullmatch(right.value) is not None
        return isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and right.value == 0
    return False


def _is_gate(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and _when_missing(node.test) and _skips_for_cuda(node.body):
            return True
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            inner = node.value.func
            if not (isinstance(inner, ast.Call) and inner.args and _cuda_reason(inner)):
                continue
            name, cond = _last(inner.func), inner.args[0]
            if name in _SKIP_UNLESS or (name in _SKIP_IF and _when_missing(cond)):
                return True
    return False


#: A test decorator that runs the test only where CUDA is (``@pytest.mark.skipif(not torch.cuda.is_available(),
#: ...)``, ``@unittest.skipUnless(torch.cuda.is_available(), ...)``), read from its source text.
_CUDA_GATE_TEXT = re.compile(r"skip\w*\((?:[^()]|\([^()]*\))*\bcuda\.(?:is_available|device_count)\(")


def _gated_tests(tree: ast.Module) -> list[tuple[int, int, set[str], str | None]]:
    """(first line, last line, names it calls, its name where the function skips itself) of each function run
    only where CUDA is: a test under a CUDA gate, or one that skips itself without CUDA (torchmetrics' retrieval
    ``run_precision_test_gpu``: ``if not torch.cuda.is_available(): pytest.skip("Test requires GPU")``)."""
    out = []
    for _owner, fn in _functions(tree):
        decorated = any(_CUDA_GATE_TEXT.search(ast.unparse(d)) for d in fn.decorator_list)
        itself = not decorated and _is_gate(fn)
        if decorated or itself:
            called = {
                _last(n.func)
                for n in ast.walk(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
            }
            out.append((fn.lineno, fn.end_lineno or fn.lineno, called, fn.name if itself else None))
    return out


def _cuda_test_helpers(
    sources: list[tuple[str, str]], gated: list[tuple[str, list[tuple[int, int, set[str], str | None]]]]
) -> frozenset[str]:
    """Functions defined in the project's test files with a CUDA device in them that only CUDA-gated tests call
    (see ProjectFacts.cuda_test_helpers): a call anywhere else rules one out (by name: each definition of it),
    unless a definition of that name skips itself without CUDA (the call is then gated by its callee)."""
    wanted = {name for _p, tests in gated for _a, _b, called, _n in tests for name in called}
    if not wanted:
        return frozenset()
    gates_at = {
        (p, a) for p, tests in gated for a, _b, _c, name in tests if name
    }  # (those that skip themselves)
    defined: set[str] = set()
    for path, text in sources:
        if "test" not in path.replace("\\", "/").lower():
            continue
        for m in _DEF_WITH_CUDA.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            if m.group(1) in wanted and m.group(1) not in _TEST_HOOKS and (path, line) not in gates_at:
                defined.add(m.group(1))  # (captum's setUp skips itself without CUDA: a gate, not a helper)
    if not defined:
        return frozenset()
    self_gated = {name for _p, tests in gated for *_rest, name in tests if name}
    ranges = {p: [(a, b) for a, b, _c, _n in tests] for p, tests in gated}
    names = re.compile(r"(?<![\w])(" + "|".join(map(re.escape, sorted(defined - self_gated))) + r")\s*\(")
    outside: set[str] = set()
    for path, text in sources if defined - self_gated else ():
        spans = ranges.get(path, [])
        for m in names.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            if text[max(0, m.start() - 4) : m.start()] == "def ":
                continue
            if not any(a <= line <= b for a, b in spans):
                outside.add(m.group(1))
    return frozenset(n for n in defined if n not in outside)


#: Methods a test framework calls itself (never a helper the tests call by name).
_TEST_HOOKS = frozenset(
    {
        "setUp",
        "tearDown",
        "setUpClass",
        "tearDownClass",
        "setup_method",
        "teardown_method",
        "setup",
        "teardown",
    }
)
#: A def whose own lines (up to the next def or class) hold a CUDA device name.
_DEF_WITH_CUDA = re.compile(
    r"^[ \t]*def[ \t]+(\w+)\((?:(?!^[ \t]*(?:def|class)[ \t]).)*?['\"]cuda(?::\d+)?['\"]", re.M | re.S
)


def _probes(tree: ast.Module, path: str, is_cuda_only: Callable[[str, str], bool]) -> set[str]:
    """Module-level functions of ``tree`` that import a CUDA-only module (``try: import flash_attn`` then
    ``return True``), and those of the same module that call one (``check_alibi_support('flash')``)."""
    funcs = {fn.name: fn for owner, fn in _functions(tree) if owner is None}
    found: set[str] = set()
    for name, fn in funcs.items():
        for n in ast.walk(fn):
            mods = (
                [a.name for a in n.names]
                if isinstance(n, ast.Import)
                else [n.module]
                if isinstance(n, ast.ImportFrom) and n.module and not n.level
                else []
            )
            if any(is_cuda_only(m, path) for m in mods):
                found.add(name)
                break
    grown = bool(found)
    while grown:
        grown = False
        for name, fn in funcs.items():
            if name not in found and any(
                isinstance(n, ast.Call) and _last(n.func) in found for n in ast.walk(fn)
            ):
                found.add(name)
                grown = True
    return found


def scan_sources(
    sources: Iterable[tuple[str, str]],
    is_cuda_only: Callable[[str, str], bool] | None = None,
    is_device_limited: Callable[[str], bool] | None = None,
) -> ProjectFacts:
    """The facts of these (path, module text) pairs: every device-named enum, then what takes one; the
    test gates; the modules only CUDA-only files import."""
    sources = [(p, t) for p, t in sources if len(t) <= SCAN_BYTES]
    extensions = frozenset(n for _p, t in sources for n in cuda_extension_names(t))
    if extensions and is_cuda_only is not None:
        base = is_cuda_only

        def is_cuda_only(mod: str, path: str, _base=base) -> bool:
            return mod in extensions or _base(mod, path)

    seen: list[tuple[str, str, ast.Module | None]] = []
    gates: set[str] = set()
    probes: set[str] = set()
    enums: dict[str, frozenset[str]] = {}
    sparse_trees: list[ast.Module] = []
    gated_tests: list[tuple[str, list[tuple[int, int, set[str], str | None]]]] = []
    for path, text in sources:
        if len(text) > SCAN_BYTES:
            continue
        enum_words, gate_words = _may_hold(text)
        probe_words = is_cuda_only is not None and any(
            not top and not level and is_cuda_only(mod, path) for top, level, mod, _n in _imports(text)
        )
        sparse_words = any(w in text for w in _sparse.WORDS)
        tree = _parse(text) if enum_words or gate_words or probe_words or sparse_words else None
        if tree is not None and sparse_words:
            sparse_trees.append(tree)
        if tree is not None and gate_words:
            gates |= {fn.name for owner, fn in _functions(tree) if owner is None and _is_gate(fn)}
            gated_tests.append((path, _gated_tests(tree)))
        if tree is not None and probe_words and is_cuda_only is not None:
            probes |= _probes(tree, path, is_cuda_only)
        if tree is not None and enum_words:
            enums.update(_device_enums(tree))
        seen.append((path, text, tree))
    helpers, built_on, reaches, nested, names, loads_limited = _cuda_only_links(
        [(p, t) for p, t, _ in seen], is_cuda_only, is_device_limited
    )
    helpers = {**_on_deepspeed_accelerator([(p, t) for p, t, _ in seen]), **helpers}
    from_data = tuple(dict.fromkeys((name, p) for p, t, _ in seen for name in _backends_from_data(t)))
    facts = ProjectFacts(
        frozenset(gates),
        {},
        helpers,
        built_on,
        frozenset(probes),
        groups_from_data=from_data,
        reaches_device_limited=reaches,
        sparse_returns=_sparse.sparse_returns(sparse_trees),
        cuda_extensions=extensions,
        cuda_test_helpers=_cuda_test_helpers([(p, t) for p, t, _ in seen], gated_tests),
        star_names=_star_names([(p, t) for p, t, _ in seen]),
        nested_cuda_only=nested,
        cuda_only_names=names,
        loads_device_limited=loads_limited,
        own_cuda_classes=_with_subclasses(
            frozenset(c for _p, t, tree in seen for c in _own_cuda_classes(t, tree)), [t for _p, t, _ in seen]
        ),
    )
    if not enums:
        return facts
    named = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(enums))) + r")\b")
    for _path, text, tree in seen:  # (a file that types a parameter with the enum need not say "Enum")
        if named.search(text) and (tree := tree or _parse(text)) is not None:
            facts = facts.merged(ProjectFacts(frozenset(), _enum_params(tree, enums)))
    return facts


#: A method ``cuda`` defined in a class body.
_OWN_CUDA = re.compile(r"^[ \t]+def cuda\(self\b", re.M)
#: Bases that make a class a torch module or tensor (its ``cuda`` wraps torch's own).
_TORCH_BASES = re.compile(r"Module|Tensor|Parameter|nn\.|Sequential|ModuleList|ModuleDict")


def _own_cuda_classes(text: str, tree: ast.Module | None) -> Iterator[str]:
    """Classes of this module defining ``cuda(self, ...)`` whose bases are not torch modules or tensors."""
    if _OWN_CUDA.search(text) is None or (tree := tree or _parse(text)) is None:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = " ".join(ast.unparse(b) for b in node.bases)
        if _TORCH_BASES.search(bases):
            continue
        if any(isinstance(s, ast.FunctionDef) and s.name == "cuda" for s in node.body):
            yield node.name


_CLASS_LINE = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)


def _with_subclasses(classes: frozenset[str], texts: list[str]) -> frozenset[str]:
    """``classes`` and the project's classes derived from them (torchdrug's ``Molecule(Graph)``), by name."""
    if not classes:
        return classes
    found = set(classes)
    pairs = [(m.group(1), m.group(2)) for t in texts if "class " in t for m in _CLASS_LINE.finditer(t)]
    grown = True
    while grown:
        grown = False
        for name, bases in pairs:
            if name not in found and any(b.strip().rsplit(".", 1)[-1] in found for b in bases.split(",")):
                found.add(name)
                grown = True
    return frozenset(found)


#: DeepSpeed's device abstraction imported (``from deepspeed.accelerator import get_accelerator``).
_DS_ACCELERATOR = re.compile(
    r"^\s*from\s+deepspeed\.accelerator\s+import\b|\bdeepspeed\.accelerator\.get_accelerator\b", re.M
)
#: A project whose device is DeepSpeed's: this many of its modules import the abstraction, and at least this share
#: of those that name CUDA (a repository with one DeepSpeed example among plain scripts is not one).
DS_ACCELERATOR_MODULES, DS_ACCELERATOR_SHARE = 5, 0.2


def _on_deepspeed_accelerator(sources: list[tuple[str, str]]) -> dict[str, str]:
    """Megatron-DeepSpeed: the model, its buffers and process groups are placed with DeepSpeed's
    ``get_accelerator()``, which has no TPU accelerator (the CPU on a TPU host), so the CUDA left in its scripts
    (``data.cuda()``, ``torch.cuda.FloatTensor`` buffers) moved to 'tpu' meets a model on the CPU. Every module of
    such a project that names CUDA -> why it is left as written (one TODO at its first statement)."""
    users = [p for p, t in sources if "deepspeed" in t and _DS_ACCELERATOR.search(t)]
    cuda = [(p, t) for p, t in sources if "cuda" in t or "nccl" in t]
    if len(users) < DS_ACCELERATOR_MODULES or len(users) < DS_ACCELERATOR_SHARE * len(cuda):
        return {}
    why = (
        f"this project places its model, buffers and process groups with DeepSpeed's accelerator "
        f"(`get_accelerator()`, imported by {len(users)} of its modules), which has no TPU accelerator (the CPU "
        "on a TPU host): tensors moved to 'tpu' here would meet a model on the CPU; left as written: give the "
        "project's device choice a 'tpu' path first"
    )
    return {p: why for p, _t in cuda}


#: ``init_process_group(backend=config.dist_backend)`` / ``init_process_group(args.backend, ...)`` (or already
#: wrapped, ``backend=_tpu_backend(cfg.DIST_BACKEND)``): a backend that is not a literal (Depth-Anything's zoedepth
#: parallelize(), SlowFast's multiprocessing.py).
_GROUP_CALL = re.compile(r"init_process_group\(([^)]*)")
_BACKEND_VALUE = re.compile(r"^\s*(?:_tpu_backend\(\s*)?([A-Za-z_][\w.]*)")


def _backends_from_data(text: str) -> Iterator[str]:
    """The names (last dotted part) of the non-literal backends this text creates process groups with."""
    if "init_process_group" not in text:
        return
    for m in _GROUP_CALL.finditer(text):
        args = m.group(1)
        kw = re.search(r"\bbackend\s*=\s*(.*)", args)
        first = args if kw is None and not re.match(r"\s*\w+\s*=", args) else (kw.group(1) if kw else "")
        v = _BACKEND_VALUE.match(first)
        if v is not None and v.group(1) not in ("None", "True", "False"):
            yield v.group(1).rsplit(".", 1)[-1]


def scan_texts(texts: Iterable[str]) -> ProjectFacts:
    """:func:`scan_sources` of module texts without paths (no import links between them)."""
    return scan_sources((f"<text {i}>", t) for i, t in enumerate(texts))


def scan_files(
    paths: Iterable[str],
    is_cuda_only: Callable[[str, str], bool] | None = None,
    is_device_limited: Callable[[str], bool] | None = None,
) -> ProjectFacts:
    """:func:`scan_sources` over the ``.py`` files among ``paths`` (an unreadable file is left out);
    ``is_cuda_only(module, importer_path)`` names the CUDA-only modules (the rules' test, passed in by the engine
    so that this module imports no rule); ``is_device_limited(module)`` names those of them that take a device
    ("cpu" or "cuda" only: CTranslate2, detectron2)."""

    def sources() -> Iterator[tuple[str, str]]:
        for p in paths:
            if not p.endswith(".py"):
                continue
            try:
                with open(p, "rb") as f:
                    data = f.read(SCAN_BYTES + 1)
                yield os.path.abspath(p), data.decode("utf-8", errors="replace")
            except OSError:
                continue

    return scan_sources(sources(), is_cuda_only, is_device_limited)


# --- modules that only CUDA-only files import -----------------------------------------------------------------
# modded-nanogpt's evals/hellaswag.py is called only from train_gpt.py, which imports triton and so is left as
# written (flag-only): migrated alone, the helper put its tensors on 'tpu' beside a model left on 'cuda'.
_IMPORT = re.compile(
    r"^([ \t]*)(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(?:\(([^()]*)\)|([\w \t,]*))"
    r"|import[ \t]+([\w.][\w., \t]*))",
    re.M,
)
#: A kernel defined with a stack's decorator (``@triton.jit``, ``@triton.autotune(...)``, ``@tilelang.jit``): the
#: decorator's root name (shared with migrate.source).
KERNEL_DECORATOR = re.compile(r"^[ \t]*@[ \t]*([A-Za-z_]\w*)(?:\.\w+)*\.(?:jit|autotune|heuristics)\b", re.M)
#: A kernel compiled from CUDA sources at run time (``load_inline(cuda_sources=...)``, ``load(sources=["k.cu"])``).
_CUDA_SOURCES = re.compile(r"\bcuda_sources\s*=|\bextra_cuda_cflags\s*=|\bload\s*\([^)]*\.cu['\"]")
#: What a test module holds besides its name: a test function or class, or a test framework's import (SlowFast's
#: tools/test_net.py is the evaluation script, named like a test).
_TEST_CONTENT = re.compile(
    r"^[ \t]*(?:def test_|class Test|import (?:pytest|unittest)\b|from (?:pytest|unittest)\b)", re.M
)


def is_test_file(path: str, text: str) -> bool:
    """``path`` is a test module: named as pytest collects (``test_*.py``, ``*_test.py``) and holding tests."""
    return TEST_FILE.match(os.path.basename(path)) is not None and _TEST_CONTENT.search(text) is not None


#: pytest's default test-file names (shared with migrate.source).
TEST_FILE = re.compile(r"^(?:test_.*|.*_test)\.py$")


def _imports(text: str) -> Iterator[tuple[bool, int, str, list[str]]]:
    """(at top level, relative level, module, imported names) of each import line; ``import a, b`` gives one
    entry per module. A text scan: a parenthesised list of names may run over lines."""
    for m in _IMPORT.finditer(text):
        top = m.group(1) == ""
        if m.group(6) is not None:
            for part in m.group(6).split(","):
                mod = part.split(" as ")[0].strip()
                if mod:
                    yield top, 0, mod, []
            continue
        listed = m.group(4) if m.group(4) is not None else m.group(5)
        listed = re.sub(r"#[^\n]*", "", listed)  # (a parenthesised list over lines, its comments dropped)
        names = [n.split(" as ")[0].strip() for n in listed.split(",")]
        yield top, len(m.group(2)), m.group(3), [n for n in names if n and n != "*"]


#: A name imported from a module that can be a compiled extension by its name (``ngram_repeat_block_cuda``,
#: ``cuda_ops``), not a function that merely mentions CUDA (detectron2's ``retry_if_cuda_oom``).
_EXTENSION_NAME = re.compile(r"(?:^|_)cuda$|^cuda_")


def _module_like(name: str) -> bool:
    return "cuda" not in name.lower() or _EXTENSION_NAME.search(name) is not None


def _imports_cuda_only(path: str, text: str, is_cuda_only: Callable[[str, str], bool]) -> str | None:
    """The CUDA-only module that makes ``path`` flag-only (migrate.source.flag_only_mode: a top-level import, or
    any import in a test file; a build from CUDA sources; the project's own CUDA extension with no fallback
    but another build of it), else None (see also :func:`_guarded_kernels`)."""
    test_file = is_test_file(path, text)
    for top, level, mod, names in _imports(text):
        if level or not (top or test_file):
            continue
        if is_cuda_only(mod, path):
            return mod
        # d2go's detr: `from detr import _C as MSDA`, the `detr._C` its setup.py builds with CUDAExtension
        if (
            kernel := next(
                (f"{mod}.{n}" for n in names if _module_like(n) and is_cuda_only(f"{mod}.{n}", path)), None
            )
        ) is not None:
            return kernel
    if "cpp_extension" in text and builds_cuda_sources(text) and not _cuda_build_optional(text):
        return (
            "torch.utils.cpp_extension"  # a kernel built from CUDA sources (fairseq MMS's lib.py load_inline)
        )
    return kernel_without_fallback(path, text, is_cuda_only)


#: The name a project gives the CUDA extension it builds: setup.py's ``CUDAExtension("name", ...)`` /
#: ``CUDAExtension(name="pkg._C", ...)``, and a run-time build, ``load(name="_raymarching", ...)``.
_EXTENSION_NAME = re.compile(r"""\bCUDAExtension\(\s*(?:name\s*=\s*)?['"]([\w.]+)['"]""")
_EXTENSION_ALIAS = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*CUDAExtension[ \t]*$", re.M)
_JIT_NAME = re.compile(r"""\bload\(\s*name\s*=\s*['"]([\w.]+)['"]""")


def cuda_extension_names(text: str) -> Iterator[str]:
    """The modules this file builds from CUDA sources (see ProjectFacts.cuda_extensions): each name and its last
    part (``pkg._C`` is imported as ``from pkg import _C`` too)."""
    found = []
    if "CUDAExtension" in text:
        found += _EXTENSION_NAME.findall(text)
        # `extension = CppExtension` ... `extension = CUDAExtension` ... `extension("MultiScaleDeformableAttention",`
        for alias in set(_EXTENSION_ALIAS.findall(text)):
            found += re.findall(rf"""\b{alias}\(\s*(?:name\s*=\s*)?['"]([\w.]+)['"]""", text)
    if "cpp_extension" in text and builds_cuda_sources(text):
        found += _JIT_NAME.findall(text)
    own = _KERNEL_PACKAGE.search(text)
    for name in found:
        yield name
        if "." in name:
            yield name.rsplit(".", 1)[1]
    if own is not None and any(name.split(".", 1)[0].startswith(own.group(1)) for name in found):
        # Pointcept's libs/pointops: `packages=["pointops"]` beside `CUDAExtension(name="pointops._C")`, and
        # libs/pointgroup_ops: `packages=["pointgroup_ops"]` beside `CUDAExtension(name="pointgroup_ops_cuda")`:
        # the one package the setup ships exists to wrap its kernels, so importing it is importing them
        yield own.group(1)


#: A setup.py that ships one package by a literal list (a kernel package: ``packages=["pointops"]``), not
#: ``find_packages()`` (a library with its kernels beside the rest, mmcv's ``mmcv._ext``).
_KERNEL_PACKAGE = re.compile(r"""\bpackages\s*=\s*\[\s*['"](\w+)['"]\s*,?\s*\]""")


def builds_cuda_sources(text: str) -> bool:
    """A build from CUDA sources in ``text``: ``cuda_sources=``, or a ``load``/``load_inline`` call naming a
    ``.cu`` file (inside a comprehension too: ``sources=[os.path.join(src, f) for f in ["k.cu", ...]]``)."""
    if _CUDA_SOURCES.search(text):
        return True
    if ".cu'" not in text and '.cu"' not in text:
        return False
    tree = _parse(text)
    return tree is not None and any(isinstance(n, ast.Call) and _builds_cuda(n) for n in ast.walk(tree))


def kernel_without_fallback(path: str, text: str, is_cuda_only: Callable[[str, str], bool]) -> str | None:
    """A CUDA-only module imported first in a ``try`` (at any level: torch-ngp's lazy ``get_backend()``) whose
    ``except`` only imports another build of it (``from .backend import _backend``, a run-time build from
    ``.cu`` sources): the file has no path without the kernel (stable-dreamfusion's raymarching,
    freqencoder). A handler that sets a fallback (``MSDA = None``) makes the kernel optional: None."""
    if _TRY_IMPORT.search(text) is None:
        return (
            None  # (the project scan asks this of every file: parse only a `try:` that opens with an import)
        )
    tree = _parse(text)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) or not node.handlers:
            continue
        kernel = next(
            (
                mod
                for stmt in node.body
                if isinstance(stmt, (ast.Import, ast.ImportFrom))
                for mod in _modules_of(stmt)
                if is_cuda_only(mod, path)
            ),
            None,
        )
        top = node in tree.body
        if kernel is not None and all(
            (top and _raises(h.body)) or all(_another_build(stmt, path, is_cuda_only) for stmt in h.body)
            for h in node.handlers
        ):
            return kernel
    return None


def _raises(body: list[ast.stmt]) -> bool:
    """A handler that only says how to build the kernel and raises (Deformable-DETR's MSDA, copied into Mask2Former
    and d2go: ``except ModuleNotFoundError: info = "..."; raise ModuleNotFoundError(info)``). At a module's top
    level that makes the kernel the module's only path; inside a function or an option it is one choice of many."""
    return (
        bool(body)
        and isinstance(body[-1], ast.Raise)
        and all(isinstance(s, (ast.Assign, ast.Expr, ast.Pass)) for s in body[:-1])
    )


#: A ``try:`` whose first statement is an import (the only shape kernel_without_fallback looks for).
_TRY_IMPORT = re.compile(
    r"^([ \t]*)try:[ \t]*(?:#[^\n]*)?\n(?:[ \t]*(?:#[^\n]*)?\n)*\1[ \t]+(?:import|from)[ \t]", re.M
)


def _modules_of(stmt: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    return [stmt.module] if stmt.module and not stmt.level else []


def _another_build(stmt: ast.stmt, path: str, is_cuda_only: Callable[[str, str], bool]) -> bool:
    """A handler's statement that offers no path without CUDA: an import of a CUDA-only module or of a project
    file that builds CUDA sources. (A raise does not count: ClassyVision's `if self._use_larc: try: from apex...
    except ImportError: raise ...` is an option that is off by default, not the module's only path.)"""
    if isinstance(stmt, ast.Import):
        return all(is_cuda_only(a.name, path) for a in stmt.names)
    if not isinstance(stmt, ast.ImportFrom):
        return False
    if not stmt.level:
        return bool(stmt.module) and is_cuda_only(stmt.module or "", path)
    base = os.path.dirname(os.path.abspath(path))
    for _ in range(stmt.level - 1):
        base = os.path.dirname(base)
    stem = os.path.join(base, *(stmt.module or "").split(".")) if stmt.module else base
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        try:
            with open(candidate, encoding="utf-8", errors="replace") as f:
                other = f.read(SCAN_BYTES)
        except OSError:
            continue
        return "cpp_extension" in other and builds_cuda_sources(other)
    return False


def _guarded_kernels(path: str, text: str, is_cuda_only: Callable[[str, str], bool]) -> str | None:
    """The CUDA-only module whose kernels ``path`` defines under a guarded import (``if TRITON_AVAILABLE: import
    triton`` then ``@triton.jit``), else None: the file is CUDA-only, though importing it works without CUDA."""
    decorated = {m.group(1) for m in KERNEL_DECORATOR.finditer(text)} if "@" in text else set()
    for _top, level, mod, _names in _imports(text) if decorated else ():
        if not level and mod.split(".")[0] in decorated and is_cuda_only(mod, path):
            return mod
    if "_C" not in text:
        return None
    for top, level, mod, names in _imports(text):
        # detrex's multi_scale_deform_attn.py: `try: from detrex import _C except ImportError: <a stand-in that
        # raises>`, its autograd Function calling `_C.ms_deform_attn_forward`: the project's compiled kernels
        for kernel in (mod, *(f"{mod}.{n}" for n in names)):
            if not top and not level and kernel.endswith("._C") and is_cuda_only(kernel, path):
                return kernel
    return None


def _cuda_build_optional(text: str) -> bool:
    """Every run-time build from CUDA sources sits in a ``try`` that handles its failure (peft's BOFT:
    ``get_fbd_cuda`` loads the kernel lazily and falls back to plain torch when the build fails): the module
    runs without it, so it is not CUDA-only."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return False
    builds: list[ast.Call] = []
    guarded: set[int] = set()

    def visit(node: ast.AST, in_try: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_try
            if isinstance(node, ast.Try) and node.handlers and child in node.body:
                inner = True
            if isinstance(child, ast.Call) and _builds_cuda(child):
                builds.append(child)
                if inner:
                    guarded.add(id(child))
            visit(child, inner)

    visit(tree, False)
    return bool(builds) and all(id(b) in guarded for b in builds)


def _builds_cuda(call: ast.Call) -> bool:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in ("load", "load_inline"):
        return False
    return (
        # (nvcc's flags: BigVGAN's load.py passes its .cu sources through a variable)
        any(k.arg in ("cuda_sources", "extra_cuda_cflags") for k in call.keywords)
        or any(
            isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.endswith(".cu")
            for a in [*call.args, *(k.value for k in call.keywords)]
            for c in ast.walk(a)
        )
        or any(
            isinstance(c, ast.JoinedStr) and ".cu" in ast.unparse(c)
            for a in [*call.args, *(k.value for k in call.keywords)]
            for c in ast.walk(a)
        )
    )


def _module_keys(path: str) -> list[str]:
    """Dotted names ``path`` can be imported by, from two to four components (``evals.hellaswag``)."""
    parts = os.path.normpath(path)[: -len(".py")].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[-k:]) for k in range(2, min(4, len(parts)) + 1)]


def _targets(importer: str, level: int, mod: str, names: list[str], by_key, files) -> set[str]:
    here = os.path.dirname(importer)
    if level:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        stem = os.path.join(base, *mod.split(".")) if mod else base
        cands = [stem + ".py", os.path.join(stem, "__init__.py")] + [
            os.path.join(stem, n + ".py") for n in names
        ]
        return {c for c in cands if c in files}
    out: set[str] = set()
    for dotted in (mod, *(f"{mod}.{n}" for n in names)):
        if dotted.count(".") > 3:  # deeper than the keys (axolotl.integrations.kernels.libs.<pkg>.<mod>)
            out |= _nearest(_deep_candidates(dotted, by_key), here)
        elif "." in dotted:
            out |= _nearest(by_key.get(dotted, set()), here)
        else:  # `import hellaswag`: a module beside the importer
            out |= {c for c in (os.path.join(here, dotted + ".py"),) if c in files}
    return out


def _deep_candidates(dotted: str, by_key: dict[str, set[str]]) -> set[str]:
    """The files a dotted name of more than four parts can mean: those its last four parts key whose folders
    carry the rest of its parts too."""
    parts = dotted.split(".")
    tail = os.sep + os.sep.join(parts)
    return {
        c
        for c in by_key.get(".".join(parts[-4:]), set())
        if (c[: -len("/__init__.py")] if c.endswith("__init__.py") else c[: -len(".py")]).endswith(tail)
    }


def _nearest(candidates: set[str], here: str) -> set[str]:
    """Of several files a dotted name can mean, those nearest the importer (the longest shared folder): Vim's
    ``seg/test.py`` importing ``backbone.vim`` means ``seg/backbone/vim.py``, not ``det/.../backbone/vim.py``."""
    if len(candidates) < 2:
        return candidates
    depth = {c: len(os.path.commonpath([here, os.path.dirname(c)])) for c in candidates}
    best = max(depth.values())
    return {c for c in candidates if depth[c] == best}


_STAR_IMPORT = re.compile(r"^from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\*", re.M)
_TORCH_IMPORT = re.compile(
    r"^import[ \t]+((?:torch|torch_xla)(?:\.\w+)*)(?:[ \t]+as[ \t]+(\w+))?[ \t]*(?:#.*)?$", re.M
)


def _modules_by_key(files: set[str]) -> dict[str, set[str]]:
    """Dotted name -> the project's .py files it can mean (see _module_keys)."""
    by_key: dict[str, set[str]] = {}
    for p in files:
        if p.endswith(".py"):
            for k in _module_keys(p):
                by_key.setdefault(k, set()).add(p)
    return by_key


def _star_names(sources: list[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """For each module with a ``from <project module> import *``: the torch names that brings (see
    ProjectFacts.star_names), through chains of star imports too."""
    stars = {p: _STAR_IMPORT.findall(t) for p, t in sources if "import *" in t}
    if not stars:
        return {}
    files = {p for p, _ in sources}
    by_key = _modules_by_key(files)
    own: dict[str, dict[str, str]] = {}
    for p, t in sources:
        if "import torch" in t or "import torch_xla" in t:
            found = {
                alias or mod.split(".")[0]: mod if alias else mod.split(".")[0]
                for mod, alias in _TORCH_IMPORT.findall(t)
            }
            if found:
                own[p] = found
    links = {
        p: {t for dots, mod in found for t in _targets(p, len(dots), mod, [], by_key, files)}
        for p, found in stars.items()
    }
    out: dict[str, dict[str, str]] = {}
    for p in links:
        names: dict[str, str] = {}
        seen, todo = {p}, list(links[p])
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            for k, v in own.get(t, {}).items():
                names.setdefault(k, v)
            todo.extend(links.get(t, ()))
        if names:
            out[os.path.abspath(p)] = names
    return out


def _cuda_only_links(
    sources: list[tuple[str, str]],
    is_cuda_only: Callable[[str, str], bool] | None,
    is_device_limited: Callable[[str], bool] | None = None,
) -> tuple[
    dict[str, str],
    dict[str, str],
    dict[str, str],
    dict[str, dict[str, str]],
    dict[str, dict[str, str]],
    frozenset[str],
]:
    """(modules only CUDA-only files import: left as written with them, modules built on a CUDA-only file,
    modules that reach a file built on a device-limited library, imports inside functions of a file built on a
    CUDA-only stack: ProjectFacts.nested_cuda_only, names imported from one: ProjectFacts.cuda_only_names,
    modules whose top-level imports load a file built on a device-limited library: loads_device_limited)."""
    if is_cuda_only is None:
        return {}, {}, {}, {}, {}, frozenset()
    unguarded = {p: m for p, t in sources if (m := _imports_cuda_only(p, t, is_cuda_only))}
    guarded = {p: m for p, t in sources if p not in unguarded and (m := _guarded_kernels(p, t, is_cuda_only))}
    cuda_only = unguarded | guarded
    if not cuda_only:
        return {}, {}, {}, {}, {}, frozenset()
    files = {p for p, _ in sources}
    by_key = _modules_by_key(files)
    importers: dict[str, set[str]] = {}
    loads: dict[str, set[str]] = {}  # what a file's top-level imports load (any import, in a test file)
    nested: dict[str, dict[str, str]] = {}
    names_from: dict[str, dict[str, str]] = {}
    for p, text in sources:
        test_file = is_test_file(p, text)
        for top, level, mod, names in _imports(text):
            for t in _targets(p, level, mod, names, by_key, files):
                if t != p:
                    importers.setdefault(t, set()).add(p)
                    if top and t in unguarded and p not in cuda_only and names:
                        names_from.setdefault(os.path.abspath(p), {}).update(
                            dict.fromkeys(names, unguarded[t])
                        )
                    if top or test_file:
                        loads.setdefault(p, set()).add(t)
                    elif t in unguarded and p not in cuda_only:
                        rel = os.path.relpath(t, os.path.dirname(p))
                        nested.setdefault(os.path.abspath(p), {})["." * level + mod] = (
                            f"this function imports the project's `{rel}`, built on `{unguarded[t]}` (CUDA-only): "
                            "what uses it runs where that stack does (CUDA), not on 'tpu'; give that path a "
                            "TPU alternative or keep it off the TPU run"
                        )
    built_on = _built_on(cuda_only, loads, frozenset(guarded))
    out: dict[str, str] = {}
    texts = dict(sources)
    for target, users in importers.items():
        if target in cuda_only or not users or not all(u in cuda_only for u in users):
            continue
        if "__main__" in texts[target] or TEST_FILE.match(os.path.basename(target)):
            continue  # a script or a test of its own: not only a helper
        user = min(users)
        out[target] = (
            f"only CUDA-only code imports this module (`{os.path.relpath(user, os.path.dirname(target))}`, which imports "
            f"`{cuda_only[user]}` and is left as written): left as written with it; port them together"
        )
    limited = {p: m for p, m in cuda_only.items() if is_device_limited is not None and is_device_limited(m)}
    reaches = _reaching(limited, importers, skip=cuda_only.keys() | out.keys())
    loads_limited = frozenset(_built_on(limited, loads)) if limited else frozenset()
    built = {p: msg for p, msg in built_on.items() if p not in out}
    return out, built, reaches, nested, names_from, loads_limited


def _reaching(roots: dict[str, str], importers: dict[str, set[str]], skip: Iterable[str]) -> dict[str, str]:
    """Files whose imports, at any level and through other project files, reach one of ``roots`` (path -> the
    device-limited library it imports) -> why. whisperX's ``__main__`` imports ``transcribe`` inside ``cli()``,
    which imports ``asr.py``, built on faster_whisper: the CLI's ``--device`` default ends in CTranslate2."""
    out: dict[str, str] = {}
    skipped = set(skip)
    todo = [(root, root) for root in sorted(roots)]
    while todo:
        at, root = todo.pop(0)
        for user in sorted(importers.get(at, ())):
            if user in out or user in skipped or user in roots:
                continue
            rel = os.path.relpath(root, os.path.dirname(user))
            out[user] = (
                f"it picks a device for a program that reaches the project's `{rel}`, built on `{roots[root]}`, "
                "which takes the device 'cpu' or 'cuda' only"
            )
            todo.append((user, root))
    return out


_VIA = ", which leads to"


def imports_cuda_only_directly(why: str) -> bool:
    """Whether a :attr:`ProjectFacts.built_on_cuda_only` reason is a direct import of the CUDA-only project
    file (a test of it), not a chain through others (Megatron's tests reach triton through ``megatron.core``'s
    package imports, whatever they test)."""
    return _VIA not in why


def _built_on(
    cuda_only: dict[str, str], loads: dict[str, set[str]], guarded: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Files whose top-level imports load a CUDA-only project file, directly or through others (lucidrains'
    PaLM-pytorch: train.py imports palm_pytorch.triton, whose model is built on triton kernels): they do not run
    on TPU until that file is ported. They are still migrated (audiocraft's models only wait for transformer.py's
    optional xformers import), and say so once. Path -> the TODO's text. A file reaching both kinds names one
    that imports its stack unguarded before one of ``guarded`` (kernels defined under a guarded import, which
    still import without it: Megatron's vllm_fused_moe.py beside the unguarded triton of ops/paged_stash.py)."""
    stacks: dict[str, tuple[str, str]] = {}  # path -> (the CUDA-only stack, the file that imports it)
    out: dict[str, str] = {}
    for roots in ({p: m for p, m in cuda_only.items() if p not in guarded}, cuda_only):
        grown = True
        while grown:
            grown = False
            for p in sorted(loads):
                if p in cuda_only or p in out:
                    continue
                hit = next((t for t in sorted(loads[p]) if t in roots or t in out), None)
                if hit is None:
                    continue
                stack, root = stacks[p] = (cuda_only[hit], hit) if hit in cuda_only else stacks[hit]
                rel = os.path.relpath(hit, os.path.dirname(p))
                via = "" if root == hit else f"{_VIA} `{os.path.relpath(root, os.path.dirname(p))}`"
                out[p] = (
                    f"this module imports the project's `{rel}`{via}, built on `{stack}` (CUDA-only, left as "
                    "written)"
                )
                grown = True
    return out


#: A folder holding one of these is a project's root (the nearest one above a migrated file).
ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
#: The most files read from a project beyond those migrated (a monorepo stays cheap).
MAX_PROJECT_FILES = 10_000


def _root_of(folder: str) -> str | None:
    folder = os.path.abspath(folder)
    while True:
        if any(os.path.exists(os.path.join(folder, m)) for m in ROOT_MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def with_project(files: Iterable[str]) -> list[str]:
    """``files`` and the ``.py`` files of the projects they are in (the nearest folder above each with a
    ``.git``, ``pyproject.toml``, ``setup.py`` or ``setup.cfg``; walked as discovery walks, up to
    :data:`MAX_PROJECT_FILES`), so that one file migrated alone reads the same facts as its whole tree."""
    out = list(dict.fromkeys(files))
    roots = {r for f in out if (r := _root_of(os.path.dirname(f) or "."))}
    seen = set(map(os.path.abspath, out))
    extra = 0
    for root in sorted(roots):
        for f in walk(root):
            if extra >= MAX_PROJECT_FILES:
                return out
            if f.endswith(".py") and os.path.abspath(f) not in seen:
                seen.add(os.path.abspath(f))
                out.append(f)
                extra += 1
    return out


def facts_for(scratch: dict[str, object], text: str) -> ProjectFacts:
    """The run's facts and this file's own (cached in the file's scratch space)."""
    got = scratch.get("project-facts")
    if got is None:
        got = scratch["project-facts"] = current().merged(scan_texts([text]))
    return got  # type: ignore[return-value]
