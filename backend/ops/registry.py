"""The lowering registry: ATen overload (or packet) -> JAX implementation.

A lowering is a function of jax arrays and plain Python values (the ATen arguments with every TPU tensor
replaced by its ``jax.Array``) that returns jax arrays. Keeping lowerings pure lets the compile path run
them under ``jax.jit`` with tracers.

Two conventions beyond that:
- A lowering registered on an in-place overload (``add_.Tensor``) returns the *new value* of ``self``;
  the dispatcher writes it back (through views) and returns ``self``.
- ``raw=True`` lowerings receive the torch-level arguments (wrappers, CPU tensors) and return
  torch-level results; used for device transfers and data-dependent ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

aten = torch.ops.aten


@dataclass(frozen=True)
class Lowering:
    """One registered implementation, and where it was defined (for the one-owner check)."""

    fn: Callable[..., Any]
    raw: bool = False
    jit: bool = False
    check: Callable[..., None] | None = None
    owner: str = ""


class DuplicateLoweringError(RuntimeError):
    """A second lowering for an overload that already has one, without ``override=``."""


REGISTRY: dict[Any, Lowering] = {}
OVERRIDES: dict[Any, str] = {}  # overload -> why its first lowering was replaced
_listeners: list[Callable[[], None]] = []
_NAMED: set[str] = set()  # overloads registered by name (see lookup)


def _owner(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def lower(
    *ops: Any,
    raw: bool = False,
    jit: bool = False,
    check: Callable[..., None] | None = None,
    override: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``fn`` as the JAX lowering of each given ATen overload or packet (or overload
    name, ``"prims.fma.default"``, for an op defined only when another torch module is imported).

    ``jit=True`` (for pure multi-primitive lowerings such as layer_norm): the dispatcher runs ``fn`` through
    ``jax.jit``, with every non-array argument static, cached per op and static arguments; one compiled
    XLA call replaces a chain of eager JAX primitives.

    ``check``: called with the torch-level arguments (wrappers, not arrays) before the lowering runs, for
    refusals that need what only the wrapper knows (e.g. whether it is a view).

    One owner per overload: registering a second lowering for the same overload raises
    :class:`DuplicateLoweringError` unless ``override="why"`` says why the new one replaces the old.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            prev = REGISTRY.get(op)
            if prev is not None and prev.fn is not fn and override is None:
                raise DuplicateLoweringError(
                    f"{op} already has a lowering ({prev.owner}); {_owner(fn)} would silently replace it. "
                    "Delete one, or pass override='why' to lower()."
                )
            if prev is not None and override is not None:
                OVERRIDES[op] = override
            REGISTRY[op] = Lowering(fn, raw, jit, check, _owner(fn))
            if isinstance(op, str):
                _NAMED.add(op)
        for cb in _listeners:
            cb()
        return fn

    return deco


def lookup(func: Any) -> Lowering | None:
    """Exact overload first, then its packet, then its name (``"prims.fma.default"``: overloads that exist
    only once another part of torch defines them, such as inductor's prims, are registered by name)."""
    hit = REGISTRY.get(func)
    if hit is None:
        hit = REGISTRY.get(getattr(func, "overloadpacket", None))
    if hit is None and _NAMED:
        hit = REGISTRY.get(str(func))
    return hit


def on_change(cb: Callable[[], None]) -> None:
    """Call ``cb`` whenever a lowering is (re)registered (the dispatcher drops its plan cache)."""
    _listeners.append(cb)
