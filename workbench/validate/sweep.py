"""Run many validations, each in its own process, so that one crash or hang cannot stop the sweep: the
validations are tasks of the workbench executor (:mod:`tpu_workbench.bench.executor`, engine ``local`` or ``ray``).

Processes come from a ``forkserver`` that has imported torch, transformers and JAX once (each run then
starts in well under a second instead of paying the imports again); a run that exceeds ``timeout`` is
killed, one that dies (a segmentation fault included) is recorded with the signal and the stage it was in.
Every run's stdout/stderr goes to ``<out>/logs/<name>.log``. JAX's persistent compilation cache is shared
by all runs of a sweep (``<out>/jax-cache`` unless told otherwise), so kernels compiled for one tiny model
are reused by the next.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tpu_workbench.bench.executor import ExecutorOptions, Outcome, Task, run_tasks
from tpu_workbench.bench.executor.task import ref

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
    engine: str = "local"
    ray_address: str | None = None


@dataclass
class JobOutcome:
    job: Job
    result: dict[str, Any]
    wall_s: float
    exitcode: int | None
    log: str
    events: list[str] = field(default_factory=list)


def validate_task(payload: dict, emit) -> dict:
    """The executor task of one run (in its own process): redirect nothing (the executor did), configure,
    validate, return the result."""
    job = Job(**payload["job"])
    cache_dir = payload["cache_dir"]
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if cache_dir:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = cache_dir
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
    import torch  # lazy: heavy

    torch.set_num_threads(max(1, payload["threads"]))
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

    return runner.validate(
        job.model_type,
        user_model=job.user_model,
        device=payload["device"],
        check_generate=job.check_generate,
        check_compile=job.check_compile,
        harness_only=job.harness_only,
        emit=emit,
    )


def _key(job: Job) -> str:
    return job.name if job.phase == "main" else f"{job.name}.{job.phase}"


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
    by_key = {_key(j): j for j in jobs}
    tasks = [
        Task(
            _key(j),
            ref(validate_task),
            {"job": asdict(j), "device": options.device, "cache_dir": cache, "threads": threads},
        )
        for j in jobs
    ]
    exec_options = ExecutorOptions(
        workers=options.jobs,
        timeout=options.timeout,
        start_method="forkserver",
        preload=tuple(PRELOAD),
        log_dir=logs,
        ray_address=options.ray_address,
    )
    outcomes: list[JobOutcome] = []

    def done(o: Outcome) -> None:
        job = by_key[o.key]
        result = o.result if o.status == "ok" and o.result is not None else _died(job, o)
        outcome = JobOutcome(job, result, round(o.wall_s, 2), o.exitcode, o.log, o.stages)
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    run_tasks(tasks, exec_options, engine=options.engine, on_done=done)
    return outcomes


def _died(job: Job, o: Outcome) -> dict:
    """The result of a run that never reported one (crash, timeout, or the harness itself raised), in the
    stage it had reached."""
    from tpu_workbench.bench.validate.runner import HARNESS_STAGES  # lazy: heavy

    kind = o.status if o.status in ("crash", "timeout") else "error"
    message = o.error.strip().splitlines()[-1] if kind == "error" and o.error.strip() else o.error
    if o.partial is not None:  # forward/backward/compare finished; a later check (generate, compile) died
        res = dict(o.partial)
        res[o.stage if o.stage in ("generate", "compile") else "late_failure"] = {
            "status": "fail",
            "error_type": kind,
            "error": message,
        }
        res["exitcode"] = o.exitcode
        return res
    harness = o.stage in HARNESS_STAGES or o.stage == "start"
    return {
        "model_type": job.model_type or job.user_model,
        "status": "harness" if harness else "fail",
        "failed_stage": o.stage,
        "error_type": kind,
        "error": message,
        "stages_seen": o.stages,
        "tier1": None if harness else False,
        "tier2": None if harness else False,
        "exitcode": o.exitcode,
    }
