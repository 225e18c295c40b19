"""TpuTensor: a wrapper tensor on device "tpu" whose payload is a ``jax.Array``.

Aliasing. JAX arrays are immutable, so storage sharing is emulated: a tensor produced by a view op
(``view``, ``select``, ``t``, ``detach``, ...) records its *root* tensor and the chain of view lowerings
that derive it from the root. Writing to a view scatters the new values into the root at the indices the
chain selects (the chain replayed on an ``iota`` of the root), and bumps the root's generation; reading a
view whose root moved on replays the chain. Roots are always current.
"""

from __future__ import annotations

import copy
import weakref
from collections import OrderedDict
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import lazy
from tpu_workbench.backend._jax import j2t_dtype, jax_module, jax_to_cpu
from tpu_workbench.backend.jit import freeze
from tpu_workbench.backend.lazy import Lazy
from tpu_workbench.backend.op_jit import op_jit
from tpu_workbench.backend.strides import contiguous_strides

_DEVICE: torch.device | None = None  # resolved after backend.register renamed PrivateUse1


def _device() -> torch.device:
    global _DEVICE
    if _DEVICE is None:
        _DEVICE = torch.device(private.privateuse1_name(), 0)
    return _DEVICE


_INTERNAL_ATTRS = frozenset(
    {"_elem", "_root", "_chain", "_gen", "_seen", "_address", "_viewed", "_saved_storage"}
)


_TENSOR_DATA = torch.Tensor.data  # (the C getset descriptor: its setter is set_data)


class TpuTensor(torch.Tensor):
    """A tensor on the "tpu" device; ``_elem`` holds its value as a ``jax.Array`` (or a jax tracer)."""

    _elem: Any
    _root: TpuTensor | None
    _chain: tuple
    _gen: int
    _seen: int

    __torch_function__ = private.disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: Any, requires_grad: bool = False, geometry: tuple | None = None) -> TpuTensor:
        """``geometry``: a view's (strides, storage offset) in its root (backend/strides.py); None: contiguous."""
        if geometry is None:
            r = private.make_wrapper_subclass(
                cls,
                elem.shape,
                dtype=j2t_dtype(elem.dtype),
                device=_DEVICE or _device(),
                requires_grad=requires_grad,
            )
        else:
            r = private.make_wrapper_subclass(
                cls,
                elem.shape,
                strides=geometry[0],
                storage_offset=geometry[1],
                dtype=j2t_dtype(elem.dtype),
                device=_DEVICE or _device(),
                requires_grad=requires_grad,
            )
        r._elem = elem
        r._root = None
        r._gen = 0
        return r

    def __init__(self, elem: Any, requires_grad: bool = False, geometry: tuple | None = None) -> None:
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
        return _dispatch(func, types, args, kwargs)

    @property
    def data(self) -> torch.Tensor:  # noqa: D102 - torch's
        return _TENSOR_DATA.__get__(self)

    @data.setter
    def data(self, new: torch.Tensor) -> None:
        # PyTorch copies ``new``'s sizes, strides and dtype into this tensor in C++ (no dispatch to hook): the
        # wrapper's array follows here (it kept its old one: ``p.data = p.data.t()`` read back untransposed).
        _TENSOR_DATA.__set__(self, new)
        if type(new) is TpuTensor:
            adopt(self, new)

    # torch refuses these on subclasses; go through a CPU copy.
    def tolist(self) -> Any:
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False) -> Any:
        """Refused as on CUDA (code tested here must not depend on a device tensor converting implicitly);
        ``force=True`` copies through the host, as torch allows for any device."""
        if not force:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                "to host memory first."
            )
        return self.detach().cpu().numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        self.numpy()  # raises the CUDA-style TypeError
        raise AssertionError("unreachable")

    def __format__(self, format_spec: str) -> str:
        # torch formats a 0-dim plain Tensor as its Python number (f"{loss:.3f}"); a subclass would print its repr.
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def data_ptr(self) -> int:
        """A stable stand-in for the address: equal for tensors that alias the same root at the same first
        element, different otherwise (code compares data_ptr()s to find shared or tied tensors)."""
        return _storage_base(self) + self.storage_offset() * self.element_size()

    def untyped_storage(self) -> TpuStorage:
        return TpuStorage(self._root if self._root is not None else self, self.device)

    def storage(self) -> TpuStorage:
        return self.untyped_storage()

    def is_pinned(self, device: Any = None) -> bool:
        return False

    def pin_memory(self, device: Any = None) -> TpuTensor:
        raise RuntimeError(f"cannot pin a '{self.device}' tensor: only dense CPU tensors can be pinned")

    def share_memory_(self) -> TpuTensor:
        # CUDA shares device memory between processes through IPC handles; a JAX array has none, so a model
        # "shared" here would train a separate copy in each process (Hogwild) without saying so.
        raise RuntimeError(
            f"share_memory_(): a '{self.device}' tensor cannot be shared between processes (its "
            "JAX array has no inter-process handle); share the model on the CPU and move it to "
            "'tpu' inside each process, or use torch.distributed"
        )

    def __deepcopy__(self, memo: dict) -> TpuTensor:
        # torch's default copies the payload's storage, which a wrapper has not; a JAX array is immutable, so a
        # new root on the same array is an independent copy.
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment."
            )
        if id(self) in memo:
            return memo[id(self)]
        if self._root is not None:  # a view: a view of the root's copy, so copies keep sharing as on CUDA
            root = copy.deepcopy(self._root, memo)
            new = stale_view(
                root, None, tuple(self.shape), self.dtype, (self.stride(), self.storage_offset())
            )
            new._chain = self._chain
        else:
            new = TpuTensor(value(self))
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        extra = {k: v for k, v in self.__dict__.items() if k not in _INTERNAL_ATTRS}
        new.__dict__.update(copy.deepcopy(extra, memo))
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto: int) -> Any:
        # Saved as a CPU tensor whose storage is tagged "tpu:0" (as a CUDA tensor's storage is tagged "cuda:0"):
        # torch.load's map_location — a string, a dict, a callable — then maps it like any device checkpoint,
        # and with no map_location it comes back on "tpu". A Parameter stays a Parameter.
        if getattr(self, "_is_param", False):
            plain = TpuTensor(value(self))
            return (private.rebuild_parameter, (plain, self.requires_grad, OrderedDict()))
        root = self._root if self._root is not None else self
        if root.dtype != self.dtype:  # a view of another dtype (view_as_real ...): saved as a copy of its own
            typed, offset, stride = (
                _cpu_storage(value(self), self.device),
                0,
                contiguous_strides(tuple(self.shape)),
            )
        else:  # a view is saved as its root's storage with its own offset and strides, as a CUDA view is
            typed, offset, stride = saved_storage(root), self.storage_offset(), self.stride()
        return (
            private.rebuild_tensor_v2,
            (typed, offset, tuple(self.shape), stride, self.requires_grad, OrderedDict()),
        )

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        # Print like torch does for any device, from a CPU copy of the value.
        with private.DisableTorchFunctionSubclass():
            cpu = jax_to_cpu(value(self))
        body = private.tensor_str(cpu, len("tensor("))
        suffix = [f"device='{self.device}'"]
        if self.dtype not in (torch.get_default_dtype(), torch.int64, torch.bool) or cpu.numel() == 0:
            suffix.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            suffix.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        elif self.requires_grad:
            suffix.append("requires_grad=True")
        if cpu.numel() == 0 and cpu.dim() != 1:
            suffix.append(f"size={tuple(cpu.shape)}")
        return "tensor(" + body + ", " + ", ".join(suffix) + ")"


def _cpu_storage(array: Any, device: torch.device) -> torch.storage.TypedStorage:
    cpu = jax_to_cpu(array)
    storage = cpu.untyped_storage()
    storage._tpu_saved_location = f"{device.type}:{device.index or 0}"
    return torch.storage.TypedStorage(wrap_storage=storage, dtype=cpu.dtype, _internal=True)


def saved_storage(root: TpuTensor) -> torch.storage.TypedStorage:
    """The CPU storage a root and its views are pickled with: one per root (and generation) while a
    ``torch.save`` holds it, so the root and its views are written once and load sharing one storage."""
    held = getattr(root, "_saved_storage", None)
    if held is not None and held[0] == root._gen:
        untyped = held[1]()
        if untyped is not None:
            return torch.storage.TypedStorage(wrap_storage=untyped, dtype=root.dtype, _internal=True)
    typed = _cpu_storage(value(root), root.device)
    root._saved_storage = (root._gen, weakref.ref(typed._untyped_storage))
    return typed


class ViewStep:
    """One view op in a view's chain, ``fn(value, *args, **kwargs)`` (item ``index`` of a multi-output view).
    Hashable by what it does, so fused eager can key a graph that replays or writes through views."""

    __slots__ = ("fn", "args", "kwargs", "index", "key")

    def __init__(self, fn: Any, args: tuple, kwargs: dict, index: int | None = None) -> None:
        self.fn, self.args, self.kwargs, self.index = fn, args, kwargs, index
        try:
            self.key = (fn, freeze(args), freeze(tuple(kwargs.items())), index)
            hash(self.key)
        except TypeError:
            self.key = None

    def __call__(self, e: Any) -> Any:
        r = self.fn(e, *self.args, **self.kwargs)
        return r if self.index is None else r[self.index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ViewStep) and self.key is not None and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key) if self.key is not None else id(self)


def _replay(root_elem: Any, chain: tuple) -> Any:
    for f in chain:
        root_elem = f(root_elem)
    return root_elem


# Strict eager: reading a stale view and writing through a view run as one cached executable per (root
# shape, chain); a chain with a step that cannot be keyed runs plainly.
_REPLAY = op_jit(_replay)


def _keyable(chain: tuple) -> bool:
    return all(getattr(f, "key", None) is not None for f in chain)


def payload(t: TpuTensor) -> Any:
    """The current value of ``t`` as the dispatcher sees it: a ``jax.Array``, or in fused eager possibly a
    ``Lazy`` placeholder (refreshing a view whose root was written since)."""
    e = t._elem
    if e.__class__ is Lazy and e.value is not None:
        e = t._elem = e.value
    root = t._root
    if root is not None and root._gen != t._seen:
        base = payload(root)
        if lazy.active() and _keyable(t._chain):
            e = lazy.call(_replay, (base, t._chain))
        else:
            e = _REPLAY(value(root) if base.__class__ is Lazy else base, t._chain)
        t._elem = e
        t._seen = root._gen
    return e


def value(t: TpuTensor) -> Any:
    """The concrete value of ``t`` (a ``jax.Array``): runs pending fused-eager work it depends on."""
    e = payload(t)
    if e.__class__ is Lazy:
        e = t._elem = lazy.materialize(e)
    return e


def set_value(t: TpuTensor, new: Any) -> None:
    """Write ``new`` (same shape and dtype as ``t``) into ``t``, and through to its root if a view."""
    root = t._root
    if root is None:
        t._elem = new
        t._gen += 1
        return
    if not t._chain:  # a pure alias (detach, alias): same value as the root
        root._elem = new
    else:
        base = payload(root)
        if lazy.active() and _keyable(t._chain):
            root._elem = lazy.call(_scatter_through, (base, t._chain, new))
        else:
            if base.__class__ is Lazy:
                base = value(root)
            if new.__class__ is Lazy:
                new = lazy.materialize(new)
            block = _write_block(base, t._chain, new)
            root._elem = block if block is not None else _SCATTER_THROUGH(base, t._chain, new)
    root._gen += 1
    t._elem = new
    t._seen = root._gen


def _write_block(base: Any, chain: tuple, new: Any) -> Any:
    """The new root when the view is a block of it (``buf[i] = row``, ``buf[a:b] = rows``: selects and unit-step
    slices): one dynamic_update_slice whose offsets are traced values, so writing row after row of a replay
    buffer reuses one program (keyed by shapes) instead of compiling a scatter per row; else None."""
    if not chain or any(getattr(step.fn, "view_region", None) is None for step in chain):
        return None
    dims = list(range(base.ndim))  # base dim of each dim of the current view
    starts, sizes = [0] * base.ndim, list(base.shape)
    for step in chain:
        if step.index is not None or step.kwargs:
            return None
        shape = tuple(sizes[d] for d in dims)
        region = step.fn.view_region(shape, *step.args)
        if region is None:
            return None
        d, start, size = region
        b = dims[d]
        starts[b] += start
        if size is None:  # a select: that dim is gone from the view
            sizes[b] = 1
            del dims[d]
        else:
            sizes[b] = size
    jax = jax_module()
    jnp = jax.numpy
    view_shape = tuple(sizes[d] for d in dims)
    update = jnp.broadcast_to(new, view_shape).astype(base.dtype).reshape(tuple(sizes))
    offsets = [jnp.asarray(o, dtype=jnp.int32) for o in starts]
    return jax.lax.dynamic_update_slice(base, update, offsets)


def _scatter_through(base: Any, chain: tuple, new: Any) -> Any:
    """New root value after writing ``new`` through the view ``chain`` (replayed on an iota of the root).

    Complex roots use a complex iota (real part = element index, imaginary part = index + n), so views that
    take real/imaginary parts (real, imag, view_as_real) map each value to its component; a real root seen
    through view_as_complex maps the two components back to two real elements."""
    jnp = jax_module().numpy
    inverted = _write_by_inverse(base, chain, new)
    if inverted is not None:
        return inverted
    n = base.size
    if jnp.issubdtype(base.dtype, jnp.complexfloating):
        iota = (jnp.arange(n, dtype=jnp.float64) + 1j * jnp.arange(n, 2 * n, dtype=jnp.float64)).reshape(
            base.shape
        )
        idx = _replay(iota, chain)
        if jnp.issubdtype(idx.dtype, jnp.complexfloating):
            if bool(jnp.any(jnp.imag(idx) < 0)):
                raise NotImplementedError(
                    "writing through a conjugated view of a TPU tensor is not supported"
                )
            k = jnp.real(idx).astype(jnp.int64).reshape(-1)
            new = jnp.broadcast_to(new, idx.shape).reshape(-1).astype(base.dtype)
            return base.reshape(-1).at[k].set(new).reshape(base.shape)
        k = idx.astype(jnp.int64).reshape(-1)
        ri = jnp.concatenate([jnp.real(base).reshape(-1), jnp.imag(base).reshape(-1)])
        ri = ri.at[k].set(jnp.broadcast_to(new, idx.shape).reshape(-1).astype(ri.dtype))
        return (ri[:n] + 1j * ri[n:]).astype(base.dtype).reshape(base.shape)
    if jnp.issubdtype(new.dtype, jnp.complexfloating):
        iota = jnp.arange(n, dtype=jnp.float64).reshape(base.shape)
        idx = _replay(iota, chain)
        new = jnp.broadcast_to(new, idx.shape).reshape(-1)
        flat = base.reshape(-1)
        flat = flat.at[jnp.real(idx).astype(jnp.int64).reshape(-1)].set(jnp.real(new).astype(base.dtype))
        flat = flat.at[jnp.imag(idx).astype(jnp.int64).reshape(-1)].set(jnp.imag(new).astype(base.dtype))
        return flat.reshape(base.shape)
    iota = jnp.arange(n, dtype=jnp.int64).reshape(base.shape)
    idx = _replay(iota, chain)
    new = jnp.broadcast_to(new, idx.shape)
    return base.reshape(-1).at[idx.reshape(-1)].set(new.reshape(-1)).reshape(base.shape)


def _write_by_inverse(base: Any, chain: tuple, new: Any) -> Any:
    """The new root when every step of the chain is a bijective view with a known inverse (``t``, ``transpose``,
    ``permute``, ``view``, ``(un)squeeze``: backend/ops/shape.py marks them): the inverse steps applied to the
    written value, which XLA fuses (a scatter costs an index array and an unfused loop); else None."""
    inverses = []
    for step in chain:
        inverse = getattr(step.fn, "view_inverse", None)
        if inverse is None or step.index is not None:
            return None
        inverses.append(inverse)
    jnp = jax_module().numpy
    if jnp.issubdtype(base.dtype, jnp.complexfloating) or jnp.issubdtype(new.dtype, jnp.complexfloating):
        return None
    inputs = [base]
    for step in chain[:-1]:
        inputs.append(step(inputs[-1]))
    out_shape = chain[-1](inputs[-1]).shape if chain else base.shape
    y = jnp.broadcast_to(new, out_shape).astype(base.dtype)
    for step, inverse, x in zip(reversed(chain), reversed(inverses), reversed(inputs), strict=True):
        y = inverse(y, x, *step.args, **step.kwargs)
    return y if tuple(y.shape) == tuple(base.shape) else None


_SCATTER_THROUGH = op_jit(_scatter_through)


def make_view(out: TpuTensor, src: TpuTensor, fn: ViewStep | None) -> None:
    """Mark ``out`` as a view of ``src`` derived by ``fn(src_value)`` (None: an alias)."""
    root = src._root
    (src if root is None else root)._viewed = True  # its shape can no longer change in place (unsqueeze_ ...)
    if root is None:
        out._root = src
        out._chain = (fn,) if fn is not None else ()
        out._seen = src._gen
    else:
        out._root = root
        out._chain = src._chain + ((fn,) if fn is not None else ())
        out._seen = src._seen


def adopt(dst: TpuTensor, src: TpuTensor) -> None:
    """``dst.data = src``: PyTorch copies ``src``'s sizes, strides and dtype into ``dst``'s C++ tensor; this makes
    ``dst``'s value an alias of ``src``'s, sharing its root as a CUDA tensor would share its storage."""
    root = src._root
    dst._elem = src._elem
    dst._gen = 0
    if root is None:
        src._viewed = True
        dst._root, dst._chain, dst._seen = src, (), src._gen
    else:
        root._viewed = True
        dst._root, dst._chain, dst._seen = root, src._chain, src._seen


_STALE = -1  # a view's seen-generation that no root has: its array is computed when first read


def stale_view(
    src: TpuTensor, step: ViewStep | None, shape: tuple, dtype: torch.dtype, geometry: tuple | None = None
) -> TpuTensor:
    """A view of ``src`` by ``step`` (None: an alias) whose array is not computed yet (backend/views.py): the
    first ``payload`` replays its chain from the root. ``geometry``: its (strides, storage offset)."""
    if geometry is None:
        out = private.make_wrapper_subclass(TpuTensor, shape, dtype=dtype, device=_DEVICE or _device())
    else:
        out = private.make_wrapper_subclass(
            TpuTensor,
            shape,
            strides=geometry[0],
            storage_offset=geometry[1],
            dtype=dtype,
            device=_DEVICE or _device(),
        )
    out._elem = None
    out._gen = 0
    root = src._root
    if root is None:
        src._viewed = True
        out._root = src
        out._chain = (step,) if step is not None else ()
    else:
        root._viewed = True
        out._root = root
        out._chain = src._chain + (step,) if step is not None else src._chain
    out._seen = _STALE
    return out


class TpuStorage:
    """What ``untyped_storage()`` returns for a TPU tensor: the identity and size of its root payload (JAX
    arrays have no PyTorch storage). Enough for code that finds shared tensors (``data_ptr``, ``nbytes``);
    anything that needs real storage bytes raises."""

    def __init__(self, root: TpuTensor, device: torch.device) -> None:
        self._root = root
        self.device = device

    def data_ptr(self) -> int:
        return _storage_base(self._root)

    def nbytes(self) -> int:
        return self._root.numel() * self._root.element_size()

    def size(self) -> int:
        return self.nbytes()

    __len__ = size

    def element_size(self) -> int:
        return 1

    def is_shared(self) -> bool:
        return False

    def cpu(self) -> torch.UntypedStorage:
        return self._root.detach().cpu().untyped_storage()

    def tolist(self) -> list:
        return self.cpu().tolist()

    def _refuse(self, what: str) -> Any:
        raise RuntimeError(
            f"{what} on the storage of a TPU tensor is not supported: TPU tensors hold JAX arrays, "
            "not PyTorch storages (use tensor operations, or .cpu() first)"
        )

    def resize_(self, size: int) -> Any:
        return self._refuse("resize_")

    def copy_(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("copy_")

    def __repr__(self) -> str:
        return f"TpuStorage(root of {tuple(self._root.shape)} {self._root.dtype}, device='{self.device}')"


_next_address = 1 << 40


def _storage_base(t: TpuTensor) -> int:
    """A virtual address for the root's payload, assigned on first use from non-overlapping ranges."""
    global _next_address
    root = t._root if t._root is not None else t
    base = getattr(root, "_address", None)
    if base is None:
        base = root._address = _next_address
        _next_address += (root.numel() * root.element_size() + 511) // 256 * 256
    return base


def _no_handler(func: Any, types: Any, args: tuple, kwargs: dict | None) -> Any:
    raise RuntimeError("the TPU device is not initialised (backend.dispatch was never imported)")


_dispatch = _no_handler


def set_dispatch_handler(handler: Any) -> None:
    """Install the function every ATen call on a TPU tensor goes to (``tpu_workbench.backend.dispatch`` installs itself:
    the tensor type stays below the dispatcher in the import graph)."""
    global _dispatch
    _dispatch = handler
