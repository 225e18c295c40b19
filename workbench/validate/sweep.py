"""Run many validations, each in its own process, so that one crash or hang cannot stop the sweep.

Processes come from a ``forkserver`` that has imported torch, transformers and JAX once (each run then
starts in well under a second instead of paying the imports again); a run that exceeds ``timeout`` is
killed, one that dies (a segmentation fault included) is recorded with the signal and the stage it was in.
Every run's stdout/stderr goes to ``<out>/logs/<name>.log``. JAX's persistent compilation cache is shared
by all runs of a sweep (``<out>/jax-cache`` unless told otherwise), so kernels compiled for one tiny model
are reused by the next.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

PRELOAD = ["torch", "transformers", "jax", "tpu_workbench.bench.validate._preload"]


@dataclass
class Job:
    """One run: an architecture (``model_type``) or a user factory (``user_model``)."""

    name: str
    model_type: str | None = None
    user_model: str | None = None
    check_generate: bool = True
    check_compile: bool = False
    harness_only: bool = False
    phase: str = "main"


@dataclass
class SweepOptions:
    jobs: int = 1
    timeout: float = 180.0
    out: Path = Path("validation")
    device: str = "tpu"
    jax_cache: str | None = "auto"
    threads: int | None = None


@dataclass
class JobOutcome:
    job: Job
    result: dict[str, Any]
    wall_s: float
    exitcode: int | None
    log: str
    events: list[str] = field(default_factory=list)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


def _child(conn, job: Job, log_path: str, device: str, cache_dir: str | None, threads: int) -> None:
    """Entry point of one run's process: redirect output, configure, validate, send the result."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if cache_dir:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = cache_dir
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
    import torch  # lazy: heavy

    torch.set_num_threads(max(1, threads))
    if cache_dir:
        try:
            import jax  # lazy: jax

            jax.config.update("jax_compilation_cache_dir", cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        except Exception:  # noqa: BLE001 - the cache only saves time
            pass
    from transformers.utils import logging as hf_logging  # lazy: heavy

    hf_logging.set_verbosity_error()
    from tpu_workbench.bench.validate import runner  # lazy: heavy

    def emit(event: str, data: dict) -> None:
        conn.send((event, data))

    result = runner.validate(
        job.model_type,
        user_model=job.user_model,
        device=device,
        check_generate=job.check_generate,
        check_compile=job.check_compile,
        harness_only=job.harness_only,
        emit=emit,
    )
    conn.send(("result", result))
    conn.close()


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _Running:
    def __init__(self, job: Job, proc, conn, log: str, timeout: float):
        self.job, self.proc, self.conn, self.log = job, proc, conn, log
        self.start = time.monotonic()
        self.deadline = self.start + timeout
        self.stage = "start"
        self.result: dict | None = None
        self.partial: dict | None = None
        self.events: list[str] = []


def run_jobs(
    jobs: list[Job], options: SweepOptions, on_done: Callable[[JobOutcome], None] | None = None
) -> list[JobOutcome]:
    """Run every job, at most ``options.jobs`` at a time; returns one outcome per job, in finish order."""
    logs = Path(options.out) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cache = None
    if options.jax_cache == "auto":
        cache = str((Path(options.out) / "jax-cache").resolve())
    elif options.jax_cache:
        cache = str(Path(options.jax_cache).resolve())
    if cache:
        Path(cache).mkdir(parents=True, exist_ok=True)
    threads = options.threads or max(1, (os.cpu_count() or 1) // max(1, options.jobs))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    pending = list(jobs)
    running: list[_Running] = []
    outcomes: list[JobOutcome] = []

    def finish(r: _Running, result: dict) -> None:
        r.conn.close()
        outcome = JobOutcome(
            r.job, result, round(time.monotonic() - r.start, 2), r.proc.exitcode, r.log, r.events
        )
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    while pending or running:
        while pending and len(running) < max(1, options.jobs):
            job = pending.pop(0)
            log = str(logs / f"{_safe_name(job.name)}{'' if job.phase == 'main' else '.' + job.phase}.log")
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=_child,
                args=(child, job, log, options.device, cache, threads),
                name=f"validate-{job.name}",
                daemon=True,
            )
            proc.start()
            child.close()
            running.append(_Running(job, proc, parent, log, options.timeout))
        now = time.monotonic()
        ready = wait(
            [r.conn for r in running] + [r.proc.sentinel for r in running],
            timeout=max(0.05, min(r.deadline for r in running) - now),
        )
        for r in list(running):
            try:
                while r.conn.poll():
                    event, data = r.conn.recv()
                    if event == "stage":
                        r.stage = data["stage"]
                        r.events.append(data["stage"])
                    elif event == "partial":
                        r.partial = data
                    elif event == "result":
                        r.result = data
            except (EOFError, OSError):
                pass
            if r.result is not None:
                r.proc.join(timeout=10)
                if r.proc.is_alive():
                    r.proc.kill()
                    r.proc.join()
                running.remove(r)
                finish(r, r.result)
            elif not r.proc.is_alive() and (r.proc.sentinel in ready or r.proc.exitcode is not None):
                r.proc.join()
                running.remove(r)
                finish(r, _died(r, f"the process died ({_signal_name(r.proc.exitcode)})", "crash"))
            elif time.monotonic() > r.deadline:
                r.proc.kill()
                r.proc.join()
                running.remove(r)
                finish(r, _died(r, f"no result within {options.timeout:g} s", "timeout"))
    return outcomes


def _died(r: _Running, message: str, kind: str) -> dict:
    """The result of a run that never reported one: crash or timeout, in the stage it had reached."""
    from tpu_workbench.bench.validate.runner import HARNESS_STAGES  # lazy: heavy

    if r.partial is not None:  # forward/backward/compare finished; a later check (generate, compile) died
        res = dict(r.partial)
        res[r.stage if r.stage in ("generate", "compile") else "late_failure"] = {
            "status": "fail",
            "error_type": kind,
            "error": f"{message} during stage {r.stage!r}",
        }
        res["exitcode"] = r.proc.exitcode
        return res
    harness = r.stage in HARNESS_STAGES or r.stage == "start"
    return {
        "model_type": r.job.model_type or r.job.user_model,
        "status": "harness" if harness else "fail",
        "failed_stage": r.stage,
        "error_type": kind,
        "error": f"{message} during stage {r.stage!r}",
        "stages_seen": r.events,
        "tier1": None if harness else False,
        "tier2": None if harness else False,
        "exitcode": r.proc.exitcode,
    }
