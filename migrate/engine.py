"""Run the migration over paths: discover, then compute and write each file (migrate.one_file), in this
process or in supervised worker processes (migrate._pool)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from . import _pool
from .discover import check_named, discover
from .fileio import decode, encode
from .limits import DEFAULT_LIMITS, Limits, StageCallback
from .one_file import Computed, apply, file_size, migrate_text, process_file
from .project import installed, scan_files, with_project
from .results import FileResult, RunResult
from .rules.cuda_api import cuda_only_module, device_limited
from .selection import RuleSet, as_rule_set

#: Below this many files a process pool costs more than it saves.
POOL_THRESHOLD = 16
#: Files at least this big are migrated in a worker process even in a small run, so that the per-file
#: limits hold exactly (the parse cannot be interrupted from inside the process that runs it).
ISOLATE_BYTES = 256 << 10  # about 2 s of parsing


#: A line this long can hold a tree thousands of levels deep (``1 + 1 + ...``) whose parse takes minutes and
#: cannot be interrupted in this process: such a file goes to a worker, where the per-file limits hold.
LONG_LINE = 8 << 10


def _long_line(path: str, size: int) -> bool:
    if size < LONG_LINE:
        return False
    try:
        with open(path, "rb") as fh:
            return any(len(line) >= LONG_LINE for line in fh)
    except OSError:
        return False


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (macOS, Windows)
        return os.cpu_count() or 1


def migrate_paths(
    paths: Iterable[str],
    *,
    write: bool = False,
    jobs: int | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    follow_symlinks: bool = False,
) -> RunResult:
    """Migrate files and folders (``.py`` and ``.ipynb``); ``write=False`` only computes diffs.

    Raises ValueError for an unknown rule code and :class:`tpu_workbench.migrate.discover.OutsideTree` for a named path
    that leads out of its tree through a symlink (unless ``follow_symlinks``).
    """
    paths = list(paths)
    check_named(paths, follow_symlinks)
    return run_files(
        discover(paths, exclude),
        write=write,
        jobs=jobs,
        rules=as_rule_set(None, select, ignore),
        limits=limits,
        named=paths,
    )


def run_files(
    files: Sequence[str],
    *,
    write: bool = False,
    jobs: int | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rules: RuleSet | None = None,
    progress: Callable[[int], object] | None = None,
    on_stage: StageCallback | None = None,
    limits: Limits = DEFAULT_LIMITS,
    named: Sequence[str] | None = None,
) -> RunResult:
    """Migrate an explicit list of files, in worker processes when it pays off or when a file is big.
    ``named``: the paths the user named (the run's tree: see ProjectFacts.tree); default the files' folders.

    Ctrl-C stops the run: files already written stay written, the rest are reported ``interrupted``
    (``RunResult.interrupted``), and no file is left half-written.
    """
    rules = as_rule_set(rules, select, ignore)
    facts = scan_files(with_project(files), cuda_only_module, device_limited)
    if files:
        facts = replace(facts, tree=tree_of(named if named else files))
    jobs = max(1, jobs or default_jobs())
    sizes = [file_size(f) for f in files]
    pooled = (jobs > 1 and len(files) >= POOL_THRESHOLD) or any(
        s >= ISOLATE_BYTES or _long_line(f, s) for f, s in zip(files, sizes, strict=True)
    )
    if not pooled:
        with installed(facts):
            return _run_here(files, write, rules, limits, progress, on_stage)
    results: list[FileResult | None] = [None] * len(files)

    def done(i: int, c: Computed) -> None:
        results[i] = apply(c)
        if progress:
            progress(1)

    job = _pool.Job(write=write, rules=rules, limits=limits, facts=facts)
    interrupted = _pool.run(files, sizes, min(jobs, len(files)), job, done, on_stage)
    out = [r if r is not None else FileResult(f, "interrupted") for f, r in zip(files, results, strict=True)]
    return RunResult(out, interrupted=interrupted)


def _run_here(
    files: Sequence[str],
    write: bool,
    rules: RuleSet,
    limits: Limits,
    progress: Callable[[int], object] | None,
    on_stage: StageCallback | None,
) -> RunResult:
    results: list[FileResult] = []
    try:
        for f in files:
            results.append(process_file(f, write=write, rules=rules, limits=limits, on_stage=on_stage))
            if progress:
                progress(1)
    except KeyboardInterrupt:
        results += [FileResult(f, "interrupted") for f in files[len(results) :]]
        return RunResult(results, interrupted=True)
    return RunResult(results)


def stdin_result(rules: RuleSet, name: str = "-") -> tuple[FileResult, bytes]:
    """Migrate standard input as bytes, decoded like a file (PEP 263 cookie, BOM), so the same bytes get the
    same answer from stdin and from a file; returns the result and the bytes for stdout (the input itself
    when nothing changed or it cannot be read). ``name`` (--stdin-filename) picks notebook or module."""
    buffer = getattr(sys.stdin, "buffer", None)  # a text stream without bytes (tests): its text as UTF-8
    data = buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8")
    try:
        src = decode(data)
    except (UnicodeDecodeError, LookupError) as exc:
        return FileResult(name, "unparsable", error=f"cannot read: {exc}"), data
    result, new_text = migrate_text(src.text, name, rules=rules)
    return result, encode(src, new_text) if result.status == "changed" else data


def tree_of(paths: Sequence[str]) -> str:
    """The folder holding every path named (a folder itself, a file's folder)."""
    folders = [p if os.path.isdir(p) else os.path.dirname(p) for p in map(os.path.abspath, paths) if p != "-"]
    try:
        return os.path.commonpath(folders)
    except ValueError:  # (files on different drives)
        return ""
