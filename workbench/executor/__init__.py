"""One executor for many isolated tasks, two engines.

A task is a named call of an importable function (``"module:function"``) on a JSON-able payload. Each task runs
in its own process (``local``: one process per task; ``ray``: a Ray task), so a crash or a hang costs that task
only; every finished task is appended to a JSONL store, so an interrupted run resumes where it stopped.

    >>> from tpu_workbench.bench.executor import Task, ExecutorOptions, run_tasks
    >>> outcomes = run_tasks([Task("a", "tpu_workbench.bench.executor.probes:square", {"x": 3})],
    ...                      ExecutorOptions(workers=1, start_method="spawn"))  # doctest: +SKIP
"""

from __future__ import annotations

from tpu_workbench.bench.executor.run import ENGINES, run_tasks
from tpu_workbench.bench.executor.store import ResultStore
from tpu_workbench.bench.executor.task import ExecutorOptions, Outcome, Task

__all__ = ["ENGINES", "ExecutorOptions", "Outcome", "ResultStore", "Task", "run_tasks"]
