"""``torch.amp.autocast("tpu")``: bfloat16 by default, casting the matmul/conv/attention family.

The AutocastPrivateUse1 key gets a fallthrough for every op, plus a kernel for each op in the
lower-precision list that casts floating inputs to ``torch.get_autocast_dtype("tpu")`` and redispatches
below autocast; ops in the fp32 list are cast up to float32.
"""

from __future__ import annotations

from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private

LOWER_PRECISION = [
    "mm.default", "addmm.default", "bmm.default", "baddbmm.default", "addbmm.default", "matmul.default",
    "linear.default", "conv1d.default", "conv2d.default", "conv3d.default", "convolution.default",
    "_convolution.default", "conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input",
    "prelu.default", "scaled_dot_product_attention.default", "addmv.default", "mv.default", "chain_matmul.default",
    "einsum.default",
]  # fmt: skip
FP32 = [
    "softmax.int", "log_softmax.int", "_softmax.default", "_log_softmax.default", "layer_norm.default",
    "native_layer_norm.default", "group_norm.default", "nll_loss.default", "cross_entropy_loss.default",
    "mse_loss.default", "l1_loss.default", "binary_cross_entropy_with_logits.default", "exp.default",
    "log.default", "pow.Tensor_Scalar", "sum.default", "prod.default", "cumsum.default", "norm.Scalar",
]  # fmt: skip

_KEY = private.DispatchKeySet(private.DispatchKey.AutocastPrivateUse1)


def _cast(x: Any, dtype: torch.dtype) -> Any:
    if (
        isinstance(x, torch.Tensor)
        and x.is_floating_point()
        and x.dtype != dtype
        and x.dtype != torch.float64
    ):
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(i, dtype) for i in x)
    return x


def _kernel(op: Any, fixed: torch.dtype | None) -> Any:
    def k(*args: Any, **kwargs: Any) -> Any:
        dtype = fixed or torch.get_autocast_dtype("tpu")
        with private.ExcludeDispatchKeyGuard(_KEY):
            return op(*_cast(args, dtype), **{n: _cast(v, dtype) for n, v in kwargs.items()})

    return k


def _overload_suffix(op: Any) -> str:
    name = private.overload_name(op)
    return "" if name == "default" else "." + name


def _resolve(name: str) -> Any:
    packet, overload = name.split(".")
    p = getattr(torch.ops.aten, packet, None)
    return getattr(p, overload, None) if p is not None else None


def install() -> list:
    """Register the autocast kernels; returns the Library objects to keep alive."""
    torch.set_autocast_dtype("tpu", torch.bfloat16)
    fall = torch.library.Library("_", "IMPL")
    fall.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    for names, fixed in ((LOWER_PRECISION, None), (FP32, torch.float32)):
        for name in names:
            op = _resolve(name)
            if op is None:
                continue
            lib.impl(
                private.schema(op).name.split("::")[1] + _overload_suffix(op),
                _kernel(op, fixed),
                "AutocastPrivateUse1",
            )
    return [fall, lib]
