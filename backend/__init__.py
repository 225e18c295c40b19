"""The "tpu" PyTorch device: PyTorch eager on JAX/XLA, with TorchTPU 0.2.0's public contract.

``import torch`` calls :func:`_autoload` through the ``torch.backends`` entry point (disable with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``); it registers the device without importing JAX, which is imported on
first use of the device. See docs/backend.md.
"""

from __future__ import annotations

import logging
import os

# No module-level `import torch`: if `backend` is imported first, importing torch runs the autoload entry
# point while this module is half-initialised; every function below imports torch when called.

__all__ = ["register", "is_registered", "stood_aside"]

log = logging.getLogger("backend")

_registered = False
_stood_aside = False
_libs: list = []  # keep torch.library registrations alive


def is_registered() -> bool:
    """True once this package owns the "tpu" device in this process."""
    return _registered


def stood_aside() -> bool:
    """True if another package owned PrivateUse1 and this backend did not register."""
    return _stood_aside


def register() -> bool:
    """Register the JAX-backed "tpu" device; idempotent. Returns False if another backend owns PrivateUse1."""
    import torch

    global _registered, _stood_aside
    if _registered:
        return True
    if _stood_aside:
        return False
    owner = torch._C._get_privateuse1_backend_name()
    if owner != "privateuseone" or hasattr(torch, "tpu"):
        _stood_aside = True
        log.warning(
            "backend: PrivateUse1 is already owned by %r (%s); the JAX-backed 'tpu' device stands aside",
            owner,
            type(getattr(torch, owner, None)).__name__,
        )
        return False

    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    from backend import device

    _setup_privateuseone_for_python_backend(
        "tpu", backend_module=device, hook=device._Hooks(), device_guard=device._Guard()
    )
    _install_kernels()
    _patch_torch()
    _registered = True

    from backend import compile as _c
    from backend import distributed as _d

    _c.register()
    _d.register()
    return True


def _factory_fallback(op, *args, **kwargs):  # noqa: ANN001, ANN202 - torch.library calling convention
    # Ops with no tensor input but device="tpu" (empty, arange, ...) reach the PrivateUse1 key here.
    from backend.dispatch import dispatch

    return dispatch(op, (), args, kwargs)


# Factories whose CompositeExplicitAutograd kernel (empty(0) + resize + out=) would win over a backend
# fallback: a wrapper's sizes cannot be resized from Python, so they get direct PrivateUse1 kernels.
FACTORIES = (
    "arange.default", "arange.start", "arange.start_step", "full.default", "zeros.default", "ones.default",
    "empty.memory_format", "empty_strided.default", "scalar_tensor.default", "linspace.default", "eye.default",
    "eye.m", "rand.default", "rand.generator", "randn.default", "randn.generator", "randint.default",
    "randint.low", "randint.generator", "randint.low_generator", "randperm.default", "randperm.generator",
    "normal.float_float", "empty_permuted.default", "logspace.default", "tril_indices.default",
    "triu_indices.default",
    # ops that reach PrivateUse1 with device tensors while the Python key is excluded (torch.tensor(...,
    # device=...) copies under an exclude guard); the boxed Python fallback cannot serve these
    "copy_.default", "_copy_from.default", "_copy_from_and_resize.default", "_to_copy.default",
    "lift_fresh.default", "resize_.default", "_local_scalar_dense.default", "set_.source_Tensor",
)  # fmt: skip


def _factory_kernel(packet: str, overload: str):  # noqa: ANN202
    import torch

    op = getattr(getattr(torch.ops.aten, packet), overload)

    def kernel(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        from backend.dispatch import dispatch

        return dispatch(op, (), args, kwargs)

    return kernel


def _install_kernels() -> None:
    import torch

    lib = torch.library.Library("_", "IMPL")
    lib.fallback(_factory_fallback, "PrivateUse1")
    _libs.append(lib)
    direct = torch.library.Library("aten", "IMPL")
    for name in FACTORIES:
        packet, overload = name.split(".")
        direct.impl(name if overload != "default" else packet, _factory_kernel(packet, overload), "PrivateUse1")
    _libs.append(direct)
    from backend import amp, composite

    _libs.extend(amp.install())
    _libs.extend(composite.install())


def _patch_torch() -> None:
    import torch
    from torch.optim import optimizer as _opt

    from backend import device
    from backend.tensor import TpuTensor

    if TpuTensor not in _opt._foreach_supported_types:
        _opt._foreach_supported_types.append(TpuTensor)

    # torch.accelerator.synchronize() has no C++ stream support for a Python backend.
    _orig_sync = torch.accelerator.synchronize

    def synchronize(device_index=None) -> None:  # noqa: ANN001
        acc = torch.accelerator.current_accelerator()
        if acc is not None and acc.type == "tpu":
            device._synchronize()
            return
        _orig_sync(device_index)

    synchronize.__doc__ = _orig_sync.__doc__
    torch.accelerator.synchronize = synchronize

    # DataLoader(pin_memory=True) pins for the current accelerator, which needs a C++ pinned allocator.
    # Host->device copies go through jax.device_put from ordinary host memory, so pinning is a no-op here.
    import torch.utils.data._utils.pin_memory as _pm

    _orig_pin = _pm.pin_memory

    def pin_memory(data, device=None):  # noqa: ANN001, ANN202
        acc = torch.accelerator.current_accelerator()
        if acc is not None and acc.type == "tpu":
            return data
        return _orig_pin(data, device)

    _pm.pin_memory = pin_memory

    # Module.to("tpu") must keep parameter identity (tied weights, optimizers built earlier): a CPU
    # parameter cannot take a wrapper's payload through `.data =`, so swap the tensors, for these calls only.
    _orig_to = torch.nn.Module.to

    def to(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        dev = torch._C._nn._parse_to(*args, **kwargs)[0]
        involved = dev is not None and (
            dev.type == "tpu" or any(isinstance(p, TpuTensor) for p in self.parameters())
        )
        if not involved or torch.__future__.get_swap_module_params_on_conversion():
            return _orig_to(self, *args, **kwargs)
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            return _orig_to(self, *args, **kwargs)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)

    to.__doc__ = _orig_to.__doc__
    torch.nn.Module.to = to
    torch.nn.Module.tpu = lambda self, device=None: to(self, torch.device("tpu", 0))


def _autoload() -> None:
    """torch.backends entry point: register the device; never imports JAX."""
    if os.environ.get("TORCH_TPU_WORKBENCH_AUTOLOAD", "1") == "0":
        return
    try:
        register()
    except Exception as exc:  # never break `import torch`
        log.warning("backend: could not register the JAX-backed 'tpu' device: %s", exc)
