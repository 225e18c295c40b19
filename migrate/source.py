"""Migrate one Python source string: prefilter, parse, one rule pass, import clean-up."""

from __future__ import annotations

import ast
import bisect
import gc
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import _walk as walk
from . import flow, groups, imports, partial, project
from ._spans import SourceMap
from ._syntax import describe as describe_syntax_error
from .limits import Watch, collector_paused
from .names import ImportTable, import_table
from .prefilter import TRIGGERS as TRIGGERS  # (re-exported: tests and callers read it here)
from .prefilter import needs_parse
from .results import Diagnostic, MigrationResult
from .rules._helpers import Helper, all_helpers, closure
from .rules.base import all_rules
from .rules.cuda_api import (
    DEVICE_LIMITED_CALLS,
    cuda_only_module,
    detectron2_device,
    device_limited,
    import_time_smalls,
    imported_modules,
    loads_compiled_ops,
    vendored_cuda_library,
)
from .rules.xla_flag_only import SPMD_MARKERS, SPMD_MODULES, Spmd, SpmdProgram
from .selection import RuleSet, as_rule_set, resolve
from .transform import MigrationTransformer, PreciseMigrationTransformer, _Index

UNUSED_IMPORT_CODE = "TPU590"
_QUIET = Watch()


class UnparsableError(Exception):
    """The source is not valid Python for libcst; the caller leaves the file untouched. ``line`` and
    ``col`` (1-based; 0 when unknown) say where Python's own parser stopped (see migrate._syntax)."""

    def __init__(self, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(f"line {line}, column {col}: {message}" if line else message)
        self.message, self.line, self.col = message, line, col


def _index(select: tuple[str, ...] | None, ignore: tuple[str, ...] | None, mode: str = "normal") -> _Index:
    """The rule index for raw ``--select`` / ``--ignore`` patterns (resolved once, see migrate.selection)."""
    return _rule_index(resolve(select, ignore).codes, mode)


@lru_cache(maxsize=64)
def _rule_index(codes: tuple[str, ...], mode: str = "normal") -> _Index:
    """The rules of one run; ``mode`` "spmd" or "cuda-only" keeps only the flagging rules, "cuda-patch" only the
    patch's and the CUDA-only stacks' (see flag_only_mode)."""
    enabled = set(codes)
    rules = [r for r in all_rules() if r.code in enabled]
    if mode == "spmd":
        # An SPMD program is flagged, never rewritten (see SpmdProgram); other rules only flag.
        rules = [
            SpmdProgram if r is Spmd else r
            for r in rules
            if r.outcome == "flagged" and not r.family.startswith("xla_model")
        ]
    elif mode == "cuda-only":
        rules = [r for r in rules if r.outcome == "flagged"]
    elif mode == "vendored":
        rules = []  # a copy of a CUDA-only library inside the tree: its code, not the project's
    elif mode == "cuda-patch":
        # a shim that patches torch.cuda for another backend (sd-scripts' IPEX hijack): its every line names
        # torch.cuda on purpose; one TODO says so, not one per line
        rules = [r for r in rules if r.code in _PATCH_CODES]
    return _Index(rules, all_rules(), flag_only=mode != "normal")


#: The rules that still report in a file that patches torch.cuda: the patch itself, and CUDA-only stacks.
_PATCH_CODES = frozenset({"TPU218", "TPU211"})


def flag_only_mode(source: str, module: cst.Module, table: ImportTable, path: str | None = None) -> str:
    """ "vendored" for a file of a CUDA-only library's copy inside the tree (left as written: jukebox's apex/,
    Vim's detectron2), "spmd" for a torch_xla SPMD program, "cuda-only" for a file that imports a CUDA-only stack at its top level
    or subclasses one (it cannot run without CUDA: rewriting half of it helps nobody), "cuda-patch" for one that
    assigns into torch.cuda (a shim for another backend), else "normal".

    Decided by qualified names, never by substrings: a file with its own ``use_spmd_backend()`` is not SPMD.
    """
    if vendored_cuda_library(path):
        return "vendored"  # (its importers' TPU211 says how to use it on a TPU host)
    if _OTHER_FRAMEWORK_IMPORT.search(source) and not _TORCH_IMPORT.search(source):
        return (
            "vendored"  # another framework's file (skrl's JAX tests): its device names are JAX's, not torch's
        )
    if any(m in source for m in SPMD_MARKERS) and _uses_spmd(source, table):
        return "spmd"
    if path and os.path.abspath(path) in project.current().cuda_only_helpers:
        return "cuda-only"  # (its only importers are; TPU211 says so at its first statement)
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if any(cuda_only_module(m, path) for m in imported_modules(small)):
                    return "cuda-only"
    if path and project.current().cuda_extensions and _kernel_without_fallback(source, path):
        return "cuda-only"  # the project's own CUDA extension, whose only fallback is another build of it
    if _imports_device_limited(module, path):
        return "cuda-only"  # (also inside a module-level try: pytorchvideo's optional detectron2 detector)
    if "MODEL.DEVICE" in source and detectron2_device(source):
        return "cuda-only"  # (d2go's runner helpers: TPU211 says so at the first `MODEL.DEVICE`)
    if path and os.path.abspath(path) in project.current().loads_device_limited:
        return "cuda-only"  # (DETA's configs: its model calls detectron2's NMS; TPU211 says so at the import)
    if "class " in source and _subclasses_cuda_only(source, table):
        return "cuda-only"
    if "cuda." in source and _patches_cuda(source, table):
        return "cuda-patch"  # (TPU218 says why at the first assignment)
    if "@" in source and _defines_cuda_kernels(source, table):
        return "cuda-only"  # (TPU211 says why at the import)
    if any(w in source for w in _LIMITED_CALL_WORDS) and _calls_device_limited(source, table):
        return "cuda-only"  # (TPU211 says why at the call)
    if "load_ext" in source and _loads_compiled_ops(source, table):
        return "cuda-only"  # (TPU211 says why at the call: mmcv's compiled operators)
    if "deepspeed" in source and _deepspeed_engine(module, source):
        return "cuda-only"  # (TPU916 says why at the engine)
    if "pytestmark" in source and _GATED_ON_CUDA_HARDWARE.search(source) and _MODULE_GATE.search(source):
        return "cuda-only"  # a test module skipped unless a CUDA compute capability (axolotl's Blackwell FP4 tests)
    if path and (project.is_test_file(path, source) or os.path.basename(path) in _CHECK_SCRIPTS):
        if _imports_cuda_only(table, path):
            return "cuda-only"
        why = project.current().built_on_cuda_only.get(os.path.abspath(path))
        if why and project.imports_cuda_only_directly(why):
            return "cuda-only"  # the test of a CUDA-only project module (rl_games' test_triton_gae.py)
    return "normal"


#: A module-level pytest gate, and CUDA hardware asked by capability: a module of tests for one GPU generation.
_MODULE_GATE = re.compile(r"^pytestmark\s*=[^\n]*(?:\n[ \t]+[^\n]*){0,6}?\bskipif\(", re.M)
_GATED_ON_CUDA_HARDWARE = re.compile(r"^\S.*torch\.cuda\.get_device_capability\(", re.M)


#: A file written for another array framework, and one that reaches torch (directly or through its stacks).
_OTHER_FRAMEWORK_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:jax|jaxlib|flax|tensorflow|paddle|mindspore|mxnet|cupy)\b", re.M
)
_TORCH_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:torch\w*|pytorch_lightning|lightning|accelerate|transformers|diffusers|"
    r"deepspeed|timm|apex)\b",
    re.M,
)


#: DeepSpeed's entry points: the engine they build picks its device (never TorchTPU's 'tpu').
_DEEPSPEED_ENGINES = ("initialize", "init_inference")


def _deepspeed_engine(module: cst.Module, source: str) -> bool:
    """A file that builds a DeepSpeed engine (``deepspeed.initialize``): the engine places the model with
    DeepSpeed's accelerator, the CPU on a TPU host, so a migrated batch on 'tpu' would meet a model on the CPU
    (lucidrains' PaLM enwik8_deepspeed). Such a file is left as written; TPU916 says so at the engine."""
    calls: list[str] = []
    for small in import_time_smalls(module):
        if isinstance(small, cst.Import):
            for a in small.names:
                if cst.helpers.get_full_name_for_node(a.name) == "deepspeed":
                    local = (
                        a.asname.name.value
                        if a.asname and isinstance(a.asname.name, cst.Name)
                        else "deepspeed"
                    )
                    calls += [f"{local}.{e}" for e in _DEEPSPEED_ENGINES]
        elif (
            isinstance(small, cst.ImportFrom)
            and small.module is not None
            and cst.helpers.get_full_name_for_node(small.module) == "deepspeed"
            and not isinstance(small.names, cst.ImportStar)
        ):
            for a in small.names:
                if a.name.value in _DEEPSPEED_ENGINES:
                    calls.append(
                        a.asname.name.value
                        if a.asname and isinstance(a.asname.name, cst.Name)
                        else a.name.value
                    )
    return any(re.search(rf"(?<![\w.]){re.escape(c)}\s*\(", source) for c in calls)


def _imports_device_limited(module: cst.Module, path: str | None) -> bool:
    """A library with CPU and CUDA kernels only (rules.cuda_api's device-limited list) imported at import time,
    a try or if block included: where it imports, the program's device is the CPU or CUDA, never 'tpu'."""
    return any(
        device_limited(m) and cuda_only_module(m, path)
        for small in import_time_smalls(module)
        for m in imported_modules(small)
    )


#: Scripts named as a kernel's check (Deformable-DETR's models/ops/test.py compares its CUDA extension with the
#: PyTorch reference): importing the CUDA-only project file directly, they are its test, left as written.
_CHECK_SCRIPTS = frozenset({"test.py", "tests.py"})


def _kernel_without_fallback(source: str, path: str) -> bool:
    names = project.current().cuda_extensions
    if not any(n in source for n in names):
        return False
    return project.kernel_without_fallback(path, source, cuda_only_module) is not None


def _imports_cuda_only(table: ImportTable, path: str) -> bool:
    """A CUDA-only module imported anywhere in the file, inside a function too: in a test file that is the
    test of a CUDA extension (Megatron's ``test_fused_kernels.py`` imports ``scaled_masked_softmax_cuda`` in its
    test functions), which has nothing to run on TPU."""
    return any(
        q is not None and cuda_only_module(q, path)
        for scope in (table.module_scope, *table.scopes.values())
        for q in scope.names.values()
    )


_CLASS_BASES = re.compile(r"^[ \t]*class\s+\w+\s*\(([^)]*)\)", re.M)


def _subclasses_cuda_only(source: str, table: ImportTable) -> bool:
    """A class built on a CUDA-only package (``class Linear8bit(bnb.nn.Linear8bitLt)``): the file wraps that
    package, and its device strings belong to it."""
    roots: dict[str, str] = {}
    for scope in (table.module_scope, *table.scopes.values()):
        for name, q in scope.names.items():
            if q is not None and cuda_only_module(q):
                roots[name] = q
    if not roots:
        return False
    for m in _CLASS_BASES.finditer(source):
        for base in m.group(1).split(","):
            if base.strip().split(".")[0] in roots:
                return True
    return False


_LIMITED_CALL_WORDS = frozenset(q.rsplit(".", 1)[-1] for q in DEVICE_LIMITED_CALLS)


#: An assignment into a module's ``cuda`` attribute: ``torch.cuda.X = ...`` (``torch.cuda.amp.Y = ...``).
_CUDA_STORE = re.compile(r"^[ \t]*([A-Za-z_]\w*)\.cuda(?:\.amp)?\.\w+[ \t]*=(?!=)", re.M)


def _patches_cuda(source: str, table: ImportTable) -> bool:
    """A file that assigns into torch.cuda (sd-scripts' IPEX hijack: ``torch.cuda.is_available =
    torch.xpu.is_available``): it patches CUDA's API on purpose; renamed, it would patch every device's."""
    roots = {m.group(1) for m in _CUDA_STORE.finditer(source)}
    return any(q == "torch" for name, q in _bound(table) if name in roots)


def _defines_cuda_kernels(source: str, table: ImportTable) -> bool:
    """A kernel defined with a CUDA-only stack's decorator, its import guarded (rl_games' ``if TRITON_AVAILABLE:
    import triton`` then ``@triton.jit def _gae_kernel``): the file's device tests choose that kernel."""
    roots = {m.group(1) for m in project.KERNEL_DECORATOR.finditer(source)}
    return any(q is not None and name in roots and cuda_only_module(q) for name, q in _bound(table))


def _bound(table: ImportTable) -> Iterator[tuple[str, str | None]]:
    """(name, qualified name) of every name the file's imports bind, in any scope."""
    for scope in (table.module_scope, *table.scopes.values()):
        yield from scope.names.items()


def _loads_compiled_ops(source: str, table: ImportTable) -> bool:
    """A file that loads mmcv's compiled operators (``ext_module = ext_loader.load_ext('_ext', [...])``) to call
    them: its device tests and allocations are the CUDA kernels' (carafe's ``assert grad_output.is_cuda``,
    three_nn's ``torch.cuda.FloatTensor`` outputs)."""
    return any(
        name is not None
        and loads_compiled_ops(f"{q or name}.load_ext")
        and re.search(rf"(?<![\w.]){re.escape(name)}\.load_ext\s*\(", source) is not None
        for name, q in _bound(table)
    )


def _calls_device_limited(source: str, table: ImportTable) -> bool:
    """A call that builds on a CPU-or-CUDA-only library without importing it (``T.ToSparseTensor()``: PyG's
    SparseTensor adjacency runs torch_sparse kernels; ogb's GNN examples)."""
    for scope in (table.module_scope, *table.scopes.values()):
        for name, q in scope.names.items():
            for call in DEVICE_LIMITED_CALLS:
                if q is None or not (call == q or call.startswith(q + ".")):
                    continue
                attr = call[len(q) :]  # ".ToSparseTensor" for an alias of the module, "" for the name itself
                if re.search(rf"(?<![\w.]){re.escape(name + attr)}\s*\(", source):
                    return True
    return False


_USE_SPMD = re.compile(r"\b([A-Za-z_]\w*(?:\.\w+)*)\.use_spmd\s*\(")


def _uses_spmd(source: str, table: ImportTable) -> bool:
    scopes = [table.module_scope, *table.scopes.values()]
    qualified = {q for scope in scopes for q in scope.names.values() if q is not None}
    if any(
        q.startswith(SPMD_MODULES) or q.endswith((".use_spmd", ".SpmdFullyShardedDataParallel"))
        for q in qualified
    ):
        return True
    for m in _USE_SPMD.finditer(source):
        root, _, rest = m.group(1).partition(".")
        for scope in scopes:
            q = scope.names.get(root)
            if q is not None and (f"{q}.{rest}" if rest else q) == "torch_xla.runtime":
                return True
    return False


#: Deepest syntax tree parsed (AST levels). CPython 3.11 itself, at its default recursion limit, compiles a
#: 2,000-term ``1 + 1 + ...`` line and refuses a 3,000-term one; libcst takes ~3 s at 3,000 and minutes at 10,000.
MAX_TREE_DEPTH = 3_000


def too_deep(source: str) -> str | None:
    """Why ``source`` is refused before libcst sees it (None: go on): an expression nested deeper than
    :data:`MAX_TREE_DEPTH`. Python's own parser (C, milliseconds) builds the tree; a file it cannot parse
    goes on to libcst, which says where the syntax error is."""
    return python_tree(source)[1]


#: Files over this size are given to ``ast`` in chunks of about this size (see _parse_in_chunks).
CHUNK_CHARS = 1_000_000
#: A line that may start a top-level statement (a chunk starts there).
_TOP_LINE = re.compile(r"^(?:def|class|async|[A-Za-z_]\w*\s*[=(.:\[])", re.M)


def top_level_chunks(source: str) -> Iterator[str]:
    """``source`` cut into pieces of about :data:`CHUNK_CHARS`, each starting on a line that begins a top-level
    ``def``, ``class`` or statement and preceded by as many newlines as lines come before it (the same line
    numbers). A cut inside a string, brackets, a continued line, a decorated def or an ``if``/``else`` leaves a
    piece that does not parse alone; when every piece parses, so does the whole text (each ends on a complete
    statement at column 0, where the next begins)."""
    at = 0
    line = 0
    while at < len(source):
        cut = len(source)
        if len(source) - at > CHUNK_CHARS:
            m = _TOP_LINE.search(source, at + CHUNK_CHARS)
            if m is not None:
                cut = m.start()
        chunk = source[at:cut]
        yield "\n" * line + chunk
        line += chunk.count("\n")
        at = cut


def _parse_in_chunks(source: str) -> ast.Module:
    """``ast.parse(source)`` with the parser's own working memory for one chunk at a time (on a 5 MB file its
    arena is ~130 MB over the ~800 MB tree); a chunk that does not parse alone, or a file naming
    ``__future__`` (whose imports must come first), is parsed at once."""
    if "__future__" in source:
        return ast.parse(source)
    bodies: list[ast.stmt] = []
    for chunk in top_level_chunks(source):
        try:
            bodies.extend(ast.parse(chunk).body)
        except SyntaxError:
            return ast.parse(source)
    return ast.Module(body=bodies, type_ignores=[])


def python_tree(source: str) -> tuple[ast.Module | None, str | None]:
    """Python's own tree of ``source`` (None when it does not parse) and :func:`too_deep`'s answer; the tree
    is handed on to the SourceMap, so a file is parsed by ``ast`` once, not twice."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = _parse_in_chunks(source) if len(source) > CHUNK_CHARS else ast.parse(source)
    except (RecursionError, MemoryError):
        return (
            None,
            f"an expression nested over {MAX_TREE_DEPTH:,} levels deep: Python itself cannot compile it",
        )
    except (SyntaxError, ValueError):
        return None, None
    # Level by level (twice as fast as a depth-first stack); the node named is the last one of the first
    # level past the limit, the one a depth-first walk that pushes children in order would meet first.
    level: list[ast.AST] = [tree]
    depth = 1
    while level:
        if depth > MAX_TREE_DEPTH:
            line = getattr(level[-1], "lineno", 0)
            where = f" (line {line})" if line else ""
            return tree, (
                f"an expression nested over {MAX_TREE_DEPTH:,} levels deep{where}: Python itself cannot compile it"
            )
        level = [c for n in level for c in ast.iter_child_nodes(n)]
        depth += 1
    return tree, None


def migrate_source(
    source: str,
    path: str = "<string>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rules: RuleSet | None = None,
    watch: Watch | None = None,
) -> MigrationResult:
    """Migrate ``source``; raises :class:`UnparsableError` when it does not parse.

    Output is byte-identical when no rule fires, and a second run over the output changes nothing.
    ``rules`` (already resolved) overrides ``select``/``ignore``; ``watch`` hears each stage (progress,
    per-file limits: see migrate.limits).
    """
    if not needs_parse(source):
        return MigrationResult(source, False, [])
    with collector_paused():
        return _migrate_parsed(source, path, as_rule_set(rules, select, ignore).codes, watch or _QUIET)


def _migrate_parsed(source: str, path: str, codes: tuple[str, ...], watch: Watch) -> MigrationResult:
    watch.stage("parsing")
    tree, deep = python_tree(source)
    if deep is not None:
        raise UnparsableError(deep)
    reduced = partial.reduce(source, tree) if tree is not None and partial.enabled() else None
    if reduced is not None:
        tree = None  # (freed before the parse; the reduced text has its own statement layout)
        plan = groups.plan(reduced) if groups.enabled() else None
        if plan is not None:
            done = _migrate_groups(source, reduced, plan, path, codes, watch)
            if done is not None:
                return done
        res = _migrate_text(source, reduced.text, reduced.tree, path, codes, watch)
        if not res.changed:
            return MigrationResult(source, False, res.diagnostics)
        restored = reduced.restore(res.new_source)
        if restored is not None:
            return MigrationResult(restored, restored != source, res.diagnostics)
        tree = python_tree(source)[0]
    return _migrate_text(source, source, tree, path, codes, watch, whole=True)


def _migrate_groups(
    source: str,
    reduced: partial.Reduced,
    plan: list[list[int]],
    path: str,
    codes: tuple[str, ...],
    watch: Watch,
) -> MigrationResult | None:
    """The reduced text migrated group by group (see migrate.groups); None: parse it in one piece."""
    pieces = reduced.pieces
    lasts = [p.last for p in pieces]
    offsets = groups.line_offsets(reduced.text)
    unit_codes: dict[int, str] = {}  # piece -> its new code (movable pieces, from their own group)
    context: dict[int, str] | None = None  # context piece -> its new code (the same in every pass)
    context_diags: list[tuple] | None = None
    found: list[Diagnostic] = []
    used: set[str] = set()
    changed = False
    state: tuple[set[str], set[str], dict[str, tuple[int, int]]] = (set(), set(), {})
    memo: dict[object, object] = {}  # (whole-source tests: asked once per file, not once per group)
    for members in [
        *map(set, plan),
        set(),
    ]:  # (the last pass: the context alone, kept for the import clean-up)
        text, tree = groups.group_text(reduced, members, offsets)
        module, new, tr, smap = _rule_pass(source, text, tree, path, codes, watch, memo=memo)
        got = _pass_codes(module, new, smap, pieces)
        if got is None:
            return None
        if not _canonical(smap, lasts):
            return None  # (a statement's lines are split otherwise: an indented blank line after a block)
        codes_of, moved = got
        if any(i not in members and (pieces[i].movable or not pieces[i].kept) for i in moved):
            return None  # (another group's placeholder or a hidden statement changed)
        changed = changed or new is not module
        if not members <= codes_of.keys():
            return None
        mine = {i: codes_of[i] for i in members}
        theirs = {i: c for i, c in codes_of.items() if pieces[i].kept and not pieces[i].movable}
        diags: list[tuple] = []
        for d in tr.diagnostics:
            i = groups.piece_at(lasts, d.line)
            if i in members:
                found.append(d)
            elif i < len(pieces) and pieces[i].kept and not pieces[i].movable:
                diags.append((d.line, d.col, d.code, d.message, d.fixed, d.outcome))
            else:
                return None
        if context is None:
            context, context_diags = theirs, sorted(diags)
        elif theirs != context or sorted(diags) != context_diags:
            return None
        unit_codes.update(mine)
        if members:
            if new is not module:
                used |= imports.names_used(new)
            state[0].update(tr.needed_imports)
            state[1].update(tr.helpers)
            merged = {**state[2], **tr.import_positions}
            if any(state[2][k] != merged[k] for k in state[2]):
                return None
            state = (state[0], state[1], merged)
            del module, new, tr, smap, text, tree
            gc.collect()  # (a group's tree, freed before the next: the collector is paused per file)
    # the context pass's tree stays for the import clean-up
    diagnostics = [d for d in tr.diagnostics]
    diagnostics += found
    if not changed:
        return MigrationResult(source, False, _sorted(diagnostics))
    before = _assemble(reduced, offsets, text, smap, new, unit_codes)
    if before is None:
        return None
    if before == reduced.text:
        return MigrationResult(source, False, _sorted(diagnostics))
    tr.needed_imports |= state[0]
    tr.helpers |= state[1]
    if any(tr.import_positions.get(k, v) != v for k, v in state[2].items()):
        return None
    tr.import_positions = {**state[2], **tr.import_positions}
    tr.diagnostics = diagnostics
    needed = set(tr.needed_imports) | {m for h in closure(tr.helpers) for m in h.imports}
    if "torch" in needed and not imports.binds(new, "torch"):
        return None  # (`import torch as th` renames the rewritten code in every group: imports.rename_root)
    final = _finish(module, new, tr, path, text, used | imports.names_used(new))
    after = _assemble(reduced, offsets, text, smap, final, unit_codes)
    if after is None:
        return None
    restored = reduced.restore(after)
    if restored is None:
        return None
    return MigrationResult(restored, restored != source, _sorted(tr.diagnostics))


def _owners(smap: SourceMap, pieces: list[partial.Piece]) -> list[int] | None:
    if not smap.ok or smap.starts is None:
        return None
    out = []
    lasts = [p.last for p in pieces]
    for start in smap.starts:
        line = bisect.bisect_right(smap.line_starts, start)
        out.append(groups.piece_at(lasts, line))
    return out


def _pass_codes(
    module: cst.Module, new: cst.Module, smap: SourceMap, pieces: list[partial.Piece]
) -> tuple[dict[int, str], set[int]] | None:
    owner = _owners(smap, pieces)
    listed = smap.pieces(new) if owner is not None else None
    if owner is None or listed is None:
        return None
    return groups.attribute(listed, owner, len(module.body))


def _canonical(smap: SourceMap, lasts: list[int]) -> bool:
    """Every statement starts on the line after the previous piece (its blank and comment lines lead it), one
    statement per piece or run: then a piece's code is the same slice of lines in every pass."""
    if not smap.ok or smap.starts is None:
        return False
    prev = -1
    for start in smap.starts:
        line = bisect.bisect_right(smap.line_starts, start)
        k = groups.piece_at(lasts, line)
        if k <= prev or (k > 0 and line != lasts[k - 1] + 1):
            return False
        prev = k
    return True


def _assemble(
    reduced: partial.Reduced,
    offsets: list[int],
    text: str,
    smap: SourceMap,
    new: cst.Module,
    unit_codes: dict[int, str],
) -> str | None:
    """The reduced text from the context pass's module ``new`` (every group under placeholders) and each group's
    statements; None when a placeholder did not come through untouched."""
    pieces = reduced.pieces
    owner = _owners(smap, pieces)
    listed = smap.pieces(new) if owner is not None else None
    if owner is None or listed is None or smap.starts is None:
        return None
    nxt = {o: (owner[i + 1] if i + 1 < len(owner) else len(pieces)) for i, o in enumerate(owner)}
    parts = [text[: smap.starts[0]]]
    placed = 0
    for i, code in listed:
        k = owner[i] if i is not None else -1
        if k < 0 or not groups.hidden_in(reduced, set(), k):
            parts.append(code)
            continue
        for m in range(k, nxt[k]):  # (a run under one placeholder: each piece's own code)
            if pieces[m].movable:
                parts.append(unit_codes[m])
                placed += 1
            else:
                a = offsets[pieces[m - 1].last]
                b = offsets[pieces[m].last] if pieces[m].last < len(offsets) else len(reduced.text)
                parts.append(reduced.text[a:b])
    if placed != sum(p.movable for p in pieces):
        return None
    parts.append(text[smap.footer_start :])
    return "".join(parts)


def _migrate_text(
    source: str,
    text: str,
    tree: ast.Module | None,
    path: str,
    codes: tuple[str, ...],
    watch: Watch,
    *,
    whole: bool = False,
) -> MigrationResult:
    """Migrate ``text``: ``source`` itself, or its reduced form (see migrate.partial) whose hidden statements
    no rule can touch; rules read whole-file facts from ``source``, libcst parses ``text`` only. ``whole``:
    ``text`` is ``source`` and ``tree`` (when not None) is :func:`python_tree`'s full tree of it."""
    module, new, transformer, smap = _rule_pass(source, text, tree, path, codes, watch, whole=whole)
    diagnostics = transformer.diagnostics
    if new is module:  # no rule changed anything (the walk returns the very same tree)
        return MigrationResult(text, False, _sorted(diagnostics))
    watch.stage("generating code")
    new_code = smap.splice(new)
    if new_code is None:
        return _whole_module(text, module, new, transformer, path)
    if new_code == text:
        return MigrationResult(text, False, _sorted(diagnostics))
    rewritten = new
    new = _finish(module, new, transformer, path, text)
    if new is not rewritten:
        new_code = smap.splice(new)
        if new_code is None:
            return _whole_module(text, module, rewritten, transformer, path)
    return MigrationResult(new_code, new_code != text, _sorted(diagnostics))


def _rule_pass(
    source: str,
    text: str,
    tree: ast.Module | None,
    path: str,
    codes: tuple[str, ...],
    watch: Watch,
    *,
    whole: bool = False,
    memo: dict[object, object] | None = None,
) -> tuple[cst.Module, cst.Module, MigrationTransformer, SourceMap]:
    """Parse ``text``, run the rules (and the device-check passes), locate the findings (``whole``: see
    :func:`_migrate_text`). ``memo``: answers of tests of ``source`` alone, shared by the passes over one file
    (migrate.groups: one pass per group, each asking them of the same whole source)."""
    memo = {} if memo is None else memo
    quiet_tree = tree if whole and tree is not None and _lines_as_parsed(source) else None
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError) as exc:
        raise UnparsableError(*describe_syntax_error(text, exc)) from exc
    watch.stage("resolving names")
    table = import_table(module)
    if path and "import *" in text and (star := project.current().star_names.get(os.path.abspath(path))):
        for (
            name,
            qname,
        ) in star.items():  # (torch names a project module's `import *` brings: ElegantRL's `th`)
            table.module_scope.names.setdefault(name, qname)
    mode = flag_only_mode(source, module, table, path)
    if mode == "spmd" and "TPU901" not in codes:
        mode = "normal"
    index = _rule_index(codes, mode)
    watch.stage("rewriting")
    own = _added_helpers(module) | _old_torch_branches(module, source)
    transformer, new = _rewrite(module, index, path, source, table, watch, {}, set(own), quiet_tree, memo)
    smap = SourceMap(text, module, tree)
    if "worth" not in memo:
        memo["worth"] = flow.worth_analysing(source)
    if memo["worth"] and _rewrote_a_check(transformer):
        watch.stage("following device checks")
        facts = flow.Flow(module, smap.texts(), path, source, cuda_only_module)
        kept: dict[int, str] = {}
        for _ in range(_MAX_FLOW_PASSES):
            more = flow.checks_to_keep(facts, *_outcomes(transformer), kept)
            if not more:
                break
            kept.update(more)
            frozen = own | {id(r) for c in facts.checks if id(c.key) in kept for r in c.regions}
            frozen |= {id(s) for c in facts.checks if id(c.key) in kept for s in facts.fed_literals(c)}
            watch.stage("rewriting (device checks kept)")
            transformer, new = _rewrite(
                module, index, path, source, table, watch, kept, frozen, quiet_tree, memo
            )
        _note_exported(transformer, facts, kept)
    watch.stage("locating findings")
    transformer.finalize(module, smap)
    return module, new, transformer, smap


#: Passes after the first one that may keep more device checks (each keeps at least one more).
_MAX_FLOW_PASSES = 4
_CHECK_CODES = frozenset({"TPU201", "TPU106", "TPU102"})


#: A test of torch's own version (``version.parse(torch.__version__) >= version.parse("2.4")``, ``TORCH_VERSION``).
_TORCH_VERSION = re.compile(r"torch\.__version__|\bTORCH_VERSION\b|\btorch_version\b")
#: Text every match of :data:`_TORCH_VERSION` holds.
_TORCH_VERSION_WORDS = ("torch.__version__", "TORCH_VERSION", "torch_version")
_NEWER = (cst.GreaterThan, cst.GreaterThanEqual)
_OLDER = (cst.LessThan, cst.LessThanEqual)


def _old_torch_branches(module: cst.Module, source: str) -> set[int]:
    """The branches of ``if <torch version> >= X: ... else: ...`` that run only on an older torch (skrl's agents:
    ``torch.amp.GradScaler(device=...)`` from 2.4, else ``torch.cuda.amp.GradScaler()``): TorchTPU needs a torch
    far newer than any such test, so the older branch never runs on a TPU host, and rewritten it would call APIs
    the older torch it serves lacks. Left as written."""
    if not any(w in source for w in _TORCH_VERSION_WORDS) or not _TORCH_VERSION.search(source):
        return set()  # (the words first: a plain search, ~60x faster than the regex on a file without them)
    out: set[int] = set()
    todo: list[cst.CSTNode] = [module]
    while todo:
        node = todo.pop()
        todo.extend(walk.child_nodes(node))
        if (
            type(node) is not cst.If
            or type(node.test) is not cst.Comparison
            or len(node.test.comparisons) != 1
        ):
            continue
        cmp = node.test
        op = type(cmp.comparisons[0].operator)
        left = _TORCH_VERSION.search(_code_of(cmp.left)) is not None
        right = _TORCH_VERSION.search(_code_of(cmp.comparisons[0].comparator)) is not None
        if left == right or op not in (*_NEWER, *_OLDER):
            continue
        newer_in_body = (op in _NEWER) == left
        if newer_in_body and node.orelse is not None:
            out.add(id(node.orelse))
        elif not newer_in_body:
            out.add(id(node.body))
    return out


def _code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _added_helpers(module: cst.Module) -> set[int]:
    """The helpers an earlier run added (``_tpu_autocast``...): their bodies are the migration's own code (the
    autocast helper names CUDA's autocast on purpose, for where there is no TPU): no rule reads them again."""
    names = {h.name for h in all_helpers()}
    own = set()
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in names:
            doc = stmt.get_docstring(clean=False) or ""
            if doc.startswith("Added by tpu-migrate"):
                own.add(id(stmt))
    return own


def _rewrite(
    module: cst.Module,
    index: _Index,
    path: str,
    source: str,
    table: ImportTable,
    watch: Watch,
    kept: dict[int, str],
    frozen: set[int],
    tree: ast.Module | None = None,
    memo: dict[object, object] | None = None,
) -> tuple[MigrationTransformer, cst.Module]:
    """One rule pass; ``kept`` device checks stay as written (flagged) and ``frozen`` nodes untouched;
    ``tree``: Python's tree of the transformer's ``source_text`` when already built; ``memo``: the file's
    (see _rule_pass), for the rules' whole-text tests."""
    if table.needs_scopes():
        transformer: MigrationTransformer = PreciseMigrationTransformer(index, path, source.splitlines())
        transformer.source_tree = tree
        if memo is not None:
            transformer.text_memo = memo
        _seed(transformer, kept, frozen)
        return transformer, MetadataWrapper(module, unsafe_skip_copy=True).visit(transformer)
    transformer = MigrationTransformer(index, path, source.splitlines(), table)
    transformer.source_tree = tree
    if memo is not None:
        transformer.text_memo = memo
    _seed(transformer, kept, frozen)
    return transformer, walk.visit(module, transformer, watch.tick)


def _lines_as_parsed(source: str) -> bool:
    """The transformer's ``source_text`` ("\\n".join of ``source.splitlines()``) has ``source``'s lines, so
    Python's tree of ``source`` is its tree too: no line break but ``\\n`` (splitlines also breaks at ``\\v``,
    ``\\x1c``, ``\\u2028`` …, which Python's tokenizer does not)."""
    text = "\n".join(source.splitlines())
    return text == source or text + "\n" == source


def _seed(tr: MigrationTransformer, kept: dict[int, str], frozen: set[int]) -> None:
    """Kept checks: calls and attributes through the guard table, compared literals through a flagged claim."""
    tr.scratch["cuda-guards"] = dict(kept)
    tr.frozen = frozen
    for key, why in kept.items():
        tr.string_claims[key] = (
            "TPU102",
            "flagged",
            f"device test kept as written ({why}), so the code it controls never runs on TPU; give the TPU path "
            "its own branch",
            None,
        )


def _note_exported(tr: MigrationTransformer, facts: flow.Flow, kept: dict[int, str]) -> None:
    """A rewritten check stored in a flag other modules can read: said on its finding (warned), since the
    code those modules switch on with it is out of this file's sight (migrate them together)."""
    exported = {id(c.key): c.exported for c in facts.checks if c.exported and id(c.key) not in kept}
    if not exported:
        return
    for i, (node, fallback, code, message, fixed, _outcome) in enumerate(tr._reports):
        name = exported.get(id(node))
        if name is not None and fixed and code in _CHECK_CODES:
            tr._reports[i] = (
                node,
                fallback,
                code,
                f"{message}; `{name}` can be read by other modules, whose code it now switches on too: "
                "migrate them together",
                fixed,
                "warned",
            )


def _rewrote_a_check(tr: MigrationTransformer) -> bool:
    return any(fixed and code in _CHECK_CODES for _n, _f, code, _m, fixed, _o in tr._reports)


def _outcomes(tr: MigrationTransformer) -> tuple[set[int], set[int]]:
    """ids of the original nodes a pass rewrote, and of those it flagged."""
    rewritten = {id(n) for n, _f, _c, _m, fixed, _o in tr._reports if fixed}
    flagged = {id(n) for n, _f, c, _m, fixed, _o in tr._reports if not fixed and c not in _ADVISORY}
    return rewritten, flagged


#: Findings that advise on one call, not mark code CUDA-only: they never keep the device check around them
#: (PixArt's apps: an optional `pipe.enable_model_cpu_offload()` kept CUDA's check on the whole pipeline load).
_ADVISORY = frozenset({"TPU915"})


def _finish(
    module: cst.Module,
    new: cst.Module,
    tr: MigrationTransformer,
    path: str,
    source: str,
    also_used: set[str] | frozenset[str] = frozenset(),
) -> cst.Module:
    """Import clean-up and helpers, after the rule pass (``also_used``: see imports.remove_unused)."""
    helpers = [h for h in closure(tr.helpers) if not _defines(new, h.name)]
    for h in helpers:
        tr.needed_imports.update(h.imports)
    new = _fix_imports(module, new, tr, path, tr.diagnostics, alias_ok=not helpers, also_used=also_used)
    # always after the leading import block: a function defined above a later import may use a helper and be
    # called before that import runs (a notebook's model-loading cell before the cell that imports numpy)
    new = _add_helpers(new, helpers)
    return _strip_leading_blank(new, source)


def _whole_module(
    source: str, module: cst.Module, new: cst.Module, tr: MigrationTransformer, path: str
) -> MigrationResult:
    """The slow way: generate the whole module (when statement spans could not be used)."""
    tr.diagnostics = [d for d in tr.diagnostics if d.code != UNUSED_IMPORT_CODE]  # _finish adds them again
    new_code = new.code
    if new_code == source:
        return MigrationResult(source, False, _sorted(tr.diagnostics))
    old_code = tr.module_code if tr.module_code is not None else module.code
    if old_code != source:  # libcst itself would change bytes nobody asked to change
        if new_code == old_code:
            return MigrationResult(source, False, _sorted(tr.diagnostics))
        raise UnparsableError("libcst cannot reproduce this file byte-for-byte; left untouched")
    rewritten = new
    new = _finish(module, new, tr, path, source)
    if new is not rewritten:
        new_code = new.code
    return MigrationResult(new_code, new_code != source, _sorted(tr.diagnostics))


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.line, d.col, d.code))


def _fix_imports(
    old: cst.Module,
    new: cst.Module,
    tr: MigrationTransformer,
    path: str,
    diagnostics: list[Diagnostic],
    *,
    alias_ok: bool = False,
    also_used: set[str] | frozenset[str] = frozenset(),
) -> cst.Module:
    """Remove the torch_xla/torch.cuda imports nothing uses any more; add the ones the rewrite needs."""
    if tr.enabled(UNUSED_IMPORT_CODE) and tr.import_positions:  # only files with torch_xla/torch.cuda imports

        def removed(node: cst.CSTNode, name: str) -> None:
            line, col = tr.import_positions.get(name, (1, 1))
            diagnostics.append(
                Diagnostic(
                    path,
                    line,
                    col,
                    UNUSED_IMPORT_CODE,
                    f"removed import of `{name}`, unused after migration",
                    True,
                    "rewritten",
                )
            )

        new = imports.remove_unused(new, removed, also_used)
    needed = set(tr.needed_imports)
    if alias_ok and "torch" in needed and not imports.binds(new, "torch"):
        alias = imports.torch_alias(old, new)
        if alias is not None:  # `import torch as th`: the rewritten code says `th.`, no second import
            new = imports.rename_root(new, "torch", alias)
            needed.discard("torch")
    if needed:
        new = imports.add_imports(new, sorted(needed))
    return new


def _defines(module: cst.Module, name: str) -> bool:
    return any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name for s in module.body)


def _bound_at_module_level(module: cst.Module, name: str) -> bool:
    """An ``import name`` run at import time: the module's own, or inside a module-level if/try/with."""
    todo: list[cst.CSTNode] = list(module.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                    (cst.helpers.get_full_name_for_node(a.name) or "").split(".")[0] == name
                    and a.asname is None
                    for a in small.names
                ):
                    return True
        elif isinstance(stmt, (cst.If, cst.Try, cst.With, cst.Else, cst.ExceptHandler, cst.Finally)):
            todo.extend(getattr(stmt.body, "body", ()))
            todo.extend(getattr(stmt, "handlers", ()))
            for part in ("orelse", "finalbody"):
                if getattr(stmt, part, None) is not None:
                    todo.append(getattr(stmt, part))
    return False


def _importing_inside(stmt: cst.CSTNode, name: str) -> cst.CSTNode:
    """A helper's def (each method of a helper class) that uses ``name`` and does not import it, with
    ``import name`` as its first statement after the docstring."""
    if isinstance(stmt, cst.ClassDef):
        return stmt.with_changes(
            body=stmt.body.with_changes(body=[_importing_inside(s, name) for s in stmt.body.body])
        )
    if not isinstance(stmt, cst.FunctionDef) or not isinstance(stmt.body, cst.IndentedBlock):
        return stmt
    text = cst.Module(body=[]).code_for_node(stmt.body)
    if f"{name}." not in text or re.search(rf"^\s*import {re.escape(name)}\b", text, re.M):
        return stmt
    body = list(stmt.body.body)
    at = 1 if body and _is_docstring(body[0], 0) else 0
    body[at:at] = [cst.SimpleStatementLine([cst.Import([cst.ImportAlias(cst.Name(name))])])]
    if at < len(body) - 1:
        body[at + 1] = body[at + 1].with_changes(
            leading_lines=[cst.EmptyLine(indent=False), *body[at + 1].leading_lines]
        )
    return stmt.with_changes(body=stmt.body.with_changes(body=body))


def _add_helpers(module: cst.Module, helpers: list[Helper]) -> cst.Module:
    """Insert helper definitions once, after the leading import block (a helper must be defined before any
    statement that may call it runs)."""
    if not helpers:
        return module
    body = list(module.body)
    last_import = -1
    for i, s in enumerate(body):
        if isinstance(s, cst.SimpleStatementLine) and any(
            isinstance(b, (cst.Import, cst.ImportFrom)) for b in s.body
        ):
            last_import = i
        elif last_import >= 0 and not _is_docstring(s, i) and not _import_setup(s):
            break
    new_nodes: list[cst.BaseStatement] = []
    lazy = [m for m in ("torch",) if not _bound_at_module_level(module, m)]
    for h in helpers:
        # (in the file's own line endings: a CRLF file's helper docstring keeps CRLF inside the string too)
        parsed = list(cst.parse_module(h.source.replace("\n", module.default_newline)).body)
        for m in (x for x in lazy if x in h.imports):
            # axolotl's test_activation_offloading.py imports torch only inside its tests: the helper imports it
            # where it runs, as they do (a top-level import would break a file that loads without torch)
            parsed = [_importing_inside(stmt, m) for stmt in parsed]
        parsed[0] = parsed[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        new_nodes.extend(parsed)
    body[last_import + 1 : last_import + 1] = new_nodes
    after = last_import + 1 + len(new_nodes)
    if after < len(body):
        nxt = body[after]
        lines = list(nxt.leading_lines)
        while lines and lines[0].comment is None:
            lines.pop(0)
        body[after] = nxt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *lines])
    return module.with_changes(body=body)


#: Statements that prepare imports (the block of imports goes on after them): ``sys.path.append('waveglow/')``.
_IMPORT_SETUP = re.compile(
    r"^\s*(?:sys\.path\.(?:append|insert|extend)\(|os\.environ\[|os\.environ\.setdefault\()"
)


def _import_setup(stmt: cst.BaseStatement) -> bool:
    """``sys.path.append(...)`` or an ``os.environ`` setting between imports (tacotron2's notebook)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    target = (
        small.value
        if isinstance(small, cst.Expr)
        else small.targets[0].target
        if isinstance(small, cst.Assign)
        else None
    )
    return target is not None and _IMPORT_SETUP.match(cst.Module([]).code_for_node(target)) is not None


def _is_docstring(stmt: cst.BaseStatement, index: int) -> bool:
    return (
        index == 0
        and isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString)
    )


def _strip_leading_blank(module: cst.Module, source: str) -> cst.Module:
    """Removing the first import can leave the file starting with blank lines; drop them."""
    if module.header or not module.body or source[:1] in ("\n", "\r"):
        return module
    first = module.body[0]
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    if len(lines) == len(first.leading_lines):
        return module
    return module.with_changes(body=[first.with_changes(leading_lines=lines), *module.body[1:]])
