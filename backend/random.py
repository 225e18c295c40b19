"""The device's random state: one global JAX PRNG key, split once per random op.

``torch.manual_seed(s)`` reseeds it (through the device module's ``manual_seed_all``). Under jit the
compile path reads the key with ``get_key()``, passes it in as an input and ``set_key()``s the one it
returns, so random lowerings must call ``next_key()`` at call time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend._jax import jax_module

_key: Any = None
_seed: int | None = None
draws = 0  # keys handed out so far (the conformance harness uses it to spot random ops)
_probing: list[Probe] = []
before_state_change: list[Callable[[], None]] = []  # fused eager flushes here: recorded draws come first


class Probe:
    """While active (shape inference of a recorded op), ``next_key`` hands out a dummy key and counts here
    instead of advancing the device key."""

    def __init__(self) -> None:
        self.draws = 0

    def __enter__(self) -> Probe:
        _probing.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _probing.pop()


def probe() -> Probe:
    return Probe()


def _state_changing() -> None:
    for cb in before_state_change:
        cb()


def _ensure() -> None:
    global _key, _seed
    if _key is None:
        _seed = torch.initial_seed() if _seed is None else _seed
        _key = jax_module().random.key(_seed % (2**63))


def seed(s: int) -> None:
    """Reseed the device PRNG (lazily: JAX is not imported until a key is needed)."""
    global _key, _seed
    _state_changing()
    _seed = int(s)
    _key = None


def initial_seed() -> int:
    return torch.initial_seed() if _seed is None else _seed


def get_key() -> Any:
    """The current key (not advanced)."""
    _ensure()
    return _key


def set_key(key: Any) -> None:
    """Replace the current key (the compile path hands back the advanced key from a jitted step)."""
    global _key
    _key = key


def next_key() -> Any:
    """Split the global key: advance it and return a fresh subkey for one random op."""
    global _key, draws
    if _probing:
        _probing[-1].draws += 1
        return jax_module().random.key(0)
    _ensure()
    _key, sub = jax_module().random.split(_key)
    draws += 1
    return sub


def get_state() -> torch.Tensor:
    """The key's raw data as a CPU uint8 tensor (for ``get_rng_state``)."""
    import numpy as np  # lazy: startup (this module is imported by import torch)

    _state_changing()
    data = np.asarray(jax_module().random.key_data(get_key())).astype(np.uint32)
    return torch.from_numpy(data.view(np.uint8).copy())


def set_state(state: torch.Tensor) -> None:
    import numpy as np  # lazy: startup

    _state_changing()
    data = state.cpu().numpy().astype(np.uint8).view(np.uint32)
    jax = jax_module()
    set_key(jax.random.wrap_key_data(jax.numpy.asarray(data)))
