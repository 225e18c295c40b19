"""``run_tasks``: the executor's one entry point, whatever the engine: resume from the store, progress bar
with ETA, outcomes appended to the store as each task finishes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.executor.store import ResultStore
from tpu_workbench.bench.executor.task import ExecutorOptions, Outcome, Task


def _local(tasks, options, done) -> None:
    from tpu_workbench.bench.executor.local import run_local  # lazy: startup

    run_local(tasks, options, done)


def _ray(tasks, options, done) -> None:
    from tpu_workbench.bench.executor.ray_engine import run_ray  # lazy: optional extra

    run_ray(tasks, options, done)


ENGINES: dict[str, Callable[[list[Task], ExecutorOptions, Callable[[Outcome], None]], None]] = {
    "local": _local,
    "ray": _ray,
}


def run_tasks(
    tasks: list[Task],
    options: ExecutorOptions | None = None,
    *,
    engine: str = "local",
    store: str | Path | ResultStore | None = None,
    resume: bool = True,
    progress: bool = False,
    on_done: Callable[[Outcome], None] | None = None,
    desc: str = "tasks",
) -> list[Outcome]:
    """Run every task not already finished in ``store`` (when ``resume``); returns all outcomes, the stored
    ones first, then the new ones in finish order. Keys must be unique."""
    if engine not in ENGINES:
        raise WorkbenchError(unknown("engine", engine, ENGINES))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise WorkbenchError(f"task keys must be unique; repeated: {', '.join(dup[:5])}")
    options = options or ExecutorOptions()
    st = store if isinstance(store, ResultStore) or store is None else ResultStore(store)
    previous = st.load() if (st is not None and resume) else {}
    outcomes = [previous[k] for k in keys if k in previous]
    todo = [t for t in tasks if t.key not in previous]
    bar = _bar(len(todo), progress, desc)

    def done(outcome: Outcome) -> None:
        if st is not None:
            st.append(outcome)
        outcomes.append(outcome)
        if bar is not None:
            bar.set_postfix_str(f"{outcome.key}: {outcome.status}", refresh=False)
            bar.update(1)
        if on_done:
            on_done(outcome)

    try:
        if todo:
            ENGINES[engine](todo, options, done)
    finally:
        if bar is not None:
            bar.close()
    return outcomes


def _bar(total: int, progress: bool, desc: str):
    if not progress or total == 0:
        return None
    from tqdm.auto import tqdm  # lazy: startup

    return tqdm(total=total, desc=desc, unit="task", file=sys.stderr, dynamic_ncols=True)
