"""The ``local`` engine: one process per task, at most N at a time, each with a deadline.

Why not a ``ProcessPoolExecutor``: a worker that segfaults breaks the whole pool (in a test it lost 11 of 16
in-flight tasks); here a process serves one task, so a crash costs that task only. Each task process leads its
own process group, so a timeout kills what it started too (a training script's data-loader workers, a
subprocess). ``forkserver`` with ``preload`` (e.g. torch) makes a start cost well under a second.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path

from tpu_workbench.bench.executor.task import ExecutorOptions, Outcome, Task, resolve, safe_name


def _child(conn, task: Task, log_path: str | None) -> None:
    """Entry point of one task's process."""
    try:
        os.setpgrp()
    except OSError:  # pragma: no cover - already a group leader
        pass
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)

    def emit(event: str, data) -> None:
        conn.send((event, data))

    try:
        result = resolve(task.fn)(task.payload, emit)
    except BaseException:  # noqa: BLE001 - the task's own failure is its result
        conn.send(("error", traceback.format_exc()))
    else:
        conn.send(("result", result))
    conn.close()


def signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def kill_group(proc) -> None:
    """SIGKILL the task's process group (its children too), then the process itself."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    if proc.is_alive():
        proc.kill()
    proc.join()


class _Running:
    def __init__(self, task: Task, proc, conn, log: str, timeout: float):
        self.task, self.proc, self.conn, self.log = task, proc, conn, log
        self.start = time.monotonic()
        self.deadline = self.start + timeout
        self.stage = "start"
        self.stages: list[str] = []
        self.partial: dict | None = None
        self.result: dict | None = None
        self.error: str | None = None

    def drain(self) -> None:
        try:
            while self.conn.poll():
                event, data = self.conn.recv()
                if event == "stage":
                    self.stage = data["stage"]
                    self.stages.append(self.stage)
                elif event == "partial":
                    self.partial = data
                elif event == "result":
                    self.result = data
                elif event == "error":
                    self.error = data
        except (EOFError, OSError):
            pass

    def outcome(self, status: str, error: str = "") -> Outcome:
        self.conn.close()
        return Outcome(
            key=self.task.key,
            status=status,  # type: ignore[arg-type]
            result=self.result,
            wall_s=round(time.monotonic() - self.start, 3),
            error=error,
            exitcode=self.proc.exitcode,
            stage=self.stage,
            stages=self.stages,
            partial=self.partial,
            log=self.log,
            engine="local",
        )


def run_local(tasks: list[Task], options: ExecutorOptions, on_done: Callable[[Outcome], None]) -> None:
    """Run ``tasks``, at most ``options.workers`` at a time; ``on_done`` gets each outcome as it finishes."""
    ctx = mp.get_context(options.start_method)
    if options.start_method == "forkserver" and options.preload:
        ctx.set_forkserver_preload(list(options.preload))
    if options.log_dir:
        Path(options.log_dir).mkdir(parents=True, exist_ok=True)
    pending = list(tasks)
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and len(running) < max(1, options.workers):
                task = pending.pop(0)
                log = str(Path(options.log_dir) / f"{safe_name(task.key)}.log") if options.log_dir else ""
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(child, task, log or None), name=f"task-{task.key}")
                proc.daemon = True
                proc.start()
                child.close()
                running.append(_Running(task, proc, parent, log, options.timeout))
            ready = wait(
                [r.conn for r in running] + [r.proc.sentinel for r in running],
                timeout=max(0.05, min(r.deadline for r in running) - time.monotonic()),
            )
            for r in list(running):
                r.drain()
                if r.result is not None or r.error is not None:
                    r.proc.join(timeout=10)
                    kill_group(r.proc)  # leftovers it started; a no-op when it exited cleanly
                    running.remove(r)
                    on_done(r.outcome("ok") if r.error is None else r.outcome("error", r.error))
                elif not r.proc.is_alive() and (r.proc.sentinel in ready or r.proc.exitcode is not None):
                    r.proc.join()
                    r.drain()  # a result sent just before the exit
                    running.remove(r)
                    if r.result is not None:
                        on_done(r.outcome("ok"))
                    else:
                        kill_group(r.proc)
                        msg = f"the process died ({signal_name(r.proc.exitcode)}) during stage {r.stage!r}"
                        on_done(r.outcome("crash", msg))
                elif time.monotonic() > r.deadline:
                    kill_group(r.proc)
                    running.remove(r)
                    msg = f"no result within {options.timeout:g} s during stage {r.stage!r}"
                    on_done(r.outcome("timeout", msg))
    finally:  # Ctrl-C or an error in on_done: leave nothing running
        for r in running:
            kill_group(r.proc)
