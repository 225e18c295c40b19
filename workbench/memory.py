"""Peak memory of one measured run, with what the number is (as torchtitan's memory monitor records it).

Each device kind reports what is honestly available there:

- ``cuda``: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` — tensors held by the
  caching allocator during the run (the number torchtitan logs as max allocated).
- ``tpu`` on a real TPU: JAX's ``peak_bytes_in_use`` of the device (since the process started; JAX has
  no reset).
- ``cpu``, and a ``tpu`` that JAX runs on the host: the process's peak resident set during the run
  (Linux ``VmHWM``, reset through ``/proc/self/clear_refs`` first). It includes the interpreter, torch,
  JAX and anything else resident, so it is an upper bound of the run's own memory; the resident set at the
  start is recorded beside it.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch


@dataclass
class MemoryPeak:
    """Filled in when the ``peak_memory`` block ends; ``bytes`` None when nothing could be measured."""

    bytes: float | None = None
    basis: str = ""
    extra: dict = field(default_factory=dict)


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(key: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def _reset_rss_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")  # "5" resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _rss_peak(peak: MemoryPeak) -> Iterator[None]:
    reset = _reset_rss_peak()
    before = _status_kib("VmRSS")
    yield
    hwm = _status_kib("VmHWM")
    if reset and hwm is not None:
        peak.bytes = hwm * 1024
        peak.basis = (
            "process peak resident set during the run (Linux VmHWM, reset before the first call); "
            "includes the interpreter and libraries"
        )
        peak.extra["rss_at_start_bytes"] = before * 1024 if before is not None else None
        return
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    peak.bytes = float(maxrss if sys.platform == "darwin" else maxrss * 1024)
    peak.basis = (
        "process peak resident set since the process started (ru_maxrss); includes everything before the run"
    )


def _cuda_peak(peak: MemoryPeak) -> Iterator[None]:
    torch.cuda.reset_peak_memory_stats()
    yield
    peak.bytes = float(torch.cuda.max_memory_allocated())
    peak.basis = "torch.cuda.max_memory_allocated during the run (tensors of the caching allocator)"
    peak.extra["max_memory_reserved_bytes"] = float(torch.cuda.max_memory_reserved())


def _jax_device_stats() -> dict | None:
    try:
        import jax  # lazy: jax

        return jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - no stats is an answer: fall back to the process peak
        return None


def _tpu_peak(peak: MemoryPeak) -> Iterator[None]:
    if not (_jax_device_stats() or {}).get("peak_bytes_in_use"):
        yield from _rss_peak(peak)  # JAX on the host CPU reports no device memory
        return
    yield
    stats = _jax_device_stats() or {}
    peak.bytes = float(stats["peak_bytes_in_use"])
    peak.basis = "JAX device peak_bytes_in_use (since the process started; JAX has no reset)"


PEAK_READERS = {"cpu": _rss_peak, "cuda": _cuda_peak, "tpu": _tpu_peak}


@contextmanager
def peak_memory(device: str) -> Iterator[MemoryPeak]:
    """``with peak_memory("cuda") as peak: run()`` — afterwards ``peak.bytes`` and ``peak.basis``."""
    peak = MemoryPeak()
    reader = PEAK_READERS.get(device.split(":")[0], _rss_peak)
    steps = reader(peak)
    next(steps)
    yield peak
    next(steps, None)
