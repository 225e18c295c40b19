"""Pinned host tensors for the "tpu" device.

Pinning is a host-memory property PyTorch implements with the accelerator's C++ pinned allocator. Here a
host->device copy is ``jax.device_put`` from ordinary memory, so pinning buys nothing and costs a copy, as on
CUDA; what matters to scripts is that ``pin_memory()`` returns a tensor for which ``is_pinned()`` is True and
that views of it report pinned too. The registry maps a storage address to the tensor pinned there (weakly:
while that tensor lives its storage cannot be reused, so an address never names a freed buffer).
"""

from __future__ import annotations

import threading
import weakref

import torch

_LOCK = threading.Lock()
_PINNED: dict[int, weakref.ref] = {}


def _address(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def is_pinned(t: torch.Tensor) -> bool:
    if t.numel() == 0:
        return False
    with _LOCK:
        ref = _PINNED.get(_address(t))
        if ref is None:
            return False
        if ref() is None:
            del _PINNED[_address(t)]
            return False
        return True


def pin(t: torch.Tensor) -> torch.Tensor:
    """A pinned copy of the CPU tensor ``t`` (``t`` itself if already pinned), like Tensor.pin_memory()."""
    if is_pinned(t):
        return t
    return mark(t.clone(memory_format=torch.preserve_format))  # differentiable, as Tensor.pin_memory() is


def mark(t: torch.Tensor) -> torch.Tensor:
    """Record the fresh host tensor ``t`` as pinned (a factory called with ``pin_memory=True`` made it)."""
    if t.numel():
        with _LOCK:
            _PINNED[_address(t)] = weakref.ref(t)
            if len(_PINNED) > 4096:
                for k in [k for k, r in _PINNED.items() if r() is None]:
                    del _PINNED[k]
    return t
