"""Run the migration over paths: discover, prefilter, parse, rewrite, diff, write atomically; in parallel."""

from __future__ import annotations

import difflib
import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial

from .discover import discover
from .fileio import decode, encode, write_atomic
from .notebook import migrate_notebook
from .results import FileResult, RunResult
from .source import UnparsableError, migrate_source, needs_parse

#: Below this many files a process pool costs more than it saves.
POOL_THRESHOLD = 16


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path.lstrip('/')}", f"b/{path.lstrip('/')}"))


def migrate_text(text: str, path: str, *, select: Sequence[str] | None = None,
                 ignore: Sequence[str] | None = None) -> tuple[FileResult, str]:
    """Migrate already-read text (``.ipynb`` by suffix); returns the result and the new text."""
    try:
        if path.endswith(".ipynb"):
            res = migrate_notebook(text, path, select=select, ignore=ignore)
        else:
            if not needs_parse(text):
                return FileResult(path, "skipped"), text
            res = migrate_source(text, path, select=select, ignore=ignore)
    except UnparsableError as exc:
        return FileResult(path, "unparsable", error=str(exc)), text
    if not res.changed:
        return FileResult(path, "unchanged", res.diagnostics), text
    return FileResult(path, "changed", res.diagnostics, unified_diff(text, res.new_source, path)), res.new_source


def process_file(path: str, *, write: bool = False, select: Sequence[str] | None = None,
                 ignore: Sequence[str] | None = None) -> FileResult:
    """One file, start to finish. Never raises for bad input: the status says what happened."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        src = decode(data)
    except (OSError, UnicodeDecodeError, LookupError) as exc:
        return FileResult(path, "unparsable", error=f"cannot read: {exc}")
    result, new_text = migrate_text(src.text, path, select=select, ignore=ignore)
    if write and result.status == "changed":
        write_atomic(os.path.realpath(path), encode(src, new_text))  # through a symlink, not over it
    return result


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (macOS, Windows)
        return os.cpu_count() or 1


def migrate_paths(
    paths: Iterable[str], *, write: bool = False, jobs: int | None = None,
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
) -> RunResult:
    """Migrate files and folders (``.py`` and ``.ipynb``); ``write=False`` only computes diffs."""
    return run_files(discover(list(paths), exclude), write=write, jobs=jobs, select=select, ignore=ignore)


def run_files(
    files: Sequence[str], *, write: bool = False, jobs: int | None = None,
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
    progress: Callable[[int], object] | None = None,
) -> RunResult:
    """Migrate an explicit list of files, in a process pool when it pays off."""
    sel = tuple(select) if select else None
    ign = tuple(ignore) if ignore else None
    if sel is not None or ign is not None:  # fail early on unknown codes, in this process
        from .rules.base import select_rules

        select_rules(sel, ign)
    work = partial(process_file, write=write, select=sel, ignore=ign)
    jobs = max(1, jobs or default_jobs())
    results: list[FileResult] = []
    if jobs == 1 or len(files) < POOL_THRESHOLD:
        for f in files:
            results.append(work(f))
            if progress:
                progress(1)
    else:
        # Largest files first, handed out one by one (small chunks only for huge trees): a few big files
        # at the end of a chunk would otherwise leave one worker busy while the others wait.
        order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
        chunk = 1 if len(files) <= 4096 else max(1, min(32, len(files) // (jobs * 64)))
        slots: list[FileResult | None] = [None] * len(files)
        with ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=_pool_context()) as pool:
            for i, r in zip(order, pool.map(work, [files[i] for i in order], chunksize=chunk), strict=True):
                slots[i] = r
                if progress:
                    progress(1)
        results = [r for r in slots if r is not None]
    return RunResult(results)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork is cheapest, but forking a process that already runs JAX's or torch's threads can deadlock
    (the notebooks and the demo call us after importing torch): use a fork server there."""
    threaded = any(name in sys.modules for name in ("jax", "torch"))
    return multiprocessing.get_context("forkserver" if threaded else "fork")


def stdin_result(select: Sequence[str] | None, ignore: Sequence[str] | None) -> tuple[FileResult, str, str]:
    """Migrate standard input; returns the result, the old and the new text."""
    text = sys.stdin.read()
    result, new = migrate_text(text, "-", select=select, ignore=ignore)
    return result, text, new
