"""Distances, FFT and embedding_bag (the long tail of core ATen)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpu_workbench.backend.ops._util import aten, jdt, wrapdim
from tpu_workbench.backend.ops.reduction import _sort
from tpu_workbench.backend.ops.registry import lower


def _pnorm(diff: Any, p: float, axis: int) -> Any:
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum(a != 0, axis=axis).astype(diff.dtype)
    if p == float("inf"):
        return jnp.max(a, axis=axis)
    if p == 1:
        return jnp.sum(a, axis=axis)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axis))
    return jnp.sum(a**p, axis=axis) ** (1.0 / p)


@lower(aten._cdist_forward.default)
def _cdist_forward(x1: Any, x2: Any, p: float, compute_mode: int | None = None) -> Any:
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    if x1.shape[-2] == 0 or x2.shape[-2] == 0:
        return jnp.zeros(diff.shape[:-1], x1.dtype)
    return _pnorm(diff, p, -1).astype(x1.dtype)


@lower(aten._pdist_forward.default)
def _pdist_forward(x: Any, p: float = 2) -> Any:
    n = x.shape[0]
    i, j = jnp.triu_indices(n, 1)
    return _pnorm(x[i] - x[j], p, -1).astype(x.dtype)


_NORM = {0: "backward", 1: "ortho", 2: "forward"}  # torch fft_norm_mode: none / by_root_n / by_n


def _fftn_scale(x: Any, dims: Any, norm: int, inverse: bool) -> Any:
    n = 1
    for d in dims:
        n *= x.shape[d]
    if norm == 0:
        return x
    s = jnp.sqrt(n) if norm == 1 else n
    return x / s


@lower(aten._fft_r2c.default)
def _fft_r2c(x: Any, dim: Any, normalization: int, onesided: bool) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    out = jnp.fft.fftn(x, axes=dims)
    out = _fftn_scale(out, dims, normalization, False)
    if onesided:
        last = dims[-1]
        out = jnp.take(out, jnp.arange(x.shape[last] // 2 + 1), axis=last)
    return out.astype(
        jnp.complex64 if x.dtype in (jnp.float32, jnp.float16, jnp.bfloat16) else jnp.complex128
    )


@lower(aten._fft_c2c.default)
def _fft_c2c(x: Any, dim: Any, normalization: int, forward: bool) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    out = jnp.fft.fftn(x, axes=dims) if forward else jnp.fft.ifftn(x, axes=dims) * _count(x, dims)
    return _fftn_scale(out, dims, normalization, not forward).astype(x.dtype)


def _count(x: Any, dims: Any) -> int:
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


@lower(aten._fft_c2r.default)
def _fft_c2r(x: Any, dim: Any, normalization: int, last_dim_size: int) -> Any:
    dims = tuple(wrapdim(d, x.ndim) for d in dim)
    shape = [x.shape[d] for d in dims]
    shape[-1] = last_dim_size
    out = jnp.fft.irfftn(x, s=shape, axes=dims) * _count_shape(shape)
    out = out / (
        jnp.sqrt(_count_shape(shape))
        if normalization == 1
        else _count_shape(shape)
        if normalization == 2
        else 1
    )
    return out.astype(jnp.float32 if x.dtype == jnp.complex64 else jnp.float64)


def _count_shape(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@lower(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def _embedding_bag(
    weight: Any,
    indices: Any,
    offsets: Any,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> Any:
    """mode 0 sum, 1 mean, 2 max; returns (output, offset2bag, bag_size, max_indices)."""
    n = indices.shape[0]
    nb = offsets.shape[0] - (1 if include_last_offset else 0)
    pos = jnp.arange(n)
    bag = jnp.searchsorted(offsets[:nb] if not include_last_offset else offsets[:nb], pos, side="right") - 1
    bag = jnp.clip(bag, 0, max(nb - 1, 0))
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones((n,), bool)
    if include_last_offset and offsets.shape[0]:
        # Indices past the last offset: torch's CPU kernel reads undefined memory for them, so there is
        # no answer to match; refuse rather than guess (and refuse under tracing, where we cannot look).
        if isinstance(offsets, jax.core.Tracer) or int(offsets[-1]) != n:
            raise NotImplementedError(
                "operator 'aten::_embedding_bag' with include_last_offset=True is only "
                "implemented for TPU when offsets[-1] == len(indices)"
            )
    rows = weight[indices]
    if mode != 2 and weight.dtype in (jnp.bfloat16, jnp.float16):
        rows = rows.astype(jnp.float32)  # torch CPU sums low-precision bags in float32, rounding once
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None].astype(rows.dtype)
    rows = jnp.where(keep[:, None], rows, 0)
    counts = jnp.zeros((nb,), jnp.int64).at[bag].add(keep.astype(jnp.int64))
    if mode == 2:
        neg = jnp.full((nb, weight.shape[1]), -jnp.inf, weight.dtype)
        out = neg.at[bag].max(jnp.where(keep[:, None], rows, -jnp.inf))
        out = jnp.where(counts[:, None] > 0, out, 0)
        is_max = (rows == out[bag]) & keep[:, None]
        cand = jnp.where(is_max, indices[:, None], -1)
        max_idx = jnp.full((nb, weight.shape[1]), -1, jnp.int64).at[bag].max(cand)
    else:
        out = jnp.zeros((nb, weight.shape[1]), rows.dtype).at[bag].add(rows)
        if mode == 1:
            out = out / jnp.maximum(counts, 1)[:, None].astype(rows.dtype)
        max_idx = jnp.zeros((nb,), jnp.int64) if mode == 1 else jnp.zeros((0,), jnp.int64)
    return out.astype(weight.dtype), bag.astype(jnp.int64), counts, max_idx


# ----------------------------------------------------------------------------- data-dependent predicates
@lower(aten.equal.default)
def equal(a: Any, b: Any) -> bool:
    """Returns a Python bool (materialises, as on every device)."""
    return a.shape == b.shape and bool(jnp.all(a == b))


@lower(aten._is_all_true.default)
def _is_all_true(x: Any) -> Any:
    """``torch._check_tensor_all_with``'s reduction: a 0-dim bool, staying on the device."""
    if x.dtype != jnp.bool_:
        raise RuntimeError(f"_is_all_true: expected a bool tensor, got {x.dtype}")
    return jnp.all(x)


@lower(aten._is_any_true.default)
def _is_any_true(x: Any) -> Any:
    if x.dtype != jnp.bool_:
        raise RuntimeError(f"_is_any_true: expected a bool tensor, got {x.dtype}")
    return jnp.any(x)


@lower(aten.is_nonzero.default)
def is_nonzero(x: Any) -> bool:
    if x.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(x.reshape(()) != 0)


@lower(aten._has_same_storage_numel.default, raw=True)
def _has_same_storage_numel(a: Any, b: Any) -> bool:
    """Forward AD's ``make_dual`` check that a tangent's storage is as large as its primal's: a TPU tensor's
    storage is its root's array (backend/tensor.py)."""
    ra = a._root if a._root is not None else a
    rb = b._root if b._root is not None else b
    return ra.numel() == rb.numel()


@lower(aten.allclose.default)
def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    if a.dtype != b.dtype:
        raise RuntimeError("allclose: the two tensors have different dtypes")
    return bool(jnp.all(isclose(a, b, rtol, atol, equal_nan)))


@lower(aten.isclose.default)
def isclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Any:
    if a.dtype == jnp.bool_:
        return a == b
    close = a == b
    if jnp.issubdtype(a.dtype, jnp.inexact):
        diff = jnp.abs(a - b)
        close = close | (jnp.isfinite(diff) & (diff <= atol + rtol * jnp.abs(b)))
        if equal_nan:
            close = close | (jnp.isnan(a) & jnp.isnan(b))
    else:
        af, bf = a.astype(jnp.float64), b.astype(jnp.float64)
        close = close | (jnp.abs(af - bf) <= atol + rtol * jnp.abs(bf))
    return close


@lower(aten.searchsorted.Tensor)
def searchsorted(
    sorted_seq: Any,
    x: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Any:
    side = side or ("right" if right else "left")
    if sorter is not None:
        sorted_seq = jnp.take_along_axis(sorted_seq, sorter, -1)
    if sorted_seq.ndim == 1:
        out = jnp.searchsorted(sorted_seq, x, side=side)
    else:
        out = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side))(
            sorted_seq.reshape(-1, sorted_seq.shape[-1]), x.reshape(-1, x.shape[-1])
        ).reshape(x.shape)
    return out.astype(jnp.int32 if out_int32 else jnp.int64)


@lower(aten.searchsorted.Scalar)
def searchsorted_scalar(
    sorted_seq: Any,
    x: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Any:
    return searchsorted(
        sorted_seq,
        jnp.asarray(x, sorted_seq.dtype),
        out_int32=out_int32,
        right=right,
        side=side,
        sorter=sorter,
    ).reshape(())


@lower(aten.kthvalue.default)
def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = wrapdim(dim, x.ndim)
    if not 1 <= k <= x.shape[d]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = _sort(x, d, False)
    v, i = jnp.take(v, k - 1, axis=d), jnp.take(i, k - 1, axis=d)
    if keepdim:
        v, i = jnp.expand_dims(v, d), jnp.expand_dims(i, d)
    return v, i


# ----------------------------------------------------------------------------- special functions (prims)
def _special(fn: Any) -> Any:
    def impl(x: Any) -> Any:
        xf = x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)
        return fn(xf).astype(xf.dtype)

    return impl


_prims = __import__("torch").ops.prims
for _name, _fn in [
    ("erfcx", jax.scipy.special.erfcx),
    ("ndtri", jax.scipy.special.ndtri),
    ("bessel_i0e", jax.scipy.special.i0e),
    ("bessel_i1", jax.scipy.special.i1),
    ("bessel_i1e", jax.scipy.special.i1e),
    ("bessel_i0", jax.scipy.special.i0),
]:
    if hasattr(_prims, _name):
        lower(getattr(_prims, _name).default)(_special(_fn))


@lower(_prims.gcd.default, aten.gcd.default)
def gcd(a: Any, b: Any) -> Any:
    return jnp.gcd(a, b)


@lower(aten.lcm.default)
def lcm(a: Any, b: Any) -> Any:
    return jnp.lcm(a, b)


# ----------------------------------------------------------------------------- complex views
@lower(aten.view_as_real.default)
def view_as_real(x: Any) -> Any:
    if not jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@lower(aten.view_as_complex.default)
def view_as_complex(x: Any) -> Any:
    if x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return jax.lax.complex(x[..., 0], x[..., 1])


@lower(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default)
def conj(x: Any) -> Any:
    return jnp.conj(x)


@lower(aten.real.default)
def real(x: Any) -> Any:
    return jnp.real(x)


@lower(aten.imag.default)
def imag(x: Any) -> Any:
    return jnp.imag(x)


# ----------------------------------------------------------------------------- histograms
def _check_hist_dtype(x: Any, name: str) -> None:
    if x.dtype not in (jnp.float32, jnp.float64):
        if jnp.issubdtype(x.dtype, jnp.floating):  # torch's half-precision edges round differently
            raise NotImplementedError(f"aten::{name} of {x.dtype} is not implemented for TPU")
        raise RuntimeError(f"\"{name}\" not implemented for '{x.dtype}'")


def _torch_linspace(lo: float, hi: float, steps: int, dt: Any) -> Any:
    """Bit-exact torch CPU linspace: ``start + step*i`` for the first half, ``end - step*(steps-1-i)`` for the
    rest, each a fused multiply-add in torch's build (one rounding); emulated in float64 for float32."""
    s, e = jnp.asarray(lo, dt), jnp.asarray(hi, dt)
    if steps == 1:
        return s.reshape(1)
    step = (e - s) / jnp.asarray(steps - 1, dt)
    i = jnp.arange(steps)
    wide = jnp.float64
    first = (s.astype(wide) + step.astype(wide) * i.astype(wide)).astype(dt)
    second = (e.astype(wide) - step.astype(wide) * (steps - 1 - i).astype(wide)).astype(dt)
    return jnp.where(i < steps // 2, first, second)


def _outer_edges(x2: Any, rng: Any) -> list[tuple[float, float]]:
    """torch's select_outer_bin_edges for an (M, N) input: ``range`` or the data's extent per column, an
    empty extent widened by 0.5 each side (numpy's rule)."""
    n = x2.shape[1]
    if rng is not None:
        if len(rng) != 2 * n:
            raise RuntimeError(
                f"torch.histogramdd: for a {n}-dimensional histogram range should have {2 * n} "
                f"elements, but got {len(rng)}"
            )
        out = [(float(rng[2 * d]), float(rng[2 * d + 1])) for d in range(n)]
    elif x2.size:
        lo, hi = np.asarray(jnp.min(x2, axis=0)), np.asarray(jnp.max(x2, axis=0))
        out = [(float(lo[d]), float(hi[d])) for d in range(n)]
    else:
        out = [(0.0, 1.0)] * n
    res = []
    for d, (lo_d, hi_d) in enumerate(out):
        if not (np.isfinite(lo_d) and np.isfinite(hi_d)):
            raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo_d}, {hi_d}] is not finite")
        if lo_d > hi_d:
            raise RuntimeError(
                f"torch.histogramdd: min should not exceed max, but got min {lo_d} max {hi_d} for "
                f"dimension {d}"
            )
        res.append((lo_d - 0.5, hi_d + 0.5) if lo_d == hi_d else (lo_d, hi_d))
    return res


def _hist_from_edges(x2: Any, edges: list, weight: Any, density: bool) -> Any:
    """Histogram of the rows of ``x2`` (M, N) over per-column sorted ``edges``: left-closed bins, the last
    one closed on both sides; values outside (and NaN) are dropped."""
    nbs = tuple(int(e.shape[0]) - 1 for e in edges)
    dt = x2.dtype
    if any(b <= 0 for b in nbs):
        return jnp.zeros(nbs, dt)
    valid = jnp.ones((x2.shape[0],), bool)
    flat = jnp.zeros((x2.shape[0],), jnp.int64)
    for d, e in enumerate(edges):
        col = x2[:, d]
        nb = nbs[d]
        valid = valid & (col >= e[0]) & (col <= e[-1])
        pos = jnp.clip(jnp.searchsorted(e, col, side="right") - 1, 0, nb - 1)
        flat = flat * nb + pos
    w = jnp.ones((x2.shape[0],), dt) if weight is None else weight.reshape(-1).astype(dt)
    hist = jnp.zeros((int(np.prod(nbs)),), dt).at[flat].add(jnp.where(valid, w, 0)).reshape(nbs)
    if density:
        hist = hist / jnp.sum(hist)
        for d, e in enumerate(edges):
            shape = [1] * len(nbs)
            shape[d] = nbs[d]
            hist = hist / jnp.diff(e).reshape(shape)
    return hist


def _check_weight(x2: Any, weight: Any) -> None:
    if weight is not None:
        if weight.dtype != x2.dtype:
            raise RuntimeError(
                "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                "should have the same dtype"
            )
        if weight.size != x2.shape[0]:
            raise RuntimeError(
                "torch.histogramdd: if weight tensor is provided it should have the same shape as "
                "the input tensor excluding its innermost dimension"
            )


def _histc_int(x: Any, bins: int, lo_arg: Any, hi_arg: Any) -> Any:
    """CUDA's integer histc (torch's CPU kernel refuses integers; ``transformers``' MoE routing counts expert
    ids this way on every accelerator): the range is the Scalar bounds truncated to the input dtype, the bin
    ``(v - lo) * bins // (hi - lo)`` in 64-bit integers, the top value in the last bin; the counts have the
    input's dtype."""
    if bins <= 0:
        raise RuntimeError("bins must be > 0")
    npdt = np.dtype(x.dtype)
    lo = int(np.array(int(lo_arg)).astype(npdt))  # Scalar -> input_t, as CUDA's kernel converts it
    hi = int(np.array(int(hi_arg)).astype(npdt))
    if lo == hi and x.size:
        lo, hi = int(jnp.min(x)), int(jnp.max(x))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not lo < hi:
        raise RuntimeError("max must be larger than min")
    flat = x.reshape(-1).astype(jnp.int64)
    valid = (flat >= lo) & (flat <= hi)
    pos = jnp.where(valid, (flat - lo) * bins // (hi - lo), 0)
    pos = jnp.where(pos == bins, bins - 1, pos)
    return jnp.zeros((bins,), x.dtype).at[pos].add(valid.astype(x.dtype))


@lower(aten.histc.default)
def histc(x: Any, bins: int = 100, min: Any = 0, max: Any = 0) -> Any:
    """torch.histc: bin = trunc((x - lo) * bins / (hi - lo)) in the input's precision (torch's linear rule,
    no edge search), the top edge counted in the last bin. Integer inputs as on CUDA (``_histc_int``)."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return _histc_int(x, bins, min, max)
    if x.dtype == jnp.bool_:
        raise RuntimeError("\"histc\" not implemented for 'Bool'")
    _check_hist_dtype(x, "histogram_cpu")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(jnp.min(x)), float(jnp.max(x))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if not lo < hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    left, right = jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype)
    flat = x.reshape(-1)
    valid = (flat >= left) & (flat <= right)
    pos = (flat - left) * jnp.asarray(bins, x.dtype) / (right - left)
    pos = jnp.clip(jnp.where(valid, pos, 0).astype(jnp.int64), 0, bins - 1)
    return jnp.zeros((bins,), x.dtype).at[pos].add(valid.astype(x.dtype))


@lower(aten.histogram.bin_ct)
def histogram_bin_ct(
    x: Any, bins: int = 100, *, range: Any = None, weight: Any = None, density: bool = False
) -> Any:
    _check_hist_dtype(x, "histogram_cpu")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    x2 = x.reshape(-1, 1)
    _check_weight(x2, weight)
    ((lo, hi),) = _outer_edges(x2, range)
    edges = _torch_linspace(lo, hi, bins + 1, x.dtype)
    return _hist_from_edges(x2, [edges], weight, density), edges


@lower(aten.histogram.bins_tensor)
def histogram_bins_tensor(x: Any, bins: Any, *, weight: Any = None, density: bool = False) -> Any:
    _check_hist_dtype(x, "histogram_cpu")
    if bins.ndim != 1 or bins.size == 0 or bins.dtype != x.dtype:
        raise RuntimeError(
            "torch.histogram: bins tensor should have one dimension, at least 1 element and the input's dtype"
        )
    x2 = x.reshape(-1, 1)
    _check_weight(x2, weight)
    return _hist_from_edges(x2, [bins], weight, density), bins


def _dd_input(x: Any) -> Any:
    _check_hist_dtype(x, "histogramdd")
    if x.ndim < 2:
        raise RuntimeError(
            f"torch.histogramdd: input tensor should have at least 2 dimensions, but got {x.ndim}"
        )
    return x.reshape(-1, x.shape[-1])


def _dd_edges(x2: Any, bins: Any, rng: Any) -> list:
    if len(bins) != x2.shape[1]:
        raise RuntimeError(
            f"torch.histogramdd: expected {x2.shape[1]} sequences of bin edges for a "
            f"{x2.shape[1]}-dimensional histogram but got {len(bins)}"
        )
    for d, b in enumerate(bins):
        if b <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {b} for dimension {d}")
    return [
        _torch_linspace(lo, hi, b + 1, x2.dtype)
        for (lo, hi), b in zip(_outer_edges(x2, rng), bins, strict=True)
    ]


@lower(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(
    x: Any, bins: Any, *, range: Any = None, weight: Any = None, density: bool = False
) -> Any:
    return _dd_edges(_dd_input(x), bins, range)


@lower(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(
    x: Any, bins: Any, *, range: Any = None, weight: Any = None, density: bool = False
) -> Any:
    x2 = _dd_input(x)
    _check_weight(x2, weight)
    return _hist_from_edges(x2, _dd_edges(x2, bins, range), weight, density)


@lower(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(x: Any, bins: Any, *, weight: Any = None, density: bool = False) -> Any:
    x2 = _dd_input(x)
    if len(bins) != x2.shape[1]:
        raise RuntimeError(
            f"torch.histogramdd: expected {x2.shape[1]} sequences of bin edges for a "
            f"{x2.shape[1]}-dimensional histogram but got {len(bins)}"
        )
    for b in bins:
        if b.ndim != 1 or b.size == 0 or b.dtype != x2.dtype:
            raise RuntimeError(
                "torch.histogramdd: bins tensor should have one dimension, at least 1 element and "
                "the input's dtype"
            )
    _check_weight(x2, weight)
    return _hist_from_edges(x2, list(bins), weight, density)


@lower(aten._efficientzerotensor.default)
def efficientzerotensor(
    size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    """Autograd's zero gradient (e.g. sgn's backward for real inputs): a plain zero array here; the CPU version
    is a ZeroTensor, which cannot be copied to the device."""

    return jnp.zeros(tuple(int(s) for s in size), jdt(dtype))


@lower(aten.record_stream.default)
def record_stream(x: Any, stream: Any) -> None:
    """``t.record_stream(s)`` (CUDA prefetchers keep a buffer alive for a side stream's copy): a no-op here,
    since a JAX array lives while anything holds it and the device has one stream."""
    return None
