"""Eager: an op with no lowering of its own, which PyTorch decomposes, runs as one cached executable.

A decomposition (``native_layer_norm_backward``, ``nll_loss_forward`` ...) is ten to thirty ATen ops, each a
dispatch and an executable in strict eager: a layer norm's backward measured 574 us a call. Here the
decomposition is traced once per call signature (the TPU tensors hold JAX tracers while it runs, as in a
``torch.compile`` graph) into one ``jax.jit`` program; the next calls with that signature run the program
(fused eager records it as one node of the pending graph, instead of the decomposition's ten to thirty).
As in ``backend/op_jit.py``, a signature's first sighting is traced and then runs op by op only when that gives
the program's bits (at most one floating-point computation); otherwise the program runs from the first call.
XLA fuses a decomposition's elementwise chain and XLA:CPU contracts a multiply feeding an add into one FMA, so
a layer norm's backward run op by op and run as one program differ in the last bit: a seeded run that took the
op-by-op path on its first step would not repeat in the same process (found on a host where the first seeded
training run of a process lost 1.186490774 where every later run lost 1.186490535).

The trace is refused, and the signature runs the decomposition op by op as before, when it would not compute
what the op-by-op run computes: a lowering that checks values on the host (an index bound) or draws random
numbers is reached (:class:`Untraceable`); an input is written or returned; an output is not a tensor; the
decomposition reads a value on the host (the tracer refuses); or it raises (the op-by-op run raises the same).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import lazy, state
from tpu_workbench.backend import random as _rng
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.jit import freeze
from tpu_workbench.backend.lazy import Lazy
from tpu_workbench.backend.op_jit import float_computations
from tpu_workbench.backend.tensor import TpuTensor, payload

_PLAIN = object()
_MAX_ENTRIES = 4096  # signatures remembered per decomposition


class Untraceable(Exception):
    """Raised by a plan that must not run under a decomposition's trace (it checks values, or draws keys)."""


class _Depth(threading.local):
    n = 0


_depth = _Depth()


def tracing() -> bool:
    """True while a decomposition is being traced on this thread."""
    return _depth.n > 0


class _Unkeyable(Exception):
    pass


class _Concrete:
    array: Any = None  # JAX's concrete array class, resolved on first use (importing JAX here would be early)


def _key_of(x: Any, tensors: list) -> Any:
    c = x.__class__
    if c is TpuTensor:
        e = payload(x).__class__  # (a view whose array is not computed yet gets it here)
        if e is not _Concrete.array and e is not Lazy:
            raise _Unkeyable  # a traced (compiled) value: not an eager call
        tensors.append(x)
        return ("T", tuple(x.shape), x.dtype)
    if c is list or c is tuple:
        return (c, tuple(_key_of(v, tensors) for v in x))
    if isinstance(x, torch.Tensor):
        raise _Unkeyable  # a CPU tensor (or another subclass): the op-by-op run handles it
    f = freeze(x)
    hash(f)
    return f


def _rebuild(x: Any, wrappers: Any) -> Any:
    c = x.__class__
    if c is TpuTensor:
        return next(wrappers)
    if c is list or c is tuple:
        return c(_rebuild(v, wrappers) for v in x)
    return x


def traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a torch-level function of TPU tensors) with a per-signature executable in strict eager."""
    cache: dict[Any, Any] = {}

    def call(*args: Any, **kwargs: Any) -> Any:
        if tracing():
            return fn(*args, **kwargs)
        if _Concrete.array is None:
            _Concrete.array = type(jax_module().numpy.zeros(()))
        tensors: list = []
        try:
            key = (
                _key_of(args, tensors),
                _key_of(tuple(kwargs.items()), tensors) if kwargs else (),
                state.current_precision(),
                torch.get_default_dtype(),
            )
            entry = cache.get(key)
        except (_Unkeyable, TypeError):
            return fn(*args, **kwargs)
        if entry is None:
            if len(cache) > _MAX_ENTRIES:
                cache.clear()
            entry, fusion_free = _build(fn, args, kwargs, tensors)
            cache[key] = entry
            if fusion_free:  # the op-by-op run gives the program's bits: a one-off call compiles nothing
                return fn(*args, **kwargs)
        if entry is _PLAIN:
            return fn(*args, **kwargs)
        program, spec, as_tuple = entry
        outs = lazy.call(program, tuple([payload(t) for t in tensors]))  # fused eager: recorded as one node
        res = [TpuTensor(outs[v]) if kind == "t" else v for kind, v in spec]
        return (tuple(res) if as_tuple is tuple else res) if as_tuple is not None else res[0]

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.cache = cache  # type: ignore[attr-defined]  # (tests read it)
    return call


def _abstract(p: Any) -> Any:
    """A pending fused-eager value as the shape and dtype it will have (what tracing needs)."""
    if p.__class__ is Lazy:
        return jax_module().ShapeDtypeStruct(p.shape, p.dtype, weak_type=p.weak_type)
    return p


def _build(fn: Callable[..., Any], args: tuple, kwargs: dict, tensors: list) -> tuple[Any, bool]:
    """((jitted program, output spec, output container) or ``_PLAIN``, whether the program is fusion-free)."""
    jax = jax_module()
    spec: list = []
    container: list = [None]

    def program(*arrays: Any) -> list:
        with state.jax_trace():
            return _traced_body(arrays)

    def _traced_body(arrays: tuple) -> list:
        wrappers = [TpuTensor(a) for a in arrays]
        it = iter(wrappers)
        a = _rebuild(args, it)
        k = {name: _rebuild(v, it) for name, v in kwargs.items()}
        _depth.n += 1
        try:
            out = fn(*a, **k)
        finally:
            _depth.n -= 1
        ids = {id(w) for w in wrappers}
        if any(payload(w) is not x for w, x in zip(wrappers, arrays, strict=True)):
            raise Untraceable("the decomposition writes an input")
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        container[0] = type(out) if isinstance(out, (tuple, list)) else None
        flat: list = []
        spec.clear()
        for o in outs:
            if isinstance(o, TpuTensor):
                if id(o) in ids or (o._root is not None and id(o._root) in ids):
                    raise Untraceable("the decomposition returns an input or a view of one")
                spec.append(("t", len(flat)))
                flat.append(payload(o))
            elif o is None or o.__class__ in (int, bool):
                spec.append(("c", o))
            else:
                raise Untraceable(f"the decomposition returns a {type(o).__name__}")
        return flat

    jitted = jax.jit(program)
    try:
        with _rng.probe() as probe:
            trace = jitted.trace(*[_abstract(payload(t)) for t in tensors])
            trace.lower()  # a primitive that cannot lower refuses here, not at the first call
        if probe.draws:
            return _PLAIN, True
    except Exception:  # noqa: BLE001 - untraceable (see the module docstring): the op-by-op run decides
        return _PLAIN, True
    return (jitted, tuple(spec), container[0]), float_computations(trace.jaxpr.jaxpr) < 2
