"""The device's mutable settings, in one place below every other backend module.

``device`` (the ``torch.tpu`` API) writes them, ``dispatch`` and the lowerings read them; keeping them
here is what lets those modules import each other in one direction only. The matmul-precision stack is
per thread (``with torch.tpu.precision(...)`` in one thread must not change another's matmuls); the eager
mode and the CPU-fallback switch are process-wide, as in TorchTPU.
"""

from __future__ import annotations

import contextlib
import enum
import os
import sys
import threading
from collections.abc import Iterator

import torch

__all__ = [
    "EagerMode", "Precision", "current_precision", "eager_mode", "launch_blocking", "pop_precision",
    "precision_override", "push_precision", "set_cpu_fallback", "cpu_fallback_enabled", "set_eager_mode_value",
]  # fmt: skip


class Precision(enum.Enum):
    """Matmul precision for float32 inputs, as ``jax.lax.Precision``."""

    DEFAULT = "DEFAULT"  # bf16 inputs, f32 accumulation on TPU
    HIGH = "HIGH"  # bf16_3x
    HIGHEST = "HIGHEST"  # full f32


class EagerMode(enum.Enum):
    """TorchTPU's eager modes."""

    DEFER_NEVER = "DEFER_NEVER"  # strict eager (default): one op at a time, dispatched asynchronously
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "DEFER_NEVER_AND_LAUNCH_BLOCKING"  # debug: wait after every op
    DEFER_AND_FUSE = "DEFER_AND_FUSE"  # fused eager: ops recorded, fused into one XLA program when needed


_TORCH_TO_PRECISION = {"medium": Precision.DEFAULT, "high": Precision.HIGH, "highest": Precision.HIGHEST}


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.precision: list[Precision] = []


_local = _PerThread()


def push_precision(p: Precision) -> None:
    _local.precision.append(p)


def pop_precision() -> None:
    _local.precision.pop()


def precision_override() -> Precision | None:
    """The innermost ``torch.tpu.precision(...)`` of this thread, if any."""
    stack = _local.precision
    return stack[-1] if stack else None


def current_precision() -> Precision:
    """The active precision: innermost ``torch.tpu.precision(...)``, else ``torch.get_float32_matmul_precision()``."""
    stack = _local.precision
    if stack:
        return stack[-1]
    return _TORCH_TO_PRECISION[torch.get_float32_matmul_precision()]


# ----------------------------------------------------------------------------- JAX traces of TPU ops
class _Trace(threading.local):
    depth = 0


_trace = _Trace()


def in_jax_trace() -> bool:
    """This thread is tracing TPU ops into a JAX program (a decomposition traced as one program, a compiled
    graph). Under a trace every JAX call gives tracers, even on concrete values, so nothing may run the pending
    fused graph, record into it, run a cached executable or fill a cache: its result would leak the trace's
    tracers into state that outlives it."""
    return _trace.depth > 0


@contextlib.contextmanager
def jax_trace() -> Iterator[None]:
    """Mark the block as tracing TPU ops into a JAX program (see :func:`in_jax_trace`)."""
    _trace.depth += 1
    try:
        yield
    finally:
        _trace.depth -= 1


# ----------------------------------------------------------------------------- eager mode
class _Process:
    eager_mode = (
        EagerMode.DEFER_AND_FUSE
        if os.environ.get("TORCH_TPU_DEFER_AND_FUSE", "0") == "1"
        else EagerMode.DEFER_NEVER
    )
    launch_blocking = (
        os.environ.get("TORCH_TPU_LAUNCH_BLOCKING", os.environ.get("TPU_LAUNCH_BLOCKING", "0")) == "1"
    )
    cpu_fallback = os.environ.get("TORCH_TPU_CPU_FALLBACK", "0") == "1"


_bad_fork = False


def in_bad_fork() -> bool:
    """This process was forked after the parent had started JAX (whose threads do not survive a fork)."""
    return _bad_fork


def _after_fork_in_child() -> None:
    global _bad_fork
    jax = sys.modules.get("jax")
    if (
        jax is not None
        and "tpu_workbench.backend._jax" in sys.modules
        and sys.modules["tpu_workbench.backend._jax"].jax_module.cache_info().currsize
    ):
        _bad_fork = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def eager_mode() -> EagerMode:
    return _Process.eager_mode


def launch_blocking() -> bool:
    """Debug eager: every op waits for its result."""
    return _Process.launch_blocking


def set_eager_mode_value(mode: EagerMode) -> None:
    """Record the mode (``device.set_eager_mode`` validates it and tells the dispatcher)."""
    _Process.eager_mode = mode
    _Process.launch_blocking = mode is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING


def set_cpu_fallback(enabled: bool) -> None:
    _Process.cpu_fallback = bool(enabled)


def cpu_fallback_enabled() -> bool:
    return _Process.cpu_fallback
