"""Fused eager (``EagerMode.DEFER_AND_FUSE``): ops are recorded into a pending graph and run as one XLA program
when a value is needed.

Recording. While the mode is on, a lowering call ``fn(*args)`` is not run: its output shapes come from
``jax.eval_shape`` (cached per function, static arguments and input shapes), the outputs become ``Lazy``
placeholders, and the call is appended to the pending graph. Inputs are either concrete ``jax.Array``s (graph
inputs) or outputs of earlier nodes.

Materialisation. ``materialize`` (reached through ``tpu_workbench.backend.tensor.value``: ``.item()``, ``.cpu()``, ``print``,
raw lowerings, data-dependent control flow) flushes the graph: the outputs still referenced by live tensors are
computed by one ``jax.jit`` executable, cached by the graph's signature (the op sequence with its static
arguments, the wiring, input shapes/dtypes and which outputs are live). A signature seen for the first time
runs node by node (as strict eager would), so a graph that changes every step costs no compile; from its
second sighting it is compiled and then served from the bounded cache. When most recent flushes are new
signatures (data-dependent shapes), recording pauses for a while and ops run strictly.

Random ops draw keys in op order from the device key, threaded through the executable, so the same seed gives
the same values as strict eager. An op the recorder cannot defer (``eval_shape`` fails: data-dependent shapes,
or a real error) flushes first and runs strictly, raising what strict eager raises.
"""

from __future__ import annotations

import collections
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tpu_workbench.backend import random as _rng
from tpu_workbench.backend import state
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.jit import freeze
from tpu_workbench.backend.op_jit import PendingView

MAX_NODES = 4096  # a graph this long is flushed even if nothing asked for a value
CACHE_SIZE = 128  # compiled graphs kept (least recently used evicted)
_WINDOW = 16  # recent flushes looked at by the adaptive fallback (a warm-up of a few steps with three graphs
# each, the optimizer's first step differing from the rest, must not look like shapes that never repeat)
_NEW_IN_WINDOW = 15  # flushes of the window that were new signatures before recording pauses
_PAUSE_OPS = 4096  # ops run strictly after the fallback triggers


class Lazy:
    """A value an op will produce when the pending graph runs: shape, dtype and where it comes from."""

    __slots__ = ("shape", "dtype", "weak_type", "node", "out", "value", "__weakref__")

    def __init__(self, shape: tuple, dtype: Any, weak_type: bool, node: int, out: int) -> None:
        self.shape, self.dtype, self.weak_type = shape, dtype, weak_type
        self.node, self.out = node, out
        self.value: Any = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"Lazy({self.shape}, {self.dtype}, node {self.node})"


@dataclass
class FusedStats:
    """Counters since process start (``torch.tpu._get_cache_stats()["fused_eager"]``)."""

    ops_recorded: int = 0
    ops_strict: int = 0  # ops run strictly while the mode was on (data-dependent, unkeyable, paused)
    flushes: int = 0
    cache_hits: int = 0
    first_sightings: int = 0  # graphs run node by node the first time their signature appeared
    compiles: int = 0
    evictions: int = 0
    fallback_pauses: int = 0
    graph_nodes_max: int = 0


_STATS = FusedStats()


class _Node:
    __slots__ = ("fn", "args", "kwargs", "key", "outs", "treedef", "rng")

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, key: Any, treedef: Any, rng: bool) -> None:
        self.fn, self.args, self.kwargs, self.key = fn, args, kwargs, key
        self.treedef = treedef
        self.outs: list[weakref.ref] = []
        self.rng = rng


class _Ref:
    """A placeholder inside a node's arguments: graph input ``k`` or output ``o`` of node ``j``."""

    __slots__ = ("kind", "a", "b")

    def __init__(self, kind: str, a: int, b: int = 0) -> None:
        self.kind, self.a, self.b = kind, a, b


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.inputs: list[Any] = []
        self.input_index: dict[int, int] = {}
        self.scalars: list[float] = []  # lifted float arguments (learning rates, bias corrections …)
        self.rng = False


_LOCK = threading.RLock()
_graph = _Graph()
_shape_cache: dict[Any, Any] = {}
_liftable: dict[Any, bool] = {}  # (fn, spec with floats erased, avals) -> may its floats be graph inputs?
_compiled: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_sightings: collections.OrderedDict[Any, int] = collections.OrderedDict()
_recent: collections.deque[bool] = collections.deque(maxlen=_WINDOW)  # True = the flush was a new signature
_paused_ops = 0


_rng.before_state_change.append(lambda: flush())


def active() -> bool:
    """Recording is on: fused mode, not paused by the fallback."""
    return (
        _paused_ops == 0 and state.eager_mode() is state.EagerMode.DEFER_AND_FUSE and not state._trace.depth
    )


def note_strict_op() -> None:
    _STATS.ops_strict += 1


def stats() -> dict[str, int]:
    out = asdict(_STATS)
    out.update(pending_nodes=len(_graph.nodes), cached_graphs=len(_compiled), cache_size=CACHE_SIZE)
    return out


def reset_stats() -> None:
    """Zero the counters and forget the adaptive fallback's recent history (compiled graphs stay cached)."""
    global _STATS, _paused_ops
    _STATS = FusedStats()
    _paused_ops = 0
    _recent.clear()


# ----------------------------------------------------------------------------- recording
class _Unkeyable(Exception):
    pass


class _Traced(_Unkeyable):
    """An argument is a JAX tracer: the call is part of a program being traced (a decomposition traced into
    one node, backend/traced.py), which runs it there and then; not an op that eager mode ran strictly."""


_ARRAY: Any = None
_TRACER: Any = None


_A = "A"  # an array argument in an erased spec (shape cache key: statics and avals only)


def _leaf(x: Any, g: _Graph, avals: list) -> tuple[Any, Any, Any]:
    """(hashable spec, the same with graph positions erased, replay template) of one argument."""
    c = x.__class__
    if c is PendingView:  # a view read by this op: its chain is replayed inside the node
        spec, erased, template = _leaf(x.base, g, avals)
        return ("v", spec, x.key), ("v", erased, x.key), PendingView(template, x.chain, x.key)
    if c is Lazy:
        if x.value is None:
            avals.append((x.shape, x.dtype, x.weak_type))
            return ("n", x.node, x.out), _A, _Ref("n", x.node, x.out)
        x = x.value
        c = x.__class__
    if c is int or c is bool or x is None or c is str:
        f = (c, x)
        return f, f, x
    if isinstance(x, _ARRAY):
        if isinstance(x, _TRACER):
            raise _Traced
        k = g.input_index.get(id(x))
        if k is None:
            k = g.input_index[id(x)] = len(g.inputs)
            g.inputs.append(x)
        avals.append((x.shape, x.dtype, x.weak_type))
        return ("i", k), _A, _Ref("i", k)
    if c is list or c is tuple:
        parts = [_leaf(v, g, avals) for v in x]
        name = "l" if c is list else "t"
        return (
            (name, tuple(p[0] for p in parts)),
            (name, tuple(p[1] for p in parts)),
            c(p[2] for p in parts),
        )
    try:
        f = freeze(x)
        hash(f)
    except TypeError:
        raise _Unkeyable from None
    return f, f, x


def call(
    fn: Callable[..., Any], args: tuple, kwargs: dict | None = None, eager: Callable[..., Any] | None = None
) -> Any:
    """``fn(*args, **kwargs)`` now (through ``eager`` if given: the same function, faster), or recorded for later
    when fused eager is recording."""
    global _paused_ops
    kwargs = kwargs or {}
    if state.eager_mode() is not state.EagerMode.DEFER_AND_FUSE or state._trace.depth:
        return (eager or fn)(*args, **kwargs)  # (under a JAX trace: nothing recorded, nothing flushed)
    if _paused_ops:  # the adaptive fallback: graphs kept changing, so ops run strictly for a while
        _paused_ops -= 1
        return _strict(fn, args, kwargs)
    with _LOCK:
        return _record(fn, args, kwargs)


# ----------------------------------------------------------------------------- the recording fast path
# A training loop records the same op, with the same wiring, at the same graph position every step. The slow
# path (_record_slow) works out an op's spec, shape, float lifting and replay template; the fast path keys all
# of that by what determines it (lowering, argument wiring by graph position, avals, statics, scalar slot) and
# reuses it, so a repeated op costs one key build and one dict look-up.
_recipes: dict[Any, tuple] = {}
_MAX_RECIPES = 65536


class _NoFastKey(Exception):
    pass


def _fast_leaf(x: Any, g: _Graph, new_inputs: list) -> Any:
    c = x.__class__
    if c is PendingView:
        return ("v", _fast_leaf(x.base, g, new_inputs), x.key)
    if c is Lazy:
        if x.value is None:
            return ("n", x.node, x.out, x.shape, x.dtype, x.weak_type)
        x = x.value
        c = x.__class__
    if c is _IMPL:
        k = g.input_index.get(id(x))
        if k is None:
            k = len(g.inputs) + len(new_inputs)
            for j, y in enumerate(new_inputs):  # the same array twice in one call
                if y is x:
                    k = len(g.inputs) + j
                    break
            else:
                new_inputs.append(x)
        return ("i", k, x.shape, x.dtype, x.weak_type)
    if c is int or c is bool or x is None or c is str:
        return (c, x)
    if c is list or c is tuple:  # (a float inside a list is static, as on the slow path)
        return (c, tuple([_fast_leaf(v, g, new_inputs) for v in x]))
    if isinstance(x, _ARRAY):
        raise _NoFastKey  # a tracer, or an array class the fast path does not know
    try:
        f = freeze(x)
        hash(f)
    except TypeError:
        raise _NoFastKey from None
    return f


def _record(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    if _IMPL is None:
        _load_types()
    g = _graph
    new_inputs: list = []
    floats: list = []  # top-level float arguments, which the slow path lifts to graph scalars when it can
    try:
        pa = []
        for a in args:
            if a.__class__ is float:
                floats.append(a)
                pa.append("F")
            else:
                pa.append(_fast_leaf(a, g, new_inputs))
        pk = []
        for k, v in kwargs.items():
            if v.__class__ is float:
                floats.append(v)
                pk.append((k, "F"))
            else:
                pk.append((k, _fast_leaf(v, g, new_inputs)))
        key = (fn, tuple(pa), tuple(pk), len(g.scalars) if floats else 0)
        recipe = _recipes.get(key)
        lifted = True
        if recipe is _STATIC_FLOATS:  # this op keeps its floats static: their values are part of the recipe
            key = (key, tuple([_float_key(f) for f in floats]))
            recipe = _recipes.get(key)
            lifted = False
    except (_NoFastKey, TypeError):
        return _record_slow(fn, args, kwargs)
    if recipe is None:
        n_in, n_sc, n_nodes = len(g.inputs), len(g.scalars), len(g.nodes)
        result = _record_slow(fn, args, kwargs)
        if _graph is g and len(g.nodes) == n_nodes + 1 and _inputs_as_expected(g, n_in, new_inputs):
            node = g.nodes[-1]
            if lifted and floats and len(g.scalars) == n_sc:  # the slow path kept them static
                _recipes[key] = _STATIC_FLOATS
                key = (key, tuple([_float_key(f) for f in floats]))
                lifted = False
            if g.scalars[n_sc:] == (floats if lifted else []):
                if len(_recipes) > _MAX_RECIPES:
                    _recipes.clear()
                _recipes[key] = (
                    node.args,
                    node.kwargs,
                    node.key,
                    node.treedef,
                    node.rng,
                    node.fn,
                    [(lz.shape, lz.dtype, lz.weak_type) for lz in _outs_of(node)],
                )
        return result
    targs, tkwargs, node_key, treedef, rng, node_fn, outs = recipe
    for x in new_inputs:
        g.input_index[id(x)] = len(g.inputs)
        g.inputs.append(x)
    if lifted and floats:
        g.scalars.extend(floats)
    return _append(g, _Node(node_fn, targs, tkwargs, node_key, treedef, rng), outs)


def _append(g: _Graph, node: _Node, avals: list) -> Any:
    """Add ``node`` to the pending graph; its outputs as Lazy placeholders (one, or its treedef's leaves)."""
    j = len(g.nodes)
    g.nodes.append(node)
    if node.rng:
        g.rng = True
    _STATS.ops_recorded += 1
    outs = []
    for o, (shape, dtype, weak) in enumerate(avals):
        lz = Lazy(shape, dtype, weak, j, o)
        node.outs.append(weakref.ref(lz))
        outs.append(lz)
    result = outs[0] if node.treedef is None else jax_module().tree_util.tree_unflatten(node.treedef, outs)
    if len(g.nodes) >= MAX_NODES:
        flush()
    return result


def _outs_of(node: _Node) -> list:
    return [ref() for ref in node.outs]


_STATIC_FLOATS = object()  # a recipe-table entry: look again with the float values in the key


def _float_key(f: float) -> tuple:
    """A float as a key part that tells 0.0 from -0.0 (equal, and equal hashes, as floats)."""
    return (f, math.copysign(1.0, f))


def _inputs_as_expected(g: _Graph, n_in: int, new_inputs: list) -> bool:
    """The slow path recorded one node whose new graph inputs are exactly what the fast key predicted (the new
    arrays appended in order), with all its outputs still alive to read their avals."""
    added = g.inputs[n_in:]
    if len(added) != len(new_inputs) or any(a is not b for a, b in zip(added, new_inputs, strict=True)):
        return False
    return all(ref() is not None for ref in g.nodes[-1].outs)


_IMPL: Any = None


def _load_types() -> None:
    global _ARRAY, _TRACER, _IMPL
    jax = jax_module()
    _ARRAY, _TRACER = jax.Array, jax.core.Tracer
    _IMPL = type(jax.numpy.zeros(()))


def _record_slow(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    global _ARRAY, _TRACER
    jax = jax_module()
    if _ARRAY is None:
        _ARRAY, _TRACER = jax.Array, jax.core.Tracer
    g = _graph
    avals: list[tuple] = []
    n_inputs = len(g.inputs)
    n_floats = 0
    try:
        pa = []
        for a in args:
            if a.__class__ is float:
                pa.append(_FLOAT)
                n_floats += 1
            else:
                pa.append(_leaf(a, g, avals))
        pk = []
        for k, v in kwargs.items():
            if v.__class__ is float:
                pk.append((k, _FLOAT))
                n_floats += 1
            else:
                pk.append((k, _leaf(v, g, avals)))
    except _Unkeyable as exc:
        _drop_inputs(g, n_inputs)
        return _strict(fn, args, kwargs, counted=not isinstance(exc, _Traced))
    avals_t = tuple(avals)
    erased = (fn, tuple(p[1] for p in pa), tuple((k, p[1]) for k, p in pk), avals_t)
    lift = False
    if n_floats:
        lift = _liftable.get(erased)
        if lift is None:
            lift = _liftable[erased] = _can_lift(fn, args, kwargs, pa, pk, avals)
    if lift:  # float arguments become graph inputs: a new learning rate is a new input, not a new program
        slot = len(g.scalars)
        targs, tkwargs = [], {}
        for a, p in zip(args, pa, strict=True):
            if p is _FLOAT:
                g.scalars.append(a)
                targs.append(_Ref("s", slot))
                slot += 1
            else:
                targs.append(p[2])
        for k, p in pk:
            if p is _FLOAT:
                g.scalars.append(kwargs[k])
                tkwargs[k] = _Ref("s", slot)
                slot += 1
            else:
                tkwargs[k] = p[2]
        targs = tuple(targs)
        spec = (tuple(p[0] for p in pa), tuple((k, p[0]) for k, p in pk))
        shape_key = erased
        n_lifted = n_floats
    else:
        if n_floats:
            pa = [(f := freeze(a), f, a) if p is _FLOAT else p for a, p in zip(args, pa, strict=True)]
            pk = [(k, (f := freeze(kwargs[k]), f, kwargs[k]) if p is _FLOAT else p) for k, p in pk]
        targs = tuple(p[2] for p in pa)
        tkwargs = {k: p[2] for k, p in pk}
        spec = (tuple(p[0] for p in pa), tuple((k, p[0]) for k, p in pk))
        shape_key = (fn, tuple(p[1] for p in pa), tuple((k, p[1]) for k, p in pk), avals_t, 0)
        n_lifted = 0
    shaped = _shape_cache.get(shape_key)
    if shaped is None:
        try:
            shaped = _eval_shape(fn, targs, tkwargs, avals + [_LIFTED] * n_lifted)
        except Exception:  # noqa: BLE001 - data-dependent or a genuine error: strict eager decides
            _drop_inputs(g, n_inputs)
            if n_lifted:
                del g.scalars[len(g.scalars) - n_lifted :]
            return _strict(fn, args, kwargs)
        if len(_shape_cache) > 65536:
            _shape_cache.clear()
        _shape_cache[shape_key] = shaped
    leaves, treedef, rng = shaped
    return _append(g, _Node(fn, targs, tkwargs, _node_id(fn, spec), treedef, rng), leaves)


_node_ids: dict[Any, int] = {}
_next_node_id = 0


def _node_id(fn: Callable, spec: Any) -> int:
    """A small int standing for (lowering, argument spec): the graph's cache key is a tuple of these, so a hit
    hashes and compares a few hundred ints, not a few hundred nested tuples. Ids are never reused, so clearing
    the table (bounded) only makes later graphs miss."""
    global _next_node_id
    key = (fn, spec)
    i = _node_ids.get(key)
    if i is None:
        if len(_node_ids) > 1 << 20:
            _node_ids.clear()
        i = _node_ids[key] = _next_node_id
        _next_node_id += 1
    return i


_FLOAT = ("F", "F", None)  # a float argument's place while deciding whether it is lifted


_LIFTED = ((), "float64", True)  # a Python float as JAX passes it to a jitted function (x64 on): weak float64


def _can_lift(fn: Callable, args: tuple, kwargs: dict, pa: list, pk: list, avals: list) -> bool:
    """A recorded op's float arguments may be graph inputs if the lowering gives the same output shapes and
    dtypes with them as weakly typed tracers as with the Python floats (it neither branches on their values
    nor promotes differently)."""
    n = sum(1 for a in args if a.__class__ is float) + sum(1 for v in kwargs.values() if v.__class__ is float)
    counter = iter(range(n))
    lifted_args = tuple(
        _Ref("s", next(counter)) if p is _FLOAT else p[2] for a, p in zip(args, pa, strict=True)
    )
    lifted_kw = {k: _Ref("s", next(counter)) if p is _FLOAT else p[2] for k, p in pk}
    static_args = tuple(a if p is _FLOAT else p[2] for a, p in zip(args, pa, strict=True))
    static_kw = {k: kwargs[k] if p is _FLOAT else p[2] for k, p in pk}
    try:
        with_tracers = _eval_shape(fn, lifted_args, lifted_kw, avals + [_LIFTED] * n)
        with_floats = _eval_shape(fn, static_args, static_kw, avals)
    except Exception:  # noqa: BLE001 - it branches on the value: keep the floats static
        return False
    return with_tracers[0] == with_floats[0] and with_tracers[2] == with_floats[2]


def _drop_inputs(g: _Graph, n: int) -> None:
    for x in g.inputs[n:]:
        g.input_index.pop(id(x), None)
    del g.inputs[n:]


def _fill(x: Any, get: Callable[[_Ref], Any]) -> Any:
    if x.__class__ is _Ref:
        return get(x)
    if x.__class__ is PendingView:
        return x.apply(_fill(x.base, get))
    if isinstance(x, list):
        return [_fill(v, get) for v in x]
    if isinstance(x, tuple):
        return tuple(_fill(v, get) for v in x)
    return x


def _eval_shape(fn: Callable, targs: tuple, tkwargs: dict, avals: list) -> tuple[list, Any, bool]:
    jax = jax_module()
    structs = [jax.ShapeDtypeStruct(s, d, weak_type=w) for s, d, w in avals]

    n_arrays = sum(1 for a in avals if a is not _LIFTED)

    def shaped(*xs: Any) -> Any:
        arrays = iter(xs[:n_arrays])

        def get(r: _Ref) -> Any:
            return xs[n_arrays + r.a - _first_scalar(targs, tkwargs)] if r.kind == "s" else next(arrays)

        a = tuple(_fill(v, get) for v in targs)
        k = {n: _fill(v, get) for n, v in tkwargs.items()}
        return fn(*a, **k)

    with _rng.probe() as probe, state.jax_trace():
        out = jax.eval_shape(shaped, *structs)
    flat, treedef = jax.tree_util.tree_flatten(out)
    if not all(isinstance(x, jax.ShapeDtypeStruct) for x in flat):
        raise TypeError("lowering returned a non-array leaf")
    single = isinstance(out, jax.ShapeDtypeStruct)
    return (
        [(tuple(x.shape), x.dtype, bool(getattr(x, "weak_type", False))) for x in flat],
        None if single else treedef,
        probe.draws > 0,
    )


def _first_scalar(targs: tuple, tkwargs: dict) -> int:
    """The smallest scalar slot a node uses (its floats are numbered consecutively from there)."""
    slots = [r.a for r in (*targs, *tkwargs.values()) if r.__class__ is _Ref and r.kind == "s"]
    return min(slots) if slots else 0


def _strict(fn: Callable, args: tuple, kwargs: dict, counted: bool = True) -> Any:
    """Run now on concrete values (flushing whatever the arguments wait for)."""
    if counted:
        note_strict_op()
    if _has_pending(args) or _has_pending(tuple(kwargs.values())):
        flush()
    return fn(*tuple(_concrete(a) for a in args), **{k: _concrete(v) for k, v in kwargs.items()})


def _concrete(x: Any) -> Any:
    if x.__class__ is Lazy:
        return materialize(x)
    if x.__class__ is PendingView:
        return PendingView(_concrete(x.base), x.chain, x.key).value()
    if isinstance(x, list):
        return [_concrete(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_concrete(v) for v in x)
    return x


def _has_pending(xs: tuple) -> bool:
    for x in xs:
        if x.__class__ is PendingView:
            x = x.base
        if x.__class__ is Lazy and x.value is None:
            return True
        if isinstance(x, (list, tuple)) and _has_pending(tuple(x)):
            return True
    return False


# ----------------------------------------------------------------------------- materialisation
def materialize(lz: Lazy) -> Any:
    """The concrete array behind ``lz`` (flushing the pending graph if needed)."""
    if lz.value is None:
        flush()
        if lz.value is None:
            raise RuntimeError("fused eager: a pending value was lost (its graph was flushed without it)")
    return lz.value


def flush() -> None:
    """Run the pending graph; fill every live Lazy with its value."""
    global _graph
    with _LOCK:
        g = _graph
        if not g.nodes:
            return
        _graph = _Graph()
        _run(g)


def _run(g: _Graph) -> None:
    global _paused_ops
    live: list[tuple[int, int, Lazy]] = []
    for j, node in enumerate(g.nodes):
        for o, ref in enumerate(node.outs):
            lz = ref()
            if lz is not None and lz.value is None:
                live.append((j, o, lz))
    _STATS.flushes += 1
    _STATS.graph_nodes_max = max(_STATS.graph_nodes_max, len(g.nodes))
    if not live:
        return
    key = (
        tuple(n.key for n in g.nodes),
        tuple((x.shape, x.dtype, x.weak_type) for x in g.inputs),
        len(g.scalars),
        tuple((j, o) for j, o, _ in live),
        g.rng,
    )
    exe = _compiled.get(key)
    new_signature = False
    if exe is not None:
        _compiled.move_to_end(key)
        _STATS.cache_hits += 1
        values = _call_compiled(exe, g)
    elif _sightings.get(key, 0) == 0:
        new_signature = True
        _sightings[key] = 1
        if len(_sightings) > 4 * CACHE_SIZE:
            _sightings.popitem(last=False)
        _STATS.first_sightings += 1
        values = _replay(g.nodes, g.inputs, g.scalars, [(j, o) for j, o, _ in live])
    else:
        exe = _compile(g, [(j, o) for j, o, _ in live])
        _compiled[key] = exe
        if len(_compiled) > CACHE_SIZE:
            _compiled.popitem(last=False)
            _STATS.evictions += 1
        _STATS.compiles += 1
        values = _call_compiled(exe, g)
    for (_, _, lz), v in zip(live, values, strict=True):
        lz.value = v
    _note_flush(new_signature)


def _note_flush(new_signature: bool) -> None:
    """The adaptive fallback: when nearly every recent graph was a signature never seen before (shapes that
    change every step), recording pauses and ops run strictly for a while."""
    global _paused_ops
    _recent.append(new_signature)
    if len(_recent) == _WINDOW and sum(_recent) >= _NEW_IN_WINDOW:
        _paused_ops = _PAUSE_OPS
        _recent.clear()
        _STATS.fallback_pauses += 1


_NO_KEY = 0  # a static stand-in when the graph draws no random numbers


def _replay(nodes: list[_Node], inputs: list, scalars: list, wanted: list[tuple[int, int]]) -> list:
    """Run the nodes in order on ``inputs``/``scalars`` (concrete, or tracers inside the compiled program)."""
    jax = jax_module()
    results: list[list] = []

    def get(r: _Ref) -> Any:
        if r.kind == "i":
            return inputs[r.a]
        if r.kind == "s":
            return scalars[r.a]
        return results[r.a][r.b]

    for node in nodes:
        out = node.fn(
            *tuple(_fill(a, get) for a in node.args), **{k: _fill(v, get) for k, v in node.kwargs.items()}
        )
        results.append([out] if node.treedef is None else jax.tree_util.tree_leaves(out))
    return [results[j][o] for j, o in wanted]


def _compile(g: _Graph, wanted: list[tuple[int, int]]) -> Callable:
    """One jitted program for this signature. It keeps the node templates (functions, statics, wiring), never
    the arrays: later graphs with the same signature pass their own inputs by position."""
    jax = jax_module()
    nodes = [_Node(n.fn, n.args, n.kwargs, None, n.treedef, n.rng) for n in g.nodes]
    uses_rng = g.rng
    n_in = len(g.inputs)

    def program(key: Any, *arrays: Any) -> Any:
        if uses_rng:
            _rng.set_key(key)
        with state.jax_trace():
            outs = _replay(nodes, list(arrays[:n_in]), list(arrays[n_in:]), wanted)
        return outs, (_rng.get_key() if uses_rng else key)

    return jax.jit(program)


def _call_compiled(exe: Callable, g: _Graph) -> list:
    uses_rng = g.rng
    saved = _rng.get_key() if uses_rng else None
    key = saved if uses_rng else _NO_KEY
    try:
        outs, new_key = exe(key, *g.inputs, *g.scalars)
    except BaseException:
        if uses_rng:
            _rng.set_key(saved)
        raise
    if uses_rng:
        _rng.set_key(new_key)
    return outs
