"""Scaled dot-product attention as one fused op, forward and backward.

``F.scaled_dot_product_attention`` picks a kernel per device; on "tpu" it would take the math path, which
is ~26 ATen ops forward and ~35 backward (mask building, scaling, two batched matmuls, a safe softmax, views),
each a dispatch of its own in eager mode. PyTorch's "overrideable" backend is the slot meant for out-of-tree
devices (entered here from an AutogradPrivateUse1 kernel for ``scaled_dot_product_attention``): one op forward (``_scaled_dot_product_fused_attention_overrideable``) and one backward, whose autograd
formula PyTorch already has. Here both are one XLA program each; the backward recomputes the forward and takes
its VJP (as flash attention recomputes the scores rather than storing them).

The fused path is chosen only where it computes what the math path computes: no dropout, 4-D inputs of one
floating dtype, no explicit mask together with ``is_causal``, a mask (bool: True attends; float: added) that
broadcasts to (batch, heads, query, key), and heads that match or group evenly (grouped-query attention).
Everything else keeps the math path. Rows with nothing to attend to give 0, as the math path's safe softmax.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend import lazy, state
from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.linalg import precision
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload

_MATH, _OVERRIDEABLE = 0, 4  # sdp::SDPBackend


def _wide(dt: Any) -> Any:
    return jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt


def _broadcasts(mask_shape: tuple, target: tuple) -> bool:
    if len(mask_shape) > len(target):
        return False
    return all(m in (1, t) for m, t in zip(reversed(mask_shape), reversed(target), strict=False))


@lower(aten._fused_sdp_choice.default, raw=True)
def _fused_sdp_choice(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> int:
    """The fused op where it is exactly the math path's computation (module docstring), else the math path.
    Raw: it reads only sizes and dtypes, so in fused eager nothing is materialised to answer it.

    PyTorch's own ``scaled_dot_product_attention`` asks a C++ dispatch stub, not this op, so the eager entry
    is the AutogradPrivateUse1 kernel in backend/composite.py, which asks :func:`fused_attention_applies`."""
    return (
        _OVERRIDEABLE
        if fused_attention_applies(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
        else _MATH
    )


def fused_attention_applies(
    query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float, is_causal: bool, enable_gqa: bool
) -> bool:
    """Torch-level: real "tpu" tensors (not a compile trace's fake tensors) for which the fused op computes
    what the math path computes (module docstring)."""
    return _choice(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa) == _OVERRIDEABLE


def _choice(
    query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float, is_causal: bool, enable_gqa: bool
) -> int:
    if dropout_p != 0.0 or not all(type(t) is TpuTensor and t.dim() == 4 for t in (query, key, value)):
        return _MATH
    dt = query.dtype
    if key.dtype != dt or value.dtype != dt or not dt.is_floating_point:
        return _MATH
    b, hq, lq, d = query.shape
    bk, hk, lk, dk = key.shape
    bv, hv, lv, _ = value.shape
    if (bk, bv) != (b, b) or dk != d or lv != lk or hv != hk or min(lq, lk, d) == 0:
        return _MATH
    if hq != hk and not (enable_gqa and hk > 0 and hq % hk == 0):
        return _MATH
    if attn_mask is not None:
        if is_causal or type(attn_mask) is not TpuTensor or attn_mask.dtype not in (torch.bool, dt):
            return _MATH
        if not _broadcasts(tuple(attn_mask.shape), (b, hq, lq, lk)):
            return _MATH
    return _OVERRIDEABLE


def _attention(q: Any, k: Any, v: Any, bias: Any, causal: bool, scale: float, prec: Any) -> tuple[Any, Any]:
    """(output, logsumexp over keys in float32); fully masked rows give 0 and a logsumexp of -inf."""
    group = q.shape[1] // k.shape[1]
    if group != 1:
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    acc = _wide(q.dtype)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, precision=prec, preferred_element_type=acc) * scale
    allowed = None
    if causal:
        allowed = jnp.tril(jnp.ones((q.shape[2], k.shape[2]), bool))
    if bias is not None:
        if bias.dtype == jnp.bool_:
            allowed = bias if allowed is None else allowed & bias
        else:
            s = s + bias.astype(acc)
    if allowed is not None:
        s = jnp.where(allowed, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.exp(s - m)
    total = jnp.sum(e, axis=-1, keepdims=True)
    p = jnp.where(total > 0, e / jnp.where(total > 0, total, 1.0), 0.0)
    out = jnp.einsum("bhqk,bhkd->bhqd", p.astype(v.dtype), v, precision=prec, preferred_element_type=acc)
    lse = (jnp.log(total) + m)[..., 0].astype(jnp.float32)
    return out.astype(q.dtype), lse


@functools.partial(jax.jit, static_argnames=("causal", "scale", "prec"))
def _forward(q: Any, k: Any, v: Any, bias: Any, *, causal: bool, scale: float, prec: Any) -> tuple[Any, Any]:
    return _attention(q, k, v, bias, causal, scale, prec)


@functools.partial(jax.jit, static_argnames=("causal", "scale", "prec", "want_bias"))
def _backward(
    g: Any, q: Any, k: Any, v: Any, bias: Any, *, causal: bool, scale: float, prec: Any, want_bias: bool
) -> tuple[Any, Any, Any, Any]:
    if bias is not None and want_bias and bias.dtype != jnp.bool_:
        out, vjp = jax.vjp(
            lambda q_, k_, v_, b_: _attention(q_, k_, v_, b_, causal, scale, prec)[0], q, k, v, bias
        )
        return vjp(g)
    out, vjp = jax.vjp(lambda q_, k_, v_: _attention(q_, k_, v_, bias, causal, scale, prec)[0], q, k, v)
    dq, dk, dv = vjp(g)
    return dq, dk, dv, None


def _scale(q: Any, scale: float | None) -> float:
    return float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])


def _opt(t: Any) -> Any:
    return None if t is None else payload(t)  # stays deferred in fused eager


@lower(aten._scaled_dot_product_fused_attention_overrideable.default, raw=True)
def sdpa_overrideable(
    query: Any,
    key: Any,
    value: Any,
    attn_bias: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple:
    """(output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask),
    the unused ones empty, as the schema asks. Raw, because max_q/max_k are Python ints: the arrays go through
    ``lazy.call`` (recorded in fused eager, one executable in strict eager)."""
    if dropout_p != 0.0 or return_debug_mask:
        raise NotImplementedError(
            "operator '_scaled_dot_product_fused_attention_overrideable' on TPU: dropout "
            "and the debug mask take the math path"
        )
    out, lse = lazy.call(
        _forward,
        (payload(query), payload(key), payload(value), _opt(attn_bias)),
        {"causal": bool(is_causal), "scale": _scale(query, scale), "prec": precision()},
    )
    zero = _zero_int64 if not state.in_jax_trace() else _zero_int64.__wrapped__  # (no cached tracer)
    return (
        TpuTensor(out),
        TpuTensor(lse),
        None,
        None,
        query.shape[2],
        key.shape[2],
        TpuTensor(zero()),
        TpuTensor(zero()),
        None,
    )


@functools.cache
def _zero_int64() -> Any:
    """The unused philox seed/offset outputs: one shared 0 (JAX arrays are immutable, and building a new one
    per call was a third of this op's eager time)."""
    return jnp.zeros((), jnp.int64)


@lower(aten._scaled_dot_product_fused_attention_overrideable_backward.default, raw=True)
def sdpa_overrideable_backward(
    grad_out: Any,
    query: Any,
    key: Any,
    value: Any,
    attn_bias: Any,
    grad_input_mask: list,
    out: Any,
    logsumexp: Any,
    cum_seq_q: Any,
    cum_seq_k: Any,
    max_q: int,
    max_k: int,
    dropout_p: float,
    is_causal: bool,
    philox_seed: Any,
    philox_offset: Any,
    *,
    scale: float | None = None,
) -> tuple:
    """(grad_query, grad_key, grad_value, grad_attn_bias): the VJP of the recomputed forward; a float mask's
    gradient (when it requires grad) comes back summed to the mask's broadcast shape."""
    want_bias = bool(grad_input_mask[3]) and attn_bias is not None and attn_bias.dtype != torch.bool
    dq, dk, dv, db = lazy.call(
        _backward,
        (payload(grad_out), payload(query), payload(key), payload(value), _opt(attn_bias)),
        {
            "causal": bool(is_causal),
            "scale": _scale(query, scale),
            "prec": precision(),
            "want_bias": want_bias,
        },
    )
    return TpuTensor(dq), TpuTensor(dk), TpuTensor(dv), TpuTensor(db) if want_bias else None
