"""Loss kernels: multi-margin and multilabel-margin losses, CTC loss, chunked linear_cross_entropy."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend.jit import jitted
from tpu_workbench.backend.lazy import Lazy
from tpu_workbench.backend.op_jit import op_jit
from tpu_workbench.backend.ops._util import aten, jdt
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload
from tpu_workbench.backend.traced import Untraceable, tracing


# ----------------------------------------------------------------------------- margin losses
def _reduce(loss: Any, reduction: int) -> Any:
    if reduction == 1:
        return jnp.mean(loss)
    if reduction == 2:
        return jnp.sum(loss)
    return loss


def _multi_margin(x: Any, target: Any, p: int, margin: float, weight: Any, reduction: int) -> Any:
    """torch: per sample sum_{j != y} [w_y *] max(0, margin - x_y + x_j)^p / C (strict z > 0)."""
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    c = x.shape[-1] if x.ndim else 1
    x2 = x.reshape(-1, c)
    t = target.reshape(-1).astype(jnp.int64)
    xt = jnp.take_along_axis(x2, t[:, None], 1)
    z = margin - xt + x2
    h = jnp.where(z > 0, z, jnp.zeros((), x.dtype))
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * weight.astype(x.dtype)[t][:, None]
    h = jnp.where(jnp.arange(c)[None, :] != t[:, None], h, jnp.zeros((), x.dtype))
    loss = jnp.sum(h, axis=1) / c
    if reduction == 0:
        return loss.reshape(()) if target.ndim == 0 else loss
    return _reduce(loss, reduction).astype(x.dtype)


@lower(aten.multi_margin_loss.default, jit=True)
def multi_margin_loss(
    x: Any, target: Any, p: int = 1, margin: float = 1, weight: Any = None, reduction: int = 1
) -> Any:
    return _multi_margin(x, target, p, margin, weight, reduction)


def _multilabel_is_target(x: Any, target: Any) -> Any:
    c = x.shape[-1] if x.ndim else 1
    t2 = target.reshape(-1, c).astype(jnp.int64)
    valid = jnp.cumprod(t2 >= 0, axis=1).astype(bool)  # targets up to the first -1
    rows = jnp.arange(t2.shape[0])[:, None]
    is_t = jnp.zeros(t2.shape, bool).at[rows, jnp.where(valid, t2, 0)].max(valid)
    return is_t.reshape(target.shape).astype(x.dtype)


def _multilabel_margin(x: Any, target: Any, reduction: int, is_target: Any) -> Any:
    """torch: per sample sum over valid targets j and non-target i of max(0, 1 - (x_j - x_i)) / C."""
    c = x.shape[-1] if x.ndim else 1
    x2 = x.reshape(-1, c)
    t2 = target.reshape(-1, c).astype(jnp.int64)
    valid = jnp.cumprod(t2 >= 0, axis=1).astype(bool)
    xt = jnp.take_along_axis(x2, jnp.where(valid, t2, 0), 1)
    z = 1 - xt[:, :, None] + x2[:, None, :]
    mask = valid[:, :, None] & (is_target.reshape(-1, c)[:, None, :] == 0)
    h = jnp.where(mask & (z > 0), z, jnp.zeros((), x.dtype))
    loss = jnp.sum(h, axis=(1, 2)) / c
    if reduction == 0:
        return loss.reshape(()) if target.ndim <= 1 else loss
    return _reduce(loss, reduction).astype(x.dtype)


@lower(aten.multilabel_margin_loss_forward.default, jit=True)
def multilabel_margin_loss_forward(x: Any, target: Any, reduction: int) -> Any:
    is_t = _multilabel_is_target(x, target)
    return _multilabel_margin(x, target, reduction, is_t), is_t


# ----------------------------------------------------------------------------- CTC loss
def _ctc_setup(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int) -> Any:
    """Padded extended labels l' (B, S) with S = 2 * max_target_length + 1, and the lengths as arrays."""
    il = jnp.asarray(input_lengths, jnp.int64).reshape(-1)
    tl_list = [int(v) for v in np.asarray(target_lengths).reshape(-1)]
    b = len(tl_list)
    max_tl = max(tl_list) if tl_list else 0
    if targets.ndim == 1:  # concatenated targets
        offs = np.concatenate([[0], np.cumsum(tl_list)[:-1]]).astype(np.int64)
        pos = offs[:, None] + np.arange(max_tl)[None, :]
        tg = (
            targets[jnp.asarray(np.minimum(pos, max(targets.shape[0] - 1, 0)))]
            if targets.shape[0]
            else jnp.zeros((b, max_tl), jnp.int64)
        )
    else:
        tg = targets[:, :max_tl]
    s = 2 * max_tl + 1
    ext = jnp.full((b, s), blank, jnp.int64)
    ext = ext.at[:, 1::2].set(tg.astype(jnp.int64)) if max_tl else ext
    tl = jnp.asarray(tl_list, jnp.int64)
    return ext, il, tl, s


def _lse(*xs: Any) -> Any:
    """log(sum(exp)) of same-shape arrays with torch's ctc convention: all -inf -> -inf."""
    m = xs[0]
    for x in xs[1:]:
        m = jnp.maximum(m, x)
    m0 = jnp.where(jnp.isneginf(m), 0, m)
    return jnp.log(sum(jnp.exp(x - m0) for x in xs)) + m0


def _ctc_alpha(lp: Any, ext: Any, il: Any, tl: Any, s: int) -> Any:
    """log_alpha (B, T, S) of torch's recursion (-inf outside the valid region) and the nll (B,)."""
    t_len = lp.shape[0]
    b = ext.shape[0]
    neg = jnp.asarray(-jnp.inf, lp.dtype)
    sidx = jnp.arange(s)[None, :]
    in_range = sidx <= 2 * tl[:, None]
    lpe = jnp.take_along_axis(jnp.moveaxis(lp, 0, 1), jnp.broadcast_to(ext[:, None, :], (b, t_len, s)), 2)
    skip = jnp.concatenate([jnp.zeros((b, 2), bool), ext[:, 2:] != ext[:, :-2]], axis=1)
    a0 = jnp.where((sidx <= 1) & in_range, lpe[:, 0, :], neg)
    a0 = jnp.where(il[:, None] > 0, a0, neg)

    def step(prev: Any, t: Any) -> Any:
        p1 = jnp.concatenate([jnp.full((b, 1), neg), prev[:, :-1]], axis=1)
        p2 = jnp.where(skip, jnp.concatenate([jnp.full((b, 2), neg), prev[:, :-2]], axis=1), neg)
        cur = _lse(prev, p1, p2) + lpe[:, t, :]
        cur = jnp.where(in_range & (t < il[:, None]), cur, neg)
        return cur, cur

    if t_len > 1:
        _, rest = jax.lax.scan(step, a0, jnp.arange(1, t_len))
        la = jnp.concatenate([a0[:, None, :], jnp.moveaxis(rest, 0, 1)], axis=1)
    else:
        la = a0[:, None, :]
    last = jnp.take_along_axis(la, jnp.clip(il - 1, 0, t_len - 1)[:, None, None], 1)[:, 0, :]
    l1 = jnp.take_along_axis(last, (2 * tl)[:, None], 1)[:, 0]
    l2 = jnp.where(tl > 0, jnp.take_along_axis(last, jnp.clip(2 * tl - 1, 0)[:, None], 1)[:, 0], neg)
    nll = -_lse(l1, l2)
    return la, nll, lpe


def _lengths(v: Any) -> list:
    return [int(x) for x in np.asarray(v).reshape(-1)]


@functools.cache
def _jit_of(fn: Any) -> Any:
    """One cached ``jax.jit`` wrapper (as the dispatcher builds for ``jit=True``) per lowering."""

    return jitted(fn)


@lower(aten._ctc_loss.default, jit=True)
def _ctc_loss(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    zero_infinity: bool = False,
) -> Any:
    """(neg_log_likelihood (B,), log_alpha (B, T, 2 * max_target_length + 1)); zero_infinity acts in the
    backward and in ctc_loss itself, as on CPU."""
    if log_probs.ndim != 3:
        raise NotImplementedError("_ctc_loss: only batched (T, N, C) log_probs are supported on TPU")
    ext, il, tl, s = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    la, nll, _ = _ctc_alpha(log_probs, ext, il, tl, s)
    return nll.astype(log_probs.dtype), la.astype(log_probs.dtype)


@lower(aten._ctc_loss.Tensor)
def _ctc_loss_t(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    zero_infinity: bool = False,
) -> Any:
    """Tensor lengths: read them (the padded label length is a shape), then the list overload's jitted path."""
    return _jit_of(_ctc_loss)(
        log_probs, targets, _lengths(input_lengths), _lengths(target_lengths), blank, zero_infinity
    )


@lower(aten._ctc_loss_backward.Tensor)
def _ctc_loss_backward_t(
    g: Any,
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    neg_log_likelihood: Any,
    log_alpha: Any,
    blank: int,
    zero_infinity: bool = False,
) -> Any:
    return _jit_of(_ctc_loss_backward)(
        g,
        log_probs,
        targets,
        _lengths(input_lengths),
        _lengths(target_lengths),
        neg_log_likelihood,
        log_alpha,
        blank,
        zero_infinity,
    )


@lower(aten._ctc_loss_backward.default, jit=True)
def _ctc_loss_backward(
    g: Any,
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    neg_log_likelihood: Any,
    log_alpha: Any,
    blank: int,
    zero_infinity: bool = False,
) -> Any:
    """torch's CPU formula (LossCTC.cpp): grad = (exp(lp) - exp(log(sum_{s: l'(s)=c} alpha*beta) + nll - lp)) * g,
    i.e. the gradient with respect to the logits under log_softmax, zero past each input length (and for
    infinite losses when zero_infinity)."""
    ext, il, tl, s = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    t_len, b, c = log_probs.shape
    la, _, lpe = _ctc_alpha(log_probs, ext, il, tl, s)
    nll = neg_log_likelihood
    neg = jnp.asarray(-jnp.inf, log_probs.dtype)
    sidx = jnp.arange(s)[None, :]
    in_range = sidx <= 2 * tl[:, None]
    skip_fwd = jnp.concatenate(
        [ext[:, :-2] != ext[:, 2:], jnp.zeros((b, 2), bool)], axis=1
    )  # s -> s+2 allowed
    tlast = il - 1
    init_mask = ((sidx == 2 * tl[:, None]) | ((sidx == 2 * tl[:, None] - 1) & (tl[:, None] > 0))) & in_range

    def step(nxt: Any, t: Any) -> Any:
        n1 = jnp.concatenate([nxt[:, 1:], jnp.full((b, 1), neg)], axis=1)
        n2 = jnp.where(skip_fwd, jnp.concatenate([nxt[:, 2:], jnp.full((b, 2), neg)], axis=1), neg)
        rec = _lse(nxt, n1, n2) + lpe[:, t, :]
        init = jnp.where(init_mask, lpe[:, t, :], neg)
        cur = jnp.where((t == tlast)[:, None], init, jnp.where((t < tlast)[:, None] & in_range, rec, neg))
        return cur, cur

    _, lbs = jax.lax.scan(step, jnp.full((b, s), neg), jnp.arange(t_len - 1, -1, -1))
    lb = jnp.moveaxis(lbs[::-1], 0, 1)  # (B, T, S)
    lab = la + lb  # -inf outside the valid region
    onehot = ext[:, :, None] == jnp.arange(c)[None, None, :]  # (B, S, C)
    cand = jnp.where(onehot[:, None, :, :], lab[:, :, :, None], neg)  # (B, T, S, C)
    m = jnp.max(cand, axis=2)
    m0 = jnp.where(jnp.isneginf(m), 0, m)
    lcab = jnp.log(jnp.sum(jnp.exp(cand - m0[:, :, None, :]), axis=2)) + m0  # (B, T, C)
    lp = jnp.moveaxis(log_probs, 0, 1)
    gb = (
        g.reshape(-1).astype(log_probs.dtype) if g.ndim else jnp.broadcast_to(g, (b,)).astype(log_probs.dtype)
    )
    res = (jnp.exp(lp) - jnp.exp(lcab + nll[:, None, None] - lp)) * gb[:, None, None]
    res = jnp.where((jnp.arange(t_len)[None, :] < il[:, None])[:, :, None], res, jnp.zeros((), res.dtype))
    if zero_infinity:
        res = jnp.where(jnp.isinf(nll)[:, None, None], jnp.zeros((), res.dtype), res)
    return jnp.moveaxis(res, 0, 1).astype(log_probs.dtype)


# ----------------------------------------------------------------------------- chunked linear_cross_entropy
def _lce_rows(x: Any, lw: Any, target: Any, lb: Any, weight: Any, ignore_index: int) -> Any:
    """Per-row (weight[target] * -log_softmax(x @ lw.T + lb)[target], weight[target]), both 0 at ignore_index."""
    logits = jnp.matmul(x, lw.T, precision=jax.lax.Precision.HIGHEST)
    if lb is not None:
        logits = logits + lb
    mask = target == ignore_index
    t = jnp.where(mask, 0, target).astype(jnp.int64)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits, axis=1), t[:, None], 1)[:, 0]
    w = jnp.ones(t.shape, x.dtype) if weight is None else weight.astype(x.dtype)[t]
    w = jnp.where(mask, jnp.zeros((), x.dtype), w)
    return w * nll, w


def _lce_check(x: Any, acc_dtype: Any, label_smoothing: float = 0.0) -> None:
    if label_smoothing > 0.0:
        raise NotImplementedError("linear_cross_entropy does not support label smoothing")
    if jdt(acc_dtype) != x.dtype:
        raise NotImplementedError(
            "linear_cross_entropy (chunked) on TPU: acc_dtype must equal the input dtype"
        )


def _lce_lower() -> None:
    """Register the chunked custom ops of ``torch.nn.modules.linear_cross_entropy`` (newer torch only)."""
    try:
        import torch.nn.modules.linear_cross_entropy  # noqa: F401  # lazy: optional (newer torch only)

        ops = torch.ops.torch_nn
        chunked = ops._linear_cross_entropy_batch_chunked.default
        no_red = ops._linear_cross_entropy_batch_chunked_no_reduction.default
    except (ImportError, AttributeError, RuntimeError):
        return

    @lower(chunked)
    def lce_chunked(
        x: Any,
        lw: Any,
        target: Any,
        lb: Any,
        weight: Any,
        reduction: str,
        ignore_index: int,
        label_smoothing: float,
        batch_chunk_size: int,
        acc_policy: str,
        acc_dtype: Any,
        allow_retain_graph: bool,
        compute_input_grad: bool,
        compute_linear_weight_grad: bool,
        compute_linear_bias_grad: bool,
    ) -> Any:
        """(loss, grad_input, grad_linear_weight, grad_linear_bias): the op precomputes the gradients of the
        scalar loss in forward (its autograd scales them); unrequested ones are empty, as on CPU."""
        _lce_check(x, acc_dtype, label_smoothing)
        if reduction not in ("mean", "sum"):
            raise NotImplementedError(f"linear_cross_entropy does not support {reduction=}")

        def loss_fn(x_: Any, lw_: Any, lb_: Any) -> Any:
            rows, w = _lce_rows(x_, lw_, target, lb_, weight, ignore_index)
            if reduction == "sum":
                return jnp.sum(rows)
            d = jnp.sum(w)
            return jnp.sum(rows) / jnp.where(d == 0, jnp.nan, d)

        loss, (gi, gw, gb) = jax.value_and_grad(loss_fn, argnums=(0, 1, 2))(x, lw, lb)
        if reduction == "mean" and x.shape[0] == 0:
            loss = jnp.asarray(jnp.nan, x.dtype)
        gi = gi if compute_input_grad else jnp.zeros((0, 0), x.dtype)
        gw = gw.astype(x.dtype) if compute_linear_weight_grad else jnp.zeros((0, 0), x.dtype)
        gb = gb.astype(x.dtype) if compute_linear_bias_grad and gb is not None else jnp.zeros((0,), x.dtype)
        return loss.astype(x.dtype), gi, gw, gb

    @lower(no_red)
    def lce_chunked_no_reduction(
        x: Any,
        lw: Any,
        target: Any,
        lb: Any,
        weight: Any,
        ignore_index: int,
        batch_chunk_size: int,
        acc_policy: str,
        acc_dtype: Any,
    ) -> Any:
        _lce_check(x, acc_dtype)
        return _lce_rows(x, lw, target, lb, weight, ignore_index)[0].astype(x.dtype)


_lce_lower()


# ----------------------------------------------------------------------------- nll_loss
# PyTorch decomposes nll_loss into a dozen ops around a gather whose index bound is checked on the host: 1.6 ms
# a call in strict eager. Here it is one lowering (torch's decomposition, in JAX), and the bound is checked by
# one small program whose flag is read on the host: CPU's error, "Target 7 is out of bounds.", not a wrong loss.
def _target_out_of_bounds(target: Any, ignore_index: int, n_classes: int) -> Any:
    return jnp.any((target != ignore_index) & ((target < 0) | (target >= n_classes)))


_OUT_OF_BOUNDS = op_jit(_target_out_of_bounds)


def _nll_check(x: Any, target: Any, weight: Any = None, reduction: int = 1, ignore_index: int = -100) -> None:
    if tracing():
        raise Untraceable("nll_loss_forward checks its targets on the host")
    t = payload(target) if isinstance(target, TpuTensor) else None
    if t is None or t.__class__ is Lazy or isinstance(t, jax.core.Tracer) or x.dim() == 0:
        return  # a CPU target is refused by the dispatcher; a pending (fused) or traced (compiled) one is not read
    n = x.shape[-1]
    if bool(_OUT_OF_BOUNDS(t, ignore_index, n)):
        host = np.asarray(t).reshape(-1)
        bad = host[(host != ignore_index) & ((host < 0) | (host >= n))]
        raise IndexError(f"Target {int(bad[0])} is out of bounds.")


def _class_shape(ndim: int, cd: int, c: int) -> list:
    shape = [1] * ndim
    shape[cd] = c
    return shape


@lower(aten.nll_loss_forward.default, check=_nll_check)
def nll_loss_forward(x: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> Any:
    if not 0 < x.ndim <= 2:
        raise AssertionError(f"input tensor should be 1D or 2D, got {x.ndim}D")
    if target.ndim > 1:
        raise AssertionError(
            f"0D or 1D target tensor expected, multi-target not supported, got {target.ndim}D"
        )
    if not (x.ndim == 1 and target.ndim == 0) and x.shape[0] != target.shape[0]:
        raise RuntimeError(f"size mismatch (got input: {list(x.shape)}, target: {list(target.shape)})")
    n = x.shape[-1]
    if weight is not None and not (weight.ndim == 1 and weight.size == n):
        raise AssertionError(
            f"weight tensor should be defined either for all {n} classes or no classes but got "
            f"weight tensor of shape: {list(weight.shape)}"
        )
    cd = 1 if x.ndim >= 2 else 0
    w = None
    if weight is not None:
        w = weight.reshape(_class_shape(x.ndim, cd, n)) if x.ndim > 1 else weight
        x = x * w
    valid = target != ignore_index
    safe = jnp.expand_dims(jnp.where(valid, target, 0), cd)
    result = jnp.where(valid, -jnp.take_along_axis(x, safe, axis=cd).squeeze(cd), 0)
    if reduction == 0 and x.ndim > 1:
        return result, jnp.zeros((), x.dtype)
    acc = jnp.float32 if x.dtype in (jnp.bfloat16, jnp.float16) else x.dtype  # torch's opmath accumulation
    if w is not None:
        picked = jnp.take_along_axis(jnp.broadcast_to(w, x.shape), safe, axis=cd).squeeze(cd)
        total = jnp.where(valid, picked, 0).astype(acc).sum()
    else:
        total = valid.sum().astype(acc)
    if reduction == 2:
        result = result.astype(acc).sum().astype(x.dtype)
    elif reduction == 1:
        result = (result.astype(acc).sum() / total).astype(x.dtype)
    return result, total.astype(x.dtype)


@lower(aten.nll_loss_backward.default)
def nll_loss_backward(
    grad_output: Any, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int, total_weight: Any
) -> Any:
    cd = 0 if x.ndim < 2 else 1
    if reduction == 1:
        grad_output = grad_output / total_weight
    if x.ndim == 1 and target.ndim > 0:
        target = target[0]
    target = jnp.expand_dims(target, cd)
    valid = target != ignore_index
    safe = jnp.where(valid, target, 0)
    classes = jnp.arange(x.shape[cd]).reshape(_class_shape(x.ndim, cd, x.shape[cd]))
    grad_input = jnp.where(classes == safe, jnp.asarray(-1.0, x.dtype), jnp.zeros((), x.dtype))
    if grad_input.ndim > grad_output.ndim > 0:
        grad_output = jnp.expand_dims(grad_output, cd)
    if weight is not None:
        grad_output = grad_output * weight.reshape(_class_shape(x.ndim, cd, weight.shape[0]))
    grad_output = jnp.where(valid, grad_output, 0)
    return grad_input * grad_output
