"""The migrate → run on "tpu" → compare chain, as reusable steps for ``tpu-bench demo`` and the notebooks.

* :func:`migrate_examples` copies the bundled sample projects into a work folder and migrates the copy
  with ``tpu-migrate`` (``examples/`` itself is never modified).
* :func:`run_training` runs one migrated script (or the migrated notebook) as a subprocess on ``"tpu"``
  or ``"cpu"`` and parses its ``step <i> loss <x>`` lines.
* :func:`check_losses` runs a sample on both devices and says whether the loss curves agree within a
  stated tolerance (``RTOL``/``ATOL``).

Nothing here imports torch: the training runs happen in child processes, so a broken "tpu" device is
reported as a failed step with its error, not a crash of the caller.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tpu_workbench.bench.paths import examples_dir
from tpu_workbench.bench.samples import ATOL, RTOL, SAMPLES, sample
from tpu_workbench.migrate import migrate_paths

LOSS_LINE = re.compile(r"^step\s+(\d+)\s+loss\s+([-+0-9.eEnaNinf]+)\s*$", re.MULTILINE)


# --------------------------------------------------------------------------------------------- migration


@dataclass
class MigrationOutcome:
    """Where the migrated copy lives and tpu-migrate's RunResult for it (``None`` if migrate failed)."""

    workdir: Path
    run: object | None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            self.run is not None
            and not self.error
            and not any(f.status == "unparsable" for f in self.run.files)
        )


def migrate_examples(
    workdir: str | Path,
    *,
    source: str | Path | None = None,
    names: list[str] | None = None,
    jobs: int | None = 1,
) -> MigrationOutcome:
    """Copy the sample projects (``source``, default the bundled ``examples/``) into ``workdir`` and
    migrate the copy in place with ``migrate_paths(..., write=True)``. The originals are not touched."""
    source = Path(source) if source else examples_dir()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    chosen = [sample(n) for n in names] if names else list(SAMPLES)
    for s in chosen:
        src = source / s.path
        if not src.exists():
            return MigrationOutcome(workdir, None, f"sample {s.name!r} missing: {src}")
        dst = workdir / s.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    t0 = time.perf_counter()
    try:
        run = migrate_paths([str(workdir / s.path) for s in chosen], write=True, jobs=jobs)
    except Exception as exc:  # noqa: BLE001 - report, never hide: the demo prints this as a failed step
        return MigrationOutcome(workdir, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    return MigrationOutcome(workdir, run, "", time.perf_counter() - t0)


def diagnostics_frame(run, root: str | Path | None = None):
    """One row per diagnostic: file, line, col, code, outcome, fixed, message (paths relative to root)."""
    rows = []
    for f in run.files:
        for d in f.diagnostics:
            path = str(d.path)
            if root is not None:
                try:
                    path = str(Path(path).resolve().relative_to(Path(root).resolve()))
                except ValueError:
                    pass
            rows.append(
                {
                    "file": path,
                    "line": d.line,
                    "col": d.col,
                    "code": d.code,
                    "outcome": d.outcome,
                    "fixed": d.fixed,
                    "message": d.message,
                }
            )
    return pd.DataFrame(rows, columns=["file", "line", "col", "code", "outcome", "fixed", "message"])


def outcome_counts(run, root: str | Path | None = None):
    """Per file: rewritten / warned / flagged counts and the converted percentage."""
    rows = []
    for f in run.files:
        c = {"rewritten": 0, "warned": 0, "flagged": 0}
        for d in f.diagnostics:
            c[d.outcome] = c.get(d.outcome, 0) + 1
        total = sum(c.values())
        path = str(f.path)
        if root is not None:
            try:
                path = str(Path(path).resolve().relative_to(Path(root).resolve()))
            except ValueError:
                pass
        rows.append(
            {
                "file": path,
                "status": f.status,
                **c,
                "converted %": 100.0 if total == 0 else 100.0 * (c["rewritten"] + c["warned"]) / total,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------- runs


@dataclass
class TrainingRun:
    """One subprocess run of a migrated sample on one device."""

    sample: str
    device: str
    command: list[str]
    returncode: int | None
    seconds: float
    losses: list[float] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error and bool(self.losses)

    def failure(self) -> str:
        """A short reason when not ok: the error, or the last lines of stderr."""
        if self.ok:
            return ""
        if self.error:
            return self.error
        if self.returncode != 0:
            tail = [ln for ln in self.stderr.strip().splitlines() if ln.strip()][-3:]
            return f"exit status {self.returncode}: " + " | ".join(tail)
        return "no 'step <i> loss <x>' lines in the output"


def parse_losses(text: str) -> list[float]:
    """Losses from ``step <i> loss <x>`` lines, in step order."""
    pairs = sorted((int(i), float(x)) for i, x in LOSS_LINE.findall(text))
    return [x for _, x in pairs]


def child_env(device: str, *, distributed: bool = False, steps: int = 5) -> dict[str, str]:
    """Environment of a training subprocess: single-process torch.distributed settings when needed,
    ``TPU_WORKBENCH_DEVICE`` (read by the sample notebook), unbuffered output."""
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", "TPU_WORKBENCH_DEVICE": device, "STEPS": str(steps)})
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    if distributed:
        env.update(
            {
                "MASTER_ADDR": "127.0.0.1",
                # a one-process world: rank 0's store binds any free port itself (port 0). A port picked
                # here and closed again can be taken before the child binds it (EADDRINUSE in CI)
                "MASTER_PORT": "0",
                "RANK": "0",
                "WORLD_SIZE": "1",
                "LOCAL_RANK": "0",
            }
        )
    return env


def run_training(
    workdir: str | Path,
    name: str,
    device: str,
    *,
    steps: int = 5,
    timeout_s: float = 300.0,
    python: str | None = None,
    on_line: Callable[[str], None] | None = None,
) -> TrainingRun:
    """Run the migrated sample ``name`` under ``workdir`` on ``device`` ("tpu" or "cpu") for ``steps`` steps.

    The child's stdout is read line by line as it is printed; ``on_line`` sees each line (the demo
    prints the loss of every step as it arrives)."""
    s = sample(name)
    workdir = Path(workdir)
    path = workdir / s.path
    python = python or sys.executable
    if s.kind == "notebook":
        cmd = [python, "-m", "tpu_workbench.bench.demo_chain", "--execute-notebook", str(path)]
    else:
        dev_args = s.tpu_args if device == "tpu" else s.cpu_args
        cmd = [python, str(path), "--steps", str(steps), *s.common_args, *dev_args]
    env = child_env(
        device, distributed=s.distributed, steps=steps
    )  # the installed package imports from anywhere
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=path.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
    )
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
    reader.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout_s, kill)
    watchdog.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
        proc.wait()
    finally:
        watchdog.cancel()
        reader.join()
    out = "".join(lines)
    error = f"timed out after {timeout_s:.0f} s" if timed_out.is_set() else ""
    return TrainingRun(
        name,
        device,
        cmd,
        None if error else proc.returncode,
        time.perf_counter() - t0,
        parse_losses(out),
        out,
        "".join(stderr),
        error,
    )


@dataclass
class LossCheck:
    """The same migrated sample on "cpu" and on "tpu": do the loss curves agree?"""

    sample: str
    cpu: TrainingRun
    tpu: TrainingRun
    rtol: float = RTOL
    atol: float = ATOL

    @property
    def max_abs_diff(self) -> float:
        pairs = list(zip(self.cpu.losses, self.tpu.losses, strict=False))
        return max((abs(a - b) for a, b in pairs), default=math.nan)

    @property
    def max_rel_diff(self) -> float:
        pairs = list(zip(self.cpu.losses, self.tpu.losses, strict=False))
        return max((abs(a - b) / max(abs(a), 1e-12) for a, b in pairs), default=math.nan)

    @property
    def ok(self) -> bool:
        return not self.problem()

    def problem(self) -> str:
        """Empty when the curves agree; else what went wrong."""
        for run in (self.cpu, self.tpu):
            if not run.ok:
                return f"{run.device} run failed: {run.failure()}"
        if len(self.cpu.losses) != len(self.tpu.losses):
            return f"step counts differ: cpu {len(self.cpu.losses)}, tpu {len(self.tpu.losses)}"
        for i, (a, b) in enumerate(zip(self.cpu.losses, self.tpu.losses, strict=True)):
            if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > self.atol + self.rtol * abs(a):
                return (
                    f"step {i}: cpu {a:.6f} vs tpu {b:.6f} (|diff| {abs(a - b):.3g} > "
                    f"{self.atol:g} + {self.rtol:g}*|cpu|)"
                )
        return ""

    def summary(self) -> dict:
        return {
            "sample": self.sample,
            "precision": sample(self.sample).precision_note,
            "tolerance": f"|diff| <= {self.atol:g} + {self.rtol:g}*|cpu|",
            "steps": len(self.cpu.losses),
            "cpu loss (last)": _last(self.cpu.losses),
            "tpu loss (last)": _last(self.tpu.losses),
            "max |diff|": self.max_abs_diff,
            "max rel diff": self.max_rel_diff,
            "agree": self.ok,
            "cpu s": round(self.cpu.seconds, 1),
            "tpu s": round(self.tpu.seconds, 1),
            "problem": self.problem(),
        }


def _last(xs: list[float]) -> float:
    return xs[-1] if xs else math.nan


def check_losses(
    workdir: str | Path,
    name: str,
    *,
    steps: int = 5,
    rtol: float | None = None,
    atol: float = ATOL,
    timeout_s: float = 300.0,
    parallel: bool = True,
    on_line: Callable[[str, str], None] | None = None,
) -> LossCheck:
    """Run migrated sample ``name`` on cpu and on tpu (two child processes, at the same time unless
    ``parallel=False``) and compare the printed losses (tolerance: the sample's ``rtol`` — RTOL for fp32
    samples — unless given). ``on_line(device, line)`` sees each line a child prints."""

    def run(dev: str) -> TrainingRun:
        hook = (lambda line: on_line(dev, line)) if on_line is not None else None
        return run_training(workdir, name, dev, steps=steps, timeout_s=timeout_s, on_line=hook)

    if parallel:
        with ThreadPoolExecutor(2) as pool:
            cpu, tpu = pool.map(run, ("cpu", "tpu"))
    else:
        cpu, tpu = run("cpu"), run("tpu")
    return LossCheck(name, cpu, tpu, sample(name).rtol if rtol is None else rtol, atol)


def verdict_frame(run, checks: list[LossCheck], root: str | Path) -> pd.DataFrame:
    """Notebook 01's answer, one row per sample: how much of it tpu-migrate converted, and whether the
    migrated script trains to the same losses on "tpu" as on "cpu" (or why it was not run)."""
    counts = outcome_counts(run, root).set_index("file")
    checked = {c.sample: c for c in checks}
    rows = []
    for s in SAMPLES:
        if s.path not in counts.index:
            continue
        c, n = checked.get(s.name), counts.loc[s.path]
        if c is not None:
            tpu = "same losses" if c.ok else f"DIFFERENT: {c.problem()}"
        else:
            tpu = (
                "not run this time (runnable)"
                if s.runnable
                else "not run: flagged for a human, not rewritten"
            )
        rows.append(
            {
                "sample": s.name,
                "converted %": n["converted %"],
                "rewritten": n["rewritten"],
                "warned": n["warned"],
                "flagged": n["flagged"],
                '"tpu" vs "cpu" training': tpu,
            }
        )
    return pd.DataFrame(rows)


def checks_frame(checks: list[LossCheck]):
    return pd.DataFrame([c.summary() for c in checks])


def losses_frame(checks: list[LossCheck]):
    """Long table: sample, device, step, loss (for plotting or display)."""
    rows = [
        {"sample": c.sample, "device": run.device, "step": i, "loss": x}
        for c in checks
        for run in (c.cpu, c.tpu)
        for i, x in enumerate(run.losses)
    ]
    return pd.DataFrame(rows, columns=["sample", "device", "step", "loss"])


def tpu_platform() -> str:
    """What the "tpu" device really is here, e.g. "tpu via XLA:CPU (JAX 0.10.2, cpu)" (runs a child
    process so the caller need not import torch)."""
    code = (
        "from tpu_workbench.bench.devices import describe_device, tpu_present\n"
        "print(describe_device('tpu').platform if tpu_present() else 'tpu device not present')"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "unknown (probe timed out)"
    lines = proc.stdout.strip().splitlines()
    return (
        lines[-1]
        if proc.returncode == 0 and lines
        else f"unknown (probe failed: {proc.stderr.strip()[-200:]})"
    )


# --------------------------------------------------------------------------------------------- notebook runner


def _execute_notebook(path: str) -> int:
    """Execute a notebook with nbclient and print its stream output (used as a child process)."""
    import nbformat  # lazy: subprocess (only the notebook child needs it; its schema validator imports slowly)
    from nbclient import NotebookClient  # lazy: subprocess

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(Path(path).parent)}}
    )
    try:
        client.execute()
    finally:
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream":
                    stream = sys.stdout if out.get("name") == "stdout" else sys.stderr
                    stream.write(out.get("text", ""))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--execute-notebook":
        sys.exit(_execute_notebook(sys.argv[2]))
    print("usage: python -m tpu_workbench.bench.demo_chain --execute-notebook NB.ipynb", file=sys.stderr)
    sys.exit(2)
