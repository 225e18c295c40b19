"""Lazy access to JAX and the torch <-> JAX dtype tables.

JAX is imported on first device use, never during ``import torch`` (autoload must stay cheap).
"""

from __future__ import annotations

import functools
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tpu_workbench.backend import autograd_thread, state


@functools.cache
def jax_module() -> Any:
    """Import JAX once, with 64-bit types on so int64/float64 stay 64-bit, XLA's persistent compilation
    cache on (eager lowerings compile per shape; a cold process otherwise recompiles everything), and XLA:CPU
    running each call inline (see :func:`_cpu_dispatch_inline`). The import leaves the user's random streams
    as they were: JAX draws from NumPy's global generator while it imports (its k8s cluster backoff table), so
    a program that seeded NumPy and first touched the device would draw other numbers than on CUDA or the CPU
    (held-out 18: torchdiffeq's ode_demo batches)."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        import jax  # lazy: jax (import torch must not import it)
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)

    jax.config.update("jax_enable_x64", True)
    _cpu_dispatch_inline(jax)
    cache = compilation_cache_dir()
    if cache is not None:
        try:
            jax.config.update("jax_compilation_cache_dir", str(cache))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        except Exception:  # noqa: BLE001 - an unwritable cache must never stop the device
            pass
    return jax


def _cpu_dispatch_inline(jax: Any) -> None:
    """Eager ops are small: on XLA:CPU, handing each one to a worker thread (JAX's async dispatch) costs more
    than the op, measured at 1.8x on a tiny GPT train step (219 vs 121 ms) on a 2-core host. Run inline instead,
    unless the user set ``JAX_CPU_ENABLE_ASYNC_DISPATCH`` (then JAX's own setting stands). Accelerators are not
    affected: the flag applies to the CPU client only, and only before it is created."""
    if "JAX_CPU_ENABLE_ASYNC_DISPATCH" in os.environ:
        return
    try:
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    except Exception:  # noqa: BLE001 - a JAX without the flag keeps its default
        pass


def compilation_cache_dir() -> Path | None:
    """``TORCH_TPU_COMPILATION_CACHE_DIR`` ("0" or "" turns the cache off); default
    ``$XDG_CACHE_HOME/tpu-workbench/xla`` (``~/.cache/...``)."""
    raw = os.environ.get("TORCH_TPU_COMPILATION_CACHE_DIR")
    if raw is not None:
        return None if raw.strip() in ("", "0") else Path(raw).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tpu-workbench" / "xla"


@functools.cache
def _tables() -> tuple[dict, dict]:
    jax = jax_module()
    jnp = jax.numpy
    pairs = [
        (torch.float32, jnp.float32),
        (torch.float64, jnp.float64),
        (torch.float16, jnp.float16),
        (torch.bfloat16, jnp.bfloat16),
        (torch.int64, jnp.int64),
        (torch.int32, jnp.int32),
        (torch.int16, jnp.int16),
        (torch.int8, jnp.int8),
        (torch.uint8, jnp.uint8),
        (torch.uint16, jnp.uint16),
        (torch.uint32, jnp.uint32),
        (torch.uint64, jnp.uint64),
        (torch.bool, jnp.bool_),
        (torch.complex64, jnp.complex64),
        (torch.complex128, jnp.complex128),
    ]
    t2j = {t: jnp.dtype(j) for t, j in pairs}
    j2t = {jnp.dtype(j): t for t, j in pairs}
    return t2j, j2t


def t2j_dtype(dtype: torch.dtype) -> Any:
    """JAX dtype for a torch dtype; TypeError for dtypes the device does not hold."""
    try:
        return _tables()[0][dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} is not supported on the TPU device") from None


def j2t_dtype(dtype: Any) -> torch.dtype:
    """torch dtype for a JAX dtype."""
    try:
        return _tables()[1][dtype]
    except KeyError:
        raise TypeError(f"JAX dtype {dtype} has no torch equivalent on the TPU device") from None


def cpu_to_jax(t: torch.Tensor) -> Any:
    """Copy a CPU tensor into a jax.Array (bfloat16 travels as its bit pattern). Host data entering the device
    marks this thread as one that uses it (see ``tpu_workbench.backend.autograd_thread``)."""
    jax = jax_module()
    autograd_thread.adopt_calling_thread()
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous()
    if t.numel() == 0 and not state.in_jax_trace():  # (a model's empty caches, made every forward: one shared
        return _empty(
            tuple(t.shape), t.dtype
        )  # immutable array per shape; under a trace it would be a tracer)
    if t.dtype == torch.bfloat16:
        bits = t.view(torch.int16).numpy()
        return jax.numpy.asarray(bits).view(jax.numpy.bfloat16)
    return jax.numpy.asarray(t.numpy())


@functools.lru_cache(maxsize=256)
def _empty(shape: tuple, dtype: torch.dtype) -> Any:
    return jax_module().numpy.zeros(shape, t2j_dtype(dtype))


def jax_to_cpu(a: Any) -> torch.Tensor:
    """Copy a jax.Array into a new CPU tensor."""
    jnp = jax_module().numpy
    if a.dtype == jnp.bfloat16:
        bits = np.array(a.view(jnp.int16))
        return torch.from_numpy(bits).view(torch.bfloat16)
    arr = np.array(a)
    if arr.ndim == 0:
        return torch.from_numpy(arr.reshape(1)).reshape(())
    return torch.from_numpy(arr)
