"""Keep a long-lived pytest worker's memory bounded.

Every new op signature on the "tpu" device compiles an XLA executable (about 1 MB on XLA:CPU), kept by the
backend's per-lowering caches and by JAX's own. One xdist worker runs hundreds of modules; measured 2026-12-05,
3,000 fuzzed calls left 3.4 GB resident (0.7 GB after clearing both), and a CI worker grew to 16 GB and was
killed by the OOM killer. After any test that leaves the worker above ``_LIMIT_MB``, the caches are dropped
(later tests recompile, mostly from JAX's persistent compilation cache on disk).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

import pytest

_LIMIT_MB = int(os.environ.get("TPU_WORKBENCH_TEST_RSS_LIMIT_MB", "3072"))


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


def _drop_compiled_caches() -> None:
    """The backend's per-lowering executables, its fused graphs, then JAX's caches; memory back to the OS."""
    op_jit = sys.modules.get("tpu_workbench.backend.op_jit")
    if op_jit is not None:
        for cache in op_jit._CACHES:
            cache.clear()
    lazy = sys.modules.get("tpu_workbench.backend.lazy")
    if lazy is not None:
        lazy._compiled.clear()
        lazy._sightings.clear()
    sys.modules["jax"].clear_caches()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: the memory stays with the allocator, still reusable
        pass


@pytest.fixture(autouse=True)
def _bounded_worker_memory():
    yield
    if "jax" in sys.modules and os.path.exists("/proc/self/statm") and _rss_mb() > _LIMIT_MB:
        _drop_compiled_caches()
