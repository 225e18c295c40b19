"""Strict eager: a lowering of the pointwise family runs as one cached XLA executable per call signature.

A pointwise lowering is a few JAX primitives (dtype promotion casts, the op, a ``where``); run eagerly, each
primitive is a dispatch of its own. Run through ``jax.jit`` it is one C++ dispatch. The executable is cached
per (lowering, static arguments, input shapes/dtypes); float arguments (a learning rate, an optimizer's bias
correction) are traced inputs — not part of the key — when the lowering gives the same output shapes and
dtypes with them traced (it neither branches on their value nor promotes differently), so a schedule does not
compile a new program per step. A signature the lowering cannot trace (it reads a value on the host, or raises)
is remembered and runs as a plain call, which raises exactly what it always raised. Random lowerings are never
jitted here (the device key must advance per call).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from backend import random as _rng
from backend._jax import jax_module
from backend.jit import freeze

_PLAIN = object()  # the signature runs as a plain call
_BY_VALUE = object()  # traceable only with its float arguments as constants
_MAX_ENTRIES = 8192


class _Unkeyable(Exception):
    pass


def reads_host_values(fn: Callable[..., Any]) -> bool:
    """Lowerings that check values only when they are concrete (``isinstance(x, jax.core.Tracer)`` guards) would
    lose the check under jit: they stay plain calls."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return True
    return "Tracer" in src or "_concrete(" in src


def op_jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a per-signature ``jax.jit`` cache (see the module docstring)."""
    jax = jax_module()
    array_type, tracer_type = jax.Array, jax.core.Tracer
    cache: dict[Any, Any] = {}

    def spec_of(x: Any, arrays: list, floats: list) -> Any:
        c = x.__class__
        if c is float:
            floats.append(x)
            return "F"
        if c is int or c is bool or x is None:
            return (c, x)
        if isinstance(x, array_type):
            if isinstance(x, tracer_type):
                raise _Unkeyable
            arrays.append(x)
            return (x.shape, x.dtype, x.weak_type)
        if c is list or c is tuple:
            return (c, tuple(spec_of(v, arrays, floats) for v in x))
        f = freeze(x)
        hash(f)
        return f

    def call(*args: Any, **kwargs: Any) -> Any:
        arrays: list = []
        floats: list = []
        try:
            key = (tuple(spec_of(a, arrays, floats) for a in args),
                   tuple((k, spec_of(v, arrays, floats)) for k, v in kwargs.items()))
        except (_Unkeyable, TypeError):
            return fn(*args, **kwargs)
        exe = cache.get(key)
        if exe is None:
            exe = _build(fn, args, kwargs, bool(floats))
            if len(cache) > _MAX_ENTRIES:
                cache.clear()
            cache[key] = exe
        if exe is _PLAIN:
            return fn(*args, **kwargs)
        if exe is _BY_VALUE:  # floats the lowering branches on: one program per value (rarely more than a few)
            vkey = (key, tuple(floats))
            exe = cache.get(vkey)
            if exe is None:
                exe = cache[vkey] = _build(fn, args, kwargs, False)
            if exe is _PLAIN:
                return fn(*args, **kwargs)
            return exe[1](*arrays)
        lifted, program = exe
        return program(*arrays, *floats) if lifted else program(*arrays)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def _template(args: tuple, kwargs: dict, lift: bool) -> tuple[Callable[[list, list], tuple], int]:
    """A function rebuilding (args, kwargs) from positional arrays (and floats, if lifted)."""
    jax = jax_module()
    array_type = jax.Array

    def rebuild(x: Any, arrays: Any, floats: Any) -> Any:
        c = x.__class__
        if c is float and lift:
            return next(floats)
        if isinstance(x, array_type):
            return next(arrays)
        if c is list or c is tuple:
            return c(rebuild(v, arrays, floats) for v in x)
        return x

    def build(arrays: list, floats: list) -> tuple:
        ia, fa = iter(arrays), iter(floats)
        return tuple(rebuild(a, ia, fa) for a in args), {k: rebuild(v, ia, fa) for k, v in kwargs.items()}

    return build, 0


def _build(fn: Callable[..., Any], args: tuple, kwargs: dict, has_floats: bool) -> Any:
    """(lifted, jitted program), or ``_PLAIN`` (not traceable), or ``_BY_VALUE`` (traceable with its floats as
    constants only: the caller keys programs by the float values)."""
    jax = jax_module()
    arrays = _arrays(args, kwargs, jax.Array)
    n_arrays = len(arrays)
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type) for x in arrays]

    def program_for(lift: bool) -> Callable[..., Any]:
        build, _ = _template(args, kwargs, lift)

        def program(*xs: Any) -> Any:
            a, k = build(list(xs[:n_arrays]), list(xs[n_arrays:]))
            return fn(*a, **k)

        return program

    def shape_of(lift: bool) -> Any:
        extra = [jax.ShapeDtypeStruct((), "float64", weak_type=True)] * (_count_floats(args, kwargs) if lift else 0)
        with _rng.probe() as probe:
            out = jax.eval_shape(program_for(lift), *structs, *extra)
        if probe.draws:
            raise _Unkeyable  # a random lowering: the device key must advance per call
        return out

    try:
        plain = shape_of(False)
    except Exception:  # noqa: BLE001 - reads a value on the host, draws random numbers, or raises
        return _PLAIN
    if has_floats:
        try:
            lifted = shape_of(True)
            same = jax.tree_util.tree_structure(plain) == jax.tree_util.tree_structure(lifted) and all(
                (p.shape, p.dtype) == (t.shape, t.dtype)
                for p, t in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(lifted), strict=True))
        except Exception:  # noqa: BLE001 - it branches on a float's value
            same = False
        if same:
            return (True, jax.jit(program_for(True)))
        return _BY_VALUE
    return (False, jax.jit(program_for(False)))


def _arrays(args: tuple, kwargs: dict, array_type: type) -> list:
    out: list = []

    def walk(x: Any) -> None:
        if isinstance(x, array_type):
            out.append(x)
        elif x.__class__ in (list, tuple):
            for v in x:
                walk(v)

    for a in (*args, *kwargs.values()):
        walk(a)
    return out


def _count_floats(args: tuple, kwargs: dict) -> int:
    n = 0

    def walk(x: Any) -> None:
        nonlocal n
        if x.__class__ is float:
            n += 1
        elif x.__class__ in (list, tuple):
            for v in x:
                walk(v)

    for a in (*args, *kwargs.values()):
        walk(a)
    return n
