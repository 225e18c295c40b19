"""Facts about where and when a measurement ran: host, versions, git revision, date."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def git_revision() -> str:
    """HEAD of the repository holding this package, with ``-dirty`` when the tree has changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + ("-dirty" if dirty else "")) if rev else "unknown"


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """torch, jax (if importable), python."""
    import torch  # lazy: heavy (the projection imports this module; `tpu-bench --help` must not load torch)

    out = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import jax  # lazy: jax

        out["jax"] = jax.__version__
    except Exception:  # noqa: BLE001
        out["jax"] = "not importable"
    return out


def host_info() -> dict[str, object]:
    """Hostname, OS, CPU count and torch thread count (the latter bounds CPU throughput)."""
    import torch  # lazy: heavy

    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
