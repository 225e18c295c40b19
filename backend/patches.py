"""The global patches the device applies to PyTorch when it registers (see ``tpu_workbench.backend._torch_private``).

``python -m tpu_workbench.backend.patches`` prints every patch (these and the ones compile/distributed register), its
target, why it exists and whether it can be switched off with ``TORCH_TPU_DISABLE_PATCHES``.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import backward_errors, memory, multiproc, pinned_factories, pinning
from tpu_workbench.backend import device as device_module
from tpu_workbench.backend.tensor import TpuTensor


def _already_there(module: torch.nn.Module, dev: torch.device, dtype: torch.dtype | None) -> bool:
    for t in itertools.chain(module.parameters(), module.buffers()):
        if t.device.type != dev.type:
            return False
        if dtype is not None and t.dtype != dtype and (t.is_floating_point() or t.is_complex()):
            return False
    return True


def _parameter_slots(module: torch.nn.Module) -> list[tuple[torch.nn.Module, str, int]]:
    """(module, name, id of the parameter) for every parameter slot, shared ones included."""
    return [(m, k, id(p)) for m in module.modules() for k, p in m._parameters.items() if p is not None]


def _retie(slots: list[tuple[torch.nn.Module, str, int]]) -> None:
    """After a conversion that built new Parameters per slot: slots that shared one parameter share again."""
    first: dict[int, Any] = {}
    for m, k, pid in slots:
        first.setdefault(pid, m._parameters[k])
        m._parameters[k] = first[pid]


def _pins_for_tpu(device: Any) -> bool:
    if device is not None:
        return torch.device(device).type == "tpu"
    return _on_tpu_accelerator()


def _on_tpu_accelerator() -> bool:
    acc = torch.accelerator.current_accelerator()
    return acc is not None and acc.type == "tpu"


def apply() -> None:
    """Apply the device's core patches (idempotent; called by ``tpu_workbench.backend.register()``)."""

    apply_accelerator()

    @private.patch(
        "multiprocessing-tpu-tensors",
        "multiprocessing ForkingPickler, DataLoader default_collate_fn_map",
        "a 'tpu' tensor crosses processes through host memory and comes back on 'tpu' (queues, DataLoader workers)",
        required=False,
    )
    def _multiprocessing() -> None:
        multiproc.install()

    @private.patch(
        "accelerator-synchronize",
        "torch.accelerator.synchronize",
        "a Python backend has no C++ stream to synchronise: wait for pending JAX work instead",
        required=True,
    )
    def _sync() -> None:
        orig = torch.accelerator.synchronize

        def synchronize(device_index: Any = None) -> None:
            if _on_tpu_accelerator():
                device_module._synchronize()
                return
            orig(device_index)

        synchronize.__doc__ = orig.__doc__
        private.replace_attr(torch.accelerator, "synchronize", synchronize)

    @private.patch(
        "pin-memory",
        "torch.Tensor.pin_memory, torch.Tensor.is_pinned",
        "pinning asks the accelerator for a C++ pinned-memory allocator a Python backend cannot register; "
        "with 'tpu' as the accelerator a pinned tensor is a host copy marked pinned (host->device copies "
        "go through jax.device_put and need no page-locked buffer), so x.pin_memory().to('tpu', "
        "non_blocking=True) and DataLoader(pin_memory=True) work",
        required=True,
    )
    def _pin() -> None:
        orig_pin, orig_is_pinned = torch.Tensor.pin_memory, torch.Tensor.is_pinned

        def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
            if self.device.type == "cpu" and _pins_for_tpu(device):
                return pinning.pin(self)
            return orig_pin(self) if device is None else orig_pin(self, device)

        def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
            if self.device.type == "cpu" and _pins_for_tpu(device):
                return pinning.is_pinned(self)
            return orig_is_pinned(self) if device is None else orig_is_pinned(self, device)

        pin_memory.__doc__, is_pinned.__doc__ = orig_pin.__doc__, orig_is_pinned.__doc__
        private.replace_attr(torch.Tensor, "pin_memory", pin_memory)
        private.replace_attr(torch.Tensor, "is_pinned", is_pinned)

    @private.patch(
        "pin-memory-factories",
        "torch.empty, torch.zeros, ... (every factory with pin_memory=)",
        "a factory called with pin_memory=True asks the accelerator for the same C++ pinned allocator; "
        "with 'tpu' as the accelerator it builds a host tensor marked pinned, as Tensor.pin_memory() does",
        required=False,
    )
    def _pin_factories() -> None:
        pinned_factories.install()

    @private.patch(
        "module-to-swaps-params",
        "torch.nn.Module.to",
        "Module.to('tpu') must keep parameter identity (tied weights, optimizers built earlier): a CPU "
        "parameter cannot take a wrapper's payload through .data=, so the tensors are swapped",
        required=True,
    )
    def _module_to() -> None:
        orig = torch.nn.Module.to

        def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            dev, dtype = private.parse_to(*args, **kwargs)[:2]
            involved = dev is not None and (
                dev.type == "tpu" or any(isinstance(p, TpuTensor) for p in self.parameters())
            )
            if not involved or torch.__future__.get_swap_module_params_on_conversion():
                return orig(self, *args, **kwargs)
            if _already_there(self, dev, dtype):
                return self  # as on the CPU: a no-op (swapping a tensor with itself fails under a live graph)
            slots = _parameter_slots(self)
            torch.__future__.set_swap_module_params_on_conversion(True)
            try:
                return orig(self, *args, **kwargs)
            except RuntimeError as exc:
                if "Couldn't swap" not in str(exc):
                    raise
            finally:
                torch.__future__.set_swap_module_params_on_conversion(False)
            # A live autograd graph holds the parameters (a CPU forward whose outputs are still referenced):
            # swapping would corrupt it, so build new Parameters as PyTorch does for devices without in-place
            # conversion (XLA), keep parameters shared inside the module shared, and say so.
            warnings.warn(
                "Module.to('tpu'): the parameters are held by a live autograd graph (outputs of an "
                "earlier forward are still referenced), so they could not be moved in place: the "
                "module has new Parameter objects; build optimizers after .to('tpu')",
                stacklevel=2,
            )
            out = orig(self, *args, **kwargs)
            _retie(slots)
            return out

        to.__doc__ = orig.__doc__
        private.replace_attr(torch.nn.Module, "to", to)
        private.replace_attr(
            torch.nn.Module, "tpu", lambda self, device=None: to(self, torch.device("tpu", 0))
        )

    @private.patch(
        "optimizer-foreach-types",
        "torch.optim.optimizer._foreach_supported_types",
        "optimizers choose their faster foreach implementation for TPU tensors (speed only)",
        required=False,
    )
    def _foreach() -> None:
        types = private.foreach_supported_types()
        if TpuTensor not in types:
            types.append(TpuTensor)

    @private.patch(
        "foreach-utils-types",
        "torch.utils._foreach_utils._foreach_supported_types",
        "gradient clipping (clip_grad_norm_, clip_grad_value_) takes its foreach path for TPU tensors, as "
        "for CUDA tensors, instead of one op per gradient (speed only)",
        required=False,
    )
    def _foreach_utils() -> None:
        types = private.foreach_utils_supported_types()
        if TpuTensor not in types:
            types.append(TpuTensor)

    @private.patch(
        "backward-errors",
        "torch.autograd._engine_run_backward (and torch.autograd.graph's)",
        "an error raised inside backward (a hook, an unpack hook, an op the device refuses) is taken out "
        "of the interpreter by the device guard so that PyTorch's noexcept guard code does not abort the "
        "process; the backward entry point raises it again in place of the empty error the engine returns",
        required=True,
    )
    def _backward_errors() -> None:
        private.wrap_engine_run_backward(backward_errors.reraising_kept_errors)


def apply_accelerator() -> None:
    """torch.accelerator's device-index and memory queries, which reach C++ hooks a Python backend lacks."""

    @private.patch(
        "accelerator-device-index",
        "torch.accelerator.set_device_index, device_index",
        "one device per process: an ordinal this process does not own raises 'invalid device ordinal' "
        "as on CUDA (without it, set_device_index(1) silently selects tpu:0)",
        required=True,
    )
    def _index() -> None:
        orig_set = torch.accelerator.set_device_index
        orig_ctx = torch.accelerator.device_index

        def set_device_index(device: Any, /) -> None:
            if _on_tpu_accelerator():
                device_mod_check(device)
                return
            orig_set(device)

        class device_index(orig_ctx):  # noqa: N801 - mirrors torch.accelerator.device_index
            def __init__(self, device: Any, /) -> None:
                if _on_tpu_accelerator():
                    device_mod_check(device)
                    device = None if device is None else 0
                super().__init__(device)

        for name, fn in (
            ("set_device_index", set_device_index),
            ("set_device_idx", set_device_index),
            ("device_index", device_index),
        ):
            fn.__doc__ = getattr(torch.accelerator, name).__doc__
            private.replace_attr(torch.accelerator, name, fn)

    @private.patch(
        "accelerator-memory",
        "torch.accelerator.memory_* / torch.accelerator.memory.*",
        "PyTorch reads memory statistics from a C++ allocator (an internal assert for a Python backend): "
        "answer with what JAX reports, or raise naming the limit",
        required=True,
    )
    def _memory() -> None:
        names = (
            "memory_stats",
            "memory_allocated",
            "memory_reserved",
            "max_memory_allocated",
            "max_memory_reserved",
            "reset_peak_memory_stats",
            "reset_accumulated_memory_stats",
            "empty_cache",
            "get_memory_info",
        )
        mem_mod = private.resolve("torch.accelerator.memory")
        for name in names:
            orig = getattr(torch.accelerator, name)
            ours = getattr(memory, name)

            def route(*args: Any, _orig: Any = orig, _ours: Any = ours, **kwargs: Any) -> Any:
                return _ours(*args, **kwargs) if _on_tpu_accelerator() else _orig(*args, **kwargs)

            route.__doc__, route.__name__ = orig.__doc__, name
            private.replace_attr(torch.accelerator, name, route)
            if hasattr(mem_mod, name):
                private.replace_attr(mem_mod, name, route)


def device_mod_check(device: Any) -> None:
    """Refuse an ordinal (or a non-tpu device) this process does not own."""
    idx = device if isinstance(device, int) else (None if device is None else torch.device(device).index)
    if isinstance(device, (str, torch.device)) and torch.device(device).type != "tpu":
        raise RuntimeError(f"torch.accelerator: expected a 'tpu' device, got {device!r}")
    device_module.check_index(idx)


def table() -> list[dict[str, Any]]:
    """Every registered patch as a row (name, target, required, applied, why)."""
    return [
        {"name": p.name, "target": p.target, "required": p.required, "applied": p.applied, "why": p.why}
        for p in private.PATCHES.values()
    ]


def main() -> None:
    from tpu_workbench import backend  # lazy: the command needs the device registered

    backend.register()
    for row in table():
        flag = "required" if row["required"] else "optional"
        state = "applied" if row["applied"] else "OFF"
        print(f"{row['name']:<28} {flag:<9} {state:<8} {row['target']}\n    {row['why']}")


if __name__ == "__main__":
    main()
