"""Worker processes that compute files for the engine, under supervision.

Why not ``concurrent.futures``: a worker must be stoppable while it works on one file (a per-file time or
memory limit), it must die with its parent (``kill -9`` of the command line left idle pool workers
holding their memory), and Ctrl-C must stop the run cleanly. So each worker has its own pipe, reads one
file path at a time, sends back the computed result (it never writes a file: the parent does), and

- dies with its parent: ``PR_SET_PDEATHSIG`` on Linux, a watchdog thread on the parent's pid elsewhere,
  and the end of its pipe when it is idle;
- ignores SIGINT: Ctrl-C reaches the parent only, which stops the workers and reports what it wrote;
- gives the C heap back after a big file (an idle worker holds no memory peak).

Largest files go first, one at a time, so a few big files do not leave one worker busy at the end.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .limits import (
    Limits,
    StageCallback,
    Watch,
    give_back_memory,
    memory_exceeded,
    rss,
    stage_text,
    time_exceeded,
)
from .one_file import TRIM_BYTES, Computed, compute_file, file_size
from .project import EMPTY, ProjectFacts, installed
from .results import FileResult
from .selection import RuleSet

#: How often the parent looks at the workers' time and memory.
POLL_S = 0.2
#: A worker reports progress inside a file at most this often, and not at all for files below this size.
REPORT_EVERY_S = 0.5
QUIET_BELOW_BYTES = 64 << 10
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Job:
    """What every file of a run is computed with (sent to each worker once)."""

    write: bool
    rules: RuleSet
    limits: Limits
    facts: ProjectFacts = EMPTY


# ------------------------------------------------------------------------------------------------
# The worker side
# ------------------------------------------------------------------------------------------------
def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent is already gone (died before prctl took effect)
        os._exit(1)

    def watchdog() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watchdog, name="tpu-migrate-watchdog", daemon=True).start()


class _PipeWatch(Watch):
    """Sends the stages of the current file to the parent (which shows them for a slow file). A small file
    is never slow: it sends nothing, so the many small files of a tree cost no messages."""

    def __init__(self, conn: Any, index: int, size: int) -> None:
        self.conn, self.index = conn, index
        self.quiet = size < QUIET_BELOW_BYTES
        self._next = 0.0
        self._name = ""

    def stage(self, name: str) -> None:
        self._name = name
        if not self.quiet:
            self._next = time.monotonic() + REPORT_EVERY_S
            self.conn.send(("stage", self.index, name))

    def tick(self, done: int, total: int) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if now >= self._next:
            self._next = now + REPORT_EVERY_S
            self.conn.send(("stage", self.index, stage_text(self._name, (done, total))))


def _worker(conn: Any, job: Job, close_fds: Sequence[int]) -> None:
    _die_with_parent(os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in close_fds:  # (fork) the other workers' pipe ends: their EOF must not wait for this process
        try:
            os.close(fd)
        except OSError:
            pass
    with installed(job.facts):
        _serve(conn, job)


def _serve(conn: Any, job: Job) -> None:
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if task is None:
            return
        index, path = task
        conn.send(("start", index, rss()))
        try:
            computed = compute_file(
                path, write=job.write, rules=job.rules, watch=_PipeWatch(conn, index, file_size(path))
            )
        except Exception:  # noqa: BLE001 - a bug, not bad input: the parent raises it with this traceback
            conn.send(("bug", index, traceback.format_exc()))
            continue
        if computed.size >= TRIM_BYTES:
            give_back_memory()
        conn.send(("done", index, computed))


# ------------------------------------------------------------------------------------------------
# The parent side
# ------------------------------------------------------------------------------------------------
class WorkerBug(RuntimeError):
    """A worker raised an unexpected exception (a bug in tpu-migrate); carries the worker's traceback."""


@dataclass
class _Busy:
    index: int
    started: float
    rss0: int | None = None
    stage: str = "starting"


class _Worker:
    def __init__(self, ctx: multiprocessing.context.BaseContext, job: Job, others: list[_Worker]) -> None:
        parent_end, child_end = ctx.Pipe(duplex=True)
        close = (
            [w.conn.fileno() for w in others] + [parent_end.fileno()]
            if ctx.get_start_method() == "fork"
            else []
        )
        self.proc = ctx.Process(
            target=_worker, args=(child_end, job, close), daemon=True, name="tpu-migrate-worker"
        )
        self.proc.start()
        child_end.close()
        self.conn = parent_end
        self.busy: _Busy | None = None

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                self.proc.kill()
        self.proc.join(timeout=None if kill else 5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def _context() -> multiprocessing.context.BaseContext:
    """Fork is cheapest, but forking a process that already runs JAX's or torch's threads can deadlock
    (the notebooks and the demo call us after importing torch): use a fork server there."""
    threaded = any(name in sys.modules for name in ("jax", "torch"))
    if sys.platform == "win32":  # pragma: no cover
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("forkserver" if threaded else "fork")


def run(
    files: Sequence[str],
    sizes: Sequence[int],
    jobs: int,
    job: Job,
    done: Callable[[int, Computed], None],
    on_stage: StageCallback | None = None,
) -> bool:
    """Compute every file in ``jobs`` workers, calling ``done(index, computed)`` in this process as each
    one finishes. Returns True when Ctrl-C stopped the run (the files not done are simply not reported)."""
    ctx = _context()
    todo = deque(sorted(range(len(files)), key=lambda i: -sizes[i]))
    workers: list[_Worker] = []
    limits = job.limits

    def finish(w: _Worker, result: Computed, how: str = "done") -> None:
        assert w.busy is not None
        index, started = w.busy.index, w.busy.started
        w.busy = None
        if on_stage is not None:
            on_stage(files[index], how, time.monotonic() - started)
        done(index, result)

    def replace(w: _Worker, result: FileResult) -> None:
        """Stop ``w`` (over a limit, or dead), report its file, start a fresh worker if work is left."""
        w.stop(kill=True)
        workers.remove(w)
        finish(w, Computed(result), "stopped")
        if todo:
            workers.append(_Worker(ctx, job, workers))

    restarts = 0
    try:
        for _ in range(min(jobs, len(todo))):
            workers.append(_Worker(ctx, job, workers))
        while todo or any(w.busy for w in workers):
            for w in list(workers):
                if w.busy is None and todo:
                    i = todo.popleft()
                    try:
                        w.conn.send((i, files[i]))
                    except OSError:  # died while idle (killed from outside): a fresh one takes the file
                        restarts += 1
                        if restarts > 3 * jobs:
                            raise WorkerBug(
                                "tpu-migrate's worker processes die as soon as they start"
                            ) from None
                        todo.appendleft(i)
                        w.stop(kill=True)
                        workers.remove(w)
                        workers.append(_Worker(ctx, job, workers))
                        continue
                    w.busy = _Busy(i, time.monotonic())
            busy = [w for w in workers if w.busy is not None]
            multiprocessing.connection.wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], POLL_S)
            now = time.monotonic()
            for w in busy:
                state = w.busy
                assert state is not None
                path = files[state.index]
                try:
                    while w.busy is not None and w.conn.poll():
                        kind, _index, payload = w.conn.recv()
                        if kind == "start":
                            state.rss0 = payload
                        elif kind == "stage":
                            state.stage = payload
                        elif kind == "done":
                            finish(w, payload)
                        else:
                            raise WorkerBug(
                                f"tpu-migrate failed on {path} (a bug; please report it):\n{payload}"
                            )
                except (EOFError, OSError):
                    pass  # the worker died: its sentinel says so below
                if w.busy is None:
                    continue
                if on_stage is not None:  # also a heartbeat while one stage (the parse) runs long
                    on_stage(path, state.stage, now - state.started)
                if not w.proc.is_alive():
                    code = w.proc.exitcode
                    why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    replace(
                        w,
                        FileResult(
                            path,
                            "unparsable",
                            error=f"the parser crashed on this file ({why}); left untouched",
                        ),
                    )
                elif limits.seconds is not None and now - state.started > limits.seconds:
                    replace(w, FileResult(path, "over-limit", error=time_exceeded(limits)))
                elif limits.memory is not None and state.rss0 is not None:
                    used = (rss(w.proc.pid) or 0) - state.rss0
                    if used > limits.memory:
                        replace(w, FileResult(path, "over-limit", error=memory_exceeded(limits, used)))
        return False
    except KeyboardInterrupt:
        for w in workers:
            if w.busy is not None:
                w.proc.kill()
        return True
    finally:
        for w in workers:
            w.stop(kill=w.busy is not None or not w.proc.is_alive())
