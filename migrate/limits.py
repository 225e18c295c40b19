"""Per-file limits (time, memory) and the progress of one file.

A file that runs past a limit is skipped with a message and left byte for byte as it was; the run goes
on. Memory is the resident memory a file adds to the process migrating it (Linux; elsewhere only the
time limit applies). In a worker process a limit is exact: the parent stops the worker. In the calling
process (small runs) it is checked between the stages of the migration and every few statements of the
rewrite, so a single stage (the parse) can overrun it; big files are therefore always migrated in a
worker (see engine.ISOLATE_BYTES).
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: Stages of one file, in order (the rewrite also reports statements done / total).
STAGES = (
    "reading",
    "parsing",
    "resolving names",
    "rewriting",
    "locating findings",
    "generating code",
    "diffing",
)

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


@dataclass(frozen=True)
class Limits:
    """``None`` means no limit."""

    seconds: float | None = 300.0
    memory: int | None = 4 << 30

    def describe(self) -> str:
        return (
            f"{_seconds(self.seconds)} and {format_bytes(self.memory) if self.memory else 'no memory limit'}"
        )


DEFAULT_LIMITS = Limits()
NO_LIMITS = Limits(None, None)


class FileLimitError(Exception):
    """A file ran past a per-file limit (the message says which, and how to raise it)."""


def parse_seconds(text: str | float) -> float | None:
    """'300', '90s', '10m', '1h', '0' or 'none' (no limit) -> seconds or None."""
    value = str(text).strip().lower()
    if value in ("0", "none", "off"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|min|h)?", value)
    if not m:
        raise ValueError(
            f"not a duration: {text!r} (use seconds such as 300, or 90s, 10m, 1h; 0 or none: no limit)"
        )
    scale = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * scale


def parse_memory(text: str | int) -> int | None:
    """'4G', '512MiB', '1.5GB', bytes, '0' or 'none' (no limit) -> bytes or None (binary units)."""
    value = str(text).strip().lower()
    if value in ("0", "none", "off"):
        return None
    m = _SIZE.match(value)
    if not m:
        raise ValueError(f"not a memory size: {text!r} (use e.g. 4G, 512M, 1.5GiB; 0 or none: no limit)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _seconds(s: float | None) -> str:
    return "no time limit" if s is None else f"{s:g} s"


def time_exceeded(limits: Limits) -> str:
    return (
        f"took longer than the per-file time limit ({_seconds(limits.seconds)}); left untouched "
        "(raise it with --max-file-seconds or [tool.tpu-migrate] max-file-seconds)"
    )


def memory_exceeded(limits: Limits, used: int) -> str:
    return (
        f"needed more than the per-file memory limit ({format_bytes(limits.memory)}, {format_bytes(used)} "
        "reached); left untouched (raise it with --max-file-memory or [tool.tpu-migrate] max-file-memory)"
    )


# ------------------------------------------------------------------------------------------------
# Memory of a process
# ------------------------------------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss(pid: int | None = None) -> int | None:
    """Resident memory of a process in bytes (Linux /proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def give_back_memory() -> None:
    """Return the C heap a big file left behind to the system (glibc keeps freed memory otherwise, so an
    idle worker would go on holding the peak of its largest file)."""
    if _TRIM is not None:
        _TRIM(0)


# ------------------------------------------------------------------------------------------------
# Watching one file
# ------------------------------------------------------------------------------------------------
class Watch:
    """Receives the stages of one file (``migrate_source(..., watch=)``); does nothing by itself."""

    def stage(self, name: str) -> None:
        """A new stage starts (one of :data:`STAGES`)."""

    def tick(self, done: int, total: int) -> None:
        """Progress inside the rewrite: ``done`` of ``total`` top-level statements."""


#: on_stage(path, text, seconds since the file started)
StageCallback = Callable[[str, str, float], None]


def stage_text(name: str, counts: tuple[int, int] | None) -> str:
    return f"{name} {counts[0]:,}/{counts[1]:,} statements" if counts else name


class LocalWatch(Watch):
    """For a file migrated in this process: checks the limits at each stage and every few statements
    (raising :class:`FileLimitError`) and reports stages to ``on_stage``."""

    CHECK_EVERY_S = 0.25

    def __init__(self, path: str, limits: Limits, on_stage: StageCallback | None = None) -> None:
        self.path, self.limits, self.on_stage = path, limits, on_stage
        self.start = time.monotonic()
        self.rss0 = rss() if limits.memory is not None else None
        self._next_check = 0.0
        self._name = ""

    def stage(self, name: str) -> None:
        self._name = name
        self._check(force=True, counts=None)

    def tick(self, done: int, total: int) -> None:
        self._check(force=False, counts=(done, total))

    def _check(self, force: bool, counts: tuple[int, int] | None) -> None:
        now = time.monotonic()
        if not force and now < self._next_check:
            return
        self._next_check = now + self.CHECK_EVERY_S
        elapsed = now - self.start
        lim = self.limits
        if lim.seconds is not None and elapsed > lim.seconds:
            raise FileLimitError(time_exceeded(lim))
        if lim.memory is not None and self.rss0 is not None:
            used = (rss() or 0) - self.rss0
            if used > lim.memory:
                raise FileLimitError(memory_exceeded(lim, used))
        if self.on_stage is not None:
            self.on_stage(self.path, stage_text(self._name, counts), elapsed)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one file: a big file's libcst tree holds millions of objects
    but no cycles worth collecting, and every full collection walks them all again (a fifth to a third of the
    time on a 1 MB file, the same peak memory)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
