"""Fused optimizer steps (Adam, AdamW, SGD, Adagrad) and GradScaler's two AMP ops.

``torch.optim.*(fused=True)`` hands the whole parameter group to one ATen call that updates every list in
place. Here that call is one jitted XLA computation over all the group's tensors (the point of "fused"),
and the new values are written back through the tensor module's ``set_value`` (so views stay views).

Arithmetic follows torch's fused CPU/CUDA kernels: element math in the parameter's "opmath" dtype (float32
for bfloat16/float16 parameters), bias corrections in float64; with ``grad_scale`` the gradients are
unscaled and the unscaled values stored back; a ``found_inf`` of 1 leaves every tensor untouched (the step
counters are rolled back by the optimizer itself). The hyper-parameters are traced, not static, so a
learning-rate schedule does not recompile.

The functional overloads (``_fused_adam`` ...), which functionalization and compile graphs use, are the
same math returning new lists; the ``.out`` overloads write the new parameters to ``out`` and leave every
other list as it is, as torch's generated CPU kernels for them do.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend import lazy
from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload, set_value

_LOW = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _opmath(dt: Any) -> Any:
    return jnp.float32 if jnp.dtype(dt) in _LOW else dt


def _unscale(g: Any, grad_scale: Any, ot: Any) -> tuple[Any, Any]:
    """(the gradient in opmath, the value stored back into the gradient tensor)."""
    gf = g.astype(ot)
    if grad_scale is None:
        return gf, g
    gf = gf / grad_scale.reshape(()).astype(ot)
    return gf, gf.astype(g.dtype)


def _skip(found_inf: Any) -> Any:
    return None if found_inf is None else found_inf.reshape(-1)[0] == 1


def _keep_if(skip: Any, old: list, new: list) -> list:
    if skip is None:
        return new
    return [jnp.where(skip, o, n) for o, n in zip(old, new, strict=True)]


def _scalar(x: Any) -> Any:
    """A learning rate: Python number or 0-dim/1-element array (a device tensor lr)."""
    return x.reshape(()) if hasattr(x, "reshape") else x


# ----------------------------------------------------------------------------- Adam / AdamW
@functools.partial(jax.jit, static_argnames=("amsgrad", "maximize", "adamw", "decay"))
def _adam_kernel(
    params: list,
    grads: list,
    exp_avgs: list,
    exp_avg_sqs: list,
    max_sqs: list,
    steps: list,
    lr: Any,
    beta1: Any,
    beta2: Any,
    wd: Any,
    eps: Any,
    grad_scale: Any,
    found_inf: Any,
    *,
    amsgrad: bool,
    maximize: bool,
    adamw: bool,
    decay: bool,
) -> tuple:
    out_p, out_g, out_m, out_v, out_vmax = [], [], [], [], []
    lr64 = jnp.asarray(_scalar(lr), jnp.float64)
    b1, b2 = jnp.asarray(beta1, jnp.float64), jnp.asarray(beta2, jnp.float64)
    for i, (p, g, m, v, step) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True)):
        ot = _opmath(p.dtype)
        gf, g_store = _unscale(g, grad_scale, ot)
        if maximize:
            gf = -gf
        pf = p.astype(ot)
        if decay:
            if adamw:
                pf = pf * (1 - lr64 * wd).astype(ot)
            else:
                gf = gf + pf * jnp.asarray(wd, ot)
        mf = m.astype(ot) * b1.astype(ot) + gf * (1 - b1).astype(ot)
        vf = v.astype(ot) * b2.astype(ot) + gf * gf * (1 - b2).astype(ot)
        t = step.reshape(()).astype(jnp.float64)
        step_size = (lr64 / (1 - b1**t)).astype(ot)
        bc2_sqrt = jnp.sqrt(1 - b2**t).astype(ot)
        if amsgrad:
            vmax = jnp.maximum(max_sqs[i].astype(ot), vf)
            out_vmax.append(vmax.astype(max_sqs[i].dtype))
            denom = jnp.sqrt(vmax) / bc2_sqrt + jnp.asarray(eps, ot)
        else:
            denom = jnp.sqrt(vf) / bc2_sqrt + jnp.asarray(eps, ot)
        pf = pf - step_size * mf / denom
        out_p.append(pf.astype(p.dtype))
        out_g.append(g_store)
        out_m.append(mf.astype(m.dtype))
        out_v.append(vf.astype(v.dtype))
    skip = _skip(found_inf)
    return (
        _keep_if(skip, params, out_p),
        _keep_if(skip, grads, out_g),
        _keep_if(skip, exp_avgs, out_m),
        _keep_if(skip, exp_avg_sqs, out_v),
        _keep_if(skip, max_sqs if amsgrad else [], out_vmax),
    )


def _adam_arrays(
    adamw: bool,
    params: list,
    grads: list,
    exp_avgs: list,
    exp_avg_sqs: list,
    max_sqs: list,
    steps: list,
    lr: Any,
    beta1: float,
    beta2: float,
    weight_decay: float,
    eps: float,
    amsgrad: bool,
    maximize: bool,
    grad_scale: Any,
    found_inf: Any,
    defer: bool = False,
) -> tuple:
    n = len(params)
    if not (len(grads) == len(exp_avgs) == len(exp_avg_sqs) == len(steps) == n):
        raise RuntimeError(
            "_fused_adam: params, grads, exp_avgs, exp_avg_sqs and state_steps must have one "
            "tensor each per parameter"
        )
    if len(max_sqs) != (n if amsgrad else 0):
        raise RuntimeError(
            "_fused_adam: max_exp_avg_sqs must have one tensor per parameter with amsgrad=True "
            "and be empty otherwise"
        )
    if n == 0:
        return [], [], [], [], []
    args = (params, grads, exp_avgs, exp_avg_sqs, max_sqs if amsgrad else [], steps, lr, beta1, beta2, weight_decay,
            eps, grad_scale, found_inf)  # fmt: skip
    flags = {"amsgrad": bool(amsgrad), "maximize": bool(maximize), "adamw": adamw, "decay": weight_decay != 0}
    return _run(defer, _adam_kernel, args, flags)


def _values(ts: Any) -> list:
    return [payload(t) for t in ts]


def _opt(t: Any) -> Any:
    return None if t is None else payload(t)


def _run(defer: bool, kernel: Any, args: tuple, kwargs: dict) -> Any:
    """Torch-level (raw) callers defer the kernel in fused eager (``lazy.call``); functional lowerings are
    already run (or recorded) by the dispatcher and call it directly."""
    return lazy.call(kernel, args, kwargs) if defer else kernel(*args, **kwargs)


def _lr_of(lr: Any) -> Any:
    """A Python lr, a CPU tensor lr (read on the host, as CUDA's kernel does) or a device tensor lr."""
    if isinstance(lr, TpuTensor):
        return payload(lr)
    if isinstance(lr, torch.Tensor):
        return lr.item()
    return lr


def _write(ts: Any, new: list) -> None:
    for t, v in zip(ts, new, strict=True):
        set_value(t, v)


def _fused_adam_inplace(adamw: bool) -> Any:
    def impl(
        self: list,
        grads: list,
        exp_avgs: list,
        exp_avg_sqs: list,
        max_exp_avg_sqs: list,
        state_steps: list,
        *,
        lr: Any,
        beta1: float,
        beta2: float,
        weight_decay: float,
        eps: float,
        amsgrad: bool,
        maximize: bool,
        grad_scale: Any = None,
        found_inf: Any = None,
    ) -> None:
        p, g, m, v, vmax = _adam_arrays(
            adamw,
            _values(self),
            _values(grads),
            _values(exp_avgs),
            _values(exp_avg_sqs),
            _values(max_exp_avg_sqs),
            _values(state_steps),
            _lr_of(lr),
            beta1,
            beta2,
            weight_decay,
            eps,
            amsgrad,
            maximize,
            _opt(grad_scale),
            _opt(found_inf),
            defer=True,
        )
        for ts, new in ((self, p), (grads, g), (exp_avgs, m), (exp_avg_sqs, v), (max_exp_avg_sqs, vmax)):
            _write(ts, new)

    return impl


def _fused_adam_functional(adamw: bool) -> Any:
    def impl(
        self: list,
        grads: list,
        exp_avgs: list,
        exp_avg_sqs: list,
        max_exp_avg_sqs: list,
        state_steps: list,
        *,
        lr: Any,
        beta1: float,
        beta2: float,
        weight_decay: float,
        eps: float,
        amsgrad: bool,
        maximize: bool,
        grad_scale: Any = None,
        found_inf: Any = None,
    ) -> tuple:
        p, g, m, v, vmax = _adam_arrays(
            adamw,
            list(self),
            list(grads),
            list(exp_avgs),
            list(exp_avg_sqs),
            list(max_exp_avg_sqs),
            list(state_steps),
            lr,
            beta1,
            beta2,
            weight_decay,
            eps,
            amsgrad,
            maximize,
            grad_scale,
            found_inf,
        )
        return list(p), list(g), list(m), list(v), list(vmax) if amsgrad else list(max_exp_avg_sqs)

    return impl


def _fused_adam_out(adamw: bool) -> Any:
    def impl(
        self: list,
        grads: list,
        exp_avgs: list,
        exp_avg_sqs: list,
        max_exp_avg_sqs: list,
        state_steps: list,
        *,
        lr: Any,
        beta1: float,
        beta2: float,
        weight_decay: float,
        eps: float,
        amsgrad: bool,
        maximize: bool,
        grad_scale: Any = None,
        found_inf: Any = None,
        out: list,
    ) -> None:
        p, g, m, v, vmax = _adam_arrays(
            adamw,
            _values(self),
            _values(grads),
            _values(exp_avgs),
            _values(exp_avg_sqs),
            _values(max_exp_avg_sqs),
            _values(state_steps),
            _lr_of(lr),
            beta1,
            beta2,
            weight_decay,
            eps,
            amsgrad,
            maximize,
            _opt(grad_scale),
            _opt(found_inf),
            defer=True,
        )
        _write(out, p)  # the state lists stay as they are: torch's generated .out kernels write only ``out``

    return impl


lower(aten._fused_adam_.default, aten._fused_adam_.tensor_lr, raw=True)(_fused_adam_inplace(False))
lower(aten._fused_adamw_.default, aten._fused_adamw_.tensor_lr, raw=True)(_fused_adam_inplace(True))
lower(aten._fused_adam.default, aten._fused_adam.tensor_lr)(_fused_adam_functional(False))
lower(aten._fused_adamw.default, aten._fused_adamw.tensor_lr)(_fused_adam_functional(True))
lower(aten._fused_adam.out, aten._fused_adam.tensor_lr_out, raw=True)(_fused_adam_out(False))
lower(aten._fused_adamw.out, aten._fused_adamw.tensor_lr_out, raw=True)(_fused_adam_out(True))


# ----------------------------------------------------------------------------- SGD
@functools.partial(jax.jit, static_argnames=("maximize", "nesterov", "first", "decay", "use_momentum"))
def _sgd_kernel(
    params: list,
    grads: list,
    bufs: list,
    lr: Any,
    wd: Any,
    momentum: Any,
    dampening: Any,
    grad_scale: Any,
    found_inf: Any,
    *,
    maximize: bool,
    nesterov: bool,
    first: bool,
    decay: bool,
    use_momentum: bool,
) -> tuple:
    out_p, out_g, out_b = [], [], []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        ot = _opmath(p.dtype)
        gf, g_store = _unscale(g, grad_scale, ot)
        if maximize:
            gf = -gf
        pf = p.astype(ot)
        if decay:
            gf = gf + pf * jnp.asarray(wd, p.dtype).astype(ot)
        if use_momentum:
            mom = jnp.asarray(momentum, p.dtype).astype(ot)
            buf = (
                gf
                if first
                else bufs[i].astype(ot) * mom + gf * jnp.asarray(1 - dampening, p.dtype).astype(ot)
            )
            out_b.append(buf.astype(bufs[i].dtype))
            gf = gf + buf * mom if nesterov else buf
        pf = pf - gf * jnp.asarray(_scalar(lr), ot)
        out_p.append(pf.astype(p.dtype))
        out_g.append(g_store)
    skip = _skip(found_inf)
    return _keep_if(skip, params, out_p), _keep_if(skip, grads, out_g), _keep_if(skip, bufs, out_b)


def _sgd_arrays(
    params: list,
    grads: list,
    bufs: list,
    weight_decay: float,
    momentum: float,
    lr: Any,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    grad_scale: Any,
    found_inf: Any,
    defer: bool = False,
) -> tuple:
    n = len(params)
    use_momentum = momentum != 0
    if len(grads) != n or len(bufs) != (n if use_momentum else 0):
        raise RuntimeError(
            "_fused_sgd: grads must have one tensor per parameter, and momentum_buffer_list one "
            "per parameter when momentum != 0 (empty otherwise)"
        )
    if n == 0:
        return [], [], []
    args = (
        params,
        grads,
        bufs if use_momentum else [],
        lr,
        weight_decay,
        momentum,
        dampening,
        grad_scale,
        found_inf,
    )
    flags = {"maximize": bool(maximize), "nesterov": bool(nesterov), "first": bool(is_first_step),
             "decay": weight_decay != 0, "use_momentum": use_momentum}  # fmt: skip
    return _run(defer, _sgd_kernel, args, flags)


@lower(aten._fused_sgd_.default, aten._fused_sgd_.tensor_lr, raw=True)
def _fused_sgd_(
    self: list,
    grads: list,
    momentum_buffer_list: list,
    *,
    weight_decay: float,
    momentum: float,
    lr: Any,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
) -> None:
    p, g, b = _sgd_arrays(
        _values(self),
        _values(grads),
        _values(momentum_buffer_list),
        weight_decay,
        momentum,
        _lr_of(lr),
        dampening,
        nesterov,
        maximize,
        is_first_step,
        _opt(grad_scale),
        _opt(found_inf),
        defer=True,
    )
    for ts, new in ((self, p), (grads, g), (momentum_buffer_list, b)):
        _write(ts, new)


@lower(aten._fused_sgd.default, aten._fused_sgd.tensor_lr)
def _fused_sgd(
    self: list,
    grads: list,
    momentum_buffer_list: list,
    *,
    weight_decay: float,
    momentum: float,
    lr: Any,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
) -> tuple:
    p, g, b = _sgd_arrays(
        list(self),
        list(grads),
        list(momentum_buffer_list),
        weight_decay,
        momentum,
        lr,
        dampening,
        nesterov,
        maximize,
        is_first_step,
        grad_scale,
        found_inf,
    )
    return list(p), list(g), list(b) if momentum != 0 else list(momentum_buffer_list)


@lower(aten._fused_sgd.out, aten._fused_sgd.tensor_lr_out, raw=True)
def _fused_sgd_out(
    self: list,
    grads: list,
    momentum_buffer_list: list,
    *,
    weight_decay: float,
    momentum: float,
    lr: Any,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
    out: list,
) -> None:
    p, g, b = _sgd_arrays(
        _values(self),
        _values(grads),
        _values(momentum_buffer_list),
        weight_decay,
        momentum,
        _lr_of(lr),
        dampening,
        nesterov,
        maximize,
        is_first_step,
        _opt(grad_scale),
        _opt(found_inf),
        defer=True,
    )
    _write(out, p)


# ----------------------------------------------------------------------------- Adagrad
@functools.partial(jax.jit, static_argnames=("maximize", "decay"))
def _adagrad_kernel(
    params: list,
    grads: list,
    sums: list,
    steps: list,
    lr: Any,
    lr_decay: Any,
    wd: Any,
    eps: Any,
    grad_scale: Any,
    found_inf: Any,
    *,
    maximize: bool,
    decay: bool,
) -> tuple:
    out_p, out_g, out_s = [], [], []
    lr64 = jnp.asarray(_scalar(lr), jnp.float64)
    for p, g, s, step in zip(params, grads, sums, steps, strict=True):
        ot = _opmath(p.dtype)
        gf, g_store = _unscale(g, grad_scale, ot)
        if maximize:
            gf = -gf
        pf = p.astype(ot)
        if decay:
            gf = gf + pf * jnp.asarray(wd, ot)
        clr = (lr64 / (1 + (step.reshape(()).astype(jnp.float64) - 1) * lr_decay)).astype(ot)
        sf = s.astype(ot) + gf * gf
        pf = pf - clr * gf / (jnp.sqrt(sf) + jnp.asarray(eps, ot))
        out_p.append(pf.astype(p.dtype))
        out_g.append(g_store)
        out_s.append(sf.astype(s.dtype))
    skip = _skip(found_inf)
    return _keep_if(skip, params, out_p), _keep_if(skip, grads, out_g), _keep_if(skip, sums, out_s)


def _adagrad_arrays(
    params: list,
    grads: list,
    sums: list,
    steps: list,
    lr: Any,
    lr_decay: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    grad_scale: Any,
    found_inf: Any,
    defer: bool = False,
) -> tuple:
    n = len(params)
    if not (len(grads) == len(sums) == len(steps) == n):
        raise RuntimeError(
            "_fused_adagrad: params, grads, state_sums and state_steps must have one tensor each "
            "per parameter"
        )
    if n == 0:
        return [], [], []
    args = (params, grads, sums, steps, lr, lr_decay, weight_decay, eps, grad_scale, found_inf)
    return _run(defer, _adagrad_kernel, args, {"maximize": bool(maximize), "decay": weight_decay != 0})


@lower(aten._fused_adagrad_.default, aten._fused_adagrad_.tensor_lr, raw=True)
def _fused_adagrad_(
    self: list,
    grads: list,
    state_sums: list,
    state_steps: list,
    *,
    lr: Any,
    lr_decay: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
) -> None:
    p, g, s = _adagrad_arrays(
        _values(self),
        _values(grads),
        _values(state_sums),
        _values(state_steps),
        _lr_of(lr),
        lr_decay,
        weight_decay,
        eps,
        maximize,
        _opt(grad_scale),
        _opt(found_inf),
        defer=True,
    )
    for ts, new in ((self, p), (grads, g), (state_sums, s)):
        _write(ts, new)


@lower(aten._fused_adagrad.default, aten._fused_adagrad.tensor_lr)
def _fused_adagrad(
    self: list,
    grads: list,
    state_sums: list,
    state_steps: list,
    *,
    lr: Any,
    lr_decay: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
) -> tuple:
    p, g, s = _adagrad_arrays(
        list(self),
        list(grads),
        list(state_sums),
        list(state_steps),
        lr,
        lr_decay,
        weight_decay,
        eps,
        maximize,
        grad_scale,
        found_inf,
    )
    if isinstance(lr, (int, float)):  # the float-lr overload also returns the (unchanged) step counters
        return list(p), list(g), list(s), list(state_steps)
    return list(p), list(g), list(s)


@lower(aten._fused_adagrad.out, aten._fused_adagrad.tensor_lr_out, raw=True)
def _fused_adagrad_out(
    self: list,
    grads: list,
    state_sums: list,
    state_steps: list,
    *,
    lr: Any,
    lr_decay: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    grad_scale: Any = None,
    found_inf: Any = None,
    out: list,
) -> None:
    p, g, s = _adagrad_arrays(
        _values(self),
        _values(grads),
        _values(state_sums),
        _values(state_steps),
        _lr_of(lr),
        lr_decay,
        weight_decay,
        eps,
        maximize,
        _opt(grad_scale),
        _opt(found_inf),
        defer=True,
    )
    _write(out, p)


# ----------------------------------------------------------------------------- GradScaler
@jax.jit
def _unscale_kernel(grads: list, found_inf: Any, inv_scale: Any) -> tuple:
    """torch's _amp_foreach_non_finite_check_and_unscale_: found_inf becomes 1 if any gradient holds an inf
    or NaN; every gradient is multiplied by inv_scale in opmath (left as is when inv_scale is 1)."""
    inv = inv_scale.reshape(())
    bad = jnp.zeros((), bool)
    out = []
    for g in grads:
        bad = bad | ~jnp.all(jnp.isfinite(g))
        ot = _opmath(g.dtype)
        scaled = (g.astype(ot) * inv.astype(ot)).astype(g.dtype)
        out.append(jnp.where(inv == 1, g, scaled))
    return out, jnp.where(bad, jnp.ones_like(found_inf), found_inf)


def _check_unscale_args(grads: list, found_inf: Any, inv_scale: Any) -> None:
    for name, t in (("found_inf", found_inf), ("inv_scale", inv_scale)):
        if t.size != 1 or t.dtype != jnp.float32:
            raise RuntimeError(
                f"_amp_foreach_non_finite_check_and_unscale_: {name} must be a 1-element float tensor"
            )
    for g in grads:
        if not jnp.issubdtype(g.dtype, jnp.floating):
            raise RuntimeError("_amp_foreach_non_finite_check_and_unscale_: gradients must be floating point")


@lower(aten._amp_foreach_non_finite_check_and_unscale_.default, raw=True)
def _amp_foreach_non_finite_check_and_unscale_(self: list, found_inf: Any, inv_scale: Any) -> None:
    grads, fi, inv = _values(self), payload(found_inf), payload(inv_scale)
    _check_unscale_args(grads, fi, inv)
    if not grads:
        return
    new, new_fi = lazy.call(_unscale_kernel, (grads, fi, inv))
    _write(self, new)
    set_value(found_inf, new_fi)


@lower(aten._amp_foreach_non_finite_check_and_unscale.default)
def _amp_foreach_non_finite_check_and_unscale(self: list, found_inf: Any, inv_scale: Any) -> tuple:
    _check_unscale_args(list(self), found_inf, inv_scale)
    if not self:
        return [], found_inf
    new, new_fi = _unscale_kernel(list(self), found_inf, inv_scale)
    return list(new), new_fi


@lower(aten._amp_foreach_non_finite_check_and_unscale.out, raw=True)
def _amp_foreach_non_finite_check_and_unscale_out(
    self: list, found_inf: Any, inv_scale: Any, *, out: list
) -> None:
    grads, fi, inv = _values(self), payload(found_inf), payload(inv_scale)
    _check_unscale_args(grads, fi, inv)
    if not grads:
        return
    new, new_fi = lazy.call(_unscale_kernel, (grads, fi, inv))
    _write(out, new)  # found_inf is left as is, as torch's generated .out kernel leaves it


@functools.partial(jax.jit, static_argnames=("growth_interval",))
def _update_scale_kernel(
    scale: Any, tracker: Any, found_inf: Any, growth: Any, backoff: Any, *, growth_interval: int
) -> tuple:
    """torch's _amp_update_scale_: back off on an inf/NaN step; otherwise grow every ``growth_interval``
    successful steps, never to an infinite scale."""
    inf = found_inf.reshape(()) != 0
    successful = tracker + 1
    grow = successful == growth_interval
    grown = (scale * growth).astype(scale.dtype)
    new_scale = jnp.where(
        inf, (scale * backoff).astype(scale.dtype), jnp.where(grow & jnp.isfinite(grown), grown, scale)
    )
    new_tracker = jnp.where(inf | grow, jnp.zeros_like(tracker), successful.astype(tracker.dtype))
    return new_scale, new_tracker


def _check_update_args(scale: Any, tracker: Any, found_inf: Any) -> None:
    if scale.size != 1 or scale.dtype != jnp.float32:
        raise RuntimeError("_amp_update_scale_: current_scale must be a 1-element float tensor")
    if tracker.size != 1 or tracker.dtype != jnp.int32:
        raise RuntimeError("_amp_update_scale_: growth_tracker must be a 1-element int tensor")
    if found_inf.size != 1 or found_inf.dtype != jnp.float32:
        raise RuntimeError("_amp_update_scale_: found_inf must be a 1-element float tensor")


@lower(aten._amp_update_scale_.default, raw=True)
def _amp_update_scale_(
    self: Any,
    growth_tracker: Any,
    found_inf: Any,
    scale_growth_factor: float,
    scale_backoff_factor: float,
    growth_interval: int,
) -> Any:
    s, t, fi = payload(self), payload(growth_tracker), payload(found_inf)
    _check_update_args(s, t, fi)
    new_s, new_t = lazy.call(
        _update_scale_kernel,
        (s, t, fi, float(scale_growth_factor), float(scale_backoff_factor)),
        {"growth_interval": int(growth_interval)},
    )
    set_value(self, new_s)
    set_value(growth_tracker, new_t)
    return self


@lower(aten._amp_update_scale.default)
def _amp_update_scale(
    self: Any,
    growth_tracker: Any,
    found_inf: Any,
    scale_growth_factor: float,
    scale_backoff_factor: float,
    growth_interval: int,
) -> tuple:
    _check_update_args(self, growth_tracker, found_inf)
    return _update_scale_kernel(
        self,
        growth_tracker,
        found_inf,
        scale_growth_factor,
        scale_backoff_factor,
        growth_interval=int(growth_interval),
    )


@lower(aten._amp_update_scale.out, raw=True)
def _amp_update_scale_out(
    self: Any,
    growth_tracker: Any,
    found_inf: Any,
    scale_growth_factor: float,
    scale_backoff_factor: float,
    growth_interval: int,
    *,
    out: Any,
) -> Any:
    s, t, fi = payload(self), payload(growth_tracker), payload(found_inf)
    _check_update_args(s, t, fi)
    new_s, new_t = lazy.call(
        _update_scale_kernel,
        (s, t, fi, float(scale_growth_factor), float(scale_backoff_factor)),
        {"growth_interval": int(growth_interval)},
    )
    set_value(out, new_s)  # growth_tracker is left as is, as torch's generated .out kernel leaves it
    return out
