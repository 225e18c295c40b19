"""Tasks per minute of the executor's engines at 1 and 2 workers, on tasks that burn a fixed CPU time
(``probes.spin``), so the figure is the engine's overhead plus the work, not a model's variance.

    python benchmarks/executor_throughput.py --tasks 40 --seconds 0.25 --engines local ray
"""

from __future__ import annotations

import argparse
import json
import time

from tpu_workbench.bench.executor import ExecutorOptions, Task, run_tasks


def measure(engine: str, workers: int, n: int, seconds: float) -> dict:
    tasks = [
        Task(f"t{i}", "tpu_workbench.bench.executor.probes:spin", {"seconds": seconds}) for i in range(n)
    ]
    start = time.monotonic()
    out = run_tasks(
        tasks, ExecutorOptions(workers=workers, timeout=120, start_method="forkserver"), engine=engine
    )
    wall = time.monotonic() - start
    return {
        "engine": engine,
        "workers": workers,
        "tasks": n,
        "cpu_s_per_task": seconds,
        "ok": sum(o.status == "ok" for o in out),
        "wall_s": round(wall, 2),
        "tasks_per_min": round(60 * n / wall, 1),
        "provenance": "measured",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=40)
    p.add_argument("--seconds", type=float, default=0.25)
    p.add_argument("--engines", nargs="+", default=["local"])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    for engine in a.engines:
        for w in a.workers:
            print(json.dumps(measure(engine, w, a.tasks, a.seconds)), flush=True)


if __name__ == "__main__":
    main()
