"""Per-lowering ``jax.jit`` caches for eager dispatch.

A ``jit=True`` lowering runs as one compiled XLA call instead of a chain of eager JAX primitives. Arrays
are traced; every other argument is static and part of the cache key, and so is the matmul precision,
because lowerings read it while tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpu_workbench.backend import state
from tpu_workbench.backend._jax import jax_module


def freeze(v: Any) -> Any:
    """A hashable, type-exact key for a static argument (1 and 1.0 and True stay distinct; NaN == NaN)."""
    if isinstance(v, list):
        return ("l", tuple(freeze(x) for x in v))
    if isinstance(v, tuple):
        return ("t", tuple(freeze(x) for x in v))
    if isinstance(v, float) and v != v:
        return ("nan",)
    return (type(v), v)


def thaw(v: Any) -> Any:
    """The value :func:`freeze` keyed."""
    if v[0] == "l":
        return [thaw(x) for x in v[1]]
    if v[0] == "t":
        return tuple(thaw(x) for x in v[1])
    if v[0] == "nan":
        return float("nan")
    return v[1]


def jitted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run under jax.jit: arrays traced, everything else static (one executable per static key)."""
    jax = jax_module()
    array_type = jax.Array
    cache: dict = {}

    def call(*args: Any, **kwargs: Any) -> Any:
        pos, static = [], []
        for i, a in enumerate(args):
            if isinstance(a, array_type):
                pos.append(i)
            else:
                static.append((i, freeze(a)))
        key = (
            tuple(pos),
            tuple(static),
            tuple((k, freeze(v)) for k, v in kwargs.items()),
            state.current_precision(),
            len(args),
        )
        try:
            f = cache.get(key)
        except TypeError:  # unhashable static argument: run eagerly
            return fn(*args, **kwargs)
        if f is None:
            n = len(args)
            st = {i: thaw(v) for i, v in static}
            kw = {k: thaw(v) for k, v in key[2]}
            ps = key[0]

            def g(*arrays: Any) -> Any:
                full = [None] * n
                for i, v in st.items():
                    full[i] = v
                for i, arr in zip(ps, arrays, strict=True):
                    full[i] = arr
                return fn(*full, **kw)

            f = cache[key] = jax.jit(g)
        return f(*[args[i] for i in pos])

    return call
