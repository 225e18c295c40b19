"""Sampling and resizing lowerings: grid_sampler 2d/3d, bilinear (``_trilinear``), low-precision trilinear
and anti-aliased bilinear upsampling."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend.decompositions import decomposition_for
from tpu_workbench.backend.ops._util import aten, wrapdim
from tpu_workbench.backend.ops.nn import _wide
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, value


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
        coord = (
            _gs_reflect(coord, 0, 2 * (size - 1)) if align_corners else _gs_reflect(coord, -1, 2 * size - 1)
        )
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
    strides = [int(np.prod(in_sp[a + 1 :])) for a in range(nd)]

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
def grid_sampler_backward(
    g: Any,
    x: Any,
    grid: Any,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Any,
) -> Any:
    _, pull = jax.vjp(
        lambda a, b: _grid_sample(a, b, interpolation_mode, padding_mode, align_corners), x, grid
    )
    gx, gg = pull(g.astype(x.dtype))
    return (gx if output_mask[0] else None), gg


# ----------------------------------------------------------------------------- bilinear (_trilinear)
@lower(aten._trilinear.default, jit=True)
def _trilinear(
    i1: Any, i2: Any, i3: Any, expand1: Any, expand2: Any, expand3: Any, sumdim: Any, unroll_dim: int = 1
) -> Any:
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
        t = jnp.einsum(f"{subs[0]},{subs[1]}->{mid}", ops[0], ops[1], preferred_element_type=acc).astype(
            a.dtype
        )
        out = jnp.einsum(f"{mid},{subs[2]}->{keep}", t, ops[2], preferred_element_type=acc)
    else:
        out = jnp.einsum(f"{subs[0]},{subs[1]},{subs[2]}->{keep}", *ops, precision=jax.lax.Precision.HIGHEST)
    return jnp.broadcast_to(out, tuple(s for k, s in enumerate(shape) if k not in summed)).astype(a.dtype)


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
def upsample_trilinear3d(
    x: Any,
    output_size: Any,
    align_corners: bool,
    scales_d: Any = None,
    scales_h: Any = None,
    scales_w: Any = None,
) -> Any:
    """Low-precision inputs: float32 math with torch CPU's rounded weights, rounded once; otherwise torch's
    decomposition."""

    v = value(x)
    if v.dtype not in (jnp.bfloat16, jnp.float16) or v.size == 0:
        return decomposition_for(aten.upsample_trilinear3d.default)(
            x, output_size, align_corners, scales_d, scales_h, scales_w
        )
    dt = jnp.dtype(v.dtype)
    mats = [
        jnp.asarray(_linear_matrix_lowp(v.shape[2 + k], int(output_size[k]), align_corners, sc, dt))
        for k, sc in enumerate((scales_d, scales_h, scales_w))
    ]
    out = jnp.einsum(
        "ncdhw,Dd,Hh,Ww->ncDHW", v.astype(jnp.float32), *mats, precision=jax.lax.Precision.HIGHEST
    )
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
        m[i, xmin : xmin + len(j)] = w
    return m


def _upsample_aa(x: Any, output_size: Any, align_corners: bool, scales: Any) -> Any:
    out = x.astype(_wide(x.dtype))
    for i, (o, sc) in enumerate(zip(output_size, scales, strict=True)):
        ax = x.ndim - 2 + i
        m = jnp.asarray(_aa_matrix(x.shape[ax], o, align_corners, sc), out.dtype)
        out = jnp.moveaxis(
            jnp.tensordot(out, m, axes=([ax], [1]), precision=jax.lax.Precision.HIGHEST), -1, ax
        )
    return out.astype(x.dtype)


@lower(aten._upsample_bilinear2d_aa.default, jit=True)
def _upsample_bilinear2d_aa(
    x: Any, output_size: Any, align_corners: bool, scales_h: Any = None, scales_w: Any = None
) -> Any:
    return _upsample_aa(x, tuple(output_size), align_corners, (scales_h, scales_w))


@lower(aten._upsample_bilinear2d_aa_backward.default, jit=True)
def _upsample_bilinear2d_aa_backward(
    g: Any, output_size: Any, input_size: Any, align_corners: bool, scales_h: Any = None, scales_w: Any = None
) -> Any:
    x = jnp.zeros(tuple(input_size), g.dtype)
    _, pull = jax.vjp(lambda t: _upsample_aa(t, tuple(output_size), align_corners, (scales_h, scales_w)), x)
    return pull(g)[0]
