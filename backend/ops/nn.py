"""Neural-network lowerings: softmax and log_softmax, layer/batch/group norm, convolution, pooling (max, avg,
adaptive max), rrelu. Sampling and resizing ops are in ``sampling``, loss kernels in ``losses``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend import lazy
from tpu_workbench.backend.ops._util import aten, jdt, wrapdim
from tpu_workbench.backend.ops.linalg import precision
from tpu_workbench.backend.ops.random import _key
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload, set_value, value


def _wide(dt: Any) -> Any:
    return jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt


@lower(aten._softmax.default, jit=True)
def _softmax(x: Any, dim: int, half_to_float: bool) -> Any:
    d = wrapdim(dim, x.ndim)  # (a 0-dim tensor takes dim 0 or -1 only)
    w = x.astype(_wide(x.dtype))
    out = jnp.exp(w - w) if x.ndim == 0 else jax.nn.softmax(w, axis=d)  # (0-dim: 1, or NaN for inf/NaN)
    return out if half_to_float else out.astype(x.dtype)


@lower(aten._log_softmax.default, jit=True)
def _log_softmax(x: Any, dim: int, half_to_float: bool) -> Any:
    d = wrapdim(dim, x.ndim)
    w = x.astype(_wide(x.dtype))
    out = w - w if x.ndim == 0 else jax.nn.log_softmax(w, axis=d)  # (0-dim: 0, or NaN for inf/NaN)
    return out if half_to_float else out.astype(x.dtype)


@lower(aten._softmax_backward_data.default, jit=True)
def _softmax_backward_data(g: Any, y: Any, dim: int, input_dtype: Any) -> Any:
    d = wrapdim(dim, y.ndim) if y.ndim else None
    gi = y * (g - jnp.sum(g * y, axis=d, keepdims=True))
    return gi.astype(jdt(input_dtype))


@lower(aten._log_softmax_backward_data.default, jit=True)
def _log_softmax_backward_data(g: Any, y: Any, dim: int, input_dtype: Any) -> Any:
    d = wrapdim(dim, y.ndim) if y.ndim else None
    gi = g - jnp.exp(y) * jnp.sum(g, axis=d, keepdims=True)
    return gi.astype(jdt(input_dtype))


@lower(aten.native_layer_norm.default, jit=True)
def native_layer_norm(x: Any, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> Any:
    k = len(normalized_shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    xf = x.astype(_wide(x.dtype))
    mean = jnp.mean(xf, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=axes, keepdims=True)
    rstd = jax.lax.rsqrt(var + eps)
    out = (xf - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


# ----------------------------------------------------------------------------- convolution
def _conv_transpose_cols(
    x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, output_padding: tuple, groups: int
) -> Any:
    """Low-precision transposed convolution as torch CPU's slow (im2col) kernel computes it: per kernel offset a
    float32-accumulated GEMM rounded to the input dtype, scattered into the output with a rounding add in kernel
    order (col2im). torch takes that path when an output padding is >= its stride (oneDNN refuses it)."""
    nd = w.ndim - 2
    n, cin = x.shape[:2]
    sp, ks = x.shape[2:], w.shape[2:]
    cog = w.shape[1]
    outs = [
        (sp[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ks[i] - 1) + output_padding[i] + 1
        for i in range(nd)
    ]
    xg = x.reshape((n, groups, cin // groups) + sp)
    wg = w.reshape((groups, cin // groups, cog) + ks)
    out = jnp.zeros((n, groups * cog, *outs), jnp.float32)
    for off in np.ndindex(*ks):
        col = jnp.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis, *off)], preferred_element_type=jnp.float32)
        col = col.astype(x.dtype).astype(jnp.float32).reshape((n, groups * cog) + sp)
        cfg = [(0, 0, 0), (0, 0, 0)]
        for i in range(nd):
            lo = off[i] * dilation[i] - padding[i]
            cfg.append((lo, outs[i] - lo - (sp[i] - 1) * stride[i] - 1, stride[i] - 1))
        out = (out + jax.lax.pad(col, jnp.float32(0), cfg)).astype(x.dtype).astype(jnp.float32)
    return out


def _nan_where_padding_meets_nonfinite(
    out: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, dn: Any, groups: int
) -> Any:
    """NaN where a non-finite weight meets a zero of the padding, as torch's native CPU convolution gives (it
    multiplies the padded zeros: 0 * inf = NaN; oneDNN's batched path skips them, so the CPU itself is not
    consistent — tests/backend/test_numeric_edges.py). XLA skips the padded positions. Only a weight tensor with
    an inf/NaN takes the extra convolution (lax.cond): the common path pays one reduction over the weights."""
    nd = w.ndim - 2

    def mark(o: Any) -> Any:
        pads = [(0, 0), (0, 0)] + [(p, p) for p in padding]
        mask = jnp.pad(jnp.zeros((1, x.shape[1]) + x.shape[2:], jnp.float32), pads, constant_values=1.0)
        bad = (~jnp.isfinite(w)).astype(jnp.float32)
        hit = jax.lax.conv_general_dilated(
            mask, bad, stride, [(0, 0)] * nd, rhs_dilation=dilation, dimension_numbers=dn,
            feature_group_count=groups,
        )  # fmt: skip
        return jnp.where(hit > 0, jnp.asarray(jnp.nan, o.dtype), o)

    return jax.lax.cond(jnp.all(jnp.isfinite(w)), lambda o: o, mark, out)


def _conv(
    x: Any,
    w: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
    cpu_slow_path: bool = True,
) -> Any:
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    stride, padding, dilation = (tuple(v) * (nd if len(v) == 1 else 1) for v in (stride, padding, dilation))
    spatial = "DHW"[-nd:] if nd <= 3 else None
    dn = jax.lax.conv_dimension_numbers(x.shape, w.shape, ("NC" + spatial, "OI" + spatial, "NC" + spatial))
    prec = precision() if x.dtype == jnp.float32 else None
    # torch CPU runs low-precision convolutions with float32 accumulation (bias included) and rounds once
    acc = _wide(x.dtype)
    pet = acc if acc != x.dtype else None
    if not transposed:
        out = jax.lax.conv_general_dilated(
            x,
            w,
            window_strides=stride,
            padding=[(p, p) for p in padding],
            rhs_dilation=dilation,
            dimension_numbers=dn,
            feature_group_count=groups,
            precision=prec,
            preferred_element_type=pet,
        )
        if any(padding) and jnp.issubdtype(w.dtype, jnp.floating):
            out = _nan_where_padding_meets_nonfinite(out, x, w, stride, padding, dilation, dn, groups)
    elif (
        cpu_slow_path
        and pet is not None
        and x.size
        and w.size
        and any(
            op >= st
            for op, st in zip(
                tuple(output_padding) * (nd if len(output_padding) == 1 else 1), stride, strict=True
            )
        )
    ):
        output_padding = tuple(output_padding) * (nd if len(output_padding) == 1 else 1)
        out = _conv_transpose_cols(x, w, stride, padding, dilation, output_padding, groups)
    else:
        output_padding = tuple(output_padding) * (nd if len(output_padding) == 1 else 1)
        # weight (in, out/groups, k...) -> (out, in/groups, k...) flipped
        cin = w.shape[0]
        wg = w.reshape((groups, cin // groups) + w.shape[1:])
        wg = jnp.swapaxes(wg, 1, 2)  # (g, out/g, in/g, k...)
        wt = wg.reshape((groups * w.shape[1], cin // groups) + w.shape[2:])
        wt = jnp.flip(wt, axis=tuple(range(2, wt.ndim)))
        pads = [
            (d * (k - 1) - p, d * (k - 1) - p + op)
            for k, p, d, op in zip(w.shape[2:], padding, dilation, output_padding, strict=True)
        ]
        dn = jax.lax.conv_dimension_numbers(
            x.shape, wt.shape, ("NC" + spatial, "OI" + spatial, "NC" + spatial)
        )
        out = jax.lax.conv_general_dilated(
            x,
            wt,
            window_strides=(1,) * nd,
            padding=pads,
            lhs_dilation=stride,
            rhs_dilation=dilation,
            dimension_numbers=dn,
            feature_group_count=groups,
            precision=prec,
            preferred_element_type=pet,
        )
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape((1, -1) + (1,) * nd)
    out = out.astype(x.dtype)
    return out[0] if unbatched else out


@lower(aten.convolution.default, jit=True)
def convolution(
    x: Any,
    w: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> Any:
    return _conv(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)


@lower(aten.convolution_backward.default, jit=True)
def convolution_backward(
    g: Any,
    x: Any,
    w: Any,
    bias_sizes: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
    output_mask: Any,
) -> Any:
    def f(x_: Any, w_: Any) -> Any:
        return _conv(x_, w_, None, stride, padding, dilation, transposed, output_padding, groups, False)

    _, vjp = jax.vjp(f, x, w)
    gx, gw = vjp(g.astype(x.dtype))
    nd = w.ndim - 2
    gb = (
        jnp.sum(g, axis=(0,) + tuple(range(2, 2 + nd)))
        if g.ndim == nd + 2
        else jnp.sum(g, axis=tuple(range(1, 1 + nd)))
    )
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb if output_mask[2] else None)


# ----------------------------------------------------------------------------- pooling
def _out_len(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return max(out, 0)


def _windows(shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, ceil: bool) -> Any:
    """Static flat indices (out..., K) of each window into the spatial plane, and a validity mask."""
    outs = [
        _out_len(n, k, s, p, d, ceil)
        for n, k, s, p, d in zip(shape, kernel, stride, padding, dilation, strict=True)
    ]
    grids = []
    for _n, o, k, s, p, d in zip(shape, outs, kernel, stride, padding, dilation, strict=True):
        pos = np.arange(o)[:, None] * s - p + np.arange(k)[None, :] * d  # (o, k)
        grids.append(pos)
    nd = len(shape)
    idx = np.zeros(tuple(outs) + tuple(kernel), np.int64)
    valid = np.ones(tuple(outs) + tuple(kernel), bool)
    inpad = np.ones(tuple(outs) + tuple(kernel), bool)
    mult = 1
    for i in reversed(range(nd)):
        pos = grids[i]
        shp = [1] * (2 * nd)
        shp[i], shp[nd + i] = pos.shape
        posb = pos.reshape(shp)
        idx = idx + np.clip(posb, 0, shape[i] - 1) * mult
        valid = valid & (posb >= 0) & (posb < shape[i])
        inpad = inpad & (posb < shape[i] + padding[i])
        mult *= shape[i]
    K = int(np.prod(kernel))
    return (
        idx.reshape(tuple(outs) + (K,)),
        valid.reshape(tuple(outs) + (K,)),
        inpad.reshape(tuple(outs) + (K,)),
        outs,
    )


def _tuple(v: Any, nd: int) -> tuple:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * nd if len(v) == 1 else v


def _max_pool(x: Any, kernel: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, nd: int) -> Any:
    kernel = _tuple(kernel, nd)
    stride = _tuple(stride, nd) if stride else kernel
    padding, dilation = _tuple(padding, nd), _tuple(dilation, nd)
    spatial = x.shape[-nd:]
    idx, valid, _, outs = _windows(spatial, kernel, stride, padding, dilation, ceil_mode)
    lead = x.shape[:-nd]
    flat = x.reshape(lead + (-1,))
    win = flat[..., jnp.asarray(idx)]  # lead + outs + (K,)
    if jnp.issubdtype(x.dtype, jnp.floating):
        neg = jnp.asarray(-jnp.inf, x.dtype)
    else:
        neg = jnp.asarray(jnp.iinfo(x.dtype).min, x.dtype)
    win = jnp.where(jnp.asarray(valid), win, neg)
    if jnp.issubdtype(x.dtype, jnp.floating):
        nan = jnp.isnan(win)
        am = jnp.where(jnp.any(nan, -1), jnp.argmax(nan, -1), jnp.argmax(win, -1))
    else:
        am = jnp.argmax(win, -1)
    vals = jnp.take_along_axis(win, am[..., None], -1)[..., 0]
    flat_idx = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(idx), win.shape), am[..., None], -1)[..., 0]
    return vals, flat_idx.astype(jnp.int64)


@lower(aten.max_pool2d_with_indices.default, jit=True)
def max_pool2d_with_indices(
    x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False
) -> Any:
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 2)


@lower(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(
    x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False
) -> Any:
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 3)


def _max_pool_backward(g: Any, x: Any, indices: Any, nd: int) -> Any:
    lead = x.shape[:-nd]
    n = int(np.prod(x.shape[-nd:]))
    gl = g.reshape(lead + (-1,))
    il = indices.reshape(lead + (-1,))
    z = jnp.zeros(lead + (n,), g.dtype)
    out = (
        jax.vmap(lambda zz, ii, gg: zz.at[ii].add(gg))(
            z.reshape(-1, n), il.reshape(-1, il.shape[-1]), gl.reshape(-1, gl.shape[-1])
        )
        if lead
        else z.at[il].add(gl)
    )
    return out.reshape(x.shape)


@lower(aten.max_pool2d_with_indices_backward.default, jit=True)
def max_pool2d_with_indices_backward(
    g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, indices: Any
) -> Any:
    return _max_pool_backward(g, x, indices, 2)


@lower(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(
    g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, indices: Any
) -> Any:
    return _max_pool_backward(g, x, indices, 3)


def _avg_pool(
    x: Any,
    kernel: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
    nd: int,
) -> Any:
    kernel = _tuple(kernel, nd)
    stride = _tuple(stride, nd) if stride else kernel
    padding = _tuple(padding, nd)
    idx, valid, inpad, outs = _windows(x.shape[-nd:], kernel, stride, padding, (1,) * nd, ceil_mode)
    lead = x.shape[:-nd]
    win = x.reshape(lead + (int(np.prod(x.shape[-nd:])),))[..., jnp.asarray(idx)]
    acc = _wide(x.dtype)
    s = jnp.sum(jnp.where(jnp.asarray(valid), win.astype(acc), 0), -1)
    if divisor_override:
        div = np.asarray(divisor_override, np.float64)
    elif count_include_pad:
        div = inpad.sum(-1).astype(np.float64)
    else:
        div = valid.sum(-1).astype(np.float64)
    return (s / jnp.asarray(div, acc)).astype(x.dtype)


@lower(aten.avg_pool2d.default, jit=True)
def avg_pool2d(
    x: Any,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Any:
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


@lower(aten.avg_pool2d_backward.default, jit=True)
def avg_pool2d_backward(
    g: Any,
    x: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Any:
    _, vjp = jax.vjp(
        lambda t: _avg_pool(
            t, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2
        ),
        x,
    )
    return vjp(g)[0]


@lower(aten.avg_pool3d.default)
def avg_pool3d(
    x: Any,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Any:
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3)


def _adaptive_matrix(n: int, o: int) -> np.ndarray:
    m = np.zeros((o, n))
    for i in range(o):
        s, e = (i * n) // o, -(-((i + 1) * n) // o)
        m[i, s:e] = 1.0 / (e - s)
    return m


def _adaptive_avg(x: Any, output_size: Any, nd: int) -> Any:
    out = x.astype(_wide(x.dtype))
    for i, o in enumerate(_tuple(output_size, nd)):
        ax = x.ndim - nd + i
        m = jnp.asarray(_adaptive_matrix(x.shape[ax], o), out.dtype)
        out = jnp.moveaxis(
            jnp.tensordot(out, m, axes=([ax], [1]), precision=jax.lax.Precision.HIGHEST), -1, ax
        )
    return out.astype(x.dtype)


@lower(aten._adaptive_avg_pool2d.default, jit=True)
def _adaptive_avg_pool2d(x: Any, output_size: Any) -> Any:
    return _adaptive_avg(x, output_size, 2)


@lower(aten._adaptive_avg_pool2d_backward.default, jit=True)
def _adaptive_avg_pool2d_backward(g: Any, x: Any) -> Any:
    _, vjp = jax.vjp(lambda t: _adaptive_avg(t, g.shape[-2:], 2), x)
    return vjp(g)[0]


@lower(aten._adaptive_avg_pool3d.default, jit=True)
def _adaptive_avg_pool3d(x: Any, output_size: Any) -> Any:
    return _adaptive_avg(x, output_size, 3)


@lower(aten._adaptive_avg_pool3d_backward.default, jit=True)
def _adaptive_avg_pool3d_backward(g: Any, x: Any) -> Any:
    _, vjp = jax.vjp(lambda t: _adaptive_avg(t, g.shape[-3:], 3), x)
    return vjp(g)[0]


# ----------------------------------------------------------------------------- batch norm
def _bn(x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float, eps: float) -> Any:
    """Returns (out, save_mean, save_invstd, new_running_mean, new_running_var); pure."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    acc = _wide(x.dtype)
    xf = x.astype(acc)
    if training:
        mean = jnp.mean(xf, axis=axes)
        var = jnp.mean(jnp.square(xf - mean.reshape(shape)), axis=axes)
        invstd = jax.lax.rsqrt(var + eps)
        n = x.size // max(x.shape[1], 1)
        new_rm = None if rm is None else ((1 - momentum) * rm + momentum * mean).astype(rm.dtype)
        new_rv = (
            None
            if rv is None
            else ((1 - momentum) * rv + momentum * var * (n / max(n - 1, 1))).astype(rv.dtype)
        )
        save_mean, save_invstd = mean.astype(x.dtype), invstd.astype(x.dtype)
        if acc != x.dtype:
            # torch CPU normalises low-precision inputs with the saved (rounded) statistics, in float32, as
            # x * alpha + beta with alpha = invstd * w, beta = b - mean * alpha
            mean, invstd = save_mean.astype(acc), save_invstd.astype(acc)
            alpha = invstd if w is None else invstd * w.astype(acc)
            beta = -mean * alpha if b is None else b.astype(acc) - mean * alpha
            out = xf * alpha.reshape(shape) + beta.reshape(shape)
            return out.astype(x.dtype), save_mean, save_invstd, new_rm, new_rv
    else:
        mean, invstd = rm.astype(acc), jax.lax.rsqrt(rv.astype(acc) + eps)
        new_rm, new_rv = rm, rv
        save_mean = save_invstd = jnp.zeros((0,), x.dtype)
    out = (xf - mean.reshape(shape)) * invstd.reshape(shape)
    if w is not None:
        out = out * w.astype(acc).reshape(shape)
    if b is not None:
        out = out + b.astype(acc).reshape(shape)
    return out.astype(x.dtype), save_mean, save_invstd, new_rm, new_rv


def _bn_raw(x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float, eps: float) -> Any:
    """Torch-level: runs ``_bn`` and updates the running-stat tensors in place (as the CPU kernel does)."""

    def v(t: Any) -> Any:
        return None if t is None else payload(t)  # stays deferred in fused eager

    out, sm, si, nrm, nrv = lazy.call(_bn, (payload(x), v(w), v(b), v(rm), v(rv), training, momentum, eps))
    if training and rm is not None:
        set_value(rm, nrm)
        set_value(rv, nrv)
    return TpuTensor(out), TpuTensor(sm), TpuTensor(si)


@lower(aten.native_batch_norm.default, aten._native_batch_norm_legit.default, raw=True)
def native_batch_norm(
    x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float, eps: float
) -> Any:
    return _bn_raw(x, w, b, rm, rv, training, momentum, eps)


@lower(aten._native_batch_norm_legit.no_stats, raw=True)
def native_batch_norm_no_stats(x: Any, w: Any, b: Any, training: bool, momentum: float, eps: float) -> Any:
    return _bn_raw(x, w, b, None, None, True, momentum, eps)


@lower(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_no_training(
    x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float
) -> Any:
    return _bn(x, w, b, rm, rv, False, momentum, eps)[:3]


@lower(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_functional(
    x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float, eps: float
) -> Any:
    return _bn(x, w, b, rm, rv, training, momentum, eps)


@lower(aten._batch_norm_with_update.default, raw=True)
def _batch_norm_with_update(x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> Any:
    """Training batch norm updating the running stats in place; save_mean/rstd keep the input dtype as on CPU
    (the stock decomposition returns them in float32 for low-precision inputs)."""

    return (*_bn_raw(x, w, b, rm, rv, True, momentum, eps), TpuTensor(jnp.zeros((0,), jnp.uint8)))


@lower(aten._batch_norm_with_update_functional.default)
def _batch_norm_with_update_functional(
    x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float
) -> Any:
    out, sm, si, nrm, nrv = _bn(x, w, b, rm, rv, True, momentum, eps)
    return out, sm, si, jnp.zeros((0,), jnp.uint8), nrm, nrv


@lower(aten._batch_norm_no_update.default)
def _batch_norm_no_update(x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> Any:
    out, sm, si = _bn(x, w, b, rm, rv, rm is None, momentum, eps)[:3]
    return out, sm, si, jnp.zeros((0,), jnp.uint8)


# ----------------------------------------------------------------------------- adaptive max pooling
def _adaptive_windows(shape: tuple, outs: tuple) -> Any:
    """Static flat indices (outs..., K) of torch's adaptive windows [floor(i*n/o), ceil((i+1)*n/o)) into the
    spatial plane, padded to the largest window, and the mask of real (non-padding) slots."""
    nd = len(shape)
    grids, masks = [], []
    for n, o in zip(shape, outs, strict=True):
        starts = np.array([(i * n) // o for i in range(o)])
        ends = np.array([-(-((i + 1) * n) // o) for i in range(o)])
        k = int((ends - starts).max()) if o else 1
        pos = starts[:, None] + np.arange(k)[None, :]
        masks.append(pos < ends[:, None])
        grids.append(np.minimum(pos, n - 1))
    kernel = tuple(g.shape[1] for g in grids)
    idx = np.zeros(tuple(outs) + kernel, np.int64)
    valid = np.ones(tuple(outs) + kernel, bool)
    mult = 1
    for i in reversed(range(nd)):
        shp = [1] * (2 * nd)
        shp[i], shp[nd + i] = grids[i].shape
        idx = idx + grids[i].reshape(shp) * mult
        valid = valid & masks[i].reshape(shp)
        mult *= shape[i]
    k = int(np.prod(kernel))
    return idx.reshape(tuple(outs) + (k,)), valid.reshape(tuple(outs) + (k,))


def _adaptive_max(x: Any, output_size: Any, nd: int) -> Any:
    """torch's CPU kernel: the first maximum of each window in row-major order; a NaN wins (the last one)."""
    outs = _tuple(output_size, nd)
    spatial = x.shape[-nd:]
    if any(s == 0 for s in spatial) and int(np.prod(outs)) > 0:
        raise RuntimeError("adaptive_max_pool: input spatial sizes must be non-zero")
    idx, valid = _adaptive_windows(spatial, outs)
    lead = x.shape[:-nd]
    win = x.reshape(lead + (-1,))[..., jnp.asarray(idx)]
    win = jnp.where(jnp.asarray(valid), win, jnp.asarray(-jnp.inf, x.dtype))
    nan = jnp.isnan(win) & jnp.asarray(valid)
    k = win.shape[-1]
    last_nan = k - 1 - jnp.argmax(nan[..., ::-1], -1)
    am = jnp.where(jnp.any(nan, -1), last_nan, jnp.argmax(win, -1))
    vals = jnp.take_along_axis(win, am[..., None], -1)[..., 0]
    flat_idx = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(idx), win.shape), am[..., None], -1)[..., 0]
    return vals, flat_idx.astype(jnp.int64)


@lower(aten.adaptive_max_pool2d.default, jit=True)
def adaptive_max_pool2d(x: Any, output_size: Any) -> Any:
    return _adaptive_max(x, output_size, 2)


@lower(aten.adaptive_max_pool3d.default, jit=True)
def adaptive_max_pool3d(x: Any, output_size: Any) -> Any:
    return _adaptive_max(x, output_size, 3)


@lower(aten.adaptive_max_pool2d_backward.default, jit=True)
def adaptive_max_pool2d_backward(g: Any, x: Any, indices: Any) -> Any:
    return _max_pool_backward(g, x, indices, 2)


@lower(aten.adaptive_max_pool3d_backward.default, jit=True)
def adaptive_max_pool3d_backward(g: Any, x: Any, indices: Any) -> Any:
    return _max_pool_backward(g, x, indices, 3)


# ----------------------------------------------------------------------------- group norm
def _group_norm(x: Any, w: Any, b: Any, n: int, c: int, hxw: int, group: int, eps: float) -> Any:
    """(out, mean (N, G), rstd (N, G)); statistics in float32 for half inputs, biased variance as torch."""
    acc = _wide(x.dtype)
    xg = x.astype(acc).reshape(n, group, -1)
    mean = jnp.mean(xg, axis=-1)
    var = jnp.mean(jnp.square(xg - mean[..., None]), axis=-1)
    rstd = jax.lax.rsqrt(var + eps)
    out = ((xg - mean[..., None]) * rstd[..., None]).reshape(n, c, -1)
    if w is not None:
        out = out * w.astype(acc)[None, :, None]
    if b is not None:
        out = out + b.astype(acc)[None, :, None]
    return out.reshape(x.shape).astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


@lower(aten.native_group_norm.default, jit=True)
def native_group_norm(x: Any, w: Any, b: Any, n: int, c: int, hxw: int, group: int, eps: float) -> Any:
    return _group_norm(x, w, b, n, c, hxw, group, eps)


@lower(aten.native_group_norm_backward.default, jit=True)
def native_group_norm_backward(
    g: Any, x: Any, mean: Any, rstd: Any, w: Any, n: int, c: int, hxw: int, group: int, output_mask: Any
) -> Any:
    """Closed form with the saved statistics: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))."""
    acc = _wide(x.dtype)
    gf = g.astype(acc).reshape(n, c, -1)
    xhat = (x.astype(acc).reshape(n, group, -1) - mean.astype(acc)[..., None]) * rstd.astype(acc)[..., None]
    xhat_c = xhat.reshape(n, c, -1)
    gx = gw = gb = None
    if output_mask[0]:
        dxhat = gf * w.astype(acc)[None, :, None] if w is not None else gf
        dxhat = dxhat.reshape(n, group, -1)
        gx = rstd.astype(acc)[..., None] * (
            dxhat - jnp.mean(dxhat, -1, keepdims=True) - xhat * jnp.mean(dxhat * xhat, -1, keepdims=True)
        )
        gx = gx.reshape(x.shape).astype(x.dtype)
    if output_mask[1]:
        gw = jnp.sum(gf * xhat_c, axis=(0, 2)).astype(x.dtype)
    if output_mask[2]:
        gb = jnp.sum(gf, axis=(0, 2)).astype(x.dtype)
    return gx, gw, gb


# ----------------------------------------------------------------------------- weight norm
def _weight_norm_axes(v: Any, dim: int) -> tuple[int, ...]:
    if v.ndim and not (dim == 0 or dim == v.ndim - 1):
        raise RuntimeError(
            "_weight_norm_interface: fused kernels can only be applied for first or last dim "
            f"(got dim={dim} for a {v.ndim}-D weight)"
        )
    return tuple(i for i in range(v.ndim) if i != dim)


@lower(aten._weight_norm_interface.default, jit=True)
def _weight_norm_interface(v: Any, g: Any, dim: int = 0) -> tuple:
    """(w, norms): w = v * g / ||v||, the norm over every dim but ``dim`` (kept, so it has g's shape); norms
    are float32 for half-precision weights, as torch's kernels keep them."""
    axes = _weight_norm_axes(v, dim)
    acc = _wide(v.dtype)
    vf = v.astype(acc)
    norms = jnp.sqrt(jnp.sum(vf * vf, axis=axes, keepdims=True))
    w = vf * (g.astype(acc) / norms)
    return w.astype(v.dtype), norms.reshape(g.shape)


@lower(aten._weight_norm_interface_backward.default, jit=True)
def _weight_norm_interface_backward(
    grad_w: Any, saved_v: Any, saved_g: Any, saved_norms: Any, dim: int
) -> tuple:
    """(grad_v, grad_g): with s = sum(grad_w * v) over the non-``dim`` axes, grad_g = s / ||v|| and
    grad_v = (g / ||v||) grad_w - (g s / ||v||^3) v (torch's CPU and CUDA kernels)."""
    axes = _weight_norm_axes(saved_v, dim)
    acc = _wide(saved_v.dtype)
    gw, v = grad_w.astype(acc), saved_v.astype(acc)
    keep = [1] * v.ndim
    if v.ndim:
        keep[dim] = v.shape[dim]
    norm = saved_norms.astype(acc).reshape(keep)
    g = saved_g.astype(acc).reshape(keep)
    s = jnp.sum(gw * v, axis=axes, keepdims=True)
    a = g / norm
    grad_v = a * gw - (a * s / (norm * norm)) * v
    return grad_v.astype(saved_v.dtype), (s / norm).reshape(saved_g.shape).astype(saved_g.dtype)


# ----------------------------------------------------------------------------- rrelu
def _rrelu(x: Any, lower_: float, upper: float, training: bool, generator: Any) -> Any:
    """(out, noise or None). Training draws r ~ U(lower, upper) from the device RNG where x <= 0 (noise 1
    elsewhere), as torch's CPU kernel; eval is leaky_relu with slope (lower + upper) / 2 and leaves noise."""
    if not training:
        slope = (lower_ + upper) / 2
        return jnp.where(x > 0, x, x * jnp.asarray(slope, x.dtype)), None

    wide = _wide(x.dtype)
    r = jax.random.uniform(_key(generator), x.shape, wide, lower_, upper).astype(x.dtype)
    neg = x <= 0
    return jnp.where(neg, x * r, x), jnp.where(neg, r, jnp.ones((), x.dtype))


def _rrelu_writing_noise(
    x: Any, noise: Any, lower: float, upper: float, training: bool, generator: Any
) -> Any:
    """The result's jax value; ``noise`` is written in place (the backward reads it)."""

    out, nz = _rrelu(value(x), float(lower), float(upper), training, generator)
    if nz is not None:
        set_value(noise, nz.astype(value(noise).dtype))
    return out


@lower(aten.rrelu_with_noise.default, raw=True)
def rrelu_with_noise(
    x: Any,
    noise: Any,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Any:
    return TpuTensor(_rrelu_writing_noise(x, noise, lower, upper, training, generator))


@lower(aten.rrelu_with_noise_.default, raw=True)
def rrelu_with_noise_(
    x: Any,
    noise: Any,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Any:
    set_value(x, _rrelu_writing_noise(x, noise, lower, upper, training, generator))
    return x


@lower(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(
    x: Any,
    noise: Any,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Any:
    out, nz = _rrelu(x, float(lower), float(upper), training, generator)
    return out, (noise if nz is None else nz.astype(noise.dtype))
