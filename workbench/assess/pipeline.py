"""One assessment: check the input, copy, migrate the copy, run the commands before and after (executor
tasks), count and project the cost, judge, write the report."""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

from tpu_workbench.bench.assess import cost, verdict
from tpu_workbench.bench.assess.candidates import propose
from tpu_workbench.bench.assess.execute import run_command
from tpu_workbench.bench.assess.migration import migrate_copy
from tpu_workbench.bench.assess.options import AssessOptions
from tpu_workbench.bench.assess.report import write_reports
from tpu_workbench.bench.assess.workspace import check_input, copy_tree, tree_digest
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.executor import ExecutorOptions, Task, run_tasks
from tpu_workbench.bench.executor.task import ref


def _commands(options: AssessOptions, candidates: list[dict]) -> list[dict]:
    cmds = [{"kind": "run", "command": c, "source": "user"} for c in options.run]
    cmds += [{"kind": "tests", "command": c, "source": "user"} for c in options.tests]
    if options.candidates:
        cmds += [{**c, "source": "candidate (confirmed with --candidates)"} for c in candidates]
    return cmds


def _key(i: int, device: str, command: str, digest: str, options: AssessOptions) -> str:
    """A task's key in ``<out>/tasks.jsonl``: what it ran on (the tree's digest) and how, so a rerun reuses a
    finished run only when nothing that decides its result changed."""
    what = json.dumps([digest, command, device, options.timeout, options.default_device])
    return f"{i}-{device}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


def _run_all(
    cmds: list[dict], before: Path, after: Path, options: AssessOptions, progress: bool, digest: str
) -> None:
    logs = Path(options.out).resolve() / "logs"
    tasks = []
    for i, c in enumerate(cmds):
        for device, cwd in (("cpu", before), ("tpu", after)):
            key = _key(i, device, c["command"], digest, options)
            payload = {
                "command": c["command"],
                "cwd": str(cwd),
                "device": device,
                "timeout": options.timeout,
                "count_flops": device == "cpu",
                "default_device": options.default_device,
                "log": str(logs / f"{key}.log"),
            }
            tasks.append(Task(key, ref(run_command), payload))
    exec_opts = ExecutorOptions(
        workers=options.workers,
        timeout=options.timeout + 60,
        start_method="forkserver",
        ray_address=options.ray_address,
    )
    store = Path(options.out).resolve() / "tasks.jsonl"
    outcomes = run_tasks(
        tasks,
        exec_opts,
        engine=options.engine,
        store=store,
        resume=options.resume,
        progress=progress,
        desc="assess",
    )
    for o in outcomes:
        i, device, _ = o.key.split("-")
        if o.status == "ok" and o.result is not None:
            cmds[int(i)][device] = o.result
        else:  # the task itself died (not the user's command): say so
            cmds[int(i)][device] = {
                "status": "fail",
                "first_error": f"assess task {o.status}: {o.error[-300:]}",
            }


def assess(options: AssessOptions, progress: bool = False) -> dict:
    """Assess ``options.path``; writes ``assessment.{md,html,json}`` under ``options.out``; returns the data."""
    root = check_input(options.path)
    out = Path(options.out).resolve()
    if out == root or root in out.parents:
        raise WorkbenchError(f"--out {options.out} is inside the assessed tree; assess never writes there")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    digest = tree_digest(root)
    with tempfile.TemporaryDirectory(prefix="tpu-assess-") as tmp:
        before = copy_tree(root, Path(tmp) / "before")
        after = copy_tree(root, Path(tmp) / "after")
        migration = migrate_copy(after, before)
        candidates = propose(before)
        cmds = _commands(options, candidates)
        if cmds:
            _run_all(cmds, before, after, options, progress, digest)
    counts = next((c for c in (cost.model_counts(cmd["cpu"].get("probe") or {}) for cmd in cmds) if c), None)
    projected = (
        cost.project_cost(counts, [options.gpu, options.tpu], options.chips, options.tokens)
        if counts
        else None
    )
    data = {
        "path": str(root),
        "options": {
            "timeout_s": options.timeout,
            "gpu": options.gpu,
            "tpu": options.tpu,
            "chips": options.chips,
            "tokens": options.tokens,
            "engine": options.engine,
            "default_device": options.default_device,
        },
        "migration": migration,
        "candidates": candidates,
        "commands": [verdict.judge_command(c) for c in cmds],
        "model": counts,
        "cost": projected,
        "user_tree_unchanged": tree_digest(root) == digest,
        "wall_s": round(time.monotonic() - started, 1),
    }
    data["verdict"] = verdict.overall(data)
    data["reports"] = write_reports(data, out)
    return data
