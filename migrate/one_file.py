"""One file, start to finish: read, migrate, diff (compute), then write (apply).

Computing and writing are apart so that a worker process only computes and the calling process alone
writes: a worker can then be stopped at any moment (a per-file limit, Ctrl-C, its parent killed) without
leaving a half-written file, and an interrupted run knows exactly what it wrote.
"""

from __future__ import annotations

import ast
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import patiencediff

from .fileio import NotWritable, SourceFile, Stamp, decode, encode, read_file, write_back
from .limits import (
    DEFAULT_LIMITS,
    FileLimitError,
    Limits,
    LocalWatch,
    StageCallback,
    Watch,
    collector_paused,
    give_back_memory,
)
from .notebook import migrate_notebook
from .results import FileResult
from .selection import RuleSet, as_rule_set
from .source import CHUNK_CHARS, UnparsableError, migrate_source, needs_parse, top_level_chunks

#: After a file this big the C heap is handed back to the system (see limits.give_back_memory).
TRIM_BYTES = 256 << 10


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff; patience matching keeps it linear in the file size (difflib's matcher is quadratic
    when changes are spread over a long file: 8,000 changed functions took 38 s). A last line without a newline
    gets git's and patch's marker, so the next file's header never joins it and the diff applies."""
    out = []
    for line in patiencediff.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        f"a/{path.lstrip('/')}",
        f"b/{path.lstrip('/')}",
        sequencematcher=patiencediff.PatienceSequenceMatcher,
    ):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


#: Python frames a file's syntax tree may need: libcst walks it recursively, and a 1,000-term ``1 + 1 + ...``
#: (which CPython compiles) is a tree 1,000 levels deep, several frames per level.
RECURSION_LIMIT = 20_000


@contextmanager
def _deep_stack() -> Iterator[None]:
    """Raise the recursion limit for one file (Python 3.11+ frames live off the C stack)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def migrate_text(
    text: str,
    path: str,
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    rules: RuleSet | None = None,
    watch: Watch | None = None,
) -> tuple[FileResult, str]:
    """Migrate already-read text (``.ipynb`` by suffix); returns the result and the new text."""
    rules = as_rule_set(rules, select, ignore)
    try:
        with collector_paused(), _deep_stack():
            if path.endswith(".ipynb"):
                res = migrate_notebook(text, path, rules=rules)
            else:
                if not needs_parse(text):
                    return FileResult(path, "skipped"), text
                res = migrate_source(text, path, rules=rules, watch=watch)
    except UnparsableError as exc:
        return FileResult(path, "unparsable", error=exc.message, line=exc.line, col=exc.col), text
    except RecursionError:  # nesting deeper than even the raised limit (see _deep_stack)
        return FileResult(
            path,
            "unparsable",
            error="nested too deeply for the migration (an expression of thousands of terms); left untouched",
        ), text
    if not res.changed:
        return FileResult(path, "unchanged", res.diagnostics), text
    broken = None if path.endswith(".ipynb") else _syntax_error(res.new_source)
    if broken is not None and _syntax_error(text) is None:  # never break what Python could read (a tool bug)
        return FileResult(
            path,
            "unparsable",
            error=f"tpu-migrate's output would not parse ({broken}): a tool bug, please report it; left untouched",
        ), text
    if watch is not None:
        watch.stage("diffing")
    return FileResult(
        path, "changed", res.diagnostics, unified_diff(text, res.new_source, path)
    ), res.new_source


def _syntax_error(code: str) -> str | None:
    """Python's own complaint about ``code`` ("line N: message"), or None when it parses. A big text is checked
    a top-level chunk at a time (a tenth of the parser's memory on a 5 MB file; every chunk parsing means the
    whole does), and at once when a chunk does not parse alone, for Python's own message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (odd escapes the original had too)
            if len(code) > CHUNK_CHARS and _chunks_parse(code):
                return None
            compile(code, "<migrated>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError):  # (the original's own limits: not ours to judge)
        return None
    return None


def _chunks_parse(code: str) -> bool:
    try:
        for chunk in top_level_chunks(code):
            compile(chunk, "<migrated>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError:
        return False
    return True


@dataclass
class Computed:
    """A file migrated but not yet written: the result, and the bytes to write (``--write``, changed)."""

    result: FileResult
    data: bytes | None = None
    stamp: Stamp | None = None
    size: int = 0


def compute_file(path: str, *, write: bool, rules: RuleSet, watch: Watch | None = None) -> Computed:
    """Read and migrate one file; never raises for bad input (the status says what happened)."""
    if watch is not None:
        watch.stage("reading")
    try:
        data, stamp = read_file(path)
        src: SourceFile = decode(data)
    except (OSError, UnicodeDecodeError, LookupError) as exc:
        return Computed(FileResult(path, "unparsable", error=f"cannot read: {exc}"))
    result, new_text = migrate_text(src.text, path, rules=rules, watch=watch)
    new = encode(src, new_text) if write and result.status == "changed" else None
    return Computed(result, new, stamp, len(data))


def apply(c: Computed) -> FileResult:
    """Write what :func:`compute_file` produced (a symlink inside the tree is written through)."""
    r = c.result
    if c.data is None:
        return r
    try:
        note = write_back(os.path.realpath(r.path), c.data, c.stamp)
    except NotWritable as exc:
        r.status, r.error = "not-writable", str(exc)
        return r
    if note:
        r.note = note
    return r


def process_file(
    path: str,
    *,
    write: bool = False,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    rules: RuleSet | None = None,
    limits: Limits = DEFAULT_LIMITS,
    on_stage: StageCallback | None = None,
) -> FileResult:
    """One file, start to finish, in this process (limits checked between stages, see migrate.limits)."""
    rules = as_rule_set(rules, select, ignore)
    watch = LocalWatch(path, limits, on_stage)
    how = "stopped"
    try:
        c = compute_file(path, write=write, rules=rules, watch=watch)
        how = "done"
    except FileLimitError as exc:
        return FileResult(path, "over-limit", error=str(exc))
    finally:
        if file_size(path) >= TRIM_BYTES:
            give_back_memory()
        if on_stage is not None:
            on_stage(path, how, time.monotonic() - watch.start)
    return apply(c)


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
