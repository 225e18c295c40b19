"""Memory statistics for ``torch.accelerator.memory_*`` on "tpu": what JAX reports, or a clear refusal.

PyTorch reads these from a C++ device allocator, which a Python backend does not have (asking for them hits
an internal assert). JAX's GPU and TPU platforms report bytes in use, peak and limit per device; its CPU
platform reports nothing, so there "allocated" is the bytes held by live JAX arrays and the peak figures
raise, naming the limit, instead of answering 0.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

from tpu_workbench.backend._jax import jax_module


class MemoryStatsUnavailable(RuntimeError):
    """The platform JAX runs on does not report this figure."""


def _device() -> Any:
    return jax_module().devices()[0]


def _jax_stats() -> dict[str, int] | None:
    try:
        return _device().memory_stats() or None
    except Exception:  # noqa: BLE001 - platforms without the API report nothing
        return None


def _live_bytes() -> int:
    dev = _device()
    return sum(a.nbytes for a in jax_module().live_arrays() if dev in a.devices())


def memory_stats(device_index: Any = None) -> collections.OrderedDict[str, int]:
    """torch-style keys from JAX's per-device statistics (peaks only where JAX reports them)."""
    js = _jax_stats()
    out: collections.OrderedDict[str, int] = collections.OrderedDict()
    if js is None:
        live = _live_bytes()
        out["allocated_bytes.all.current"] = live
        out["reserved_bytes.all.current"] = live
        return out
    used = int(js.get("bytes_in_use", 0))
    out["allocated_bytes.all.current"] = used
    out["reserved_bytes.all.current"] = int(js.get("bytes_reserved", used))
    if "peak_bytes_in_use" in js:
        out["allocated_bytes.all.peak"] = int(js["peak_bytes_in_use"])
    if "peak_bytes_reserved" in js or "peak_bytes_in_use" in js:
        out["reserved_bytes.all.peak"] = int(js.get("peak_bytes_reserved", js.get("peak_bytes_in_use", 0)))
    if "num_allocs" in js:
        out["allocation.all.allocated"] = int(js["num_allocs"])
    if "bytes_limit" in js:
        out["bytes_limit"] = int(js["bytes_limit"])
    return out


def _peak(key: str, what: str) -> int:
    stats = memory_stats()
    if key not in stats:
        raise MemoryStatsUnavailable(
            f"{what}: JAX's {_device().platform} platform does not report peak memory, so the TPU device cannot "
            "answer it (memory_allocated() is the bytes held by live arrays; measure the process's peak RSS "
            "instead, e.g. resource.getrusage)"
        )
    return stats[key]


def memory_allocated(device_index: Any = None) -> int:
    return memory_stats()["allocated_bytes.all.current"]


def memory_reserved(device_index: Any = None) -> int:
    return memory_stats()["reserved_bytes.all.current"]


def max_memory_allocated(device_index: Any = None) -> int:
    return _peak("allocated_bytes.all.peak", "max_memory_allocated()")


def max_memory_reserved(device_index: Any = None) -> int:
    return _peak("reserved_bytes.all.peak", "max_memory_reserved()")


_reset_warned = False


def reset_peak_memory_stats(device_index: Any = None) -> None:
    """JAX's peak counters cannot be reset: peaks stay "since the process started" (warned once)."""
    global _reset_warned
    if not _reset_warned:
        _reset_warned = True
        warnings.warn(
            "reset_peak_memory_stats() on the TPU device: JAX's peak counters cannot be reset; peak "
            "figures count from the start of the process",
            stacklevel=2,
        )


def reset_accumulated_memory_stats(device_index: Any = None) -> None:
    reset_peak_memory_stats(device_index)


def empty_cache() -> None:
    """Nothing to release: JAX frees an array's buffer when its last reference goes."""


def get_memory_info(device_index: Any = None) -> tuple[int, int]:
    """(free, total) bytes: the device's limit where JAX reports one, else the host's memory (XLA:CPU)."""
    js = _jax_stats()
    if js is not None and "bytes_limit" in js:
        total = int(js["bytes_limit"])
        return total - int(js.get("bytes_in_use", 0)), total
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            info[k] = int(v.split()[0]) * 1024
    return info.get("MemAvailable", info.get("MemFree", 0)), info["MemTotal"]
