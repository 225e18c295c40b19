"""One command in one copy in one subprocess with a timeout (killed with its children), observed by the probe.

Each (command, phase) is an executor task; the subprocess itself is started here, in a session of its own,
so a timeout kills everything it started.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tpu_workbench.bench.assess.probe import STUB

MISSING_OP = re.compile(r"operator '([^']+)' is not implemented for TPU")
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)\b.*)$")


def first_error(log: str) -> str | None:
    """The exception that ended the run (last traceback's last line), or pytest's first ``E`` line."""
    lines = log.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            for line in lines[i + 1 :]:
                m = EXC_LINE.match(line.strip())
                if m and not line.startswith(" "):
                    return m.group(1)[:500]
    for line in lines:
        if line.startswith("E   ") and line[4:].strip():
            return line[4:].strip()[:500]
    for line in lines:
        if line.startswith("FAILED "):
            return line[:500]
    return None


PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?),? ?)+)"
)


PYTEST_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*(?:\[\s*\d+%\])?\s*$")


def test_summary(log: str) -> str | None:
    """pytest's closing counts ("3 failed, 10 passed"), when the command was a pytest run; for a run killed
    before its summary, the counts of its progress marks so far."""
    found = [m.group(1).strip(" ,") for m in map(PYTEST_SUMMARY.match, log.splitlines()) if m]
    if found:
        return found[-1]
    marks = "".join(m.group(1) for m in map(PYTEST_PROGRESS.match, log.splitlines()) if m)
    if not marks:
        return None
    counts = {"passed": marks.count("."), "failed": marks.count("F"), "errors": marks.count("E")}
    return "before it stopped: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)


def _env(device: str, probe: str, count_flops: bool, cwd: Path, default_device: bool = False) -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(probe).parent), str(cwd), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    env["TPU_ASSESS_PROBE"] = probe
    env["TPU_ASSESS_FLOPS"] = "1" if count_flops else "0"
    env["TPU_ASSESS_DEVICE"] = device
    if default_device and device != "cpu":
        env["TPU_ASSESS_DEFAULT_DEVICE"] = device
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("TORCH_TPU_CPU_FALLBACK", None)  # strict: an op without a lowering fails, and says which
    return env


def run_command(payload: dict, emit) -> dict:
    """Executor task: run ``payload['command']`` in ``payload['cwd']``; pass/fail, first error, ops, probe data."""
    cwd = Path(payload["cwd"])
    device = payload["device"]
    command = payload["command"].replace("{device}", device)
    probe_dir = Path(tempfile.mkdtemp(prefix="assess-probe-"))
    (probe_dir / "sitecustomize.py").write_text(STUB)
    prefix = str(probe_dir / "probe")
    log_path = Path(payload["log"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    emit("stage", {"stage": f"{device}: {command}"})
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=_env(
                device, prefix, payload.get("count_flops", False), cwd, payload.get("default_device", False)
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=payload["timeout"])
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        try:  # the whole session: its children too (data-loader workers, servers it started)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    wall = time.monotonic() - start
    text = log_path.read_text(encoding="utf-8", errors="replace")
    probes = []
    for p in sorted(glob.glob(prefix + ".*.json")):
        try:
            probes.append(json.loads(Path(p).read_text()))
        except ValueError:  # a process killed while writing its probe file
            continue
    shutil.rmtree(probe_dir, ignore_errors=True)
    missing = sorted(set(MISSING_OP.findall(text)))
    return {
        "command": command,
        "device": device,
        "status": "timeout" if timed_out else ("pass" if rc == 0 else "fail"),
        "returncode": rc,
        "signal": signal.Signals(-rc).name if rc is not None and rc < 0 else None,
        "wall_s": round(wall, 2),
        "first_error": (
            f"no result within {payload['timeout']:g} s (killed with its children)" if timed_out else None
        )
        or (first_error(text) if rc else None),
        "missing_ops": missing,
        "tests": test_summary(text) if "pytest" in command or "py.test" in command else None,
        "log": str(log_path),
        "log_tail": text[-2000:],
        "probe": _merge(probes),
    }


def _merge(probes: list[dict]) -> dict:
    """One view over every process the command started (a pytest run, a launcher and its workers)."""
    modules: dict[str, dict] = {}
    recompiles: list[str] = []
    fallback: dict[str, int] = {}
    aten: set[str] = set()
    device_ops: dict[str, int] = {}
    compile_stats = None
    for p in probes:
        for key, m in p.get("modules", {}).items():
            if key not in modules or m["calls"] > modules[key]["calls"]:
                modules[key] = m
        recompiles += p.get("recompiles", [])
        for op, n in (p.get("cpu_fallback_ops") or {}).items():
            fallback[op] = fallback.get(op, 0) + n
        compile_stats = p.get("tpu_compile_stats") or compile_stats
        aten.update(p.get("aten_ops", []))
        for op, n in (p.get("device_ops") or {}).items():
            device_ops[op] = device_ops.get(op, 0) + n
    return {
        "processes": len(probes),
        "modules": sorted(modules.values(), key=lambda m: -m["parameters"]),
        "recompiles": recompiles[:20],
        "cpu_fallback_ops": fallback,
        "tpu_compile_stats": compile_stats,
        "aten_ops": sorted(aten),
        "device_ops": dict(sorted(device_ops.items())),
    }
