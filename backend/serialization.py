"""torch.load / torch.save for "tpu" tensors, without PyTorch storages on the device.

A TPU tensor holds a JAX array, not a PyTorch storage, and a Python backend cannot register a storage
allocator: creating a PrivateUse1 storage (``torch.UntypedStorage(n, device="tpu")``, ``storage.to("tpu")``,
which ``torch.load(map_location="tpu")`` does for every tensor) dereferences a null allocator in C++ and kills
the interpreter. So:

- every storage constructor on "tpu" is refused with a clear error, except inside ``torch.load``, where a
  storage bound for "tpu" stays on the CPU and is marked with its target device;
- a storage restored for a "tpu" location (``map_location="tpu"``, ``torch.device("tpu")``, ``{"cpu": "tpu"}``,
  a callable returning ``storage.to("tpu")``, or a checkpoint tagged "tpu:N") stays on the CPU, marked;
- the tensor rebuilt on a marked storage is moved to the device as it is rebuilt (a plain copy, so the
  result is a leaf with the saved ``requires_grad``).

Saving goes through ``TpuTensor.__reduce_ex__``: a CPU copy whose storage is tagged "tpu:0", exactly as a CUDA
tensor's storage is tagged "cuda:0", rebuilt by ``_rebuild_tensor_v2`` (on ``weights_only``'s allow-list); so
every ``map_location`` form — ``"cpu"``, a dict, a callable such as ``lambda s, loc: s`` — maps it as it maps
any device checkpoint.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend.strides import contiguous_strides

_MARK = "_tpu_restore_device"
_TPU_LOCATION = re.compile(r"tpu(:\d+)?$")


def _in_load() -> bool:
    """Inside torch.load with a map_location (the only way a storage constructor can be asked for "tpu")."""
    return getattr(private.serialization_tls(), "map_location", None) is not None


def _target(location: str) -> torch.device | None:
    if not isinstance(location, str) or not _TPU_LOCATION.match(location):
        return None
    from tpu_workbench.backend import device  # lazy: startup (device imports this module's users)

    return device.checked_device(torch.device(location))


def _restore(storage: Any, location: str) -> Any:
    """Deserializer for "tpu"/"tpu:N" locations: keep the bytes on the CPU, mark the target."""
    dev = _target(location)
    if dev is None:
        return None
    setattr(storage, _MARK, dev)
    return storage


def _saved_location(storage: Any) -> str | None:
    """Tagger (before the CPU's): a TPU tensor's CPU copy being saved is tagged with its device, "tpu:0"."""
    untyped = getattr(storage, "_untyped_storage", storage)
    return getattr(untyped, "_tpu_saved_location", None)


def _marked(storage: Any) -> torch.device | None:
    untyped = getattr(storage, "_untyped_storage", storage)
    return getattr(untyped, _MARK, None)


def _to_device(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    with torch.no_grad():
        moved = t.detach().to(dev)
    moved.requires_grad_(t.requires_grad)
    return moved


def _rebuild_on_device(
    rebuild: Any, storage: Any, offset: int, size: Any, stride: Any, dev: torch.device
) -> torch.Tensor:
    """A tensor rebuilt on a storage bound for the device. The first tensor on a storage becomes the storage's
    device copy (a tensor of its own shape where it covers the whole storage in order, else the flat storage);
    later tensors on the same storage (views saved with their base, as ``torch.save`` writes a CUDA view) are
    views of that copy, so they still share it after loading."""
    untyped = getattr(storage, "_untyped_storage", storage)
    held = getattr(untyped, "_tpu_device_copy", None)
    if held is None:
        numel = untyped.nbytes() // torch.empty((), dtype=storage.dtype).element_size()
        size, stride = tuple(size), tuple(stride)
        whole = offset == 0 and math.prod(size) == numel and stride == contiguous_strides(size)
        t = rebuild(storage, offset, size, stride) if whole else rebuild(storage, 0, (numel,), (1,))
        held = untyped._tpu_device_copy = _to_device(t, dev)
        if whole:
            return held  # (torch's _rebuild_tensor_v2 sets the saved requires_grad on what this returns)
    with torch.no_grad():
        view = held.as_strided(tuple(size), tuple(stride), offset).detach()
    return view


def _storage_new(orig_new: Any) -> Any:
    def __new__(cls: type, *args: Any, device: Any = None, **kwargs: Any) -> Any:  # noqa: N807 - the slot
        if device is not None and torch.device(device).type == "tpu":
            dev = torch.device(device)
            if not _in_load():
                raise RuntimeError(
                    f"a PyTorch storage on '{dev}' cannot be created: TPU tensors hold JAX arrays, not storages. "
                    "Move tensors with tensor.to('tpu'); load checkpoints with torch.load(f, map_location='tpu')."
                )
            storage = orig_new(cls, *args, **kwargs)  # on the CPU, marked: the tensor rebuilt on it moves
            setattr(storage, _MARK, _target(str(dev)) or dev)
            return storage
        if device is None:
            return orig_new(cls, *args, **kwargs)
        return orig_new(cls, *args, device=device, **kwargs)

    return __new__


def install() -> None:
    """Register the deserializer and the patches (called by ``tpu_workbench.backend.register()``)."""

    @private.patch(
        "storage-on-tpu",
        "torch.UntypedStorage.__new__",
        "a storage on 'tpu' would dereference a null C++ allocator (a segmentation fault): refuse it with "
        "a clear error, and keep it on the CPU, marked, inside torch.load",
        required=True,
    )
    def _storage() -> None:
        cls = torch.UntypedStorage
        private.replace_attr(cls, "__new__", _storage_new(private.storage_base_new()))

    @private.patch(
        "storage-tpu-method",
        "torch.UntypedStorage.tpu, torch.TypedStorage.tpu",
        "storage.tpu(), like storage.cuda(), for map_location callables (lambda s, loc: s.tpu()); "
        "outside torch.load it raises the clear no-storage-on-tpu error",
        required=False,
    )
    def _storage_tpu() -> None:
        def tpu(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
            index = device if isinstance(device, int) else (torch.device(device).index if device else None)
            return self.to(device=torch.device("tpu", index or 0), non_blocking=non_blocking)

        for cls in (torch.UntypedStorage, torch.TypedStorage):
            if not hasattr(cls, "tpu"):
                private.replace_attr(cls, "tpu", tpu)

    @private.patch(
        "load-to-tpu",
        "torch._utils._rebuild_tensor, _rebuild_tensor_v3; torch.serialization packages",
        "torch.load(map_location='tpu' …) restores each storage on the device, which a Python backend "
        "cannot do: storages stay on the CPU and each rebuilt tensor is moved",
        required=True,
    )
    def _load() -> None:
        torch.serialization.register_package(9, _saved_location, _restore)
        utils = private.torch_utils()
        rebuild, rebuild_v3 = utils._rebuild_tensor, utils._rebuild_tensor_v3

        def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any) -> torch.Tensor:
            dev = _marked(storage)
            if dev is None:
                return rebuild(storage, storage_offset, size, stride)
            return _rebuild_on_device(rebuild, storage, storage_offset, size, stride, dev)

        def _rebuild_tensor_v3(storage: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
            t = rebuild_v3(storage, *args, **kwargs)
            dev = _marked(storage)
            return t if dev is None else _to_device(t, dev)

        for new, old in ((_rebuild_tensor, rebuild), (_rebuild_tensor_v3, rebuild_v3)):
            new.__name__, new.__qualname__, new.__module__ = old.__name__, old.__qualname__, old.__module__
            private.replace_attr(utils, old.__name__, new)
        private.refresh_weights_only_allowlist()
