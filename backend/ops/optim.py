"""Fused optimizer steps (Adam, AdamW, SGD, Adagrad) and GradScaler's two AMP ops.

``torch.optim.*(fused=True)`` hands the whole parameter group to one ATen call that updates every list in
place. Here that call is one jitted XLA computation over all the group's tensors (the point of "fused"),
and the new values are written back through the tensor module's ``set_value`` (so views stay views).

Arithmetic follows torch's fused CPU/CUDA kernels: element math in the parameter's "opmath" dtype (float32
for bfloat16/float16 parameters), bias corrections in float64; with ``grad_scale`` the gradients are
unscaled and the unscaled values stored back; a ``found_inf`` of 1 leaves every tensor untouched (the step
counters are rolled back by the optimizer itself). The hyper-parameters are traced, not static, so a
learning-rate schedule does not recompile.

Written once: each optimizer is an ``_Optimizer`` (its state lists, hyper-parameters, length checks and
per-parameter math); one jitted driver (``_step_kernel``) does what they share (unscaling, maximize, opmath
casts, the ``found_inf`` skip), and one factory (``_register``) lowers the three overloads of each: in place
(``_fused_adam_``), functional (``_fused_adam``: new lists, as functionalization and compile graphs use) and
``.out`` (writes the new parameters to ``out`` and leaves every other list as it is, as torch's generated CPU
kernels for them do).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
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


# ----------------------------------------------------------------------------- the shared driver
@dataclasses.dataclass(frozen=True)
class _Optimizer:
    """One fused optimizer. ``updated``: the state lists it writes (after params and grads, in schema order);
    ``read``: those it only reads (step counters); ``hyper``: the traced hyper-parameters (lr first);
    ``flags(kwargs)``: the static switches; ``active(kwargs)``: which updated lists hold one tensor per
    parameter (the others are empty, e.g. max_exp_avg_sqs without amsgrad); ``check``: the length checks;
    ``math(pf, gf, ot, pdt, updated, read, hyper, flags)``: one parameter's (dtype ``pdt``) new value and new states, in opmath
    (None for an inactive list); ``float_lr_returns``: lists the float-lr functional overload also returns."""

    name: str
    updated: tuple[str, ...]
    read: tuple[str, ...]
    hyper: tuple[str, ...]
    flags: Callable[[dict], dict]
    active: Callable[[dict], tuple[bool, ...]]
    check: Callable[[int, dict, dict], None]
    math: Callable[..., tuple]
    float_lr_returns: tuple[str, ...] = ()


@functools.partial(jax.jit, static_argnames=("math", "flags"))
def _step_kernel(
    params: list,
    grads: list,
    updated: tuple,
    read: tuple,
    hyper: dict,
    grad_scale: Any,
    found_inf: Any,
    *,
    math: Callable[..., tuple],
    flags: tuple,
) -> tuple:
    fl = dict(flags)
    out_p, out_g = [], []
    out_u: list[list] = [[] for _ in updated]
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        ot = _opmath(p.dtype)
        gf, g_store = _unscale(g, grad_scale, ot)
        if fl["maximize"]:
            gf = -gf
        pf = p.astype(ot)
        mine = tuple(u[i] if u else None for u in updated)
        pf, new = math(pf, gf, ot, p.dtype, mine, tuple(r[i] for r in read), hyper, fl)
        out_p.append(pf.astype(p.dtype))
        out_g.append(g_store)
        for lst, old, n in zip(out_u, mine, new, strict=True):
            if old is not None:
                lst.append(n.astype(old.dtype))
    skip = _skip(found_inf)
    return (
        _keep_if(skip, params, out_p),
        _keep_if(skip, grads, out_g),
        *[_keep_if(skip, list(u), o) for u, o in zip(updated, out_u, strict=True)],
    )


def _arrays(opt: _Optimizer, lists: dict, kw: dict, defer: bool) -> tuple:
    """The new (params, grads, *updated) arrays for arrays ``lists`` (by schema name) and keyword args ``kw``."""
    n = len(lists["self"])
    opt.check(n, lists, kw)
    active = opt.active(kw)
    if n == 0:
        return tuple([] for _ in range(2 + len(opt.updated)))
    args = (
        lists["self"],
        lists["grads"],
        tuple(lists[u] if on else [] for u, on in zip(opt.updated, active, strict=True)),
        tuple(lists[r] for r in opt.read),
        {h: kw[h] for h in opt.hyper},
        kw.get("grad_scale"),
        kw.get("found_inf"),
    )
    flags = {"math": opt.math, "flags": tuple(sorted(opt.flags(kw).items()))}
    return lazy.call(_step_kernel, args, flags) if defer else _step_kernel(*args, **flags)


def _values(ts: Any) -> list:
    return [payload(t) for t in ts]


def _opt(t: Any) -> Any:
    return None if t is None else payload(t)


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


def _named(opt: _Optimizer, args: tuple) -> dict:
    return dict(zip(("self", "grads", *opt.updated, *opt.read), args, strict=True))


def _tensor_call(opt: _Optimizer, args: tuple, kw: dict) -> tuple[dict, tuple]:
    """A raw (tensor-level) call: its tensor lists by name and its new arrays, run (or recorded) now."""
    lists = _named(opt, args)
    kw = dict(
        kw, lr=_lr_of(kw["lr"]), grad_scale=_opt(kw.get("grad_scale")), found_inf=_opt(kw.get("found_inf"))
    )
    return lists, _arrays(opt, {k: _values(v) for k, v in lists.items()}, kw, defer=True)


def _register(opt: _Optimizer) -> None:
    """Lower ``_fused_<name>_`` (in place), ``_fused_<name>`` (functional) and ``_fused_<name>.out``."""
    inplace = getattr(aten, f"_fused_{opt.name}_")
    functional = getattr(aten, f"_fused_{opt.name}")

    def fused_inplace(*args: Any, **kw: Any) -> None:
        lists, new = _tensor_call(opt, args, kw)
        for name, arrays in zip(("self", "grads", *opt.updated), new, strict=True):
            _write(lists[name], arrays)

    def fused_functional(*args: Any, **kw: Any) -> tuple:
        lists = {k: list(v) for k, v in _named(opt, args).items()}
        new = _arrays(opt, lists, kw, defer=False)
        active = (True, True, *opt.active(kw))
        names = ("self", "grads", *opt.updated)
        res = [list(a) if on else lists[n] for a, on, n in zip(new, active, names, strict=True)]
        if isinstance(kw["lr"], (int, float)):
            res += [lists[n] for n in opt.float_lr_returns]
        return tuple(res)

    def fused_out(*args: Any, out: list, **kw: Any) -> None:
        _, new = _tensor_call(opt, args, kw)
        _write(
            out, new[0]
        )  # the state lists stay as they are: torch's generated .out kernels write only ``out``

    lower(inplace.default, inplace.tensor_lr, raw=True)(fused_inplace)
    lower(functional.default, functional.tensor_lr)(fused_functional)
    lower(functional.out, functional.tensor_lr_out, raw=True)(fused_out)


# ----------------------------------------------------------------------------- Adam / AdamW
def _adam_math(adamw: bool) -> Callable[..., tuple]:
    def math(pf: Any, gf: Any, ot: Any, pdt: Any, updated: tuple, read: tuple, h: dict, fl: dict) -> tuple:
        m, v, vmax_old = updated
        (step,) = read
        lr64 = jnp.asarray(_scalar(h["lr"]), jnp.float64)
        b1, b2 = jnp.asarray(h["beta1"], jnp.float64), jnp.asarray(h["beta2"], jnp.float64)
        if fl["decay"]:
            if adamw:
                pf = pf * (1 - lr64 * h["weight_decay"]).astype(ot)
            else:
                gf = gf + pf * jnp.asarray(h["weight_decay"], ot)
        mf = m.astype(ot) * b1.astype(ot) + gf * (1 - b1).astype(ot)
        vf = v.astype(ot) * b2.astype(ot) + gf * gf * (1 - b2).astype(ot)
        t = step.reshape(()).astype(jnp.float64)
        step_size = (lr64 / (1 - b1**t)).astype(ot)
        bc2_sqrt = jnp.sqrt(1 - b2**t).astype(ot)
        vmax = None
        if fl["amsgrad"]:
            vmax = jnp.maximum(vmax_old.astype(ot), vf)
            denom = jnp.sqrt(vmax) / bc2_sqrt + jnp.asarray(h["eps"], ot)
        else:
            denom = jnp.sqrt(vf) / bc2_sqrt + jnp.asarray(h["eps"], ot)
        return pf - step_size * mf / denom, (mf, vf, vmax)

    return math


def _adam_check(name: str) -> Callable[[int, dict, dict], None]:
    def check(n: int, lists: dict, kw: dict) -> None:
        if not (
            len(lists["grads"])
            == len(lists["exp_avgs"])
            == len(lists["exp_avg_sqs"])
            == len(lists["state_steps"])
            == n
        ):
            raise RuntimeError(
                f"_fused_{name}: params, grads, exp_avgs, exp_avg_sqs and state_steps must have one "
                "tensor each per parameter"
            )
        if len(lists["max_exp_avg_sqs"]) != (n if kw["amsgrad"] else 0):
            raise RuntimeError(
                f"_fused_{name}: max_exp_avg_sqs must have one tensor per parameter with amsgrad=True "
                "and be empty otherwise"
            )

    return check


for _name, _adamw in (("adam", False), ("adamw", True)):
    _register(
        _Optimizer(
            name=_name,
            updated=("exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"),
            read=("state_steps",),
            hyper=("lr", "beta1", "beta2", "weight_decay", "eps"),
            flags=lambda kw: {
                "amsgrad": bool(kw["amsgrad"]),
                "maximize": bool(kw["maximize"]),
                "decay": kw["weight_decay"] != 0,
            },
            active=lambda kw: (True, True, bool(kw["amsgrad"])),
            check=_adam_check(_name),
            math=_adam_math(_adamw),
        )
    )


# ----------------------------------------------------------------------------- SGD
def _sgd_math(pf: Any, gf: Any, ot: Any, pdt: Any, updated: tuple, read: tuple, h: dict, fl: dict) -> tuple:
    (buf_old,) = updated
    if fl["decay"]:
        gf = gf + pf * jnp.asarray(h["weight_decay"], pdt).astype(ot)
    buf = None
    if fl["use_momentum"]:
        mom = jnp.asarray(h["momentum"], pdt).astype(ot)
        buf = (
            gf
            if fl["first"]
            else buf_old.astype(ot) * mom + gf * jnp.asarray(1 - h["dampening"], pdt).astype(ot)
        )
        gf = gf + buf * mom if fl["nesterov"] else buf
    return pf - gf * jnp.asarray(_scalar(h["lr"]), ot), (buf,)


def _sgd_check(n: int, lists: dict, kw: dict) -> None:
    if len(lists["grads"]) != n or len(lists["momentum_buffer_list"]) != (n if kw["momentum"] != 0 else 0):
        raise RuntimeError(
            "_fused_sgd: grads must have one tensor per parameter, and momentum_buffer_list one "
            "per parameter when momentum != 0 (empty otherwise)"
        )


_register(
    _Optimizer(
        name="sgd",
        updated=("momentum_buffer_list",),
        read=(),
        hyper=("lr", "weight_decay", "momentum", "dampening"),
        flags=lambda kw: {
            "maximize": bool(kw["maximize"]),
            "nesterov": bool(kw["nesterov"]),
            "first": bool(kw["is_first_step"]),
            "decay": kw["weight_decay"] != 0,
            "use_momentum": kw["momentum"] != 0,
        },  # fmt: skip
        active=lambda kw: (kw["momentum"] != 0,),
        check=_sgd_check,
        math=_sgd_math,
    )
)


# ----------------------------------------------------------------------------- Adagrad
def _adagrad_math(
    pf: Any, gf: Any, ot: Any, pdt: Any, updated: tuple, read: tuple, h: dict, fl: dict
) -> tuple:
    (s,) = updated
    (step,) = read
    lr64 = jnp.asarray(_scalar(h["lr"]), jnp.float64)
    if fl["decay"]:
        gf = gf + pf * jnp.asarray(h["weight_decay"], ot)
    clr = (lr64 / (1 + (step.reshape(()).astype(jnp.float64) - 1) * h["lr_decay"])).astype(ot)
    sf = s.astype(ot) + gf * gf
    return pf - clr * gf / (jnp.sqrt(sf) + jnp.asarray(h["eps"], ot)), (sf,)


def _adagrad_check(n: int, lists: dict, kw: dict) -> None:
    if not (len(lists["grads"]) == len(lists["state_sums"]) == len(lists["state_steps"]) == n):
        raise RuntimeError(
            "_fused_adagrad: params, grads, state_sums and state_steps must have one tensor each per parameter"
        )


_register(
    _Optimizer(
        name="adagrad",
        updated=("state_sums",),
        read=("state_steps",),
        hyper=("lr", "lr_decay", "weight_decay", "eps"),
        flags=lambda kw: {"maximize": bool(kw["maximize"]), "decay": kw["weight_decay"] != 0},
        active=lambda kw: (True,),
        check=_adagrad_check,
        math=_adagrad_math,
        float_lr_returns=("state_steps",),  # the float-lr functional overload also returns the step counters
    )
)


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
