"""The "tpu" PyTorch device: PyTorch eager on JAX/XLA, with TorchTPU 0.2.0's public contract.

``import torch`` calls :func:`_autoload` through the ``torch.backends`` entry point (disable with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``); it registers the device without importing JAX, which is imported on
first use of the device. See docs/backend.md.
"""

from __future__ import annotations

import importlib
import logging
import os

# `import torch` comes last in this file (see the bottom): importing any of our modules first makes this file
# import torch, whose autoload calls `_autoload` below while none of our sub-modules is half-initialised.

__all__ = ["register", "is_registered", "stood_aside"]

log = logging.getLogger(__name__)

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
    import torch  # lazy: startup (backend may be imported before torch finishes importing)

    global _registered, _stood_aside
    if _registered:
        return True
    if _stood_aside:
        return False
    from tpu_workbench.backend import _torch_private as private  # lazy: startup (import torch runs this)

    owner = private.privateuse1_name()
    if owner != "privateuseone" or hasattr(torch, "tpu"):
        _stood_aside = True
        log.warning(
            "backend: PrivateUse1 is already owned by %r (%s); the JAX-backed 'tpu' device stands aside",
            owner,
            type(getattr(torch, owner, None)).__name__,
        )
        return False

    from tpu_workbench.backend import device  # lazy: startup

    private.setup_python_backend("tpu", device, device._Hooks(), device._Guard())
    _install_kernels()
    from tpu_workbench.backend import generator, patches, serialization  # lazy: startup

    patches.apply()
    serialization.install()
    generator.install()
    _registered = True

    from tpu_workbench.backend import compile as _c  # lazy: startup
    from tpu_workbench.backend import distributed as _d  # lazy: startup

    _c.register()
    _d.register()
    return True


def _factory_fallback(op, *args, **kwargs):  # noqa: ANN001, ANN202 - torch.library calling convention
    # Ops with no tensor input but device="tpu" (empty, arange, ...) reach the PrivateUse1 key here.
    from tpu_workbench.backend.dispatch import (
        dispatch,  # lazy: jax (the dispatcher loads every lowering family)
    )

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
    import torch  # lazy: startup (backend may be imported before torch finishes importing)

    op = getattr(getattr(torch.ops.aten, packet), overload)

    def kernel(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        from tpu_workbench.backend.dispatch import dispatch  # lazy: jax

        return dispatch(op, (), args, kwargs)

    return kernel


def _install_kernels() -> None:
    import torch  # lazy: startup (backend may be imported before torch finishes importing)

    lib = torch.library.Library("_", "IMPL")
    lib.fallback(_factory_fallback, "PrivateUse1")
    _libs.append(lib)
    direct = torch.library.Library("aten", "IMPL")
    for name in FACTORIES:
        packet, overload = name.split(".")
        direct.impl(
            name if overload != "default" else packet, _factory_kernel(packet, overload), "PrivateUse1"
        )
    _libs.append(direct)
    from tpu_workbench.backend import amp, composite  # lazy: startup

    _libs.extend(amp.install())
    _libs.extend(composite.install())


def _autoload() -> None:
    """torch.backends entry point: register the device; never imports JAX."""
    if os.environ.get("TORCH_TPU_WORKBENCH_AUTOLOAD", "1") == "0":
        return
    try:
        register()
    except Exception as exc:  # never break `import torch`
        log.warning("backend: could not register the JAX-backed 'tpu' device: %s", exc)


# Import order is free: when one of our modules is imported before torch (`from tpu_workbench.backend import state`
# first), this line runs torch's import, and with it the autoload entry point, once `_autoload` exists and before
# the sub-module that was asked for starts (it would be half-initialised inside the registration otherwise).
# When torch is imported first, torch is already in sys.modules here and this line is free. (Not bound to a
# global: the functions above import torch themselves, since autoload calls them before this line returns.)
importlib.import_module("torch")
