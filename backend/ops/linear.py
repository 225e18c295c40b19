"""``nn.Linear`` as one op forward and one backward.

ATen's ``linear`` is a composite: ``t`` of the weight, a reshape, ``mm`` (``addmm`` with a bias) and a view
back, and in backward ``TBackward``, ``MmBackward`` (two ``mm`` and their transposes), ``ViewBackward`` and the
bias sum: about ten dispatches and four autograd nodes per layer, which cost more than the matmul on small
layers. PyTorch has a linear op with its own derivative, ``mkldnn_linear`` (backward:
``mkldnn_linear_backward``, one op returning the input, weight and bias gradients); backend/composite.py routes
``linear`` on TPU tensors to it, and these lowerings compute it with the same arithmetic as the composite:
``addmm(bias, x2d, w.t())`` / ``mm(x2d, w.t())`` forward, and ``mm(g, w)``, ``g.t() @ x2d`` and ``g.sum(0)``
backward (``w.t()`` is column-major, so PyTorch's mm backward returns its gradient as ``(g.t() @ x2d).t()``,
which ``t`` backward turns back), each operand behind an ``optimization_barrier`` as the composite's views are (a dot
folding a transpose into its operand sums in another order).
"""

from __future__ import annotations

from typing import Any

import jax

from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.linalg import addmm, mm
from tpu_workbench.backend.ops.reduction import sum_
from tpu_workbench.backend.ops.registry import lower


def _as_operand(x: Any) -> Any:
    return jax.lax.optimization_barrier(x)


def _check(x: Any, w: Any, b: Any) -> None:
    if w.ndim != 2 or x.ndim < 1:
        raise RuntimeError(
            f"linear: expected a 2-D weight and an input of at least 1 dimension, got "
            f"{w.ndim}-D and {x.ndim}-D"
        )
    if x.shape[-1] != w.shape[1]:
        m = 1
        for s in x.shape[:-1]:
            m *= s
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({m}x{x.shape[-1]} and {w.shape[1]}x{w.shape[0]})"
        )
    if b is not None and (b.ndim != 1 or b.shape[0] != w.shape[0]):
        raise RuntimeError(f"linear: bias of shape {tuple(b.shape)} for {w.shape[0]} outputs")


@lower(aten.mkldnn_linear.default, jit=True)
def linear(x: Any, w: Any, b: Any = None) -> Any:
    _check(x, w, b)
    x2 = _as_operand(x.reshape(-1, x.shape[-1]))
    wt = _as_operand(w.T)
    out = mm(x2, wt) if b is None else addmm(b, x2, wt)
    return out.reshape(*x.shape[:-1], w.shape[0])


@lower(aten.mkldnn_linear_backward.default, jit=True)
def linear_backward(x: Any, grad: Any, w: Any, mask: Any) -> tuple:
    """(grad_input, grad_weight, grad_bias), each None where ``mask`` does not ask for it."""
    k, n = x.shape[-1], w.shape[0]
    g2 = _as_operand(grad.reshape(-1, n))
    gx = mm(g2, _as_operand(w)).reshape(x.shape) if mask[0] else None
    gw = mm(_as_operand(g2.T), _as_operand(x.reshape(-1, k))) if mask[1] else None
    gb = sum_(g2, [0], True).reshape(n) if mask[2] else None
    return gx, gw, gb
