"""The ``ray`` engine (optional extra: ``pip install ".[ray]"``): each task is a Ray task with its CPU and
memory request and no retries, so the same task functions reach beyond one machine. A worker that segfaults
fails that task only (Ray reports the worker died); a task past its deadline is cancelled with ``force=True``
(its worker process is killed). Outcomes stream into the same store as the local engine's."""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.executor.task import ExecutorOptions, Outcome, Task, resolve, safe_name


def _in_worker(task: Task, log: str | None) -> dict:
    """Runs inside a Ray worker: the task's output to its log, events kept and returned with the result."""
    events: dict = {"stages": [], "partial": None}

    def emit(event: str, data) -> None:
        if event == "stage":
            events["stages"].append(data["stage"])
        elif event == "partial":
            events["partial"] = data

    saved = None
    if log:
        saved = (os.dup(1), os.dup(2))
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    try:
        return {"result": resolve(task.fn)(task.payload, emit), "error": None, **events}
    except BaseException:  # noqa: BLE001 - the task's own failure is its result
        return {"result": None, "error": traceback.format_exc(), **events}
    finally:
        if saved:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)


def _import_ray():
    try:
        import ray  # lazy: optional extra
    except ImportError as exc:
        raise WorkbenchError('the ray engine needs Ray: pip install ".[ray]"') from exc
    return ray


def check_address(address: str, timeout: float = 5.0) -> None:
    """Fail fast when a cluster address does not answer: Ray itself retries for minutes. ``auto`` (Ray finds a
    local cluster) is left to Ray."""
    if address == "auto":
        return
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise WorkbenchError(f"Ray address {address!r} is not host:port (or ray://host:port, or auto)")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise WorkbenchError(f"the Ray cluster at {address} does not answer ({exc})") from exc


def _init(ray, options: ExecutorOptions) -> bool:
    """Connect to ``options.ray_address`` or start a local cluster on 127.0.0.1; True when we started it."""
    if ray.is_initialized():
        return False
    if options.ray_address:
        check_address(options.ray_address)
        try:
            ray.init(address=options.ray_address, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
            raise WorkbenchError(
                f"the Ray cluster at {options.ray_address} does not answer ({type(exc).__name__}: {exc})"
            ) from exc
        return True
    ray.init(
        num_cpus=max(1, options.workers),
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    return True


def run_ray(tasks: list[Task], options: ExecutorOptions, on_done: Callable[[Outcome], None]) -> None:
    ray = _import_ray()
    started = _init(ray, options)
    remote = ray.remote(_in_worker).options(
        num_cpus=options.cpus_per_task, memory=options.memory_per_task, max_retries=0
    )
    if options.log_dir:
        Path(options.log_dir).mkdir(parents=True, exist_ok=True)
    pending = list(tasks)
    running: dict = {}  # ref -> (task, start, log)
    try:
        while pending or running:
            while pending and len(running) < max(1, options.workers):
                task = pending.pop(0)
                log = (
                    str(Path(options.log_dir).resolve() / f"{safe_name(task.key)}.log")
                    if options.log_dir
                    else ""
                )
                running[remote.remote(task, log or None)] = (task, time.monotonic(), log)
            deadline = min(start for _, start, _ in running.values()) + options.timeout
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(0.05, deadline - time.monotonic()))
            for ref in ready:
                task, start, log = running.pop(ref)
                wall = round(time.monotonic() - start, 3)
                try:
                    got = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died (a segfault) or Ray failed the task
                    died = isinstance(exc, ray.exceptions.WorkerCrashedError)
                    why = f"the Ray worker died: {exc}" if died else f"{type(exc).__name__}: {exc}"
                    on_done(Outcome(task.key, "crash", None, wall, why[:2000], log=log, engine="ray"))
                    continue
                stages = got["stages"]
                on_done(
                    Outcome(
                        task.key,
                        "ok" if got["error"] is None else "error",
                        got["result"],
                        wall,
                        got["error"] or "",
                        stage=stages[-1] if stages else "start",
                        stages=stages,
                        partial=got["partial"],
                        log=log,
                        engine="ray",
                    )
                )
            now = time.monotonic()
            for ref, (task, start, log) in list(running.items()):
                if now - start > options.timeout:
                    ray.cancel(ref, force=True)
                    running.pop(ref)
                    msg = f"no result within {options.timeout:g} s (the Ray task was cancelled)"
                    on_done(
                        Outcome(task.key, "timeout", None, round(now - start, 3), msg, log=log, engine="ray")
                    )
    finally:
        for ref in running:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
