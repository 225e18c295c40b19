"""``torch.compile(backend="tpu")``: each Dynamo FX graph runs as one XLA executable through ``jax.jit``.

How it works (see docs/compile_and_distributed.md):

* Dynamo captures a torch-level FX graph whose inputs are the user's tensors *and* the module's
  parameters/buffers (``inline_inbuilt_nn_modules``).  We never lower the FX graph ourselves: the
  graph is *run* once with ``TpuTensor`` wrappers around ``jax`` tracers, under ``torch.no_grad()``,
  so every aten op goes through the eager device's pure-JAX lowerings and lands in one jaxpr.
* Forward without grad: one ``jax.jit`` executable.  Forward with grad: one executable computing
  ``jax.vjp`` (outputs + residuals), plus one executable for the pullback, glued into autograd by
  ``_GraphFunction`` (a ``torch.autograd.Function``).  AOTAutograd is not used: its backward needs
  ``__coerce_same_metadata_as_tangent__`` from subclasses and it would hand us aten graphs that we
  would then run op by op anyway; ``jax.vjp`` gives the same "one forward + one backward kernel"
  shape with JAX doing the differentiation of our own lowerings.
* Input mutation (BatchNorm running stats, ``x.add_()`` on an input): the wrappers' final payloads
  are extra outputs and are written back into the real inputs after the call.
* RNG: the global JAX key (``tpu_workbench.backend.random``) is an input and the advanced key an output, so
  dropout under ``torch.manual_seed`` is reproducible and no tracer leaks into the global state.
* Executables are cached per graph on (shapes, dtypes, requires-grad, grad mode, static args):
  a new shape is a new trace and a new compile, counted in :func:`stats`.
"""

from __future__ import annotations

import functools
import itertools
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from tpu_workbench import backend
from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import lazy, state
from tpu_workbench.backend import random as brandom
from tpu_workbench.backend.tensor import TpuTensor, value

__all__ = ["CompileStats", "register", "reset_stats", "stats", "tpu_backend"]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# statistics the user can read (compile time is reported apart from step time by the workbench)
# --------------------------------------------------------------------------------------------------
@dataclass
class CompileStats:
    """Counters since process start (or the last :func:`reset_stats`)."""

    graphs: int = 0  # FX graphs handed to the backend by Dynamo (one per graph break / recompile)
    traces: int = 0  # times an FX graph was traced into a jaxpr (forward or forward+vjp)
    compiles: int = 0  # XLA executables built (forward, forward+vjp and backward each count)
    forward_compiles: int = 0
    backward_compiles: int = 0
    cache_hits: int = 0  # calls served by an already-built executable
    compile_seconds: float = 0.0  # wall time spent tracing + lowering + compiling
    calls: int = 0  # calls of compiled graphs (forward)
    eager_fallbacks: int = 0  # calls of graphs that could not be traced and ran op by op
    # compilations of code that had compiled before: a Dynamo recompile of a frame (a guard failed: a new
    # shape, dtype, Python scalar or grad mode) reaching the "tpu" backend, or a new input signature of an
    # already compiled graph. Read it as torch.tpu._get_cache_stats()["recompiles"] (TorchTPU's own name for
    # its cache statistics); a number that grows every step means every step pays a compile.
    recompiles: int = 0


_STATS = CompileStats()
_LOCK = threading.Lock()


def stats() -> dict[str, float]:
    """Return the compile counters as a dict (a copy; safe to keep)."""
    with _LOCK:
        return asdict(_STATS)


def reset_stats() -> None:
    """Zero the counters (executables already built stay cached)."""
    global _STATS
    with _LOCK:
        _STATS = CompileStats()


# --------------------------------------------------------------------------------------------------
# adapters to the eager device (backend.tensor / backend.random); kept here so we never edit them
# --------------------------------------------------------------------------------------------------
def _tensor_cls() -> type:
    return TpuTensor


def _payload(t: torch.Tensor) -> Any:
    """The jax.Array behind a TpuTensor (through the device's own unwrap when it has one)."""
    return value(t)


def _wrap(a: Any) -> torch.Tensor:
    return TpuTensor(a)


def _ensure_device() -> None:
    backend.register()


# --------------------------------------------------------------------------------------------------
# the compiled graph
# --------------------------------------------------------------------------------------------------
@dataclass
class _Entry:
    """One specialisation of a graph: the executables and what the trace learned."""

    fwd: Any = None  # jax compiled executable
    bwd: Any = None  # jax compiled pullback executable (built at first backward)
    mutated: tuple[int, ...] = ()  # positions (in the tensor-input list) written in place
    out_spec: tuple[Any, ...] = ()  # per graph output: ("d", i) diff, ("n", i) non-diff, ("c", v) const
    out_is_tuple: bool = True


class _HostInput(Exception):
    """A host tensor in the graph (input or output) that one executable cannot express."""


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


class _CompiledGraph:
    """Callable Dynamo runs in place of the FX graph."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        gm = _private_copy(gm)  # Dynamo keeps reading the original's placeholders: never edit it
        self.gm = gm
        self.cache: dict[tuple[Any, ...], _Entry] = {}
        self.cpu_outputs = _strip_output_transfers(gm)
        self.lifted = _lift_tensor_attributes(gm)
        self.eager = False  # set when the graph cannot be traced (data-dependent host reads)

    def _run_eager(self, args: Sequence[Any]) -> Any:
        with _LOCK:
            _STATS.eager_fallbacks += 1
        out = self.gm(*args)
        return self._to_cpu_outputs(out)

    def _to_cpu_outputs(self, out: Any) -> Any:
        if not self.cpu_outputs:
            return out
        seq = list(out) if isinstance(out, tuple | list) else [out]
        for i in self.cpu_outputs:
            seq[i] = seq[i].cpu()
        return type(out)(seq) if isinstance(out, tuple | list) else seq[0]

    def _host_tensors(self, args: Sequence[Any]) -> list[torch.Tensor]:
        """CPU tensors the graph can reach (inputs and module attributes, e.g. an optimizer's step count)."""
        tcls = _tensor_cls()
        found = [a for a in args if isinstance(a, torch.Tensor) and not isinstance(a, tcls)]
        for n in self.gm.graph.nodes:
            if n.op == "get_attr":
                v = _getattr(self.gm, n.target)
                if isinstance(v, torch.Tensor) and not isinstance(v, tcls):
                    found.append(v)
        return found

    # ---- argument classification -------------------------------------------------------------
    def _split(self, args: Sequence[Any]) -> tuple[list[int], list[Any], tuple[Any, ...]]:
        tcls = _tensor_cls()
        tpos: list[int] = []
        arrays: list[Any] = []
        key: list[Any] = []
        for i, a in enumerate(args):
            if isinstance(a, tcls):
                tpos.append(i)
                arr = _payload(a)
                arrays.append(arr)
                key.append(("t", tuple(arr.shape), str(arr.dtype), bool(a.requires_grad)))
            elif isinstance(a, torch.Tensor):
                if a.device.type == "cpu" and a.numel() <= 16:
                    # a small host tensor is baked in as a constant; its value is part of the key
                    key.append(("cpu", tuple(a.shape), str(a.dtype), tuple(a.reshape(-1).tolist())))
                else:
                    raise _HostInput(f"graph input {i} is a {a.device.type} tensor of shape {tuple(a.shape)}")
            elif isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool):
                key.append(("s", type(a).__name__, a.node.hint if hasattr(a, "node") else a))
            else:
                key.append(("s", type(a).__name__, a))
        return tpos, arrays, tuple(key)

    def __call__(self, *args: Any) -> Any:
        if self.lifted:
            args = (*args, *(_getattr(self.gm, n) for n in self.lifted))
        if self.eager:
            return self._run_eager(args)
        try:
            tpos, arrays, key = self._split(args)
        except _HostInput as exc:
            self.eager = True
            _warn_eager(exc)
            return self._run_eager(args)
        tcls = _tensor_cls()
        diff = [j for j, i in enumerate(tpos) if args[i].requires_grad and _is_float(args[i].dtype)]
        grad = torch.is_grad_enabled() and bool(diff)
        full_key = (grad, key)
        entry = self.cache.get(full_key)
        rng = brandom.get_key()
        with _LOCK:
            _STATS.calls += 1
            if entry is not None:
                _STATS.cache_hits += 1
        if entry is None:
            if self.cache:
                with _LOCK:
                    _STATS.recompiles += 1
            host = self._host_tensors(args)
            before = [(t, t._version, t.clone()) for t in host]
            try:
                entry = self._build(args, tpos, arrays, diff, grad, rng)
                _check_host_untouched(before)
            except (*_UNTRACEABLE, _HostInput) as exc:
                # e.g. a value read on the host mid-graph: run this graph op by op, correctly, and say so
                self.eager = True
                _warn_eager(exc)
                return self._run_eager(args)
            self.cache[full_key] = entry

        if grad:
            box: dict[str, Any] = {}
            diff_tensors = [args[tpos[j]] for j in diff]
            other = [a for j, a in enumerate(arrays) if j not in set(diff)]
            diff_outs = _GraphFunction.apply(self, entry, box, other, rng, *diff_tensors)
            nondiff_arrays, mut_arrays, new_key = box["aux"]
        else:
            diff_out_arrays, nondiff_arrays, mut_arrays, new_key = entry.fwd(arrays, rng)
            diff_outs = tuple(_wrap(a) for a in diff_out_arrays)
        brandom.set_key(new_key)

        # write mutated inputs back through the eager device (handles views of a base correctly)
        if entry.mutated:
            with torch.no_grad():
                for j, arr in zip(entry.mutated, mut_arrays, strict=True):
                    dst = args[tpos[j]]
                    dst.copy_(tcls(arr))

        outs: list[Any] = []
        for kind, v in entry.out_spec:
            if kind == "d":
                outs.append(diff_outs[v])
            elif kind == "n":
                outs.append(_wrap(nondiff_arrays[v]))
            else:
                outs.append(v)
        return self._to_cpu_outputs(tuple(outs) if entry.out_is_tuple else outs[0])

    # ---- tracing / compiling -----------------------------------------------------------------
    def _graph_fn(
        self, args: Sequence[Any], tpos: list[int], entry: _Entry
    ) -> Callable[[list[Any], Any], tuple[list[Any], list[Any], list[Any], Any]]:
        """Pure JAX function of (tensor payloads, rng key) -> (float outs, other outs, mutations, key)."""
        tcls = _tensor_cls()
        tset = set(tpos)
        static = [None if i in tset else a for i, a in enumerate(args)]  # keep no input tensor alive

        def run(arrays: list[Any], rng: Any) -> tuple[list[Any], list[Any], list[Any], Any]:
            with state.jax_trace():  # (see backend.state.in_jax_trace)
                return traced_graph(arrays, rng)

        def traced_graph(arrays: list[Any], rng: Any) -> tuple[list[Any], list[Any], list[Any], Any]:
            with _LOCK:
                _STATS.traces += 1
            wrappers = [tcls(a) for a in arrays]
            call_args = list(static)
            for j, i in enumerate(tpos):
                call_args[i] = wrappers[j]
            saved = brandom.get_key()
            brandom.set_key(rng)
            try:
                with torch.no_grad():
                    out = self.gm(*call_args)
                new_key = brandom.get_key()
            finally:
                brandom.set_key(saved)
            entry.out_is_tuple = isinstance(out, tuple | list)
            out_list = list(out) if entry.out_is_tuple else [out]
            fouts: list[Any] = []
            nouts: list[Any] = []
            spec: list[Any] = []
            for o in out_list:
                if isinstance(o, tcls):
                    if _is_float(o.dtype):
                        spec.append(("d", len(fouts)))
                        fouts.append(_payload(o))
                    else:
                        spec.append(("n", len(nouts)))
                        nouts.append(_payload(o))
                elif isinstance(o, torch.Tensor):
                    raise _HostInput(f"graph produces a {o.device.type} tensor from device values")
                else:
                    spec.append(("c", o))
            entry.out_spec = tuple(spec)
            final = [_payload(w) for w in wrappers]
            entry.mutated = tuple(j for j, (a, f) in enumerate(zip(arrays, final, strict=True)) if f is not a)
            muts = [final[j] for j in entry.mutated]
            return fouts, nouts, muts, new_key

        return run

    def _build(
        self, args: Sequence[Any], tpos: list[int], arrays: list[Any], diff: list[int], grad: bool, rng: Any
    ) -> _Entry:
        import jax  # lazy: jax (import torch registers this module)

        entry = _Entry()
        run = self._graph_fn(args, tpos, entry)
        t0 = time.perf_counter()
        if not grad:
            fwd = jax.jit(run).lower(arrays, rng).compile()
        else:
            diff_set = set(diff)
            other_pos = [j for j in range(len(arrays)) if j not in diff_set]

            def fwd_vjp(other: list[Any], rng: Any, *diff_arrays: Any) -> Any:
                def f(*d: Any) -> Any:
                    merged: list[Any] = [None] * len(arrays)
                    for j, a in zip(diff, d, strict=True):
                        merged[j] = a
                    for j, a in zip(other_pos, other, strict=True):
                        merged[j] = a
                    fouts, nouts, muts, new_key = run(merged, rng)
                    return fouts, (nouts, muts, new_key)

                fouts, pullback, aux = jax.vjp(f, *diff_arrays, has_aux=True)
                return fouts, aux, pullback

            other0 = [arrays[j] for j in other_pos]
            fwd = jax.jit(fwd_vjp).lower(other0, rng, *[arrays[j] for j in diff]).compile()
        dt = time.perf_counter() - t0
        entry.fwd = fwd
        with _LOCK:
            _STATS.compiles += 1
            _STATS.forward_compiles += 1
            _STATS.compile_seconds += dt
        return entry

    def _backward(self, entry: _Entry, pullback: Any, cts: list[Any]) -> Any:
        import jax  # lazy: jax (import torch registers this module)

        if entry.bwd is None:
            t0 = time.perf_counter()
            entry.bwd = jax.jit(lambda pb, c: pb(c)).lower(pullback, cts).compile()
            dt = time.perf_counter() - t0
            with _LOCK:
                _STATS.compiles += 1
                _STATS.backward_compiles += 1
                _STATS.compile_seconds += dt
        else:
            with _LOCK:
                _STATS.cache_hits += 1
        return entry.bwd(pullback, cts)


def _private_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return torch.fx.GraphModule(gm, graph)


def _getattr(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _check_host_untouched(before: list[tuple[torch.Tensor, int, torch.Tensor]]) -> None:
    """A graph that writes into a host tensor cannot be cached: the write would happen once, at trace
    time, and never again (AdamW's CPU ``step`` count would stay at 1). Undo the trace's write and say so;
    the caller runs the graph eagerly, which is correct."""
    touched = [(t, saved) for t, version, saved in before if t._version != version]
    if touched:
        with torch.no_grad():
            for t, saved in touched:
                t.copy_(saved)
        raise _HostInput(
            f"graph writes into {len(touched)} host (cpu) tensor(s), e.g. an optimizer's step count; "
            "keep such state on the device (AdamW(..., capturable=True)) to compile it"
        )


def _lift_tensor_attributes(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """Turn ``get_attr`` nodes that hold "tpu" tensors into graph inputs read at every call.

    Dynamo keeps some tensors (e.g. an optimizer's parameters and states) as attributes of the graph
    module instead of inputs.  Traced as constants they would be baked into the executable (stale
    after the next eager update) and an in-place op on them would write a tracer into the real
    tensor.  As inputs they are read fresh each call and their mutations are written back.
    """
    tcls = _tensor_cls()
    nodes = list(gm.graph.nodes)
    attrs = [n for n in nodes if n.op == "get_attr" and isinstance(_getattr(gm, n.target), tcls)]
    if not attrs:
        return ()
    lifting = set(attrs)
    first_body = next(n for n in nodes if n.op != "placeholder" and n not in lifting)  # (stays in the graph)
    names = []
    for i, n in enumerate(attrs):
        with gm.graph.inserting_before(first_body):
            ph = gm.graph.placeholder(f"_tpu_lifted_{i}")
        n.replace_all_uses_with(ph)
        gm.graph.erase_node(n)
        names.append(n.target)
    gm.recompile()
    return tuple(names)


def _is_cpu_transfer(node: torch.fx.Node) -> bool:
    if node.op == "call_method" and node.target == "cpu":
        return True
    if node.op == "call_method" and node.target == "to":
        rest = [*node.args[1:], *node.kwargs.values()]
        return any(a == "cpu" or (isinstance(a, torch.device) and a.type == "cpu") for a in rest) and not any(
            isinstance(a, torch.dtype) for a in rest
        )
    return False


def _strip_output_transfers(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """``y.cpu()`` feeding only the graph output (typical before a graph break): run the graph on
    "tpu" and copy those outputs to the host after the executable, instead of inside the trace."""
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out_node.args[0]
    if not isinstance(outs, tuple | list):
        return ()
    outs = list(outs)
    moved = []
    for i, n in enumerate(outs):
        if isinstance(n, torch.fx.Node) and _is_cpu_transfer(n) and set(n.users) == {out_node}:
            outs[i] = n.args[0]
            moved.append(i)
    if moved:
        out_node.args = (type(out_node.args[0])(outs),)
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return tuple(moved)


def _untraceable() -> tuple[type[BaseException], ...]:
    import jax  # lazy: jax (import torch registers this module)

    return (
        jax.errors.ConcretizationTypeError,
        jax.errors.TracerArrayConversionError,
        jax.errors.TracerIntegerConversionError,
        jax.errors.TracerBoolConversionError,
    )


_UNTRACEABLE: tuple[type[BaseException], ...] = ()


def _warn_eager(exc: BaseException) -> None:
    """Once per graph (the decision is made once per graph)."""

    warnings.warn(
        "torch.compile(backend='tpu'): a graph cannot run as one executable "
        f"({type(exc).__name__}: {str(exc)[:120]}); it runs op by op (see stats()['eager_fallbacks'])",
        stacklevel=3,
    )


class _GraphFunction(torch.autograd.Function):
    """Autograd node for a compiled graph: forward = jit(vjp), backward = jit(pullback)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        graph: _CompiledGraph,
        entry: _Entry,
        box: dict[str, Any],
        other: list[Any],
        rng: Any,
        *diff_tensors: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        diff_arrays = [_payload(t) for t in diff_tensors]
        fouts, aux, pullback = entry.fwd(other, rng, *diff_arrays)
        box["aux"] = aux
        ctx.graph, ctx.entry, ctx.pullback = graph, entry, pullback
        ctx.out_meta = [(tuple(a.shape), a.dtype) for a in fouts]
        return tuple(_wrap(a) for a in fouts)

    @staticmethod
    @once_differentiable  # the pullback is not itself differentiated: double backward must raise
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        import jax.numpy as jnp  # lazy: jax

        cts = []
        for g, (shape, dtype) in zip(grads, ctx.out_meta, strict=True):
            cts.append(jnp.zeros(shape, dtype) if g is None else _payload(g).astype(dtype))
        in_cts = ctx.graph._backward(ctx.entry, ctx.pullback, cts)
        return (None, None, None, None, None, *(_wrap(c) for c in in_cts))


# --------------------------------------------------------------------------------------------------
# the Dynamo backend
# --------------------------------------------------------------------------------------------------
def _refuse_mode(mode: Any) -> None:
    """TorchTPU 0.2.0 refuses ``mode=`` with backend "tpu" (contract §15): the modes choose inductor's autotuning
    and CUDA graphs, which XLA has no use for; a migrated script must drop the argument."""
    raise ValueError(
        f"torch.compile(backend='tpu') does not take mode= (got {mode!r}): the modes tune inductor kernels and "
        "CUDA graphs; XLA compiles the whole graph. Remove mode= (as TorchTPU 0.2.0 requires)"
    )


def _refuse_dynamic() -> None:
    """TorchTPU 0.2.0 refuses ``dynamic=True`` with backend "tpu" (contract §15): one executable per shape."""
    raise ValueError(
        "torch.compile(backend='tpu') does not support dynamic=True: XLA compiles one executable per input "
        "shape. Leave dynamic unset (False), pad inputs to a few fixed shapes (buckets), or mark varying "
        "dimensions with torch._dynamo.mark_dynamic only on backends that support it (as TorchTPU 0.2.0 requires)"
    )


def _note_recompile() -> None:
    """A Dynamo recompile of a frame that already compiled (its CompileId says which compile of the frame)."""
    cid = private.current_compile_id()
    if cid is not None and getattr(cid, "frame_compile_id", 0):
        with _LOCK:
            _STATS.recompiles += 1


def device_choosing_backend(mode: Any = None, options: Any = None, dynamic: Any = None) -> Callable[..., Any]:
    """The backend of ``torch.compile(fn)`` with no backend named: a plain function's device is known only
    from its inputs, so each captured graph goes to "tpu" when an input is a TPU tensor, else to inductor
    (with the caller's mode/options), as it would without this package."""

    def choose(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in example_inputs):
            if mode is not None:
                _refuse_mode(mode)
            if dynamic:
                _refuse_dynamic()
            return tpu_backend(gm, example_inputs)
        return private.inductor_wrapper(mode, options, dynamic)(gm, example_inputs)

    choose.__name__ = "tpu_or_inductor"
    return choose


def inductor_refusing_tpu(mode: Any = None, options: Any = None, dynamic: Any = None) -> Callable[..., Any]:
    """``backend="inductor"`` named for a plain function: a graph with TPU inputs is refused with a message naming
    backend "tpu" (inductor has no "tpu" code generator: it would fail deep inside with a ModuleNotFoundError);
    any other graph goes to inductor unchanged."""

    def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in example_inputs):
            raise ValueError(
                "torch.compile: backend='inductor' cannot compile a graph whose inputs are on the 'tpu' device; "
                "use backend='tpu' (or no backend: the device is chosen from the inputs)"
            )
        return private.inductor_wrapper(mode, options, dynamic)(gm, example_inputs)

    inductor.__name__ = "inductor"
    return inductor


def tpu_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **options: Any
) -> Callable[..., Any]:
    """Dynamo backend "tpu" (entry point ``torch_dynamo_backends``): FX graph -> jax.jit executables."""
    _ensure_device()
    global _UNTRACEABLE
    if not _UNTRACEABLE:
        _UNTRACEABLE = _untraceable()
    mode = options.pop("mode", None)
    if mode is not None:
        _refuse_mode(mode)
    if options:
        unknown = sorted(options)
        raise TypeError(f"torch.compile(backend='tpu'): unsupported options {unknown}")
    with _LOCK:
        _STATS.graphs += 1
    _note_recompile()
    return _CompiledGraph(gm)


# --------------------------------------------------------------------------------------------------
# registration: Dynamo tensor hook + torch.compile defaults (as TorchTPU's loader does)
# --------------------------------------------------------------------------------------------------
_HOOKED = False


def _install_dynamo_hook() -> None:
    """Let Dynamo wrap TpuTensor as a tensor (it refuses unknown tensor subclasses otherwise)."""
    global _HOOKED
    if _HOOKED:
        return
    private.dynamo_register_tensor_type(TpuTensor)
    # Eager tpu ops that run inside a compiled region (around a graph break) enter the device's
    # __torch_dispatch__ and JAX; Dynamo must run those frames, never try to trace them.
    for mod in ("tpu_workbench.backend", "jax", "jaxlib"):
        private.dynamo_trace_rules_add(mod)
    _HOOKED = True


def _on_tpu(model: Any) -> bool:
    mod = model if isinstance(model, torch.nn.Module) else getattr(model, "__self__", None)
    if isinstance(mod, torch.nn.Module):
        first = next(itertools.chain(mod.parameters(), mod.buffers()), None)
        return first is not None and first.device.type == "tpu"
    return False


def _is_tpu_backend(backend: Any) -> bool:
    return backend == "tpu" or backend is tpu_backend


def _make_compile(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def compile(model: Any = None, **kwargs: Any) -> Any:  # noqa: A001 - mirrors torch.compile
        if model is None:  # decorator form: @torch.compile(...) (torch's own would pass backend="inductor")
            return lambda fn: compile(fn, **kwargs)
        if kwargs.get("backend") is None and _on_tpu(model):
            kwargs["backend"] = "tpu"
        elif kwargs.get("backend") is None and not isinstance(model, torch.nn.Module):
            # a plain function: its graphs choose by their inputs' device (mode/options go to inductor there)
            _install_dynamo_hook()
            kwargs["backend"] = device_choosing_backend(kwargs.pop("mode", None), kwargs.pop("options", None),
                                                        kwargs.get("dynamic"))  # fmt: skip
            return orig(model, **kwargs)
        backend = kwargs.get("backend")
        if (
            backend == "inductor"
            and not isinstance(model, torch.nn.Module)
            and "tpu_workbench.backend.tensor" in sys.modules
        ):
            _install_dynamo_hook()
            kwargs["backend"] = inductor_refusing_tpu(kwargs.pop("mode", None), kwargs.pop("options", None),
                                                      kwargs.get("dynamic"))  # fmt: skip
            return orig(model, **kwargs)
        if _is_tpu_backend(backend):
            if kwargs.get("mode") is not None:
                _refuse_mode(kwargs["mode"])
            if kwargs.get("dynamic"):
                _refuse_dynamic()
            _ensure_device()
            _install_dynamo_hook()
            if kwargs.get("dynamic") is None:
                kwargs["dynamic"] = False  # TorchTPU default: one executable per shape
        elif backend in ("inductor", None) and _on_tpu(model) and not kwargs.get("options"):
            raise ValueError(
                "torch.compile: backend='inductor' cannot run a model on the 'tpu' device; "
                "use backend='tpu' (the default for tpu models)"
            )
        elif (
            "tpu_workbench.backend.tensor" in sys.modules
        ):  # other backends ("eager", "aot_eager") on tpu tensors
            _install_dynamo_hook()
        return orig(model, **kwargs)

    compile._tpu_patched = True  # type: ignore[attr-defined]
    return compile


def register() -> None:
    """Called by backend.register(): patch torch.compile defaults, expose stats on torch.tpu."""

    @private.patch(
        "compile-defaults",
        "torch.compile",
        "TorchTPU's defaults: backend='tpu' for models on the device, dynamic=False, and a clear error "
        "for backend='inductor' on TPU tensors (without it, compiling a TPU model needs backend='tpu')",
        required=False,
    )
    def _compile() -> None:
        if not getattr(torch.compile, "_tpu_patched", False):
            private.replace_attr(torch, "compile", _make_compile(torch.compile))

    if "torch._dynamo.variables.builder" in sys.modules and "tpu_workbench.backend.tensor" in sys.modules:
        _install_dynamo_hook()
    tpu_mod = getattr(torch, "tpu", None)
    if tpu_mod is not None and not hasattr(tpu_mod, "_get_cache_stats"):
        tpu_mod._get_cache_stats = cache_stats


def cache_stats() -> dict[str, Any]:
    """``torch.tpu._get_cache_stats()``: torch.compile's counters, with fused eager's under "fused_eager"."""
    out: dict[str, Any] = dict(stats())
    out["fused_eager"] = lazy.stats()
    return out
