"""Route one ATen call on "tpu" tensors: lowering -> decomposition -> NotImplementedError.

Each OpOverload gets a *plan* (a small closure) the first time it is seen; later calls go straight to
it, so the hot path is: look up plan, unwrap arguments, call the JAX lowering, wrap the result.
CPU fallback (off by default) is switched on by ``TORCH_TPU_CPU_FALLBACK=1`` or
``tpu_workbench.backend.dispatch.set_cpu_fallback(True)``; it warns once per op and counts calls in
``FALLBACK_COUNTS``.
"""

from __future__ import annotations

import collections
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import device as device_module
from tpu_workbench.backend import fidelity, lazy, state
from tpu_workbench.backend import operands as operands_module
from tpu_workbench.backend import ops as _ops
from tpu_workbench.backend._jax import cpu_to_jax, j2t_dtype, jax_module, jax_to_cpu, t2j_dtype
from tpu_workbench.backend.decompositions import decomposition_for
from tpu_workbench.backend.jit import jitted
from tpu_workbench.backend.op_jit import op_jit, reads_host_values
from tpu_workbench.backend.operands import operands, unwrap, unwrap_args, unwrap_kwargs, wrap
from tpu_workbench.backend.ops.registry import lookup, on_change
from tpu_workbench.backend.refusals import INDEX_TENSOR_OPS, check_inplace_cast, inplace_check, refusal_for
from tpu_workbench.backend.size_check import size_check_for
from tpu_workbench.backend.tensor import TpuTensor, payload, set_dispatch_handler, set_value, value
from tpu_workbench.backend.traced import Untraceable, traced, tracing
from tpu_workbench.backend.views import (
    alias_plan,
    deferred_view,
    metadata_inplace_plan,
    on_storage,
    view_plan,
)

_ops.load()  # fill the registry
import tpu_workbench.backend.sparse  # noqa: E402, F401 - registers the sparse COO constructor (after the dense families)

FALLBACK_COUNTS: collections.Counter[str] = collections.Counter()
_PLANS: dict[Any, Callable[[Any, tuple, dict], Any]] = {}
on_change(_PLANS.clear)
fidelity.on_change(_PLANS.clear)


def set_cpu_fallback(enabled: bool) -> None:
    """Turn the CPU fallback for ops without a lowering on or off (debugging aid, slow)."""
    state.set_cpu_fallback(enabled)
    _PLANS.clear()


def cpu_fallback_enabled() -> bool:
    return state.cpu_fallback_enabled()


def dispatch(func: Any, types: Any = (), args: tuple = (), kwargs: dict | None = None) -> Any:
    """Entry point from ``TpuTensor.__torch_dispatch__`` and the PrivateUse1 fallback kernel. The hot path is
    a plan look-up and a call: every per-op check that does not depend on the call lives in the plan."""
    plan = _PLANS.get(func)
    if plan is None:
        if state._bad_fork:  # (a fork empties _PLANS, so a forked child always comes here)
            raise RuntimeError(
                "Cannot re-initialize the TPU device in a forked subprocess (JAX was started in the parent). To "
                "use the TPU device with multiprocessing, you must use the 'spawn' start method (DataLoader("
                "multiprocessing_context='spawn') or torch.multiprocessing.set_start_method('spawn'))"
            )
        plan = _PLANS[func] = _make_plan(func)
    if kwargs:
        if kwargs.get("device") is not None:
            _check_device_arg(kwargs["device"])
    else:
        kwargs = {}
    if state._Process.launch_blocking:
        return _blocking_call(plan, func, args, kwargs)
    try:
        return plan(func, args, kwargs)
    except Exception:
        if private.current_graph_task_id() == -1 or not state.cpu_fallback_enabled():
            raise
        return _backward_rescue(func, args, kwargs)


os.register_at_fork(after_in_child=_PLANS.clear)


def _check_device_arg(dev: Any) -> None:
    """A factory or copy asked for "tpu:N": only this process's ordinals exist (invalid ordinal, as CUDA)."""
    if isinstance(dev, torch.device) and dev.type == "tpu" and dev.index not in (None, 0):
        device_module.check_index(dev.index)


BACKWARD_RESCUES: collections.Counter[str] = collections.Counter()


def _backward_rescue(func: Any, args: tuple, kwargs: dict) -> Any:
    """An op failed inside the autograd engine while the CPU fallback is on: it is run on the CPU instead, with
    a warning, and counted in BACKWARD_RESCUES and FALLBACK_COUNTS. With the fallback off the op's error
    reaches the caller of backward, as in forward (``backend/backward_errors.py`` carries it through the
    engine)."""
    name = func.name()
    if BACKWARD_RESCUES[name] == 0:
        warnings.warn(
            f"operator '{name}' failed on TPU inside backward; running it on the CPU (slow)", stacklevel=2
        )
    BACKWARD_RESCUES[name] += 1
    return _plan_cpu_fallback(func, args, kwargs, warn=False)


def _blocking_call(plan: Callable, func: Any, args: tuple, kwargs: dict) -> Any:
    res = plan(func, args, kwargs)
    leaves = [
        value(r) for r in (res if isinstance(res, (list, tuple)) else (res,)) if isinstance(r, TpuTensor)
    ]
    jax_module().block_until_ready(leaves)
    return res


# ----------------------------------------------------------------------------- schema helpers
def _is_inplace(func: Any) -> bool:
    s = private.schema(func)
    return (
        func.overloadpacket.__name__.endswith("_")
        and bool(s.arguments)
        and s.arguments[0].alias_info is not None
        and s.arguments[0].alias_info.is_write
    )


def _out_args(func: Any) -> list[str]:
    return [
        a.name
        for a in private.schema(func).arguments
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    ]


def _functional_of_inplace(func: Any) -> Any:
    name = func.overloadpacket.__name__[:-1]
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None
    return getattr(packet, private.overload_name(func), None)


_OPTIONS = {"dtype", "layout", "device", "pin_memory", "memory_format"}


def _functional_of_out(func: Any, outs: list[str]) -> Any:
    want = [a.name for a in private.schema(func).arguments if a.name not in outs and a.name not in _OPTIONS]
    for name in func.overloadpacket.overloads():
        cand = getattr(func.overloadpacket, name)
        if _out_args(cand):
            continue
        if [a.name for a in private.schema(cand).arguments if a.name not in _OPTIONS] == want:
            return cand
    return None


def _astype(x: Any, dt: Any) -> Any:
    return x.astype(dt)


def _cast(new: Any, like: torch.Tensor, inplace: bool = False) -> Any:
    """Cast an in-place result to ``self``'s dtype; its shape must be ``self``'s (sizes are fixed). In place, a
    result type ``self`` cannot hold (``long.add_(0.5)``, ``int.sigmoid_()``) is refused, as PyTorch refuses it."""
    jd = t2j_dtype(like.dtype)
    if new.dtype != jd:
        if inplace:
            check_inplace_cast(j2t_dtype(new.dtype), like.dtype)
        new = lazy.call(_astype, (new, jd))
    if tuple(new.shape) != tuple(like.shape):
        raise RuntimeError(
            f"output with shape {list(like.shape)} doesn't match the broadcast shape {list(new.shape)}"
            " (in-place ops cannot change a TPU tensor's shape)"
        )
    return new


def _write_outs(outs: list[torch.Tensor], res: Any, func: Any) -> None:
    vals = res if isinstance(res, (tuple, list)) else (res,)
    for o, r in zip(outs, vals, strict=False):
        rv = payload(r) if isinstance(r, TpuTensor) else r
        if tuple(o.shape) != tuple(rv.shape):
            raise RuntimeError(
                f"{func.name()}: out= tensor has shape {list(o.shape)} but the result has shape "
                f"{list(rv.shape)}; the TPU device cannot resize a tensor in place, pass an out= of the "
                "right shape"
            )
        set_value(o, _cast(rv, o))


def _direct_plan(
    func: Any, fn: Callable[..., Any], eager: Callable[..., Any] | None = None
) -> Callable[[Any, tuple, dict], Any]:
    if func.is_view:
        return alias_plan() if func in _ALIAS_OPS else view_plan(fn, _strict_executable(fn))

    if eager is None:

        def plan_direct(f, a, k):
            return wrap(lazy.call(fn, unwrap(a), unwrap_kwargs(k)))

        return plan_direct

    process = state._Process
    fused = state.EagerMode.DEFER_AND_FUSE

    if func in _UNSAFE_VIEWS:  # its result shares the input's storage (autograd just does not track it)

        def plan_unsafe_view(f, a, k):
            out = deferred_view(f, fn, a, k)
            if out is not None:
                return out
            return plan_direct_strict(f, a, k)

    def plan_direct_strict(f, a, k):
        if process.eager_mode is fused:
            return wrap(lazy.call(fn, operands(a, True), unwrap_kwargs(k), eager))
        if k:
            return wrap(eager(*operands(a), **unwrap_kwargs(k)))
        return wrap(eager(*operands(a)))

    return plan_unsafe_view if func in _UNSAFE_VIEWS else plan_direct_strict


# ----------------------------------------------------------------------------- plans
def _tensor_bounds_plan(func: Any) -> Callable[[Any, tuple, dict], Any] | None:
    """``torch.linspace(0, t, n)`` / ``logspace`` with a 0-dim device tensor as a bound: PyTorch reads such a
    bound with ``.item()`` and builds on the requested device (the CPU by default), so it runs on CUDA; the
    overloads taking tensors come here because of the bound (ffjord's ``linspace(0, end_time, n)``)."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    if name not in ("linspace", "logspace") or func._overloadname not in _TENSOR_BOUNDS:
        return None
    default = packet.default

    def plan_tensor_bounds(f: Any, a: tuple, k: dict) -> Any:
        start, end, *rest = a
        wrong = [
            f"{which} with {b.dim()} dimension(s)"
            for which, b in (("start", start), ("end", end))
            if isinstance(b, torch.Tensor) and b.dim() != 0
        ]
        if wrong:  # (PyTorch's words)
            raise RuntimeError(
                f"{name} only supports 0-dimensional start and end tensors, but got {' and '.join(wrong)}."
            )
        scalar = [b.item() if isinstance(b, torch.Tensor) else b for b in (start, end)]
        return default(*scalar, *rest, **k)

    return plan_tensor_bounds


_TENSOR_BOUNDS = frozenset({"Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor"})


def _make_plan(func: Any) -> Callable[[Any, tuple, dict], Any]:
    operands_module.init()
    if (bounds := _tensor_bounds_plan(func)) is not None:
        return bounds
    low = lookup(func)
    if fidelity.fidelity_enabled() and fidelity.absent_on_torchtpu(func):
        message = fidelity.refusal_message(func)

        def plan_absent(f: Any, a: tuple, k: dict) -> Any:
            raise NotImplementedError(message)

        return plan_absent
    plan = _make_lowering_plan(func, low)
    if low is not None and _refuses_trace(low):
        plan = _outside_traces(plan)
    if func in _CPU_INDICES_OK:
        plan = _accepting_cpu_indices(plan)
    if func is torch.ops.aten.lift_fresh.default:
        plan = _lifting_into_traces(plan)
    if func is torch.ops.aten.as_strided.default:
        plan = on_storage(plan)
    if low is not None and low.check is not None:
        check, inner = low.check, plan

        def plan_checked(f: Any, a: tuple, k: dict) -> Any:
            check(*a, **k)
            return inner(f, a, k)

        plan = plan_checked
    checks = [c for c in (refusal_for(func), _inplace_refusal(func)) if c is not None]
    if checks:
        refused = plan

        def plan_refusing(f: Any, a: tuple, k: dict) -> Any:
            for c in checks:
                c(a, k)
            return refused(f, a, k)

        plan = plan_refusing
    sizes = size_check_for(func)
    if sizes is not None:
        sized = plan

        def plan_size_checked(f: Any, a: tuple, k: dict) -> Any:
            sizes(a, k)
            return sized(f, a, k)

        plan = plan_size_checked
    return plan


_NOT_WRITES = frozenset({"set_", "resize_", "resize_as_", "detach_", "fill_", "zero_"})


def _inplace_refusal(func: Any) -> Any:
    """An in-place op's cast/overlap refusal (backend/refusals.py); not for shape-only or storage ops."""
    if not _is_inplace(func) or func in _METADATA_INPLACE or func.overloadpacket.__name__ in _NOT_WRITES:
        return None
    return inplace_check(func)


def runs_here(func: Any) -> bool:
    """``func`` has a plan other than "not implemented" (with the CPU fallback off)."""
    if state.cpu_fallback_enabled():
        return lookup(func) is not None
    try:
        return _make_lowering_plan(func, lookup(func)) is not _plan_missing
    except Exception:  # noqa: BLE001 - an overload the plan builder cannot read: not ours
        return False


def _refuses_trace(low: Any) -> bool:
    """A lowering that checks values on the host or draws random numbers: a decomposition traced into one
    program (backend/traced.py) must not reach it (the check would vanish; the key must advance per call)."""
    return reads_host_values(low.fn) or getattr(low.fn, "__module__", "").startswith(_PLAIN_FAMILIES)


def _outside_traces(inner: Callable[[Any, tuple, dict], Any]) -> Callable[[Any, tuple, dict], Any]:
    def plan(f: Any, a: tuple, k: dict) -> Any:
        if tracing():
            raise Untraceable(f.name())
        return inner(f, a, k)

    return plan


def _lifting_into_traces(inner: Callable[[Any, tuple, dict], Any]) -> Callable[[Any, tuple, dict], Any]:
    """``torch.tensor(data, device="tpu")`` inside a compiled frame builds the device tensor with Python modes
    off, then lifts it; FakeTensorMode leaves subclasses to us, so the lift makes it the trace's fake tensor
    (CUDA tensors are converted the same way), not a real tensor among fakes ("two devices, tpu:0 and tpu:0")."""

    def plan(f: Any, a: tuple, k: dict) -> Any:
        mode = private.active_fake_mode()
        if mode is not None:
            return mode.from_tensor(a[0])
        return inner(f, a, k)

    return plan


def _accepting_cpu_indices(inner: Callable[[Any, tuple, dict], Any]) -> Callable[[Any, tuple, dict], Any]:
    """Advanced indexing takes index tensors from the host, as CUDA does (``x_tpu[torch.tensor([0, 2])]``):
    they are copied to the device; every other CPU tensor argument still has to be a 0-dim scalar."""

    def plan(f: Any, a: tuple, k: dict) -> Any:
        if (
            len(a) > 1
            and a[1]
            and any(type(i) is not TpuTensor and isinstance(i, torch.Tensor) for i in a[1])
        ):
            idx = [
                TpuTensor(cpu_to_jax(i)) if type(i) is not TpuTensor and isinstance(i, torch.Tensor) else i
                for i in a[1]
            ]
            a = (a[0], idx, *a[2:])
        return inner(f, a, k)

    return plan


def _make_lowering_plan(func: Any, low: Any) -> Callable[[Any, tuple, dict], Any]:
    if low is not None and low.raw:
        fn = low.fn
        return lambda f, a, k: fn(*a, **k)

    inplace = _is_inplace(func)
    outs = _out_args(func)

    if low is not None:
        fn = jitted(low.fn) if low.jit else low.fn
        eager = _strict_executable(low.fn, build_at_first_sight=low.jit)
        process = state._Process
        fused = state.EagerMode.DEFER_AND_FUSE
        if inplace:

            def plan_inplace(f, a, k):
                self = a[0]
                if eager is None:
                    new = lazy.call(fn, unwrap_args(a), unwrap_kwargs(k))
                elif process.eager_mode is not fused:
                    new = eager(*operands(a), **unwrap_kwargs(k))
                else:
                    new = lazy.call(fn, operands(a, True), unwrap_kwargs(k), eager)
                set_value(self, _cast(new, self, True))
                return self

            return plan_inplace
        if outs:

            def plan_out_direct(f, a, k):
                o = [k[n] for n in outs]
                kk = {n: v for n, v in k.items() if n not in outs}
                _write_outs(o, lazy.call(fn, unwrap(a), unwrap_kwargs(kk), eager), f)
                return o[0] if len(o) == 1 else tuple(o)

            return plan_out_direct
        return _direct_plan(func, fn, eager)

    # No direct lowering.
    if func in _METADATA_INPLACE:
        return _plan_metadata_inplace(func)
    if inplace:
        functional = _functional_of_inplace(func)
        if functional is not None and lookup(functional) is not None:

            def plan_inplace_functional(f, a, k):
                self = a[0]
                res = dispatch(functional, (), a, k)
                set_value(self, _cast(payload(res), self, True))
                return self

            return plan_inplace_functional
    if outs:
        functional = _functional_of_out(func, outs)
        if functional is not None and (lookup(functional) is not None or decomposition_for(functional)):

            def plan_out(f, a, k):
                o = [k[n] for n in outs]
                kk = {n: v for n, v in k.items() if n not in outs}
                _write_outs(o, dispatch(functional, (), a, kk), f)
                return o[0] if len(o) == 1 else tuple(o)

            return plan_out
    dec = decomposition_for(func)
    if dec is not None:
        run = traced(dec)
        return lambda f, a, k: run(*a, **k)
    if inplace:
        functional = _functional_of_inplace(func)
        if functional is not None and decomposition_for(functional) is not None:

            def plan_inplace_decomposed(f, a, k):
                self = a[0]
                res = dispatch(functional, (), a, k)
                set_value(self, _cast(payload(res), self, True))
                return self

            return plan_inplace_decomposed
    if private.dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        run = traced(func.decompose)
        return lambda f, a, k: run(*a, **k)
    if state.cpu_fallback_enabled():
        return _plan_cpu_fallback
    return _plan_missing


def _strict_executable(
    fn: Callable[..., Any], build_at_first_sight: bool = False
) -> Callable[..., Any] | None:
    """``fn`` as one cached executable per call signature in strict eager (backend/op_jit.py), unless it checks
    values on the host (those checks would vanish under jit) or draws random numbers (its key must advance)."""
    if reads_host_values(fn) or getattr(fn, "__module__", "").startswith(_PLAIN_FAMILIES):
        return None
    return op_jit(fn, build_at_first_sight=build_at_first_sight)


_PLAIN_FAMILIES = ("tpu_workbench.backend.ops.random",)
_ALIAS_OPS: set = set()
_UNSAFE_VIEWS: set = set()  # not views to autograd, but their results share the input's storage
_CPU_INDICES_OK: set = set()  # ops whose ``indices`` list may hold CPU tensors
_METADATA_INPLACE: dict = {}  # in-place shape op -> its functional overload


def _plan_metadata_inplace(func: Any) -> Callable[[Any, tuple, dict], Any]:
    low = lookup(_METADATA_INPLACE[func])
    if low is None or low.raw:
        return _plan_missing
    return metadata_inplace_plan(low.fn)


def _plan_missing(func: Any, args: tuple, kwargs: dict) -> Any:
    lazy.flush()  # fused eager: the work recorded before this op lands before the error
    raise NotImplementedError(
        f"operator '{func.name()}' is not implemented for TPU. Set TORCH_TPU_CPU_FALLBACK=1 (or call "
        "tpu_workbench.backend.dispatch.set_cpu_fallback(True)) to run it on the CPU instead, or add a lowering in "
        "backend/ops/."
    )


def _to_cpu(a: Any) -> Any:
    if isinstance(a, TpuTensor):
        return jax_to_cpu(value(a))
    if isinstance(a, (list, tuple)):
        return type(a)([_to_cpu(x) for x in a])
    if isinstance(a, torch.device) and a.type != "cpu":
        return torch.device("cpu")
    return a


def _plan_cpu_fallback(func: Any, args: tuple, kwargs: dict, warn: bool = True) -> Any:
    name = func.name()
    if FALLBACK_COUNTS[name] == 0 and warn:
        warnings.warn(
            f"operator '{name}' is not implemented for TPU; running it on the CPU (slow)", stacklevel=3
        )
    FALLBACK_COUNTS[name] += 1
    cargs = _to_cpu(args)
    ckwargs = {k: _to_cpu(v) for k, v in kwargs.items()}
    if "device" in ckwargs:
        ckwargs["device"] = torch.device("cpu")
    res = func(*cargs, **ckwargs)
    # write mutated arguments back
    for i, arg in enumerate(private.schema(func).arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            src = cargs[i] if i < len(cargs) and not arg.kwarg_only else ckwargs.get(arg.name)
            dst = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            if isinstance(dst, TpuTensor) and isinstance(src, torch.Tensor):
                set_value(dst, cpu_to_jax(src))
    if _is_inplace(func):
        return args[0]
    outs = _out_args(func)
    if outs:
        o = [kwargs[n] for n in outs]
        return o[0] if len(o) == 1 else tuple(o)

    def back(r: Any) -> Any:
        if isinstance(r, torch.Tensor):
            return TpuTensor(cpu_to_jax(r))
        if isinstance(r, (list, tuple)):
            return type(r)([back(x) for x in r])
        return r

    return back(res)


def _init_alias_ops() -> None:
    aten = torch.ops.aten
    _ALIAS_OPS.update({aten.detach.default, aten.alias.default, aten.lift_fresh.default})
    _UNSAFE_VIEWS.update({aten._unsafe_view.default})
    _CPU_INDICES_OK.update(INDEX_TENSOR_OPS)
    _METADATA_INPLACE.update(
        {
            aten.unsqueeze_.default: aten.unsqueeze.default,
            aten.squeeze_.default: aten.squeeze.default,
            aten.squeeze_.dim: aten.squeeze.dim,
            aten.squeeze_.dims: aten.squeeze.dims,
            aten.transpose_.default: aten.transpose.int,
            aten.t_.default: aten.t.default,
            aten.as_strided_.default: aten.as_strided.default,  # (Dynamo's clone_input of a tensor made in a frame)
        }
    )


_init_alias_ops()
set_dispatch_handler(dispatch)
