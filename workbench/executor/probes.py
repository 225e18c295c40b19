"""Small task functions that test and benchmark the engines: one that returns, one that raises, one that
segfaults, one that hangs (with a child process of its own), one that burns a fixed amount of CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def square(payload: dict, emit) -> dict:
    emit("stage", {"stage": "square"})
    return {"y": payload["x"] ** 2, "pid": os.getpid()}


def fail(payload: dict, emit) -> dict:
    raise ValueError(f"asked to fail: {payload.get('why', '')}")


def segfault(payload: dict, emit) -> dict:
    emit("stage", {"stage": "about to crash"})
    emit("partial", {"got": "this far"})
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def hang(payload: dict, emit) -> dict:
    """Sleeps forever, with a child that does too and writes its pid to ``payload['pidfile']``."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if payload.get("pidfile"):
        with open(payload["pidfile"], "w") as f:
            f.write(str(child.pid))
    emit("stage", {"stage": "hanging"})
    time.sleep(3600)
    return {}


def spin(payload: dict, emit) -> dict:
    """Burns ``payload['seconds']`` of CPU (a stand-in for a tiny model's validation)."""
    end = time.process_time() + float(payload.get("seconds", 0.2))
    n = 0
    while time.process_time() < end:
        n += 1
    return {"iterations": n}


PROBES = {f.__name__: f for f in (square, fail, segfault, hang, spin)}
