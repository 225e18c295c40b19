"""Strict eager: a lowering runs as one cached XLA executable per call signature.

A lowering is a few JAX primitives (dtype promotion casts, the op, a ``where``); run eagerly, each primitive is
a dispatch of its own (about 50 us each on XLA:CPU). Run through ``jax.jit`` it is one C++ dispatch. The
executable is cached per (lowering, static arguments, input shapes/dtypes, matmul precision, default dtype), and
built the *second* time a signature is seen: a one-off call (a test, a shape seen once) runs plainly and pays
no compile — unless the plain run could give other bits than the program. XLA fuses a lowering's elementwise
chain, and XLA:CPU always lets LLVM contract a multiply feeding an add into one FMA (one rounding instead of
two: ``add(x, y, alpha=-0.1)``, SGD's step); so a lowering whose traced program has two or more floating-point
computations is built at its first sighting and every call, the first included, runs the same program (a seeded
run repeats from the first run of a process, as on CUDA). The check is one trace of the lowering per new
signature; a single-primitive lowering (most calls) still runs plainly the first time. Float arguments (a learning rate, an optimizer's bias correction) are traced inputs, not part of
the key, when the lowering gives the same output shapes and dtypes with them traced (it neither branches on
their value nor promotes differently), so a schedule does not compile a new program per step.

A signature the lowering cannot trace (it reads a value on the host, raises, or returns something that is not
an array) is remembered and runs as a plain call, which raises exactly what it always raised. Random lowerings
are never jitted here (the device key must advance per call).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import random as _rng
from tpu_workbench.backend import state
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.jit import freeze

_PLAIN = object()  # the signature runs as a plain call
_BY_VALUE = object()  # traceable only with its float arguments as constants
_SEEN_ONCE = object()  # seen once: the next sighting builds the executable
_MAX_ENTRIES = 8192  # signatures remembered per lowering
_MAX_EXECUTABLES = 2048  # compiled programs kept across all lowerings (each holds XLA code and buffers)
_CACHES: list[dict] = []
_compiled = 0


class _Unkeyable(Exception):
    pass


class PendingView:
    """A view whose array was never computed (backend/views.py), passed to an executable as its root's array and
    the chain of view steps: the program replays the chain itself, so XLA fuses the transpose or reshape into
    the op that reads it instead of running a program per view."""

    __slots__ = ("base", "chain", "key")

    def __init__(self, base: Any, chain: tuple, key: tuple) -> None:
        self.base, self.chain, self.key = base, chain, key

    def apply(self, base: Any) -> Any:
        """The view inside a program, as an array of its own (the barrier keeps XLA from folding the view into
        the op that reads it: a dot reading a transposed operand sums in another order, and the op must give
        the bits it gives on the computed view when it runs plainly)."""
        for step in self.chain:
            base = step(base)
        return jax_module().lax.optimization_barrier(base)

    def value(self) -> Any:
        """The view's array, computed now (one cached executable per root signature and chain)."""
        return _REPLAY_CHAIN(self.base, self.chain)


def _replay_chain(base: Any, chain: tuple) -> Any:
    for step in chain:
        base = step(base)
    return base


def _concrete(x: Any) -> Any:
    c = x.__class__
    if c is PendingView:
        return x.value()
    if c is list or c is tuple:
        return c([_concrete(v) for v in x])
    return x


def _concrete_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn`` run plainly, on the views' arrays."""
    return fn(*[_concrete(a) for a in args], **{k: _concrete(v) for k, v in kwargs.items()})


def reads_host_values(fn: Callable[..., Any]) -> bool:
    """Lowerings that check values only when they are concrete (``isinstance(x, jax.core.Tracer)`` guards) would
    lose the check under jit: they stay plain calls. A lowering whose check sits in a helper it calls says so
    with a ``reads_host_values = True`` attribute."""
    if getattr(fn, "reads_host_values", False):
        return True
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return True
    return "Tracer" in src or "_concrete(" in src


class _Types:
    """JAX's array classes, resolved on first use (importing this module must not import JAX)."""

    array: Any = None
    tracer: Any = None
    impl: Any = None

    @classmethod
    def load(cls) -> None:
        jax = jax_module()
        cls.array, cls.tracer = jax.Array, jax.core.Tracer
        cls.impl = type(jax.numpy.zeros(()))


def _spec(x: Any, arrays: list, floats: list) -> Any:
    """The cache-key part of one argument; arrays and floats are collected in call order."""
    c = x.__class__
    if c is _Types.impl:
        arrays.append(x)
        return (x.shape, x.dtype, x.weak_type)
    if c is float:
        floats.append(x)
        return "F"
    if c is PendingView:
        b = x.base
        arrays.append(b)
        return ("V", b.shape, b.dtype, b.weak_type, x.key)
    if c is int or c is bool or x is None:
        return (c, x)
    if c is list or c is tuple:
        return (c, tuple([_spec(v, arrays, floats) for v in x]))
    if isinstance(x, _Types.array):
        if isinstance(x, _Types.tracer):
            raise _Unkeyable
        arrays.append(x)
        return (x.shape, x.dtype, x.weak_type)
    if getattr(x, "key", False) is None:  # a view step that could not be keyed (backend.tensor.ViewStep)
        raise _Unkeyable
    f = freeze(x)
    hash(f)
    return f


def op_jit(fn: Callable[..., Any], *, build_at_first_sight: bool = False) -> Callable[..., Any]:
    """``fn`` with a per-signature ``jax.jit`` cache (see the module docstring). ``build_at_first_sight``: for a
    lowering of several primitives that must give the same bits on every call (XLA fuses its elementwise chain,
    which may round differently from the primitives run one by one), the program is built on the first call."""
    cache: dict[Any, Any] = {}
    _CACHES.append(cache)

    def call(*args: Any, **kwargs: Any) -> Any:
        if _Types.impl is None:
            _Types.load()
        if state._trace.depth:  # inside a traced program: part of it (caching here would keep its tracers)
            return _concrete_call(fn, args, kwargs)
        arrays: list = []
        floats: list = []
        try:
            key = (
                tuple([_spec(a, arrays, floats) for a in args]),
                tuple([(k, _spec(v, arrays, floats)) for k, v in kwargs.items()]) if kwargs else (),
                state.current_precision(),
                torch.get_default_dtype(),
            )
            exe = cache.get(key)
        except (_Unkeyable, TypeError):
            return _concrete_call(fn, args, kwargs)
        if exe is None or exe is _SEEN_ONCE:
            if exe is None and not build_at_first_sight and _fusion_free(fn, args, kwargs):
                if len(cache) > _MAX_ENTRIES:
                    cache.clear()
                cache[key] = _SEEN_ONCE
                return _concrete_call(fn, args, kwargs)
            exe = cache[key] = _build(fn, args, kwargs, bool(floats))
            _count_compiled(exe)
        if exe is _PLAIN:
            return _concrete_call(fn, args, kwargs)
        if (
            exe is _BY_VALUE
        ):  # floats the lowering branches on: one program per value (rarely more than a few)
            vkey = (key, tuple(floats))
            exe = cache.get(vkey)
            if exe is None:
                exe = cache[vkey] = _build(fn, args, kwargs, False)
                _count_compiled(exe)
            if exe is _PLAIN:
                return _concrete_call(fn, args, kwargs)
            return exe[1](*arrays)
        lifted, program = exe
        return program(*arrays, *[_scalar(f) for f in floats]) if lifted else program(*arrays)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.cache = cache  # type: ignore[attr-defined]  # (tests read it)
    return call


_MOVES = frozenset(
    ("broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice", "dynamic_slice",
     "concatenate", "pad", "copy", "copy_p", "rev", "gather", "select_n", "iota", "dynamic_update_slice",
     "optimization_barrier", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "is_finite", "stop_gradient")
)  # fmt: skip


_CASTS = frozenset(("convert_element_type", "broadcast_in_dim", "reshape", "squeeze", "expand_dims"))


def _computations(jaxpr: Any) -> list[str]:
    """The primitives of a jaxpr in order (nested ones included), casts and broadcasts left out (a traced float
    arrives as a float64 scalar that the program converts: the same computation)."""
    out: list[str] = []
    for eqn in jaxpr.eqns:
        subs = [
            v for v in eqn.params.values() if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns")
        ]
        if subs:
            for v in subs:
                out += _computations(getattr(v, "jaxpr", v))
        elif eqn.primitive.name not in _CASTS:
            out.append(eqn.primitive.name)
    return out


def float_computations(jaxpr: Any) -> int:
    """The equations of a jaxpr (nested ones included) that compute a floating-point value: each rounds, and
    two of them fused may round differently from the two run apart."""
    n = 0
    for eqn in jaxpr.eqns:
        subs = [
            v for v in eqn.params.values() if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns")
        ]
        if subs:
            n += sum(float_computations(getattr(v, "jaxpr", v)) for v in subs)
            continue
        if eqn.primitive.name in _MOVES:
            continue
        if any(getattr(getattr(v, "aval", None), "dtype", None) is not None and v.aval.dtype.kind in "fc"
               for v in eqn.outvars):  # fmt: skip
            n += 1
    return n


def _fusion_free(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """Whether the lowering, run plainly, surely gives the bits its program gives: at most one floating-point
    computation once traced (floats as constants). Not traceable: True (the call runs plainly anyway)."""
    jax = jax_module()
    arrays = _arrays(args, kwargs, jax.Array)
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type) for x in arrays]
    build = _template(args, kwargs, False)

    def program(*xs: Any) -> Any:
        a, k = build(list(xs), [])
        with state.jax_trace():
            return fn(*a, **k)

    try:
        with _rng.probe() as probe:
            closed = jax.make_jaxpr(program)(*structs)
    except Exception:  # noqa: BLE001 - reads a value on the host, raises ...: it runs plainly
        return True
    if probe.draws:
        return True
    return float_computations(closed.jaxpr) < 2


def _count_compiled(exe: Any) -> None:
    """A process that sees many shapes (a test suite, a model sweep) must not keep every program it ever built:
    past the bound, every cache starts over (programs still in use are rebuilt on their next two sightings)."""
    global _compiled
    if isinstance(exe, tuple):
        _compiled += 1
        if _compiled > _MAX_EXECUTABLES:
            for c in _CACHES:
                c.clear()
            _compiled = 0


_SCALARS: dict[Any, Any] = {}


def _scalar(f: float) -> Any:
    """A Python float as the weakly typed 0-dim array jit would make of it, cached: a jitted call converting a
    float argument itself costs as much as the op (a learning rate, eps and betas recur every step)."""
    k = f if f != 0.0 else (f, math.copysign(1.0, f))  # 0.0 and -0.0 are equal keys but different values
    a = _SCALARS.get(k)
    if a is None:
        if len(_SCALARS) > 4096:
            _SCALARS.clear()
        a = _SCALARS[k] = jax_module().numpy.asarray(f)
    return a


class _ViewSlot:
    """A :class:`PendingView`'s place in a program's template: its chain of view steps without its root array."""

    __slots__ = ("chain",)

    def __init__(self, chain: tuple) -> None:
        self.chain = chain

    def apply(self, base: Any) -> Any:
        for step in self.chain:
            base = step(base)
        return jax_module().lax.optimization_barrier(base)


_ARRAY_SLOT = object()  # an array argument's place in a program's template


def _template(args: tuple, kwargs: dict, lift: bool) -> Callable[[list, list], tuple]:
    """A function rebuilding (args, kwargs) from positional arrays (and floats, if lifted). It keeps the arguments'
    structure, never their arrays: a cached program must not hold the buffers of the call that built it (a
    replay buffer written row by row kept every 16 MB version alive: DRL-Pytorch's DQN ran out of memory)."""
    array_type = _Types.array

    def skeleton(x: Any) -> Any:
        c = x.__class__
        if c is PendingView:
            return _ViewSlot(x.chain)
        if isinstance(x, array_type):
            return _ARRAY_SLOT
        if c is list or c is tuple:
            return c(skeleton(v) for v in x)
        return x

    shape_args = tuple(skeleton(a) for a in args)
    shape_kwargs = {k: skeleton(v) for k, v in kwargs.items()}

    def rebuild(x: Any, arrays: Any, floats: Any) -> Any:
        c = x.__class__
        if c is float and lift:
            return next(floats)
        if c is _ViewSlot:
            return x.apply(next(arrays))
        if x is _ARRAY_SLOT:
            return next(arrays)
        if c is list or c is tuple:
            return c(rebuild(v, arrays, floats) for v in x)
        return x

    def build(arrays: list, floats: list) -> tuple:
        ia, fa = iter(arrays), iter(floats)
        return tuple(rebuild(a, ia, fa) for a in shape_args), {
            k: rebuild(v, ia, fa) for k, v in shape_kwargs.items()
        }

    return build


class _NotArrays(Exception):
    """The lowering returned something other than arrays (a Python number, a shape): jit would turn it into one."""


def _build(fn: Callable[..., Any], args: tuple, kwargs: dict, has_floats: bool) -> Any:
    """(lifted, jitted program), or ``_PLAIN`` (not traceable), or ``_BY_VALUE`` (traceable with its floats as
    constants only: the caller keys programs by the float values)."""
    jax = jax_module()
    arrays = _arrays(args, kwargs, jax.Array)
    n_arrays = len(arrays)
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type) for x in arrays]
    tracer = jax.core.Tracer

    def program_for(lift: bool, checked: bool = False) -> Callable[..., Any]:
        build = _template(args, kwargs, lift)

        def program(*xs: Any) -> Any:
            a, k = build(list(xs[:n_arrays]), list(xs[n_arrays:]))
            with state.jax_trace():
                out = fn(*a, **k)
            if checked and not all(isinstance(leaf, tracer) for leaf in jax.tree_util.tree_leaves(out)):
                raise _NotArrays
            return out

        return program

    def shape_of(lift: bool) -> tuple[Any, list]:
        extra = [jax.ShapeDtypeStruct((), "float64", weak_type=True)] * (
            _count_floats(args, kwargs) if lift else 0
        )
        with _rng.probe() as probe:
            closed, out = jax.make_jaxpr(program_for(lift, checked=True), return_shape=True)(*structs, *extra)
        if probe.draws:
            raise _Unkeyable  # a random lowering: the device key must advance per call
        return out, _computations(closed.jaxpr)

    try:
        plain, plain_ops = shape_of(False)
    except Exception:  # noqa: BLE001 - reads a value on the host, draws random numbers, raises, or returns non-arrays
        return _PLAIN
    if has_floats:
        try:
            lifted, lifted_ops = shape_of(True)
            # the same computation with the floats traced: same outputs, and the same primitives (a lowering
            # that picks its formula by a float's type or value — pow's x * x for 2, sqrt for 0.5 — takes
            # another path when the float is a tracer, without an error)
            same = (
                jax.tree_util.tree_structure(plain) == jax.tree_util.tree_structure(lifted)
                and all(
                    (p.shape, p.dtype) == (t.shape, t.dtype)
                    for p, t in zip(
                        jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(lifted), strict=True
                    )
                )
                and plain_ops == lifted_ops
            )
        except Exception:  # noqa: BLE001 - it branches on a float's value
            same = False
        if same:
            return (True, jax.jit(program_for(True)))
        return _BY_VALUE
    return (False, jax.jit(program_for(False)))


def _arrays(args: tuple, kwargs: dict, array_type: type) -> list:
    out: list = []

    def walk(x: Any) -> None:
        if x.__class__ is PendingView:
            out.append(x.base)
        elif isinstance(x, array_type):
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


_REPLAY_CHAIN = op_jit(_replay_chain)
