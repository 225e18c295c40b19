"""Migrate one Python source string: prefilter, parse, one rule pass, import clean-up."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import _walk as walk
from . import imports
from ._spans import SourceMap
from .names import import_table
from .results import Diagnostic, MigrationResult
from .rules.base import all_rules, select_rules
from .rules.xla_flag_only import SPMD_MARKERS, Spmd, SpmdProgram
from .transform import MigrationTransformer, PreciseMigrationTransformer, _Index

#: Cheap text test run before parsing: a file that matches none of these cannot match a rule. Written
#: against code forms, not prose: "CUDA" in a docstring does not make a file worth parsing. Each regex
#: comes with a word that every one of its matches contains: a regex runs only over a file that holds its
#: word (a plain substring test, C speed), so common words ("device") cost one cheap search, not a scan
#: with every alternative (a property test checks the pairing).
TRIGGERS: tuple[tuple[str, str], ...] = (
    ("cuda", r"""['"]cuda(?::[^'"\n]*)?['"]"""), ("xla", r"""['"]xla(?::[^'"\n]*)?['"]"""),
    ("nccl", r"""['"]nccl(?::[^'"\n]*)?['"]"""), ("cuda", r"""f['"]cuda:"""), ("xla", r"""f['"]xla:"""),
    ("cuda", r"\bcuda\s*[.(]"), ("cuda", r"\.cuda\b"), ("cuda", r"\bis_cuda\b"), ("xla", "torch_xla"),
    ("cudnn", "cudnn"),
    *((w.replace("PT_", ""), rf"\b{w}_[A-Z_]+") for w in ("CUDA", "NCCL", "XLA", "XRT", "PJRT", "PT_XLA")),
    ("TPU_", "TPU_NUM_DEVICES"), ("TPU_", "TPU_PROCESS_ADDRESSES"),
    *((w, rf"\b{w}\b") for w in ("triton", "apex", "flash_attn", "bitsandbytes", "xformers", "cupy",
                                  "transformer_engine")),
    ("cuda", r"\bpycuda\b"),
    ("xla", "openxla"), ("GradScaler", "GradScaler"), ("autocast", "autocast"),
    ("ProfilerActivity", "ProfilerActivity"), ("emit_nvtx", "emit_nvtx"), ("CUDA", "CUDAExtension"),
    ("CUDA", "CUDAGraph"), ("tpu-migrate", "tpu-migrate"),
    # framework knobs (rules/frameworks.py)
    ("accelerator", r"""\baccelerator\s*=\s*['"]"""), ("strategy", r"""\bstrategy\s*=\s*['"](?:xla|tpu|single_)"""),
    ("tpu_", r"\btpu_(?:num_)?cores\b"), ("tpu_", "tpu_metrics_debug"), ("gpus", r"\bgpus\s*="),
    ("XLA", r"XLA\w*(?:Strategy|Accelerator|Precision|CheckpointIO|Profiler|Environment)"),
    ("TPU", r"TPU\w*(?:Strategy|Accelerator|Plugin)"), ("Device", r"\bDevice[TG]PU\b"),
    ("composer", r"\bcomposer\b"), ("--tpu", "--tpu"),  # (not device="tpu": migrated code is full of it)
)
PREFILTER: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (word, re.compile("|".join(rx for w, rx in TRIGGERS if w == word)))
    for word in dict.fromkeys(word for word, _ in TRIGGERS))

UNUSED_IMPORT_CODE = "TPU590"


class UnparsableError(Exception):
    """The source is not valid Python for libcst; the caller leaves the file untouched."""


@lru_cache(maxsize=64)
def _index(select: tuple[str, ...] | None, ignore: tuple[str, ...] | None, spmd: bool = False) -> _Index:
    rules = select_rules(select, ignore)
    if spmd:
        # An SPMD program is flagged, never rewritten (see SpmdProgram); other rules only flag.
        rules = [SpmdProgram if r is Spmd else r for r in rules
                 if r.outcome == "flagged" and not r.family.startswith("xla_model")]
    return _Index(rules, all_rules())


def is_spmd_program(source: str) -> bool:
    return any(m in source for m in SPMD_MARKERS)


def _key(patterns: Iterable[str] | None) -> tuple[str, ...] | None:
    return tuple(patterns) if patterns else None


def needs_parse(source: str) -> bool:
    return any(word in source and regex.search(source) is not None for word, regex in PREFILTER)


def migrate_source(
    source: str, path: str = "<string>", *, select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> MigrationResult:
    """Migrate ``source``; raises :class:`UnparsableError` when it does not parse.

    Output is byte-identical when no rule fires, and a second run over the output changes nothing.
    """
    if not needs_parse(source):
        return MigrationResult(source, False, [])
    spmd = is_spmd_program(source)
    index = _index(_key(select), _key(ignore), spmd and "TPU901" in _index(_key(select), _key(ignore)).codes)
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, RecursionError, ValueError) as exc:
        raise UnparsableError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    table = import_table(module)
    if table.needs_scopes():
        transformer: MigrationTransformer = PreciseMigrationTransformer(index, path, source.splitlines())
        new = MetadataWrapper(module, unsafe_skip_copy=True).visit(transformer)
    else:
        transformer = MigrationTransformer(index, path, source.splitlines(), table)
        new = walk.visit(module, transformer)
    smap = SourceMap(source, module)
    transformer.finalize(module, smap)
    diagnostics = transformer.diagnostics
    if new is module:  # no rule changed anything (the walk returns the very same tree)
        return MigrationResult(source, False, _sorted(diagnostics))
    new_code = smap.splice(new)
    if new_code is None:
        return _whole_module(source, module, new, transformer, path)
    if new_code == source:
        return MigrationResult(source, False, _sorted(diagnostics))
    rewritten = new
    new = _finish(module, new, transformer, path, source)
    if new is not rewritten:
        new_code = smap.splice(new)
        if new_code is None:
            return _whole_module(source, module, rewritten, transformer, path)
    return MigrationResult(new_code, new_code != source, _sorted(diagnostics))


def _finish(module: cst.Module, new: cst.Module, tr: MigrationTransformer, path: str, source: str) -> cst.Module:
    """Import clean-up and helpers, after the rule pass."""
    new = _fix_imports(module, new, tr, path, tr.diagnostics)
    new = _add_helpers(new, tr.helpers)
    return _strip_leading_blank(new, source)


def _whole_module(source: str, module: cst.Module, new: cst.Module, tr: MigrationTransformer,
                  path: str) -> MigrationResult:
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


def _fix_imports(old: cst.Module, new: cst.Module, tr: MigrationTransformer, path: str,
                 diagnostics: list[Diagnostic]) -> cst.Module:
    """Remove the torch_xla/torch.cuda imports nothing uses any more; add the ones the rewrite needs."""
    if tr.enabled(UNUSED_IMPORT_CODE) and tr.import_positions:  # only files with torch_xla/torch.cuda imports
        def removed(node: cst.CSTNode, name: str) -> None:
            line, col = tr.import_positions.get(name, (1, 1))
            diagnostics.append(Diagnostic(path, line, col, UNUSED_IMPORT_CODE,
                                          f"removed import of `{name}`, unused after migration", True, "rewritten"))

        new = imports.remove_unused(new, removed)
    if tr.needed_imports:
        new = imports.add_imports(new, sorted(tr.needed_imports))
    return new


def _add_helpers(module: cst.Module, helpers: dict[str, str]) -> cst.Module:
    """Insert helper definitions once, after the last top-level import."""
    if not helpers:
        return module
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    todo = [src for name, src in sorted(helpers.items()) if name not in defined]
    if not todo:
        return module
    body = list(module.body)
    last_import = -1
    for i, s in enumerate(body):
        if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(b, (cst.Import, cst.ImportFrom)) for b in s.body):
            last_import = i
    new_nodes: list[cst.BaseStatement] = []
    for src in todo:
        parsed = list(cst.parse_module(src).body)
        parsed[0] = parsed[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        new_nodes.extend(parsed)
    body[last_import + 1:last_import + 1] = new_nodes
    after = last_import + 1 + len(new_nodes)
    if after < len(body):
        nxt = body[after]
        lines = list(nxt.leading_lines)
        while lines and lines[0].comment is None:
            lines.pop(0)
        body[after] = nxt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *lines])
    return module.with_changes(body=body)


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
