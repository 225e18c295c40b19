"""Every private PyTorch API the backend touches, and every global patch it applies, in one place.

A Python device backend has to reach below PyTorch's public API (PrivateUse1 registration hooks, wrapper
subclasses, the dispatcher's tables, a few Dynamo/FSDP internals). Those names can move in any release, so
the project pins ``torch>=2.13,<2.14`` and this module names each touchpoint once:

- ``TOUCHPOINTS`` lists them (dotted path, why, who uses it); ``resolve(name)`` finds one and raises
  :class:`TorchPrivateAPIError` naming it when a torch upgrade moved it. ``tests/backend/test_torch_private.py``
  resolves all of them and checks that no other backend module reaches a private torch name directly.
- ``patch(...)`` registers a global monkey-patch with its target, its reason and whether correctness needs it;
  ``PATCHES`` lists them (``python -m tpu_workbench.backend.patches`` prints the table). Patches not needed for correctness
  can be switched off with ``TORCH_TPU_DISABLE_PATCHES=name,name``.

Hot-path names are bound once at import (a module attribute read, no extra call); heavy or optional
subsystems (Dynamo, FSDP, c10d) are resolved when first used.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["TOUCHPOINTS", "PATCHES", "Patch", "TorchPrivateAPIError", "patch", "resolve", "replace_attr"]


class TorchPrivateAPIError(RuntimeError):
    """A private PyTorch API the backend relies on is missing (a torch version outside the tested pin)."""


@dataclass(frozen=True)
class Touchpoint:
    path: str  # "module:attr.attr" (module imported, then attributes walked)
    why: str
    users: tuple[str, ...]


TOUCHPOINTS: dict[str, Touchpoint] = {}


def _tp(path: str, why: str, *users: str) -> str:
    TOUCHPOINTS[path] = Touchpoint(path, why, users)
    return path


def resolve(path: str) -> Any:
    """The object at ``path`` ("module:attr.attr"); :class:`TorchPrivateAPIError` naming it if it moved."""
    mod_name, _, attrs = path.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
        for a in attrs.split(".") if attrs else ():
            obj = getattr(obj, a)
    except (ImportError, AttributeError) as exc:
        tp = TOUCHPOINTS.get(path)
        why = f" (used for: {tp.why})" if tp else ""
        raise TorchPrivateAPIError(
            f"private PyTorch API {path!r} is missing in torch {torch.__version__}{why}; this backend is tested "
            "with torch 2.13 — install torch>=2.13,<2.14"
        ) from exc
    return obj


# ----------------------------------------------------------------------------- registration of the device
PRIVATEUSE1_NAME = _tp(
    "torch._C:_get_privateuse1_backend_name",
    "which backend owns PrivateUse1",
    "backend/__init__.py",
    "backend/tensor.py",
    "backend/device.py",
)
SETUP_PYTHON_BACKEND = _tp(
    "torch.utils.backend_registration:_setup_privateuseone_for_python_backend",
    "rename PrivateUse1 to 'tpu' and install hooks/guard/module",
    "backend/__init__.py",
)
HOOKS_BASE = _tp("torch._C._acc:PrivateUse1Hooks", "base class of the device hooks", "backend/device.py")
GUARD_BASE = _tp("torch._C._acc:DeviceGuard", "base class of the device guard", "backend/device.py")
DEVICE_TYPE_PU1 = _tp(
    "torch._C._autograd:DeviceType.PrivateUse1", "the guard's device type", "backend/device.py"
)

privateuse1_name: Callable[[], str] = resolve(PRIVATEUSE1_NAME)
PrivateUse1Hooks: type = resolve(HOOKS_BASE)
DeviceGuard: type = resolve(GUARD_BASE)
DEVICE_TYPE_PRIVATEUSE1: Any = resolve(DEVICE_TYPE_PU1)


def setup_python_backend(name: str, module: Any, hooks: Any, guard: Any) -> None:
    resolve(SETUP_PYTHON_BACKEND)(name, backend_module=module, hook=hooks, device_guard=guard)


# ----------------------------------------------------------------------------- the tensor type
make_wrapper_subclass: Callable[..., Any] = resolve(
    _tp(
        "torch:Tensor._make_wrapper_subclass",
        "TpuTensor: a tensor with sizes but no storage",
        "backend/tensor.py",
    )
)
disabled_torch_function_impl: Any = resolve(
    _tp(
        "torch._C:_disabled_torch_function_impl",
        "TpuTensor opts out of __torch_function__",
        "backend/tensor.py",
    )
)
DisableTorchFunctionSubclass: Any = resolve(
    _tp(
        "torch._C:DisableTorchFunctionSubclass",
        "repr reads the payload without re-dispatch",
        "backend/tensor.py",
    )
)
tensor_str: Callable[..., str] = resolve(
    _tp(
        "torch._tensor_str:_tensor_str",
        "print a TPU tensor exactly as torch prints a CPU one",
        "backend/tensor.py",
    )
)
rebuild_device_tensor_from_cpu: Callable[..., Any] = resolve(
    _tp(
        "torch._utils:_rebuild_device_tensor_from_cpu_tensor",
        "pickle/torch.save a TPU tensor with a rebuild function on torch.load's weights_only allow-list",
        "backend/tensor.py",
    )
)

rebuild_parameter: Callable[..., Any] = resolve(
    _tp(
        "torch._utils:_rebuild_parameter",
        "pickle a TPU Parameter as a Parameter (weights_only allow-listed)",
        "backend/tensor.py",
    )
)

rebuild_tensor_v2: Callable[..., Any] = resolve(
    _tp(
        "torch._utils:_rebuild_tensor_v2",
        "pickle a TPU tensor as a CPU tensor on a storage tagged 'tpu:0'",
        "backend/tensor.py",
    )
)
rebuild_sparse_tensor: Callable[..., Any] = resolve(
    _tp(
        "torch._utils:_rebuild_sparse_tensor",
        "pickle a sparse TPU tensor as its components (weights_only allow-listed)",
        "backend/sparse.py",
    )
)

# ----------------------------------------------------------------------------- the dispatcher
_MODE_STACK = _tp(
    "torch.utils._python_dispatch:_get_current_dispatch_mode_stack",
    "a tensor lifted into a Dynamo trace (torch.tensor(..., device='tpu') in a compiled frame) "
    "must become the trace's fake tensor",
    "backend/dispatch.py",
)


def active_fake_mode() -> Any:
    """The FakeTensorMode on the dispatch mode stack (Dynamo / AOT tracing), or None."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # lazy: heavy

    for mode in reversed(resolve(_MODE_STACK)()):
        if isinstance(mode, FakeTensorMode):
            return mode
    return None


_FORWARD_AD = _tp(
    "torch.autograd.forward_ad:_current_level",
    "is a forward-AD dual level open? (the one-op linear has no forward derivative: the composite runs then)",
    "backend/composite.py",
)
_forward_ad_module: Any = resolve("torch.autograd.forward_ad")
resolve(_FORWARD_AD)


def forward_ad_level() -> int:
    """The innermost open forward-AD dual level (-1: none)."""
    return _forward_ad_module._current_level


current_graph_task_id: Callable[[], int] = resolve(
    _tp(
        "torch._C:_current_graph_task_id",
        "is this op running inside the autograd engine (backward)?",
        "backend/dispatch.py",
    )
)
dispatch_has_kernel_for_dispatch_key: Callable[[str, str], bool] = resolve(
    _tp(
        "torch._C:_dispatch_has_kernel_for_dispatch_key",
        "does an op have a CompositeImplicitAutograd kernel?",
        "backend/dispatch.py",
        "backend/coverage.py",
    )
)
dispatch_get_all_op_names: Callable[[], list] = resolve(
    _tp(
        "torch._C:_dispatch_get_all_op_names",
        "enumerate ATen ops (coverage, foreach lowerings)",
        "backend/coverage.py",
        "backend/ops/foreach.py",
    )
)
DispatchKey: Any = resolve(
    _tp(
        "torch._C:DispatchKey",
        "AutocastPrivateUse1 / PrivateUse1 keys",
        "backend/amp.py",
        "backend/distributed.py",
    )
)
DispatchKeySet: Any = resolve(
    _tp("torch._C:DispatchKeySet", "exclude autocast while casting", "backend/amp.py")
)
ExcludeDispatchKeyGuard: Any = resolve(
    _tp("torch._C:_ExcludeDispatchKeyGuard", "run the casted op below autocast", "backend/amp.py")
)
_NO_DISPATCH = _tp(
    "torch.utils._mode_utils:no_dispatch",
    "change a wrapper's recorded sizes with the stock metadata kernel (squeeze_, t_ ...)",
    "backend/dispatch.py",
)
no_dispatch: Callable[[], Any] = resolve(_NO_DISPATCH)
_DECOMP_TABLE = _tp(
    "torch._decomp:decomposition_table",
    "PyTorch's decompositions (second choice after a lowering)",
    "backend/decompositions.py",
)
_CORE_DECOMPS = _tp(
    "torch._decomp:core_aten_decompositions", "the core ATen decompositions", "backend/decompositions.py"
)
_tp(
    "torch:ops.aten.add.Tensor._schema",
    "argument names/aliasing of an overload (in-place, out=, written args)",
    "backend/dispatch.py",
    "backend/amp.py",
    "backend/distributed.py",
)
_tp(
    "torch:ops.aten.add.Tensor._overloadname",
    "overload names for registration and reports",
    "backend/amp.py",
    "backend/coverage.py",
    "backend/dispatch.py",
)
_tp(
    "torch:ops.aten.add.Tensor._op_dk",
    "call an op's kernel for one dispatch key (FSDP2's PrivateUse1 kernels)",
    "backend/distributed.py",
)


def schema(op: Any) -> Any:
    """An OpOverload's FunctionSchema."""
    return op._schema


def overload_name(op: Any) -> str:
    return op._overloadname


def decomposition_tables() -> tuple[dict, dict]:
    """(the full decomposition table, the core ATen table)."""
    return resolve(_DECOMP_TABLE), resolve(_CORE_DECOMPS)()


def call_for_key(op: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
    return op._op_dk(key, *args, **kwargs)


CGenerator: type = resolve(
    _tp(
        "torch._C:Generator",
        "the C generator type torch.Generator names (subclassed for 'tpu')",
        "backend/generator.py",
    )
)

# ----------------------------------------------------------------------------- serialization
_STORAGE_BASE_NEW = _tp(
    "torch._C:StorageBase.__new__",
    "the C constructor behind torch.UntypedStorage",
    "backend/serialization.py",
)
_SER_TLS = _tp(
    "torch.serialization:_serialization_tls",
    "is a torch.load running, and with which map_location?",
    "backend/serialization.py",
)
_REBUILD = _tp(
    "torch._utils:_rebuild_tensor", "rebuild a tensor on a restored storage", "backend/serialization.py"
)
_REBUILD_V3 = _tp(
    "torch._utils:_rebuild_tensor_v3",
    "rebuild a tensor on a restored storage (dtype variant)",
    "backend/serialization.py",
)
_ALLOWED_GLOBALS = _tp(
    "torch._weights_only_unpickler:_get_allowed_globals",
    "weights_only's cached allow-list of rebuild functions",
    "backend/serialization.py",
)


def storage_base_new() -> Callable[..., Any]:
    return resolve(_STORAGE_BASE_NEW)


def serialization_tls() -> Any:
    return resolve(_SER_TLS)


def torch_utils() -> Any:
    resolve(_REBUILD)
    resolve(_REBUILD_V3)
    return importlib.import_module("torch._utils")


def refresh_weights_only_allowlist() -> None:
    """Drop weights_only's cached allow-list so it picks up the patched rebuild functions."""
    resolve(_ALLOWED_GLOBALS).cache_clear()


# ----------------------------------------------------------------------------- nn / optim / data
parse_to: Callable[..., tuple] = resolve(
    _tp("torch._C._nn:_parse_to", "read the target device of Module.to(...) arguments", "backend/__init__.py")
)
_FOREACH_TYPES = _tp(
    "torch.optim.optimizer:_foreach_supported_types",
    "let optimizers pick their foreach implementation for TPU tensors",
    "backend/__init__.py",
)
_PIN_MEMORY = _tp(
    "torch.utils.data._utils.pin_memory:pin_memory", "the DataLoader's pinning step", "backend/__init__.py"
)
_DEVICE_CONSTRUCTORS = _tp(
    "torch.utils._device:_device_constructors",
    "`with torch.device(...)` matches factories by identity: its cached set must hold the "
    "originals the pin_memory wrappers call",
    "backend/pinned_factories.py",
)
_JIT_REGISTER_BUILTIN = _tp(
    "torch.jit._builtins:_register_builtin",
    "TorchScript must keep compiling torch.zeros(...) as aten::zeros after the pin_memory "
    "wrappers replace it",
    "backend/pinned_factories.py",
)


def cache_device_constructors() -> None:
    """Fill ``torch.utils._device``'s factory set now, while ``torch.*`` still holds the original builtins."""
    resolve(_DEVICE_CONSTRUCTORS)()


def jit_register_builtin(fn: Callable[..., Any], op: str) -> None:
    resolve(_JIT_REGISTER_BUILTIN)(fn, op)


_FOREACH_UTILS_TYPES = _tp(
    "torch.utils._foreach_utils:_foreach_supported_types",
    "let clip_grad_norm_/clip_grad_value_ and other foreach users pick the foreach path for TPU tensors",
    "backend/patches.py",
)


def foreach_supported_types() -> list:
    return resolve(_FOREACH_TYPES)


def foreach_utils_supported_types() -> list:
    return resolve(_FOREACH_UTILS_TYPES)


_ENGINE_RUN_BACKWARD = _tp(
    "torch.autograd.graph:_engine_run_backward",
    "the one entry point of backward and autograd.grad (raise an error kept by the guard)",
    "backend/patches.py",
)
_AUTOGRAD_RUN_BACKWARD = _tp(
    "torch.autograd:_engine_run_backward",
    "torch.autograd's own binding of that entry point",
    "backend/patches.py",
)


def wrap_engine_run_backward(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace both bindings of torch's backward entry point by ``wrap(original)`` (from inside a patch)."""
    graph = importlib.import_module("torch.autograd.graph")
    autograd = importlib.import_module("torch.autograd")
    original = resolve(_ENGINE_RUN_BACKWARD)
    if getattr(original, "__wrapped_for_backward_errors__", False):
        return
    wrapped = wrap(original)
    replace_attr(graph, "_engine_run_backward", wrapped)
    if resolve(_AUTOGRAD_RUN_BACKWARD) is original:
        replace_attr(autograd, "_engine_run_backward", wrapped)


# ----------------------------------------------------------------------------- torch.compile / Dynamo
_TRACE_RULES_ADD = _tp(
    "torch._dynamo.trace_rules:add", "Dynamo runs (never traces) backend/jax frames", "backend/compile.py"
)
_TYPE_DISPATCH = _tp(
    "torch._dynamo.variables.builder:VariableBuilder._type_dispatch_impl",
    "Dynamo wraps TpuTensor as a tensor (it refuses unknown tensor subclasses)",
    "backend/compile.py",
)
_WRAP_TENSOR = _tp(
    "torch._dynamo.variables.builder:VariableBuilder.wrap_tensor",
    "the handler Dynamo uses",
    "backend/compile.py",
)


_INDUCTOR_WRAPPER = _tp(
    "torch:_TorchCompileInductorWrapper",
    "torch.compile(fn) with no backend: a graph whose inputs are not on 'tpu' goes to inductor "
    "exactly as torch.compile would send it (mode, options, dynamic)",
    "backend/compile.py",
)


def inductor_wrapper(mode: Any, options: Any, dynamic: Any) -> Callable[..., Any]:
    return resolve(_INDUCTOR_WRAPPER)(mode, options, dynamic)


_COMPILE_ID = _tp(
    "torch._guards:CompileContext.current_compile_id",
    "which compile of a frame Dynamo is running (frame_compile_id > 0: a recompile), for the recompile counter",
    "backend/compile.py",
)


def current_compile_id() -> Any:
    return resolve(_COMPILE_ID)()


def dynamo_trace_rules_add(module: str) -> None:
    resolve(_TRACE_RULES_ADD)(module)


def dynamo_register_tensor_type(cls: type) -> None:
    type_dispatch = resolve(_TYPE_DISPATCH)
    wrap = resolve(_WRAP_TENSOR)
    for trace_numpy in (False, True):
        type_dispatch(trace_numpy).setdefault(cls, wrap)


# ----------------------------------------------------------------------------- distributed
_CREATE_WORK = _tp(
    "torch._C._distributed_c10d:_create_work_from_future",
    "an already completed Work",
    "backend/distributed.py",
)
_FUNCOL = _tp(
    "torch.distributed._functional_collectives",
    "defines _c10d_functional::_wrap_tensor_autograd",
    "backend/distributed.py",
)
_FSDP_COLLECTIVES = _tp(
    "torch.distributed.fsdp._fully_shard._fsdp_collectives",
    "defines torch.ops.fsdp.*",
    "backend/distributed.py",
)
_FSDP_PARAM = _tp(
    "torch.distributed.fsdp._fully_shard._fsdp_param",
    "FSDP2 free/alloc of unsharded storage",
    "backend/distributed.py",
)
_FSDP_PARAM_GROUP = _tp(
    "torch.distributed.fsdp._fully_shard._fsdp_param_group",
    "FSDP2 free/alloc of unsharded storage",
    "backend/distributed.py",
)
_tp("torch.ops:_c10d_functional", "functional collectives to lower", "backend/distributed.py")


_RESOLVE_PG = _tp(
    "torch.distributed.distributed_c10d:_resolve_process_group",
    "a process group from its name (functional collectives pass names)",
    "backend/distributed.py",
)


_COLLATE_MAP = _tp(
    "torch.utils.data._utils.collate:default_collate_fn_map",
    "DataLoader workers stack 'tpu' samples without a shared-memory storage (a wrapper has none)",
    "backend/multiproc.py",
)


def default_collate_fn_map() -> dict:
    return resolve(_COLLATE_MAP)


def resolve_process_group(name: str) -> Any:
    return resolve(_RESOLVE_PG)(name)


def create_work_from_future(fut: Any) -> Any:
    return resolve(_CREATE_WORK)(fut)


def load_functional_collectives() -> None:
    resolve(_FUNCOL)


def load_fsdp_collectives() -> None:
    resolve(_FSDP_COLLECTIVES)


def fsdp_storage_modules() -> tuple[Any, Any]:
    return resolve(_FSDP_PARAM), resolve(_FSDP_PARAM_GROUP)


def c10d_functional_ops() -> Any:
    return torch.ops._c10d_functional


# ----------------------------------------------------------------------------- conformance harness (tests)
_OP_DB = _tp(
    "torch.testing._internal.common_methods_invocations:op_db",
    "OpInfo samples for the conformance harness",
    "backend/conformance.py",
)


def op_db() -> list:
    return resolve(_OP_DB)


tree_flatten: Callable[..., Any] = resolve(
    _tp("torch.utils._pytree:tree_flatten", "walk OpInfo samples", "backend/conformance.py")
)
tree_map: Callable[..., Any] = resolve(
    _tp("torch.utils._pytree:tree_map", "move OpInfo samples to the device", "backend/conformance.py")
)


# ----------------------------------------------------------------------------- global patches
@dataclass
class Patch:
    """One global monkey-patch: what it replaces, why, and whether correctness needs it."""

    name: str
    target: str
    why: str
    required: bool
    apply: Callable[[], None]
    applied: bool = False
    originals: list[tuple[Any, str, Any]] = field(default_factory=list)


PATCHES: dict[str, Patch] = {}


def _disabled() -> set[str]:
    return {n.strip() for n in os.environ.get("TORCH_TPU_DISABLE_PATCHES", "").split(",") if n.strip()}


def patch(
    name: str, target: str, why: str, *, required: bool
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register ``fn`` as the patch ``name`` and apply it now (once), unless it is optional and switched off
    by ``TORCH_TPU_DISABLE_PATCHES``. A required patch cannot be switched off: the device would give wrong
    results or crash without it."""

    def deco(fn: Callable[[], None]) -> Callable[[], None]:
        p = PATCHES.get(name)
        if p is None:
            p = PATCHES[name] = Patch(name, target, why, required, fn)
        if p.applied:
            return fn
        if name in _disabled():
            if required:
                raise RuntimeError(f"TORCH_TPU_DISABLE_PATCHES: patch {name!r} ({target}) is required: {why}")
            return fn
        _CURRENT.append(p)
        try:
            fn()
        finally:
            _CURRENT.pop()
        p.applied = True
        return fn

    return deco


_CURRENT: list[Patch] = []


MISSING = object()  # the original of an attribute a patch adds


def replace_attr(owner: Any, attr: str, new: Any) -> Any:
    """Set ``owner.attr = new`` from inside a patch, remembering the original (returned; ``MISSING`` if new)."""
    old = getattr(owner, attr, MISSING)
    if _CURRENT:
        _CURRENT[-1].originals.append((owner, attr, old))
    setattr(owner, attr, new)
    return old
