"""Whether a project function a device check's branch calls is portable: host code, or device code that the same
run migrates (``x.cuda()``, a ``"cuda"`` literal, ``torch.cuda.synchronize()``), so it selects no CUDA-only path.

glow-tts' ``stft.inverse()`` tests ``magnitude.device.type == "cuda"`` and its branch calls ``window_sumsquare``,
a numpy helper of the project's ``audio_processing.py``: kept as CUDA's because of that call, the test sent a TPU
tensor to the numpy branch (``.numpy()`` raises) while its twin in ``transform()`` was migrated. co-tracker's
evaluator keeps ``if torch.cuda.is_available(): dataclass_to_cuda_(sample)`` for the helper's name while the
helper's own ``t.float().cuda()`` becomes ``.to("tpu")`` and the model goes to "tpu": the batch stayed on the CPU.

A function is portable when it is an undecorated module-level ``def`` whose text names nothing CUDA-only (CUDA
words are allowed only as the ``.cuda()`` method, a ``"cuda"``/``"cuda:N"`` literal and the torch.cuda calls the
rules migrate) and whose calls are builtins, torch, host libraries, methods of values, or other portable
functions of its own file or of a project file it imports (followed at most ``_MAX_FILES`` files deep). It is
read with Python's ``ast`` from the files' whole texts, so the answer is the same whichever part of a file libcst
parsed (migrate.partial), and a second pass over migrated files gives the same answer.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from collections.abc import Callable
from functools import lru_cache

from . import project
from ._foreign import search_folders

#: Top-level packages whose calls carry no device state and run no CUDA kernel.
HOST_LIBRARIES = frozenset(
    {
        "warnings",
        "logging",
        "math",
        "time",
        "os",
        "sys",
        "functools",
        "itertools",
        "numpy",
        "scipy",
        "random",
        "re",
        "json",
        "collections",
        "copy",
        "operator",
        "librosa",
        "PIL",
        "pandas",
        "sklearn",
        "dataclasses",
        "typing",
        "abc",
        "enum",
        "pathlib",
        "contextlib",
        "inspect",
        "types",
        "datetime",
        "string",
        "io",
        "pickle",
        "glob",
        "shutil",
        "pywt",
    }
)
#: torch.cuda calls the rules migrate (to torch.accelerator, or drop): portable.
MIGRATED_CUDA_CALLS = frozenset(
    f"torch.cuda.{k}"
    for k in (
        "is_available",
        "device_count",
        "current_device",
        "synchronize",
        "current_stream",
        "set_stream",
        "set_device",
        "manual_seed",
        "manual_seed_all",
        "empty_cache",
        "Stream",  # (rules/cuda_api.py TPU207: torch.Stream; a timing Event: a local event that reads the clock)
        "Event",
        # memory statistics (rules/cuda_api.py _MEMORY_ACCELERATOR: torch.accelerator's on TorchTPU 0.2.0)
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_cached",
        "max_memory_cached",
        "reset_peak_memory_stats",
        "reset_max_memory_allocated",
        "memory_stats",
        "reset_accumulated_memory_stats",
    )
)
#: torch's single-process multi-GPU wrapper: its forward scatters with CUDA's torch._C._scatter, which raises on
#: "tpu" (rules/distributed.py flags it, TPU407): code that calls it stays CUDA's, like an unmigrated torch.cuda call
DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.data_parallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)
#: torch.cuda.amp names the rules migrate (to torch.autocast / torch.amp with the "tpu" device): portable.
MIGRATED_AMP_CALLS = frozenset(
    f"torch.cuda.amp.{k}" for k in ("autocast", "GradScaler", "custom_fwd", "custom_bwd")
)
#: A word that names CUDA-only state or code (outside the forms the rules migrate): the function is not portable.
_CUDA_WORD = re.compile(r"(?i)cuda|cudnn|nccl|triton|gpu")
_DEVICE_LITERAL = re.compile(r"^(?:cuda|tpu)(?::\d+)?$")
_MAX_FILES = 3  # project files followed from the first one (a helper of a helper of a helper)
_MAX_BYTES = 2 << 20


class HostHelpers:
    """Answers for one file (its whole text and path); memoised per (file, name)."""

    def __init__(
        self, source: str | None, path: str | None, cuda_only: Callable[[str, str], bool] | None = None
    ) -> None:
        """``cuda_only(module, importer)``: the rules' test of a CUDA-only module. Without it no function of
        another file is portable: a file the run leaves as written keeps its ``.cuda()`` as CUDA's."""
        self._cuda_only = cuda_only
        self._source, self._path = source, os.path.abspath(path) if path else None
        self._memo: dict[tuple[str | None, str], bool] = {}
        self._tree: ast.Module | None = None
        self._hits: dict[tuple[str, str], str | None] = {}

    def is_host(self, name: str) -> bool:
        """``name``, called bare in this file, is host code."""
        return self._judge(self._own_tree(), self._path, name, 0)

    def cuda_call_in(self, name: str) -> str | None:
        """The first torch.cuda call the rules leave as written (no TPU equivalent) in the class or function
        ``name`` of this file or of a project file it imports, else None: calling it, or a method of it, reaches
        CUDA-only state (sam2's ``MemMeter.update`` resets CUDA's peak memory statistics, which raises without
        CUDA)."""
        return self._found(name, _unmigrated_cuda_call)

    def engine_in(self, name: str) -> str | None:
        """The framework engine the class or function ``name`` builds (``accelerate.Accelerator``,
        ``deepspeed.initialize``), else None: such an object places its model itself (audiolm's
        SoundStreamTrainer: accelerate's device, the CPU on a TPU host), so moving it by hand splits it from its
        batches."""
        return self._found(name, _engine_call)

    def cuda_only_import(self, level: int, module: str, names: list[str]) -> str | None:
        """The project module an import inside a check's branch loads, when that module is left as written or
        built on one that is (migrate.project; fairseq's ``from fairseq.modules.dynamicconv_layer import
        DynamicconvLayer``, whose package imports the compiled ``dynamicconv_cuda``), else None."""
        if self._path is None or self._cuda_only is None:
            return None
        facts = project.current()
        folder = os.path.dirname(self._path)
        for dotted in (module, *(f"{module}.{n}" if module else n for n in names)):
            if dotted and dotted.rsplit(".", 1)[-1] in facts.cuda_extensions:
                return dotted  # (EasyOCR's `from .. import deform_pool_cuda`: the project's compiled CUDA extension)
            target = _module_file(folder, level, dotted) if dotted else None
            if target is None:
                continue
            key = os.path.abspath(target)
            if key in facts.cuda_only_helpers or key in facts.built_on_cuda_only:
                return dotted
            tree = _parse_file(target)
            if tree is not None and self._left_as_written(target, tree):
                return dotted
        return None

    def _own_tree(self) -> ast.Module | None:
        """This file's tree, parsed once (the text is dropped after)."""
        if self._tree is None and self._source is not None:
            self._tree = _parse_text(self._source)
            self._source = None
        return self._tree

    def _found(self, name: str, test: Callable[[ast.Call, dict], str | None]) -> str | None:
        """``_find`` from this file, memoised per (test, name): a check's region may call one helper many times."""
        key = (test.__name__, name)
        if key not in self._hits:
            self._hits[key] = self._find(self._own_tree(), self._path, name, 0, test)
        return self._hits[key]

    def _find(
        self, tree, path, name: str, depth: int, test: Callable[[ast.Call, dict], str | None]
    ) -> str | None:
        """``test`` over the calls of the def or class ``name`` of this file or of the project file it comes from."""
        if tree is None or depth > _MAX_FILES:
            return None
        roots = _imports(tree)
        if name in roots:
            kind, level, module = roots[name]
            target = (
                _module_file(os.path.dirname(path), level, module) if kind == "project" and path else None
            )
            return None if target is None else self._find(_parse_file(target), target, name, depth + 1, test)
        defs = [s for s in tree.body if type(s) in (ast.FunctionDef, ast.ClassDef) and s.name == name]
        if len(defs) != 1:
            return None
        own = _own_streams(defs[0], roots)
        unwrapped = _unwrapped_device_blocks(defs[0], roots)
        return next(
            (
                hit
                for n in ast.walk(defs[0])
                if type(n) is ast.Call
                and id(n) not in unwrapped
                and (hit := test(n, roots))
                and not (hit == "torch.cuda.stream" and len(n.args) == 1 and ast.unparse(n.args[0]) in own)
            ),
            None,
        )

    def _judge(self, tree: ast.Module | None, path: str | None, name: str, depth: int) -> bool:
        key = (path, name)
        if key not in self._memo:
            self._memo[key] = False  # (recursion: a function calling itself is judged by its other calls)
            self._memo[key] = tree is not None and self._host_def(tree, path, name, depth)
        return self._memo[key]

    def _host_def(self, tree: ast.Module, path: str | None, name: str, depth: int) -> bool:
        roots = _imports(tree)
        if name in roots and roots[name][0] == "project":
            return self._imported(path, roots[name][1], roots[name][2], name, depth)
        defs = [
            s
            for s in tree.body
            if type(s) in (ast.FunctionDef, ast.ClassDef)
            and s.name == name
            and all(_PLAIN_DECORATOR.match(ast.unparse(d)) for d in s.decorator_list)
        ]
        if len(defs) != 1:
            return False
        unwrapped = _unwrapped_device_blocks(defs[0], roots)
        if any(_CUDA_WORD.search(w) for w in _cuda_words(defs[0], unwrapped)):
            return False
        within = type(defs[0]) is ast.ClassDef
        if within and not all(self._host_base(b, tree, path, roots, depth) for b in defs[0].bases):
            return False
        for n in ast.walk(defs[0]):
            if (
                type(n) is ast.Call
                and id(n) not in unwrapped
                and not self._host_call(n, tree, path, roots, depth, within)
            ):
                return False
        return True

    def _host_base(self, base: ast.expr, tree: ast.Module, path: str | None, roots: dict, depth: int) -> bool:
        """A portable class's base: ``object``, torch's (``nn.Module``, ``autograd.Function``) or a portable
        class of the project."""
        if type(base) is ast.Name and base.id == "object":
            return True
        f = base
        while type(f) is ast.Attribute:
            f = f.value
        if type(f) is not ast.Name:
            return False
        if f.id in roots and roots[f.id][0] == "library":
            return roots[f.id][2] == "torch" and not _dotted(base, roots).startswith("torch.cuda")
        return base is f and self._judge(tree, path, f.id, depth)

    def _host_call(
        self,
        call: ast.Call,
        tree: ast.Module,
        path: str | None,
        roots: dict,
        depth: int,
        within: bool = False,
    ) -> bool:
        """``within``: the call sits in a class being judged, whose own methods (``self.f()``) are judged with
        it (its text is the class's)."""
        f = call.func
        while type(f) is ast.Attribute:
            f = f.value
        if type(f) is ast.Call and type(f.func) is ast.Name and f.func.id == "super":
            return within  # super().__init__(): the base, judged with the class
        if type(f) is not ast.Name:
            return True  # a call of a call's result, of a subscript: a value's method
        base = f.id
        if base in roots:
            kind, _level, module = roots[base]
            if kind == "project":
                return call.func is f and self._judge(tree, path, base, depth)
            if module == "torch":
                dotted = _dotted(call.func, roots)
                return (
                    not dotted.startswith("torch.cuda.") or dotted in MIGRATED_CUDA_CALLS | MIGRATED_AMP_CALLS
                )
            return module in HOST_LIBRARIES
        if call.func is f:  # a bare name: a builtin or another function of this file
            return hasattr(builtins, base) or self._judge(tree, path, base, depth)
        if base in ("self", "cls"):
            return within  # a method of the class being judged (its text is judged), else of the program
        if base[:1].isupper():  # `AFB1D.apply(...)`: a class of this file, judged as a whole
            return self._judge(tree, path, base, depth)
        return True

    def _imported(self, path: str | None, level: int, module: str, name: str, depth: int) -> bool:
        if path is None or depth >= _MAX_FILES:
            return False
        target = _module_file(os.path.dirname(path), level, module)
        if target is None or self._cuda_only is None:
            return False
        tree = _parse_file(target)
        if tree is None or self._left_as_written(target, tree):
            return False  # its `.cuda()` stays CUDA's: a check calling it must stay too
        return self._judge(tree, target, name, depth + 1)

    def _left_as_written(self, path: str, tree: ast.Module) -> bool:
        """The run leaves ``path`` as written (migrate.source.flag_only_mode): it imports a CUDA-only module at
        its top level, or only such files import it (migrate.project)."""
        if os.path.abspath(path) in project.current().cuda_only_helpers:
            return True
        for s in tree.body:
            mods = (
                [a.name for a in s.names]
                if type(s) is ast.Import
                else [s.module]
                if type(s) is ast.ImportFrom and s.module and not s.level
                else []
            )
            if any(self._cuda_only(m, path) for m in mods):  # type: ignore[misc]
                return True
        return False


def _imports(tree: ast.Module) -> dict[str, tuple[str, int, str]]:
    """Module-level import aliases -> ("library" or "project", relative level, module). An absolute import of a
    module that is not a known host library or torch may be the project's own: it is looked for on disk."""
    out: dict[str, tuple[str, int, str]] = {}
    for s in tree.body:
        if type(s) is ast.Import:
            for a in s.names:
                root = a.name.split(".")[0]
                out[a.asname or root] = ("library", 0, root)
        elif type(s) is ast.ImportFrom:
            module = s.module or ""
            root = module.split(".")[0]
            known = not s.level and (root in HOST_LIBRARIES or root.startswith("torch"))
            for a in s.names:
                out[a.asname or a.name] = ("library", 0, root) if known else ("project", s.level, module)
    return out


@lru_cache(maxsize=1024)
def _module_file(folder: str, level: int, module: str) -> str | None:
    """The project file ``from <level dots><module> import ...`` names, seen from ``folder``."""
    parts = module.split(".") if module else []
    if level:
        base = folder
        for _ in range(level - 1):
            base = os.path.dirname(base)
        bases = [base]
    else:
        bases = [b for here in search_folders(folder) for b in (here, os.path.join(here, "src"))]
    for base in bases:
        stem = os.path.join(base, *parts)
        for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
            if parts and os.path.isfile(cand):
                return cand
    return None


@lru_cache(maxsize=256)
def _parse_file(path: str) -> ast.Module | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > _MAX_BYTES:
        return None
    return _parse_text(data.decode("utf-8", errors="replace"))


def _parse_text(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _cuda_words(fn: ast.FunctionDef | ast.ClassDef, unwrapped: set[int] = frozenset()):  # type: ignore[assignment]
    """The names, attributes and strings of ``fn`` that could name CUDA-only code, leaving out the forms the
    rules migrate (the ``.cuda()`` method, device literals, migrated torch.cuda calls, the ``torch.cuda.device``
    of a ``with`` the rules unwrap) and the names of called functions (each is judged itself)."""
    skip: set[int] = set()
    for n in ast.walk(fn):
        if id(n) in unwrapped and type(n) is ast.Call:
            skip.update(id(x) for x in ast.walk(n.func))
        if type(n) is ast.Expr and type(n.value) is ast.Constant:
            skip.add(id(n.value))  # a docstring or a bare string: prose, not a value
        if type(n) is ast.Call:
            f = n.func
            if type(f) is ast.Name or (type(f) is ast.Attribute and f.attr == "cuda"):
                skip.add(id(f))
            if type(f) is ast.Attribute and f.attr in {q.rsplit(".", 1)[1] for q in MIGRATED_CUDA_CALLS}:
                inner = f.value
                if type(inner) is ast.Attribute and inner.attr == "cuda":
                    skip.update((id(f), id(inner)))
            if type(f) is ast.Attribute and f.attr in {q.rsplit(".", 1)[1] for q in MIGRATED_AMP_CALLS}:
                amp = f.value  # torch.cuda.amp.autocast(): the rules write torch.autocast("tpu")
                if type(amp) is ast.Attribute and amp.attr == "amp" and type(amp.value) is ast.Attribute:
                    if amp.value.attr == "cuda":
                        skip.update((id(f), id(amp), id(amp.value)))
    for n in ast.walk(fn):
        if id(n) in skip:
            continue
        if type(n) is ast.Name:
            yield n.id
        elif type(n) is ast.Attribute:
            yield n.attr
        elif type(n) is ast.Constant and type(n.value) is str and not _DEVICE_LITERAL.match(n.value):
            yield n.value


#: Decorators that leave a function what its body is (gpytorch's ``@contextmanager def least_used_cuda_device()``).
_PLAIN_DECORATOR = re.compile(
    r"(?:contextlib\.)?contextmanager$|(?:functools\.)?(?:lru_cache|cache|wraps)\b|(?:staticmethod|classmethod|property)$"
)


def _own_streams(definition: ast.AST, roots: dict) -> set[str]:
    """Names and attributes the definition binds only to ``torch.cuda.Stream()``: ``with torch.cuda.stream(s)`` on
    one of them is migrated (rules/cuda_api.py TPU207: ``with s:``), so it does not make the code CUDA-only."""
    made: set[str] = set()
    other: set[str] = set()
    for n in ast.walk(definition):
        if type(n) is ast.Assign:
            stream = type(n.value) is ast.Call and _dotted(n.value.func, roots) in (
                "torch.cuda.Stream",
                "torch.Stream",
            )
            for t in n.targets:
                (made if stream else other).add(ast.unparse(t))
    return made - other


def _unwrapped_device_blocks(definition: ast.AST, roots: dict) -> set[int]:
    """The ``torch.cuda.device(...)`` calls of ``with`` blocks the rules unwrap (rules/cuda_api.py TPU219: one
    item, outside a loop, or a tensor's own device): they do not make the code CUDA-only. gpytorch's
    ``least_used_cuda_device`` was judged CUDA-only on the first run and portable on the second, after the
    first had unwrapped its ``with``: its callers' checks changed on a second run."""
    found: set[int] = set()

    def visit(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if type(child) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
                visit(child, False)
                continue
            if type(child) is ast.With and len(child.items) == 1 and child.items[0].optional_vars is None:
                call = child.items[0].context_expr
                if (
                    type(call) is ast.Call
                    and _dotted(call.func, roots) == "torch.cuda.device"
                    and (not in_loop or _tensor_device_arg(call))
                ):
                    found.add(id(call))
            visit(child, in_loop or type(child) in (ast.For, ast.AsyncFor, ast.While))

    visit(definition, False)
    return found


def _tensor_device_arg(call: ast.Call) -> bool:
    """``torch.cuda.device(t.device)`` / ``(t.get_device())`` (as rules/cuda_api.py ``_own_device``)."""
    first = call.args[0] if call.args else None
    if type(first) is ast.Call and type(first.func) is ast.Attribute:
        return first.func.attr == "get_device"
    return type(first) is ast.Attribute and first.attr == "device"


#: What TPU205 writes for CUDA's device queries where it can (elsewhere it keeps them): a caller's check that kept
#: CUDA's for the query keeps it on a second run too, over the migrated callee (OLMo-core's GPU monitor callback)
_REWRITTEN_QUERIES = frozenset({"torch.tpu.get_device_name", "torch.tpu.get_device_properties"})


def _unmigrated_cuda_call(call: ast.Call, roots: dict) -> str | None:
    dotted = _dotted(call.func, roots)
    if dotted.startswith("torch.cuda.") and dotted not in MIGRATED_CUDA_CALLS | MIGRATED_AMP_CALLS:
        return dotted
    if dotted in _REWRITTEN_QUERIES:
        return "torch.cuda." + dotted.rsplit(".", 1)[1]
    if dotted in DATA_PARALLEL:
        return dotted  # (captum's influence helpers wrap the model in DataParallel behind a CUDA check)
    return None


#: Frameworks' engines that place the model themselves: (module, callable).
_ENGINES = {("accelerate", "Accelerator"), ("deepspeed", "initialize"), ("deepspeed", "init_inference")}


def _engine_call(call: ast.Call, roots: dict) -> str | None:
    f = call.func
    last = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else None
    root = f
    while type(root) is ast.Attribute:
        root = root.value
    module = roots[root.id][2] if type(root) is ast.Name and root.id in roots else None
    if module is not None and (module.split(".")[0], last) in _ENGINES:
        return f"{module.split('.')[0]}.{last}"
    return None


def _dotted(node: ast.expr, roots: dict) -> str:
    """``torch.cuda.synchronize`` for ``th.cuda.synchronize`` (``th`` an alias of torch)."""
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(roots[node.id][2] if node.id in roots else node.id)
    return ".".join(reversed(parts))
