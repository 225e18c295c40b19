"""The global patches the device applies to PyTorch when it registers (see ``backend._torch_private``).

``python -m backend.patches`` prints every patch (these and the ones compile/distributed register), its
target, why it exists and whether it can be switched off with ``TORCH_TPU_DISABLE_PATCHES``.
"""

from __future__ import annotations

from typing import Any

import torch

from backend import _torch_private as private
from backend import device
from backend.tensor import TpuTensor


def _on_tpu_accelerator() -> bool:
    acc = torch.accelerator.current_accelerator()
    return acc is not None and acc.type == "tpu"


def apply() -> None:
    """Apply the device's core patches (idempotent; called by ``backend.register()``)."""

    @private.patch("accelerator-synchronize", "torch.accelerator.synchronize",
                   "a Python backend has no C++ stream to synchronise: wait for pending JAX work instead",
                   required=True)
    def _sync() -> None:
        orig = torch.accelerator.synchronize

        def synchronize(device_index: Any = None) -> None:
            if _on_tpu_accelerator():
                device._synchronize()
                return
            orig(device_index)

        synchronize.__doc__ = orig.__doc__
        private.replace_attr(torch.accelerator, "synchronize", synchronize)

    @private.patch("dataloader-pin-memory", "torch.utils.data._utils.pin_memory.pin_memory",
                   "DataLoader(pin_memory=True) pins for the current accelerator through a C++ pinned allocator a "
                   "Python backend cannot register; host->device copies need no pinned buffer here",
                   required=True)
    def _pin() -> None:
        mod = private.resolve("torch.utils.data._utils.pin_memory")
        orig = mod.pin_memory

        def pin_memory(data: Any, device: Any = None) -> Any:
            if _on_tpu_accelerator():
                return data
            return orig(data, device)

        private.replace_attr(mod, "pin_memory", pin_memory)

    @private.patch("module-to-swaps-params", "torch.nn.Module.to",
                   "Module.to('tpu') must keep parameter identity (tied weights, optimizers built earlier): a CPU "
                   "parameter cannot take a wrapper's payload through .data=, so the tensors are swapped",
                   required=True)
    def _module_to() -> None:
        orig = torch.nn.Module.to

        def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            dev = private.parse_to(*args, **kwargs)[0]
            involved = dev is not None and (
                dev.type == "tpu" or any(isinstance(p, TpuTensor) for p in self.parameters())
            )
            if not involved or torch.__future__.get_swap_module_params_on_conversion():
                return orig(self, *args, **kwargs)
            torch.__future__.set_swap_module_params_on_conversion(True)
            try:
                return orig(self, *args, **kwargs)
            finally:
                torch.__future__.set_swap_module_params_on_conversion(False)

        to.__doc__ = orig.__doc__
        private.replace_attr(torch.nn.Module, "to", to)
        private.replace_attr(torch.nn.Module, "tpu", lambda self, device=None: to(self, torch.device("tpu", 0)))

    @private.patch("optimizer-foreach-types", "torch.optim.optimizer._foreach_supported_types",
                   "optimizers choose their faster foreach implementation for TPU tensors (speed only)",
                   required=False)
    def _foreach() -> None:
        types = private.foreach_supported_types()
        if TpuTensor not in types:
            types.append(TpuTensor)


def table() -> list[dict[str, Any]]:
    """Every registered patch as a row (name, target, required, applied, why)."""
    return [
        {"name": p.name, "target": p.target, "required": p.required, "applied": p.applied, "why": p.why}
        for p in private.PATCHES.values()
    ]


def main() -> None:
    import backend  # lazy: the command needs the device registered

    backend.register()
    for row in table():
        flag = "required" if row["required"] else "optional"
        state = "applied" if row["applied"] else "OFF"
        print(f"{row['name']:<28} {flag:<9} {state:<8} {row['target']}\n    {row['why']}")


if __name__ == "__main__":
    main()
