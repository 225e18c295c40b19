"""Neural-network lowerings: softmax, norms, convolution, pooling, attention choice."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from backend.ops._util import aten, jdt, wrapdim
from backend.ops.linalg import precision
from backend.ops.registry import lower


def _wide(dt: Any) -> Any:
    return jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt


@lower(aten._softmax.default, jit=True)
def _softmax(x: Any, dim: int, half_to_float: bool) -> Any:
    if x.ndim == 0:
        return jnp.ones_like(x)
    out = jax.nn.softmax(x.astype(_wide(x.dtype)), axis=wrapdim(dim, x.ndim))
    return out if half_to_float else out.astype(x.dtype)


@lower(aten._log_softmax.default, jit=True)
def _log_softmax(x: Any, dim: int, half_to_float: bool) -> Any:
    if x.ndim == 0:
        return jnp.zeros_like(x)
    out = jax.nn.log_softmax(x.astype(_wide(x.dtype)), axis=wrapdim(dim, x.ndim))
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
def _conv_transpose_cols(x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, output_padding: tuple,
                         groups: int) -> Any:
    """Low-precision transposed convolution as torch CPU's slow (im2col) kernel computes it: per kernel offset a
    float32-accumulated GEMM rounded to the input dtype, scattered into the output with a rounding add in kernel
    order (col2im). torch takes that path when an output padding is >= its stride (oneDNN refuses it)."""
    nd = w.ndim - 2
    n, cin = x.shape[:2]
    sp, ks = x.shape[2:], w.shape[2:]
    cog = w.shape[1]
    outs = [(sp[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ks[i] - 1) + output_padding[i] + 1
            for i in range(nd)]
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


def _conv(x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
          output_padding: Any, groups: int, cpu_slow_path: bool = True) -> Any:
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
            x, w, window_strides=stride, padding=[(p, p) for p in padding], rhs_dilation=dilation,
            dimension_numbers=dn, feature_group_count=groups, precision=prec,
            preferred_element_type=pet,
        )
    elif (cpu_slow_path and pet is not None and x.size and w.size
          and any(op >= st for op, st in zip(tuple(output_padding) * (nd if len(output_padding) == 1 else 1), stride,
                                             strict=True))):
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
        pads = [(d * (k - 1) - p, d * (k - 1) - p + op)
                for k, p, d, op in zip(w.shape[2:], padding, dilation, output_padding, strict=True)]
        dn = jax.lax.conv_dimension_numbers(x.shape, wt.shape, ("NC" + spatial, "OI" + spatial, "NC" + spatial))
        out = jax.lax.conv_general_dilated(
            x, wt, window_strides=(1,) * nd, padding=pads, lhs_dilation=stride, rhs_dilation=dilation,
            dimension_numbers=dn, feature_group_count=groups, precision=prec, preferred_element_type=pet,
        )
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape((1, -1) + (1,) * nd)
    out = out.astype(x.dtype)
    return out[0] if unbatched else out


@lower(aten.convolution.default, jit=True)
def convolution(x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
                output_padding: Any, groups: int) -> Any:
    return _conv(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)


@lower(aten.convolution_backward.default, jit=True)
def convolution_backward(g: Any, x: Any, w: Any, bias_sizes: Any, stride: Any, padding: Any, dilation: Any,
                         transposed: bool, output_padding: Any, groups: int, output_mask: Any) -> Any:
    def f(x_: Any, w_: Any) -> Any:
        return _conv(x_, w_, None, stride, padding, dilation, transposed, output_padding, groups, False)

    _, vjp = jax.vjp(f, x, w)
    gx, gw = vjp(g.astype(x.dtype))
    nd = w.ndim - 2
    gb = jnp.sum(g, axis=(0,) + tuple(range(2, 2 + nd))) if g.ndim == nd + 2 else jnp.sum(
        g, axis=tuple(range(1, 1 + nd)))
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
    outs = [_out_len(n, k, s, p, d, ceil) for n, k, s, p, d in zip(shape, kernel, stride, padding, dilation,
                                                                    strict=True)]
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
    return idx.reshape(tuple(outs) + (K,)), valid.reshape(tuple(outs) + (K,)), inpad.reshape(tuple(outs) + (K,)), outs


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
def max_pool2d_with_indices(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,
                            ceil_mode: bool = False) -> Any:
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 2)


@lower(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,
                            ceil_mode: bool = False) -> Any:
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 3)


def _max_pool_backward(g: Any, x: Any, indices: Any, nd: int) -> Any:
    lead = x.shape[:-nd]
    n = int(np.prod(x.shape[-nd:]))
    gl = g.reshape(lead + (-1,))
    il = indices.reshape(lead + (-1,))
    z = jnp.zeros(lead + (n,), g.dtype)
    out = jax.vmap(lambda zz, ii, gg: zz.at[ii].add(gg))(
        z.reshape(-1, n), il.reshape(-1, il.shape[-1]), gl.reshape(-1, gl.shape[-1])
    ) if lead else z.at[il].add(gl)
    return out.reshape(x.shape)


@lower(aten.max_pool2d_with_indices_backward.default, jit=True)
def max_pool2d_with_indices_backward(g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                                     ceil_mode: bool, indices: Any) -> Any:
    return _max_pool_backward(g, x, indices, 2)


@lower(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                                     ceil_mode: bool, indices: Any) -> Any:
    return _max_pool_backward(g, x, indices, 3)


def _avg_pool(x: Any, kernel: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
              divisor_override: Any, nd: int) -> Any:
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
def avg_pool2d(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


@lower(aten.avg_pool2d_backward.default, jit=True)
def avg_pool2d_backward(g: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                        count_include_pad: bool, divisor_override: Any) -> Any:
    _, vjp = jax.vjp(lambda t: _avg_pool(t, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                         divisor_override, 2), x)
    return vjp(g)[0]


@lower(aten.avg_pool3d.default)
def avg_pool3d(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Any:
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
        out = jnp.moveaxis(jnp.tensordot(out, m, axes=([ax], [1]), precision=jax.lax.Precision.HIGHEST), -1, ax)
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


@lower(aten._fused_sdp_choice.default)
def _fused_sdp_choice(*args: Any, **kwargs: Any) -> int:
    """Always the math path: attention lowers to matmul + softmax, which XLA fuses."""
    return 0



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
        new_rv = None if rv is None else ((1 - momentum) * rv + momentum * var * (n / max(n - 1, 1))).astype(rv.dtype)
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
    from backend.tensor import TpuTensor, set_value, value

    def v(t: Any) -> Any:
        return None if t is None else value(t)

    out, sm, si, nrm, nrv = _bn(value(x), v(w), v(b), v(rm), v(rv), training, momentum, eps)
    if training and rm is not None:
        set_value(rm, nrm)
        set_value(rv, nrv)
    return TpuTensor(out), TpuTensor(sm), TpuTensor(si)


@lower(aten.native_batch_norm.default, aten._native_batch_norm_legit.default, raw=True)
def native_batch_norm(x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float,
                      eps: float) -> Any:
    return _bn_raw(x, w, b, rm, rv, training, momentum, eps)


@lower(aten._native_batch_norm_legit.no_stats, raw=True)
def native_batch_norm_no_stats(x: Any, w: Any, b: Any, training: bool, momentum: float, eps: float) -> Any:
    return _bn_raw(x, w, b, None, None, True, momentum, eps)


@lower(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_no_training(x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> Any:
    return _bn(x, w, b, rm, rv, False, momentum, eps)[:3]


@lower(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_functional(x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float,
                                 eps: float) -> Any:
    return _bn(x, w, b, rm, rv, training, momentum, eps)


@lower(aten._batch_norm_with_update.default, raw=True)
def _batch_norm_with_update(x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> Any:
    """Training batch norm updating the running stats in place; save_mean/rstd keep the input dtype as on CPU
    (the stock decomposition returns them in float32 for low-precision inputs)."""
    from backend.tensor import TpuTensor

    return (*_bn_raw(x, w, b, rm, rv, True, momentum, eps), TpuTensor(jnp.zeros((0,), jnp.uint8)))


@lower(aten._batch_norm_with_update_functional.default)
def _batch_norm_with_update_functional(x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float,
                                       eps: float) -> Any:
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
def native_group_norm_backward(g: Any, x: Any, mean: Any, rstd: Any, w: Any, n: int, c: int, hxw: int, group: int,
                               output_mask: Any) -> Any:
    """Closed form with the saved statistics: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))."""
    acc = _wide(x.dtype)
    gf = g.astype(acc).reshape(n, c, -1)
    xhat = ((x.astype(acc).reshape(n, group, -1) - mean.astype(acc)[..., None]) * rstd.astype(acc)[..., None])
    xhat_c = xhat.reshape(n, c, -1)
    gx = gw = gb = None
    if output_mask[0]:
        dxhat = gf * w.astype(acc)[None, :, None] if w is not None else gf
        dxhat = dxhat.reshape(n, group, -1)
        gx = rstd.astype(acc)[..., None] * (dxhat - jnp.mean(dxhat, -1, keepdims=True)
                                            - xhat * jnp.mean(dxhat * xhat, -1, keepdims=True))
        gx = gx.reshape(x.shape).astype(x.dtype)
    if output_mask[1]:
        gw = jnp.sum(gf * xhat_c, axis=(0, 2)).astype(x.dtype)
    if output_mask[2]:
        gb = jnp.sum(gf, axis=(0, 2)).astype(x.dtype)
    return gx, gw, gb


# ----------------------------------------------------------------------------- grid sampling
def _gs_unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _gs_reflect(x: Any, twice_low: int, twice_high: int) -> Any:
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = jnp.abs(x - lo)
    extra = jnp.fmod(x, span)
    flips = jnp.floor(x / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _gs_pad(coord: Any, size: int, padding_mode: int, align_corners: bool) -> Any:
    """torch's compute_coordinates: zeros leaves the coordinate, border clips it, reflection reflects then clips."""
    if padding_mode == 1:
        return jnp.clip(coord, 0, size - 1)
    if padding_mode == 2:
        coord = _gs_reflect(coord, 0, 2 * (size - 1)) if align_corners else _gs_reflect(coord, -1, 2 * size - 1)
        return jnp.clip(coord, 0, size - 1)
    return coord


def _cubic_coeffs(t: Any) -> list:
    a = -0.75

    def c1(v: Any) -> Any:
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def c2(v: Any) -> Any:
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a

    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _grid_sample(x: Any, grid: Any, mode: int, padding_mode: int, align_corners: bool) -> Any:
    """grid_sampler_{2,3}d: mode 0 bilinear, 1 nearest, 2 bicubic (2-D); padding 0 zeros, 1 border, 2 reflection.
    Every corner is gathered from the flattened input and masked when out of bounds (zero contribution)."""
    nd = grid.shape[-1]
    n, c = x.shape[:2]
    in_sp = x.shape[2:]
    out_sp = grid.shape[1:-1]
    flat = x.reshape(n, c, -1)
    g = grid.reshape(n, -1, nd).astype(x.dtype)
    strides = [int(np.prod(in_sp[a + 1:])) for a in range(nd)]

    def gather(pos: list) -> Any:
        valid = jnp.ones(pos[0].shape, bool)
        lin = jnp.zeros(pos[0].shape, jnp.int64)
        for a in range(nd):
            valid = valid & (pos[a] >= 0) & (pos[a] <= in_sp[a] - 1)
            lin = lin + jnp.clip(pos[a], 0, in_sp[a] - 1).astype(jnp.int64) * strides[a]
        vals = jnp.take_along_axis(flat, lin[:, None, :], axis=2)
        return jnp.where(valid[:, None, :], vals, jnp.zeros((), x.dtype))

    raw = [_gs_unnormalize(g[..., nd - 1 - a], in_sp[a], align_corners) for a in range(nd)]
    if mode == 2:
        if nd != 2:
            raise NotImplementedError("grid_sampler_3d: bicubic interpolation is not supported")
        lo = [jnp.floor(r) for r in raw]
        wy, wx = (_cubic_coeffs(r - f) for r, f in zip(raw, lo, strict=True))
        out = jnp.zeros((n, c, g.shape[1]), x.dtype)
        for i in range(4):
            yy = _gs_pad(lo[0] - 1 + i, in_sp[0], padding_mode, align_corners)
            for j in range(4):
                xx = _gs_pad(lo[1] - 1 + j, in_sp[1], padding_mode, align_corners)
                out = out + gather([jnp.trunc(yy), jnp.trunc(xx)]) * (wy[i] * wx[j])[:, None, :]
        return out.reshape((n, c) + tuple(out_sp))
    src = [_gs_pad(r, in_sp[a], padding_mode, align_corners) for a, r in enumerate(raw)]
    if mode == 1:
        out = gather([jnp.round(s) for s in src])
        return out.reshape((n, c) + tuple(out_sp))
    if mode != 0:
        raise NotImplementedError(f"grid_sampler: interpolation mode {mode} is not supported")
    lo = [jnp.floor(s) for s in src]
    out = jnp.zeros((n, c, g.shape[1]), x.dtype)
    for corner in np.ndindex(*(2,) * nd):
        pos, w = [], None
        for a, k in enumerate(corner):
            pos.append(lo[a] + k)
            wa = (src[a] - lo[a]) if k else (lo[a] + 1 - src[a])
            w = wa if w is None else w * wa
        out = out + gather(pos) * w[:, None, :]
    return out.reshape((n, c) + tuple(out_sp))


@lower(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default, jit=True)
def grid_sampler(x: Any, grid: Any, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Any:
    return _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners)


@lower(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default, jit=True)
def grid_sampler_backward(g: Any, x: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                          align_corners: bool, output_mask: Any) -> Any:
    _, pull = jax.vjp(lambda a, b: _grid_sample(a, b, interpolation_mode, padding_mode, align_corners), x, grid)
    gx, gg = pull(g.astype(x.dtype))
    return (gx if output_mask[0] else None), gg


# ----------------------------------------------------------------------------- bilinear (_trilinear)
@lower(aten._trilinear.default, jit=True)
def _trilinear(i1: Any, i2: Any, i3: Any, expand1: Any, expand2: Any, expand3: Any, sumdim: Any,
               unroll_dim: int = 1) -> Any:
    """Each input gets size-1 dims inserted at its ``expand`` positions (ascending); the broadcast product is
    summed over ``sumdim`` (those dims dropped)."""
    def ex(t: Any, e: Any) -> Any:
        for d in sorted(e):
            t = jnp.expand_dims(t, d)
        return t

    a, b, c = ex(i1, expand1), ex(i2, expand2), ex(i3, expand3)
    shape = jnp.broadcast_shapes(a.shape, b.shape, c.shape)
    summed = {wrapdim(d, len(shape)) for d in sumdim}
    if jnp.issubdtype(a.dtype, jnp.integer) or jnp.issubdtype(a.dtype, jnp.bool_):
        return jnp.sum(a * b * c, axis=tuple(sorted(summed))) if summed else a * b * c
    letters = "abcdefghijklmnopqrstuvwxyz"[: len(shape)]
    keep = "".join(ch for k, ch in enumerate(letters) if k not in summed)
    ops, subs = [], []
    for t in (a, b, c):  # drop broadcast (size-1) dims so einsum contracts without materialising the product
        drop = tuple(k for k in range(t.ndim) if t.shape[k] == 1 and shape[k] != 1)
        ops.append(jnp.squeeze(t, drop))
        subs.append("".join(ch for k, ch in enumerate(letters) if k not in drop))
    acc = _wide(a.dtype)
    if acc != a.dtype:
        # torch contracts pairwise (i1 with i2 over the sum dims i3 lacks, then with i3), each a float32-
        # accumulated GEMM rounded to the input dtype
        s3 = set(subs[2])
        mid = "".join(ch for ch in letters if (ch in subs[0] or ch in subs[1]) and (ch in keep or ch in s3))
        t = jnp.einsum(f"{subs[0]},{subs[1]}->{mid}", ops[0], ops[1], preferred_element_type=acc).astype(a.dtype)
        out = jnp.einsum(f"{mid},{subs[2]}->{keep}", t, ops[2], preferred_element_type=acc)
    else:
        out = jnp.einsum(f"{subs[0]},{subs[1]},{subs[2]}->{keep}", *ops, precision=jax.lax.Precision.HIGHEST)
    return jnp.broadcast_to(out, tuple(s for k, s in enumerate(shape) if k not in summed)).astype(a.dtype)


# ----------------------------------------------------------------------------- rrelu
def _rrelu(x: Any, lower_: float, upper: float, training: bool, generator: Any) -> Any:
    """(out, noise or None). Training draws r ~ U(lower, upper) from the device RNG where x <= 0 (noise 1
    elsewhere), as torch's CPU kernel; eval is leaky_relu with slope (lower + upper) / 2 and leaves noise."""
    if not training:
        slope = (lower_ + upper) / 2
        return jnp.where(x > 0, x, x * jnp.asarray(slope, x.dtype)), None
    from backend.ops.random import _key

    wide = _wide(x.dtype)
    r = jax.random.uniform(_key(generator), x.shape, wide, lower_, upper).astype(x.dtype)
    neg = x <= 0
    return jnp.where(neg, x * r, x), jnp.where(neg, r, jnp.ones((), x.dtype))


def _rrelu_writing_noise(x: Any, noise: Any, lower: float, upper: float, training: bool, generator: Any) -> Any:
    """The result's jax value; ``noise`` is written in place (the backward reads it)."""
    from backend.tensor import set_value, value

    out, nz = _rrelu(value(x), float(lower), float(upper), training, generator)
    if nz is not None:
        set_value(noise, nz.astype(value(noise).dtype))
    return out


@lower(aten.rrelu_with_noise.default, raw=True)
def rrelu_with_noise(x: Any, noise: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
                     generator: Any = None) -> Any:
    from backend.tensor import TpuTensor

    return TpuTensor(_rrelu_writing_noise(x, noise, lower, upper, training, generator))


@lower(aten.rrelu_with_noise_.default, raw=True)
def rrelu_with_noise_(x: Any, noise: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
                      generator: Any = None) -> Any:
    from backend.tensor import set_value

    set_value(x, _rrelu_writing_noise(x, noise, lower, upper, training, generator))
    return x


@lower(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(x: Any, noise: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                                training: bool = False, generator: Any = None) -> Any:
    out, nz = _rrelu(x, float(lower), float(upper), training, generator)
    return out, (noise if nz is None else nz.astype(noise.dtype))


# ----------------------------------------------------------------------------- low-precision trilinear upsampling
def _linear_matrix_lowp(n: int, o: int, align_corners: bool, scale: float | None, dt: Any) -> np.ndarray:
    """(o, n) interpolation matrix as torch CPU's linear upsampling kernel builds it for a low-precision input:
    source index in float32, lambda1 rounded to ``dt``, lambda0 = 1 - lambda1 rounded to ``dt``."""
    f32 = np.float32
    if align_corners:
        sc = f32((n - 1) / (o - 1)) if o > 1 else f32(0)
    else:
        sc = f32(1.0 / scale) if scale is not None and scale > 0 else f32(n / o)
    m = np.zeros((o, n), np.float32)
    for i in range(o):
        src = sc * f32(i) if align_corners else max(sc * (f32(i) + f32(0.5)) - f32(0.5), f32(0))
        i0 = min(int(src), n - 1)
        i1 = i0 + (1 if i0 < n - 1 else 0)
        l1 = np.asarray(f32(src) - f32(i0), dtype=np.float32).astype(dt).astype(np.float32)
        l0 = np.asarray(f32(1) - l1, dtype=np.float32).astype(dt).astype(np.float32)
        m[i, i0] += l0
        m[i, i1] += l1
    return m


@lower(aten.upsample_trilinear3d.default, raw=True)
def upsample_trilinear3d(x: Any, output_size: Any, align_corners: bool, scales_d: Any = None, scales_h: Any = None,
                         scales_w: Any = None) -> Any:
    """Low-precision inputs: float32 math with torch CPU's rounded weights, rounded once; otherwise torch's
    decomposition."""
    from backend.dispatch import decomposition_for
    from backend.tensor import TpuTensor, value

    v = value(x)
    if v.dtype not in (jnp.bfloat16, jnp.float16) or v.size == 0:
        return decomposition_for(aten.upsample_trilinear3d.default)(x, output_size, align_corners, scales_d,
                                                                    scales_h, scales_w)
    dt = jnp.dtype(v.dtype)
    mats = [jnp.asarray(_linear_matrix_lowp(v.shape[2 + k], int(output_size[k]), align_corners, sc, dt))
            for k, sc in enumerate((scales_d, scales_h, scales_w))]
    out = jnp.einsum("ncdhw,Dd,Hh,Ww->ncDHW", v.astype(jnp.float32), *mats, precision=jax.lax.Precision.HIGHEST)
    return TpuTensor(out.astype(v.dtype))


# ----------------------------------------------------------------------------- anti-aliased bilinear upsampling
def _aa_matrix(n: int, o: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """torch's _compute_index_ranges_weights for the antialiased bilinear (triangle) filter: (o, n) weights."""
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n / o
    support = s if s >= 1.0 else 1.0  # interp_size 2 -> (2 * 0.5) * scale, or 1
    invscale = 1.0 / s if s >= 1.0 else 1.0
    m = np.zeros((o, n))
    for i in range(o):
        center = s * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        xsize = min(int(center + support + 0.5), n) - xmin
        j = np.arange(max(xsize, 0))
        w = np.maximum(0.0, 1.0 - np.abs((j + xmin - center + 0.5) * invscale))
        tot = w.sum()
        if tot != 0:
            w = w / tot
        m[i, xmin:xmin + len(j)] = w
    return m


def _upsample_aa(x: Any, output_size: Any, align_corners: bool, scales: Any) -> Any:
    out = x.astype(_wide(x.dtype))
    for i, (o, sc) in enumerate(zip(output_size, scales, strict=True)):
        ax = x.ndim - 2 + i
        m = jnp.asarray(_aa_matrix(x.shape[ax], o, align_corners, sc), out.dtype)
        out = jnp.moveaxis(jnp.tensordot(out, m, axes=([ax], [1]), precision=jax.lax.Precision.HIGHEST), -1, ax)
    return out.astype(x.dtype)


@lower(aten._upsample_bilinear2d_aa.default, jit=True)
def _upsample_bilinear2d_aa(x: Any, output_size: Any, align_corners: bool, scales_h: Any = None,
                            scales_w: Any = None) -> Any:
    return _upsample_aa(x, tuple(output_size), align_corners, (scales_h, scales_w))


@lower(aten._upsample_bilinear2d_aa_backward.default, jit=True)
def _upsample_bilinear2d_aa_backward(g: Any, output_size: Any, input_size: Any, align_corners: bool,
                                     scales_h: Any = None, scales_w: Any = None) -> Any:
    x = jnp.zeros(tuple(input_size), g.dtype)
    _, pull = jax.vjp(lambda t: _upsample_aa(t, tuple(output_size), align_corners, (scales_h, scales_w)), x)
    return pull(g)[0]


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
def multi_margin_loss(x: Any, target: Any, p: int = 1, margin: float = 1, weight: Any = None,
                      reduction: int = 1) -> Any:
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
        tg = targets[jnp.asarray(np.minimum(pos, max(targets.shape[0] - 1, 0)))] if targets.shape[0] else \
            jnp.zeros((b, max_tl), jnp.int64)
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
    from backend.dispatch import _jitted

    return _jitted(fn)


@lower(aten._ctc_loss.default, jit=True)
def _ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
              zero_infinity: bool = False) -> Any:
    """(neg_log_likelihood (B,), log_alpha (B, T, 2 * max_target_length + 1)); zero_infinity acts in the
    backward and in ctc_loss itself, as on CPU."""
    if log_probs.ndim != 3:
        raise NotImplementedError("_ctc_loss: only batched (T, N, C) log_probs are supported on TPU")
    ext, il, tl, s = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    la, nll, _ = _ctc_alpha(log_probs, ext, il, tl, s)
    return nll.astype(log_probs.dtype), la.astype(log_probs.dtype)


@lower(aten._ctc_loss.Tensor)
def _ctc_loss_t(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
                zero_infinity: bool = False) -> Any:
    """Tensor lengths: read them (the padded label length is a shape), then the list overload's jitted path."""
    return _jit_of(_ctc_loss)(log_probs, targets, _lengths(input_lengths), _lengths(target_lengths), blank,
                              zero_infinity)


@lower(aten._ctc_loss_backward.Tensor)
def _ctc_loss_backward_t(g: Any, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
                         neg_log_likelihood: Any, log_alpha: Any, blank: int, zero_infinity: bool = False) -> Any:
    return _jit_of(_ctc_loss_backward)(g, log_probs, targets, _lengths(input_lengths), _lengths(target_lengths),
                                       neg_log_likelihood, log_alpha, blank, zero_infinity)


@lower(aten._ctc_loss_backward.default, jit=True)
def _ctc_loss_backward(g: Any, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
                       neg_log_likelihood: Any, log_alpha: Any, blank: int, zero_infinity: bool = False) -> Any:
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
    skip_fwd = jnp.concatenate([ext[:, :-2] != ext[:, 2:], jnp.zeros((b, 2), bool)], axis=1)  # s -> s+2 allowed
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
    gb = g.reshape(-1).astype(log_probs.dtype) if g.ndim else jnp.broadcast_to(g, (b,)).astype(log_probs.dtype)
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
        raise NotImplementedError("linear_cross_entropy (chunked) on TPU: acc_dtype must equal the input dtype")


def _lce_lower() -> None:
    """Register the chunked custom ops of ``torch.nn.modules.linear_cross_entropy`` (newer torch only)."""
    try:
        import torch
        import torch.nn.modules.linear_cross_entropy  # noqa: F401 - defines the torch_nn ops
        ops = torch.ops.torch_nn
        chunked = ops._linear_cross_entropy_batch_chunked.default
        no_red = ops._linear_cross_entropy_batch_chunked_no_reduction.default
    except (ImportError, AttributeError, RuntimeError):
        return

    @lower(chunked)
    def lce_chunked(x: Any, lw: Any, target: Any, lb: Any, weight: Any, reduction: str, ignore_index: int,
                    label_smoothing: float, batch_chunk_size: int, acc_policy: str, acc_dtype: Any,
                    allow_retain_graph: bool, compute_input_grad: bool, compute_linear_weight_grad: bool,
                    compute_linear_bias_grad: bool) -> Any:
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
    def lce_chunked_no_reduction(x: Any, lw: Any, target: Any, lb: Any, weight: Any, ignore_index: int,
                                 batch_chunk_size: int, acc_policy: str, acc_dtype: Any) -> Any:
        _lce_check(x, acc_dtype)
        return _lce_rows(x, lw, target, lb, weight, ignore_index)[0].astype(x.dtype)


_lce_lower()
