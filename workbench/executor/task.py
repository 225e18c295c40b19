"""What a task is, how it is run (options) and what came of it (outcome): plain dataclasses, no torch."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

#: ok: the function returned a result; error: it raised (traceback kept); crash: its process died (a signal or
#: an exit without a result); timeout: no result within the time limit (killed, with its children).
Status = Literal["ok", "error", "crash", "timeout"]
Emit = Callable[[str, Any], None]


@dataclass(frozen=True)
class Task:
    """``fn`` ("package.module:function") is called as ``fn(payload, emit)`` in a process of its own;
    ``emit(event, data)`` streams progress ("stage" with ``{"stage": name}``, "partial" with an interim
    result) back to the parent, so a task that dies later still reports how far it got."""

    key: str
    fn: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutorOptions:
    """``workers``: tasks at once; ``timeout``: seconds per task; ``start_method``: ``forkserver`` (fast
    starts after ``preload``), ``spawn`` or ``fork``; ``log_dir``: each task's stdout/stderr to
    ``<log_dir>/<key>.log`` (None: inherited); ``ray_address``: a running cluster for the ray engine (None
    starts a local one bound to 127.0.0.1); ``cpus_per_task``/``memory_per_task``: Ray resources."""

    workers: int = 1
    timeout: float = 180.0
    start_method: str = "forkserver"
    preload: tuple[str, ...] = ()
    log_dir: Path | None = None
    ray_address: str | None = None
    cpus_per_task: float = 1.0
    memory_per_task: int | None = None


@dataclass
class Outcome:
    key: str
    status: Status
    result: dict[str, Any] | None
    wall_s: float
    error: str = ""
    exitcode: int | None = None
    stage: str = "start"
    stages: list[str] = field(default_factory=list)
    partial: dict[str, Any] | None = None
    log: str = ""
    engine: str = "local"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def resolve(ref: str) -> Callable[..., dict]:
    """The function named by ``"module:function"``; a clear error for a malformed or missing one."""
    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"task function {ref!r} is not of the form 'package.module:function'")
    return getattr(importlib.import_module(module), name)


def ref(fn: Callable[..., dict]) -> str:
    """``"module:function"`` of a module-level function, for :class:`Task` (a name, so any engine can import
    it: a forkserver child, a spawned interpreter, a Ray worker on another machine)."""
    return f"{fn.__module__}:{fn.__qualname__}"


def safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:120]
