"""The ``torch.tpu`` module: TorchTPU 0.2.0's public device API, backed by JAX.

Legacy per-device calls (``is_available``, ``device_count``, ``synchronize``, ...) raise
``RuntimeError`` naming their ``torch.accelerator`` replacement when user code calls them, as TorchTPU
does on torch >= 2.11; ``TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1`` turns that into a one-time warning.
PyTorch's own modules still reach them (torch uses them for RNG forking, serialization, ...).

Importing this module must not import JAX (it runs inside ``import torch`` through autoload).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import backward_errors, lazy, state
from tpu_workbench.backend import random as _random
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.fidelity import fidelity_enabled, set_fidelity
from tpu_workbench.backend.state import EagerMode, Precision

__all__ = [
    "EagerMode", "Event", "Precision", "Stream", "current_device", "current_stream", "default_generators",
    "default_stream", "device", "device_count", "device_of", "fidelity_enabled", "get_amp_supported_dtype",
    "get_device_name", "get_device_properties", "get_rng_state", "initial_seed", "is_available",
    "is_initialized", "manual_seed", "manual_seed_all", "precision", "set_device", "set_eager_mode",
    "set_fidelity", "set_rng_state", "set_stream", "stream", "synchronize",
]  # fmt: skip

_legacy_warned = False


def _check_legacy(name: str, replacement: str, depth: int = 2) -> None:
    global _legacy_warned
    caller = sys._getframe(depth).f_globals.get("__name__", "")
    if caller == "torch" or caller.startswith(("torch.", "tpu_workbench.backend")):
        return  # PyTorch internals and this backend may use them
    if os.environ.get("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS", "0") == "1":
        if not _legacy_warned:
            _legacy_warned = True
            warnings.warn(
                f"torch.tpu.{name} is a legacy device API; use {replacement} (further warnings suppressed)",
                DeprecationWarning,
                stacklevel=depth + 1,
            )
        return
    raise RuntimeError(
        f"torch.tpu.{name} is a legacy device API and is not available with torch >= 2.11; use "
        f"{replacement} instead (set TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1 to allow it with a warning)."
    )


def _legacy(replacement: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _check_legacy(fn.__name__ + "()", replacement, depth=2)
            return fn(*args, **kwargs)

        return wrapper

    return deco


# ----------------------------------------------------------------------------- device queries
@_legacy("torch.accelerator.is_available()")
def is_available() -> bool:
    return True


@_legacy("torch.accelerator.device_count()")
def device_count() -> int:
    return 1


@_legacy("torch.accelerator.current_device_index()")
def current_device() -> int:
    return 0


@_legacy("torch.accelerator.set_device_index(i)")
def set_device(device: Any) -> None:
    check_index(torch.device(device).index if isinstance(device, (str, torch.device)) else int(device))


# ----------------------------------------------------------------------------- one device per process
def local_rank() -> int | None:
    """The launcher's LOCAL_RANK (torchrun, mp.spawn helpers), if this process has one."""
    raw = os.environ.get("LOCAL_RANK")
    return int(raw) if raw is not None and raw.strip().isdigit() else None


def valid_indices() -> tuple[int, ...]:
    """Ordinals that name this process's device: 0, and the LOCAL_RANK a launcher gave it."""
    lr = local_rank()
    return (0,) if lr in (None, 0) else (0, lr)


def check_index(index: int | None) -> None:
    """Raise like CUDA does for an ordinal this process does not have. One device per process (as TorchTPU):
    it is "tpu", "tpu:0", or "tpu:<LOCAL_RANK>" under a launcher; every tensor reports it as tpu:0."""
    if index is None or index in valid_indices():
        return
    names = " or ".join(f"tpu:{i}" for i in valid_indices())
    raise RuntimeError(
        f'invalid device ordinal: tpu:{index} (this process has one TPU device, named "tpu" or {names}; '
        "each process of a multi-device job owns one device — launch one process per device with torchrun)"
    )


def checked_device(dev: torch.device) -> torch.device:
    """``dev`` as this process's device (index 0) after checking its ordinal."""
    check_index(dev.index)
    return torch.device(dev.type, 0)


def _synchronize() -> None:
    """Wait for every pending JAX computation (JAX dispatches asynchronously), fused-eager work included."""
    lazy.flush()
    if jax_module.cache_info().currsize == 0:
        return  # JAX never imported: nothing can be pending
    jax = jax_module()
    jax.block_until_ready(jax.live_arrays())
    jax.effects_barrier()


@_legacy("torch.accelerator.synchronize()")
def synchronize(device: Any = None) -> None:
    _synchronize()


def is_initialized() -> bool:
    return True


#: CUDA's lazy-init flag, read by torch.utils.checkpoint: it stashes and restores the device RNG around a
#: recomputation only when the device module says it is initialised (otherwise dropout draws new masks).
_initialized = True


def _is_in_bad_fork() -> bool:
    return state.in_bad_fork()


def _jax_devices() -> list:
    return jax_module().devices()


def get_device_name(device: Any = None) -> str:
    """Honest name: the JAX platform that executes the ops, e.g. "XLA CPU via JAX 0.10.2"."""
    jax = jax_module()
    d = _jax_devices()[0]
    return f"XLA {d.platform.upper()} via JAX {jax.__version__}"


@dataclass(frozen=True)
class _DeviceProperties:
    name: str
    platform: str
    device_kind: str
    total_memory: int
    jax_device_count: int
    type: str = "tpu"


def get_device_properties(device: Any = None) -> _DeviceProperties:
    devs = _jax_devices()
    d = devs[0]
    total = 0
    with contextlib.suppress(Exception):
        total = int((d.memory_stats() or {}).get("bytes_limit", 0))
    return _DeviceProperties(get_device_name(), d.platform, d.device_kind, total, len(devs))


class device:
    """Legacy device context manager (single device: only ordinal 0)."""

    def __init__(self, device: Any) -> None:
        _check_legacy("device(...)", "torch.accelerator.device_index(i)", depth=2)
        self.idx = device if isinstance(device, int) else (torch.device(device).index or 0)

    def __enter__(self) -> device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class device_of(device):
    """Context manager selecting the device of a tensor (always tpu:0 here)."""

    def __init__(self, obj: torch.Tensor) -> None:
        self.idx = 0


# ----------------------------------------------------------------------------- streams (placeholders)
class Stream:
    """Placeholder stream: XLA/PJRT orders the work, as TorchTPU documents."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device(private.privateuse1_name(), 0)

    def synchronize(self) -> None:
        _synchronize()

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Stream) -> None:
        return None

    def wait_event(self, event: Event) -> None:
        return None

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event


class Event:
    """Placeholder event; ``synchronize`` waits for all pending work."""

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Stream | None = None) -> None:
        return None

    def wait(self, stream: Stream | None = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        raise RuntimeError(
            "TPU events carry no timestamps here; time with time.perf_counter after synchronize()"
        )


_default_stream: Stream | None = None


def default_stream(device: Any = None) -> Stream:
    global _default_stream
    if _default_stream is None:
        _default_stream = Stream()
    return _default_stream


@_legacy("torch.accelerator.current_stream()")
def current_stream(device: Any = None) -> Stream:
    return default_stream()


@_legacy("torch.accelerator.set_stream(s)")
def set_stream(stream: Stream) -> None:
    return None


@contextlib.contextmanager
def stream(stream: Stream | None) -> Iterator[Stream | None]:
    yield stream


# ----------------------------------------------------------------------------- RNG
default_generators: tuple = ()  # torch.Generator(device="tpu") needs C++; the device has one JAX key


def manual_seed(seed: int) -> None:
    """Seed the device PRNG (the same key serves the only device)."""
    _random.seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Called by ``torch.manual_seed``: reseeds the JAX key so runs repeat."""
    _random.seed(int(seed))


def seed() -> None:
    _random.seed(torch.seed())


seed_all = seed


@_legacy("torch.random.initial_seed()")
def initial_seed() -> int:
    return _random.initial_seed()


@_legacy("torch.random.get_rng_state() / torch.accelerator-agnostic RNG state APIs")
def get_rng_state(device: Any = None) -> torch.Tensor:
    return _random.get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    _random.set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [_random.get_state()]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    _random.set_state(new_states[0])


# ----------------------------------------------------------------------------- AMP and precision
def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


@contextlib.contextmanager
def precision(p: Precision | str) -> Iterator[None]:
    """Context manager: run float32 matmuls/convolutions at precision ``p``."""
    state.push_precision(Precision(p.upper()) if isinstance(p, str) else Precision(p))
    try:
        yield
    finally:
        state.pop_precision()


# ----------------------------------------------------------------------------- eager modes
def _set_mode(mode: EagerMode) -> None:
    try:
        mode = EagerMode(mode)
    except ValueError:
        raise ValueError(
            f"unknown eager mode {mode!r}; choose one of {[m.name for m in EagerMode]}"
        ) from None
    if state.eager_mode() is EagerMode.DEFER_AND_FUSE and mode is not EagerMode.DEFER_AND_FUSE:
        lazy.flush()  # leaving fused eager: recorded work runs now
    state.set_eager_mode_value(mode)


class set_eager_mode:  # noqa: N801 - TorchTPU's name
    """Switch to eager ``mode`` now, as ``torch.set_grad_enabled`` does (a bare call must not silently do nothing);
    used as ``with set_eager_mode(mode):`` it restores the previous mode when the block ends."""

    def __init__(self, mode: EagerMode) -> None:
        self._previous = state.eager_mode()
        _set_mode(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _set_mode(self._previous)


class _TpuModule(types.ModuleType):
    @property
    def eager_mode(self) -> EagerMode:
        return state.eager_mode()

    @eager_mode.setter
    def eager_mode(self, mode: EagerMode) -> None:
        _set_mode(mode)


# ----------------------------------------------------------------------------- PrivateUse1 hooks
class _Hooks(private.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(private.DeviceGuard):
    type_ = staticmethod(backward_errors.guard_device_type)  # a plain function: see backward_errors


sys.modules[__name__].__class__ = _TpuModule
