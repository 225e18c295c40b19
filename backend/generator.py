"""``torch.Generator("tpu")``: a seeded generator for random ops on the device.

A generator for a device is created by the device's C++ hooks, which a Python backend cannot provide. The
device's random lowerings draw their JAX keys from an explicit ``torch.Generator`` (advancing it), so a "tpu"
generator is a CPU generator whose ``device`` says "tpu:0": ``manual_seed``/``seed``/``get_state``/``set_state``
work, and seeded draws repeat. ``torch.Generator`` is replaced by a subclass that builds one for device
"tpu" and leaves every other device to PyTorch; ``isinstance(g, torch.Generator)`` still holds for every
generator PyTorch creates.
"""

from __future__ import annotations

from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import device as device_module

_CGenerator = private.CGenerator


class TpuGenerator(_CGenerator):
    """A generator bound to the "tpu" device (its state is a CPU Mersenne Twister)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("tpu", 0)

    def __reduce__(self) -> Any:
        return (torch.Generator, ("tpu",), self.get_state())

    def __setstate__(self, state: torch.Tensor) -> None:
        self.set_state(state)

    def __repr__(self) -> str:
        return f"<torch.Generator object on device tpu:0 (seed {self.initial_seed()})>"


class _GeneratorType(type(_CGenerator)):  # torch's metaclass for opaque types
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _CGenerator)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _CGenerator)


def _make_generator_class() -> type:
    class Generator(_CGenerator, metaclass=_GeneratorType):
        __doc__ = _CGenerator.__doc__

        def __new__(cls, device: Any = None) -> Any:
            if device is not None:
                dev = torch.device(device) if not isinstance(device, int) else None
                if dev is not None and dev.type == "tpu":
                    device_module.check_index(dev.index)
                    return _CGenerator.__new__(TpuGenerator, "cpu")
                return _CGenerator(device)
            return _CGenerator()

    Generator.__module__ = "torch"
    Generator.__qualname__ = "Generator"
    return Generator


def install() -> None:
    @private.patch(
        "generator-tpu",
        "torch.Generator",
        "torch.Generator('tpu') needs a C++ generator hook a Python backend cannot register; the patched "
        "class builds a seeded generator for 'tpu' and passes every other device to PyTorch",
        required=False,
    )
    def _generator() -> None:
        if torch.Generator is _CGenerator:
            private.replace_attr(torch, "Generator", _make_generator_class())
