"""Factories called with ``pin_memory=True`` (``torch.empty(n, pin_memory=True)``) while "tpu" is the accelerator.

PyTorch's CPU factories ask the accelerator's C++ hooks for a pinned allocator, which a Python backend cannot
provide, so the call would fail with a message about ``PrivateUse1HooksInterface``. CUDA scripts preallocate
staging buffers this way. Each factory that takes ``pin_memory`` is wrapped: with ``pin_memory=True`` for a
host tensor it builds an ordinary host tensor and marks it pinned (see ``tpu_workbench.backend.pinning``); every other call
goes straight to the original. Dynamo is told to keep the wrappers in its graphs as the factories they are
(``tpu_workbench.backend.compile``), so compiled code that calls ``torch.zeros`` does not break its graph here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import pinning

# the public torch.* functions whose schema has a pin_memory argument (tests/backend/test_pinned_factories.py
# recomputes this from the pinned torch's schemas), plus torch.tensor, which parses its own arguments
FACTORIES = (
    "arange", "bartlett_window", "blackman_window", "empty", "empty_like", "empty_permuted", "empty_quantized",
    "empty_strided", "eye", "from_file", "full", "full_like", "hamming_window", "hann_window", "kaiser_window",
    "linspace", "logspace", "normal", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn",
    "randn_like", "randperm", "range", "scalar_tensor", "sparse_bsc_tensor", "sparse_bsr_tensor",
    "sparse_compressed_tensor", "sparse_coo_tensor", "sparse_csc_tensor", "sparse_csr_tensor", "tril_indices",
    "triu_indices", "zeros", "zeros_like", "tensor",
)  # fmt: skip

# Tensor methods with a pin_memory argument; the new tensor is on self's device unless device= says otherwise
METHODS = ("new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full")

_WRAPPERS: dict[str, Callable[..., Any]] = {}


def _on_host(args: tuple, kwargs: dict) -> bool:
    device = kwargs.get("device")
    if device is None:
        like = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("input")
        return like is None or not isinstance(like, torch.Tensor) or like.device.type == "cpu"
    return torch.device(device).type == "cpu"


def _tpu_is_accelerator() -> bool:
    acc = torch.accelerator.current_accelerator()
    return acc is not None and acc.type == "tpu"


def _wrap(name: str, factory: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(factory)
    def pinned_factory(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pin_memory") and _on_host(args, kwargs) and _tpu_is_accelerator():
            kwargs["pin_memory"] = False
            return pinning.mark(factory(*args, **kwargs))
        return factory(*args, **kwargs)

    pinned_factory.__qualname__ = pinned_factory.__name__ = name
    pinned_factory._tpu_original = factory  # type: ignore[attr-defined]
    return pinned_factory


def install() -> None:
    """Replace each ``torch.<factory>`` and ``torch.Tensor.new_*`` by its wrapper (idempotent).

    Three identity tables know the originals: ``with torch.device(...)`` (filled before the swap, since the
    wrappers call the originals it intercepts), TorchScript's builtin table (each wrapper is registered as its
    aten op) and Dynamo's (which sees through ``functools.wraps``; ``tests/backend/test_pinned_factories.py``)."""
    private.cache_device_constructors()
    for owner, names in ((torch, FACTORIES), (torch.Tensor, METHODS)):
        for name in names:
            current = getattr(owner, name, None)
            if current is None or hasattr(current, "_tpu_original"):
                continue
            _WRAPPERS[f"{owner.__name__}.{name}"] = wrapper = _wrap(name, current)
            private.replace_attr(owner, name, wrapper)
            if owner is torch:
                private.jit_register_builtin(wrapper, f"aten::{name}")


def wrappers() -> list[Callable[..., Any]]:
    """The installed wrappers, for Dynamo to keep in its graphs."""
    return list(_WRAPPERS.values())
