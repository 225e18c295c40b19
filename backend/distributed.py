"""The "tpu_dist" (alias "tpu") process-group backend: collectives on "tpu" tensors over gloo.

Transport: **gloo over host copies**.  ``init_process_group("tpu_dist")`` builds one
``ProcessGroupGloo`` and registers it for both the "cpu" and the "tpu" device types.  A collective
on CPU tensors goes straight to gloo.  A collective on "tpu" tensors reaches the device's
``__torch_dispatch__`` (the Python key sits above the backend keys, so the ``c10d::*`` op never
gets to a PrivateUse1 kernel); there a raw lowering registered here copies every "tpu" tensor
argument to the host, re-issues the *same* ``c10d`` op on the copies (now dispatched to gloo's
CPU path), waits for it, and writes the results back into the "tpu" tensors in place (through the
device's view machinery, so DDP bucket views and FSDP2 shard views see the new values).

Collectives therefore complete before the call returns (``async_op=True`` hands back an already
finished Work).  That costs overlap, never correctness.  Multi-chip execution *inside* one
process would come from JAX sharding, not from this path.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend._jax import cpu_to_jax, jax_to_cpu
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, set_value, value

__all__ = ["BACKEND_NAME", "BACKEND_ALIAS", "register", "set_tpu_launch_env"]

BACKEND_NAME = "tpu_dist"
BACKEND_ALIAS = "tpu"

# c10d ops whose tensor arguments named like this are written by the collective
_WRITTEN_ARGS = {
    "tensors",
    "output_tensors",
    "output_tensor",
    "output_lists",
    "outputs",
    "output",
}
_READ_ONLY_OPS = {"send", "barrier", "monitored_barrier_", "check_for_nan"}

_REGISTERED = False


# --------------------------------------------------------------------------------------------------
# the process group
# --------------------------------------------------------------------------------------------------
def _create_backend(store: Any, rank: int, world_size: int, timeout: timedelta) -> Any:
    """Creator for ``Backend.register_backend``: one gloo backend serving "cpu" and "tpu" tensors."""
    from torch.distributed import ProcessGroupGloo  # lazy: optional (torch.distributed may be absent)

    _register_lazy_hooks()
    _destroy_at_exit()
    return ProcessGroupGloo(store, rank, world_size, timeout)


_EXIT_HOOK = False


def _destroy_at_exit() -> None:
    """Destroy the process groups while the interpreter is still whole, if the program did not: gloo's worker
    threads can still hold work (tensors with Python references) when the interpreter is torn down, and
    freeing them then takes the GIL of a dying interpreter: SIGABRT, "terminate called without an active
    exception" (pytorch/pytorch#190489; seen here once in CI on a migrated torch_xla template run by torchrun,
    after its last line had printed). Gloo's destroy is local to the process, so no other rank is waited for."""
    global _EXIT_HOOK
    if _EXIT_HOOK:
        return
    _EXIT_HOOK = True
    atexit.register(_destroy_groups)


def _destroy_groups() -> None:
    import torch.distributed as dist  # lazy: optional (torch.distributed may be absent)

    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except (
            RuntimeError,
            ValueError,
        ) as exc:  # at exit: say why, never turn a finished run into a failure
            print(f"tpu_dist: the process group could not be destroyed at exit: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# host-copy lowerings for the c10d / functional-collective ops
# --------------------------------------------------------------------------------------------------
def _is_tpu(x: Any) -> bool:
    return isinstance(x, TpuTensor)


def _to_host(x: Any) -> torch.Tensor:
    return jax_to_cpu(value(x))


def _write_back(dst: torch.Tensor, src: torch.Tensor) -> None:
    set_value(dst, cpu_to_jax(src))


def _map(obj: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(obj, list | tuple):
        return type(obj)(_map(o, fn) for o in obj)
    return fn(obj)


def _leaves(obj: Any) -> list[Any]:
    if isinstance(obj, list | tuple):
        return [x for o in obj for x in _leaves(o)]
    return [obj]


def _is_work(x: Any) -> bool:
    return hasattr(x, "wait") and not isinstance(x, torch.Tensor)


def _wait(res: Any) -> None:
    for leaf in _leaves(res):
        if _is_work(leaf):
            leaf.wait()


def _completed_work(result: list[torch.Tensor]) -> Any:
    """A Work that is already done (gloo's send/recv Work must not be waited on twice).

    Its future holds the written "tpu" tensors, as DDP's comm hooks read ``fut.value()``.
    """
    fut: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
    fut.set_result(result)
    return private.create_work_from_future(fut).boxed()


def _ensure_cpu_backend(group: Any) -> None:
    """Host copies are re-issued on the group's "cpu" backend. A group made for "tpu" only (e.g.
    ``init_process_group()`` with no backend, as ``init_device_mesh("tpu", ...)`` does, picks the
    accelerator's backend alone) gets our gloo backend registered for "cpu" as well."""
    import torch.distributed as dist  # lazy: optional

    if isinstance(group, str):
        group = private.resolve_process_group(group)
    elif isinstance(group, torch.ScriptObject):
        group = dist.ProcessGroup.unbox(group)
    if not isinstance(group, dist.ProcessGroup):
        return
    cpu, tpu = torch.device("cpu"), torch.device("tpu")
    if cpu not in group._device_types and tpu in group._device_types:
        group._register_backend(cpu, dist.ProcessGroup.BackendType.CUSTOM, group._get_backend(tpu))


def _groups_in(args: Any, kwargs: dict[str, Any], names: list[str]) -> list[Any]:
    out = []
    for i, a in enumerate(args):
        if i < len(names) and names[i] in ("process_group", "group_name", "group"):
            out.append(a)
    out += [v for k, v in kwargs.items() if k in ("process_group", "group_name", "group")]
    return out


def _c10d_lowering(func: Any) -> Callable[..., Any]:
    """Raw lowering for an in-place ``c10d::*`` op: host copies -> gloo -> write back."""
    schema = private.schema(func)
    names = [a.name for a in schema.arguments]
    op_name = schema.name.split("::")[1]

    def run(*args: Any, **kwargs: Any) -> Any:
        pairs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        written: list[tuple[torch.Tensor, torch.Tensor]] = []

        def host(x: Any) -> Any:
            if _is_tpu(x):
                c = _to_host(x)
                pairs[id(c)] = (x, c)
                return c
            return x

        cargs = []
        for i, a in enumerate(args):
            ca = _map(a, host)
            cargs.append(ca)
            if op_name not in _READ_ONLY_OPS and i < len(names) and names[i] in _WRITTEN_ARGS:
                written += [pairs[id(c)] for c in _leaves(ca) if id(c) in pairs]
        ckwargs = {}
        for k, v in kwargs.items():
            cv = _map(v, host)
            ckwargs[k] = cv
            if op_name not in _READ_ONLY_OPS and k in _WRITTEN_ARGS:
                written += [pairs[id(c)] for c in _leaves(cv) if id(c) in pairs]
        for g in _groups_in(args, kwargs, names):
            _ensure_cpu_backend(g)
        res = func(*cargs, **ckwargs)
        _wait(res)
        for dst, src in written:
            _write_back(dst, src)
        done = _completed_work([dst for dst, _ in written])

        def back(r: Any) -> Any:
            # the op returns its (aliased) inputs: hand back the "tpu" originals, and a finished Work
            if isinstance(r, torch.Tensor):
                return pairs[id(r)][0] if id(r) in pairs else r
            return done if _is_work(r) else r

        return back(res) if not isinstance(res, list | tuple) else type(res)(_map(x, back) for x in res)

    return run


def _functional_lowering(func: Any) -> Callable[..., Any]:
    """Raw lowering for a ``_c10d_functional`` op: host copies -> op -> wait -> new "tpu" tensors."""
    schema = private.schema(func)
    written_names = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}

    def run(*args: Any, **kwargs: Any) -> Any:
        pairs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        written: list[tuple[torch.Tensor, torch.Tensor]] = []

        def host(x: Any) -> Any:
            if _is_tpu(x):
                c = _to_host(x)
                pairs[id(c)] = (x, c)
                return c
            return x

        names = [a.name for a in schema.arguments]
        cargs = []
        for i, a in enumerate(args):
            ca = _map(a, host)
            cargs.append(ca)
            if i < len(names) and names[i] in written_names:
                written += [pairs[id(c)] for c in _leaves(ca) if id(c) in pairs]
        ckwargs = {}
        for k, v in kwargs.items():
            ckwargs[k] = _map(v, host)
            if k in written_names:
                written += [pairs[id(c)] for c in _leaves(ckwargs[k]) if id(c) in pairs]
        for g in _groups_in(args, kwargs, names):
            _ensure_cpu_backend(g)
        res = func(*cargs, **ckwargs)
        wait = private.c10d_functional_ops().wait_tensor.default
        for leaf in _leaves(res):
            if isinstance(leaf, torch.Tensor):
                wait(leaf)
        for dst, src in written:
            _write_back(dst, src)

        def back(r: Any) -> Any:
            if isinstance(r, torch.Tensor):
                if id(r) in pairs:
                    return pairs[id(r)][0]
                return TpuTensor(cpu_to_jax(r))
            return r

        return _map(res, back)

    return run


def _wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
    # Our functional collectives finish before returning; the "tpu" tensor is already final.
    return tensor


def _fresh_alias(tensor: torch.Tensor) -> torch.Tensor:
    # funcol wraps results in AsyncCollectiveTensor to defer the wait; ours are already complete, so a
    # new tensor with the same (immutable) payload is the whole job.
    return TpuTensor(value(tensor))


def _privateuse1_kernel(func: Any) -> Callable[..., Any]:
    key = private.DispatchKey.PrivateUse1

    def run(*args: Any, **kwargs: Any) -> Any:
        return private.call_for_key(func, key, *args, **kwargs)

    return run


def _split_with_sizes_copy(
    all_gather_output: torch.Tensor, sizes: list[int], dim: int = 0, *, out: list[torch.Tensor]
) -> None:
    # Adapter: the device's generic out= path does not take a *list* ``out`` (aten's
    # split_with_sizes_copy.out), so copy piece by piece here.
    with torch.no_grad():
        for dst, piece in zip(out, torch.split(all_gather_output, sizes, dim), strict=True):
            dst.copy_(piece)


def _register_lowerings() -> None:
    c10d_names = [
        "allreduce_",
        "allreduce_coalesced_",
        "allgather_",
        "_allgather_base_",
        "allgather_coalesced_",
        "allgather_into_tensor_coalesced_",
        "reduce_scatter_",
        "_reduce_scatter_base_",
        "reduce_scatter_tensor_coalesced_",
        "broadcast_",
        "reduce_",
        "gather_",
        "scatter_",
        "alltoall_",
        "alltoall_base_",
        "send",
        "recv_",
        "recv_any_source_",
        "barrier",
        "monitored_barrier_",
        "check_for_nan",
    ]
    for n in c10d_names:
        op = getattr(torch.ops.c10d, n, None)
        if op is not None:
            lower(op.default, raw=True)(_c10d_lowering(op.default))
    fn = private.c10d_functional_ops()
    for n in [
        "all_gather_into_tensor",
        "all_gather_into_tensor_coalesced",
        "all_gather_into_tensor_out",
        "all_reduce",
        "all_reduce_",
        "all_reduce_coalesced",
        "all_reduce_coalesced_",
        "all_to_all_single",
        "broadcast",
        "broadcast_",
        "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced",
        "reduce_scatter_tensor_out",
    ]:
        op = getattr(fn, n, None)
        if op is not None:
            lower(op.default, raw=True)(_functional_lowering(op.default))
    lower(fn.wait_tensor.default, raw=True)(_wait_tensor)


@functools.cache
def _register_lazy_hooks() -> None:
    """``_c10d_functional::_wrap_tensor_autograd`` only exists once funcol is imported, which is too
    heavy for ``import torch`` time; it is registered when a process group is created instead."""
    private.load_functional_collectives()  # defines the op
    wrap = getattr(private.c10d_functional_ops(), "_wrap_tensor_autograd", None)
    if wrap is not None:
        lower(wrap.default, raw=True)(_fresh_alias)
    # FSDP2's helper ops ship Python PrivateUse1 kernels made of aten ops; the Python key (our
    # __torch_dispatch__) sits above them, so route to those kernels explicitly.
    private.load_fsdp_collectives()  # defines torch.ops.fsdp

    for n in ("all_gather_copy_in", "chunk_cat"):
        op = getattr(torch.ops.fsdp, n, None)
        if op is not None:
            lower(op.default, raw=True)(_privateuse1_kernel(op.default))
    op = getattr(torch.ops.fsdp, "split_with_sizes_copy", None)
    if op is not None:
        lower(op.default, raw=True)(_split_with_sizes_copy)
    _patch_fsdp_storage()


def _patch_fsdp_storage() -> None:
    @private.patch(
        "fsdp2-storage",
        "torch.distributed.fsdp._fully_shard._fsdp_param.free_storage/alloc_storage",
        "FSDP2 frees/re-allocates unsharded parameters with untyped_storage().resize_; a TPU tensor has "
        "no storage (its payload is an immutable jax.Array the all-gather replaces), so both are "
        "no-ops for TPU tensors: correct, without FSDP's memory saving on the unsharded copy",
        required=True,
    )
    def _fsdp() -> None:
        _fsdp_param, _fsdp_param_group = private.fsdp_storage_modules()
        orig_free, orig_alloc = _fsdp_param.free_storage, _fsdp_param.alloc_storage

        def free_storage(tensor: torch.Tensor) -> None:
            if not _is_tpu(tensor):
                orig_free(tensor)

        def alloc_storage(tensor: torch.Tensor) -> None:
            if not _is_tpu(tensor):
                orig_alloc(tensor)

        for mod in (_fsdp_param, _fsdp_param_group):
            if hasattr(mod, "free_storage"):
                private.replace_attr(mod, "free_storage", free_storage)
            if hasattr(mod, "alloc_storage"):
                private.replace_attr(mod, "alloc_storage", alloc_storage)


# --------------------------------------------------------------------------------------------------
# launch helper (TorchTPU's torch.tpu.distributed.set_tpu_launch_env)
# --------------------------------------------------------------------------------------------------
def set_tpu_launch_env(nnodes: int = 1, nproc_per_node: int = 1, node_rank: int = 0) -> dict[str, str]:
    """Set the launcher variables ``torchrun``/``mp.spawn`` workers read; returns what was set.

    On this JAX-backed device there is no TPU topology to discover, so only the standard
    ``WORLD_SIZE``/``NODE_RANK``/``MASTER_ADDR``/``MASTER_PORT`` are filled (existing values win).
    """
    env = {
        "WORLD_SIZE": str(nnodes * nproc_per_node),
        "NODE_RANK": str(node_rank),
        "MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
        "MASTER_PORT": os.environ.get("MASTER_PORT", "29500"),
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in env}


@functools.cache
def _register_backends() -> None:
    import torch.distributed as dist  # lazy: optional

    if not dist.is_available():
        return
    for name in (BACKEND_NAME, BACKEND_ALIAS):
        if name.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(name, _create_backend, devices=["cpu", "tpu"])


def register() -> None:
    """Called by backend.register(): the "tpu_dist"/"tpu" backends and the collective lowerings."""
    global _REGISTERED
    if _REGISTERED:
        return
    _register_backends()
    _register_lowerings()
    _REGISTERED = True
