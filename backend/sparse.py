"""Sparse COO tensors on "tpu": a wrapper holding two dense TPU tensors, ``indices`` and ``values``.

Models register sparse COO buffers (graph adjacency, fixed masks) and move them with ``.to("tpu")``; code then
reads ``indices()``/``values()``, calls ``coalesce()``/``to_dense()``, or multiplies the sparse matrix with a
dense one. Those operations are written here in dense TPU ops on the two components; any other op on a
sparse TPU tensor raises ``NotImplementedError`` naming it. Coalescing reads the indices on the host (its
output size depends on the data), as CUDA's kernel syncs too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import tensor as tensor_module
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor

aten = torch.ops.aten
_TPU = None


def _tpu() -> torch.device:
    global _TPU
    if _TPU is None:
        _TPU = torch.device(private.privateuse1_name(), 0)
    return _TPU


class TpuSparseTensor(TpuTensor):
    """A sparse COO tensor on "tpu"."""

    @staticmethod
    def __new__(
        cls,
        indices: TpuTensor,
        values: TpuTensor,
        size: Any,
        coalesced: bool = False,
        requires_grad: bool = False,
    ) -> TpuSparseTensor:
        r = private.make_wrapper_subclass(
            cls,
            tuple(size),
            dtype=values.dtype,
            device=_tpu(),
            layout=torch.sparse_coo,
            requires_grad=requires_grad,
        )
        r._ind, r._val, r._coal = indices, values, bool(coalesced)
        r._sparse_dim = indices.shape[0]
        r._root = None
        r._gen = 0
        return r

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
        impl = SPARSE_OPS.get(func) or SPARSE_OPS.get(func.overloadpacket)
        if impl is None:
            if any(isinstance(a, TpuSparseTensor) for a in _flat(args, kwargs or {})):
                raise NotImplementedError(
                    f"operator '{func.name()}' is not implemented for sparse TPU tensors (supported: indices/values, "
                    "coalesce, to_dense, .to(), sparse @ dense, scalar mul/div, neg, transpose, sum, add); "
                    "call .to_dense() first"
                )
            return tensor_module._dispatch(func, types, args, kwargs)
        return impl(*args, **(kwargs or {}))

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        body = repr(_to_cpu(self))
        return body[:-1] + f", device='{self.device}')" if body.endswith(")") else body

    def __reduce_ex__(self, proto: int) -> Any:
        # torch's own sparse rebuild (weights_only allow-listed) on the two dense TPU components, which honour
        # map_location as every TPU tensor does
        return (
            private.rebuild_sparse_tensor,
            (torch.sparse_coo, (self._ind, self._val, tuple(self.shape), self._coal)),
        )

    def __deepcopy__(self, memo: dict) -> TpuSparseTensor:
        return TpuSparseTensor(self._ind.clone(), self._val.clone(), self.shape, self._coal)


def _flat(args: tuple, kwargs: dict) -> list:
    out = []
    for a in (*args, *kwargs.values()):
        out.extend(a if isinstance(a, (list, tuple)) else [a])
    return out


SPARSE_OPS: dict[Any, Callable[..., Any]] = {}


def _sparse(*ops: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            SPARSE_OPS[op] = fn
        return fn

    return deco


def _to_cpu(s: TpuSparseTensor) -> torch.Tensor:
    return torch.sparse_coo_tensor(s._ind.cpu(), s._val.cpu(), s.shape, is_coalesced=s._coal)


def _from_parts(
    indices: torch.Tensor, values: torch.Tensor, size: Any, coalesced: bool = False
) -> TpuSparseTensor:
    ind = indices if isinstance(indices, TpuTensor) else indices.to(_tpu())
    val = values if isinstance(values, TpuTensor) else values.to(_tpu())
    return TpuSparseTensor(ind.to(torch.int64), val, size, coalesced)


@lower(aten._sparse_coo_tensor_with_dims_and_tensors.default, raw=True)
def _new(
    sparse_dim: int,
    dense_dim: int,
    size: Any,
    indices: Any,
    values: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    is_coalesced: bool | None = None,
) -> Any:
    """Where ``sparse.to("tpu")`` and ``torch.sparse_coo_tensor(..., device="tpu")`` land."""
    if dtype is not None and values.dtype != dtype:
        values = values.to(dtype)
    return _from_parts(indices, values, size, bool(is_coalesced))


@_sparse(aten._to_copy.default)
def _to_copy(
    s: TpuSparseTensor,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    non_blocking: bool = False,
    memory_format: Any = None,
) -> torch.Tensor:
    if layout not in (None, torch.sparse_coo):
        raise NotImplementedError(f"converting a sparse TPU tensor to layout {layout} is not supported")
    val = s._val if dtype is None else s._val.to(dtype)
    if device is not None and torch.device(device).type != "tpu":
        return torch.sparse_coo_tensor(s._ind.cpu(), val.cpu(), s.shape, is_coalesced=s._coal).to(device)
    return TpuSparseTensor(s._ind, val, s.shape, s._coal)


@_sparse(aten._indices.default)
def _indices(s: TpuSparseTensor) -> torch.Tensor:
    return s._ind


@_sparse(aten._values.default)
def _values(s: TpuSparseTensor) -> torch.Tensor:
    return s._val


@_sparse(aten.indices.default)
def indices(s: TpuSparseTensor) -> torch.Tensor:
    if not s._coal:
        raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
    return s._ind


@_sparse(aten.values.default)
def values(s: TpuSparseTensor) -> torch.Tensor:
    if not s._coal:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return s._val


@_sparse(aten._nnz.default)
def _nnz(s: TpuSparseTensor) -> int:
    return s._ind.shape[1]


@_sparse(aten.sparse_dim.default)
def sparse_dim(s: TpuSparseTensor) -> int:
    return s._sparse_dim


@_sparse(aten.dense_dim.default)
def dense_dim(s: TpuSparseTensor) -> int:
    return s.dim() - s._sparse_dim


@_sparse(aten.is_coalesced.default)
def is_coalesced(s: TpuSparseTensor) -> bool:
    return s._coal


@_sparse(aten._coalesced_.default)
def _coalesced_(s: TpuSparseTensor, coalesced: bool) -> TpuSparseTensor:
    s._coal = bool(coalesced)
    return s


@_sparse(aten._coalesce.default, aten.coalesce.default)
def coalesce(s: TpuSparseTensor) -> TpuSparseTensor:
    """Sorted unique indices, duplicate values summed (the index set is read on the host)."""
    if s._coal:
        return s
    sizes = list(s.shape[: s._sparse_dim])
    ind = s._ind.cpu()
    lin = torch.zeros(ind.shape[1], dtype=torch.int64)
    for d, n in enumerate(sizes):
        lin = lin * n + ind[d]
    uniq, inverse = torch.unique(lin, sorted=True, return_inverse=True)
    out_val = torch.zeros((uniq.numel(), *s._val.shape[1:]), dtype=s._val.dtype, device=_tpu())
    out_val = out_val.index_add(0, inverse.to(_tpu()), s._val)
    out_ind = torch.empty((len(sizes), uniq.numel()), dtype=torch.int64)
    rest = uniq.clone()
    for d in range(len(sizes) - 1, -1, -1):
        out_ind[d] = rest % sizes[d]
        rest = rest // sizes[d]
    return TpuSparseTensor(out_ind.to(_tpu()), out_val, s.shape, True)


@_sparse(aten._to_dense.default, aten.to_dense.default)
def to_dense(s: TpuSparseTensor, dtype: Any = None, *, masked_grad: Any = None) -> torch.Tensor:
    out = torch.zeros(tuple(s.shape), dtype=dtype or s.dtype, device=_tpu())
    if s._ind.shape[1] == 0:
        return out
    idx = tuple(s._ind[d] for d in range(s._sparse_dim))
    return out.index_put(idx, s._val.to(out.dtype), accumulate=True)


def _dense_of(x: Any) -> Any:
    return to_dense(x) if isinstance(x, TpuSparseTensor) else x


@_sparse(aten.mm.default, aten._sparse_mm.default)
def mm(a: Any, b: Any) -> torch.Tensor:
    if isinstance(b, TpuSparseTensor):
        return mm(b.t(), a.t()).t() if not isinstance(a, TpuSparseTensor) else mm(a, to_dense(b))
    if a.dim() != 2 or a._sparse_dim != 2:
        raise NotImplementedError(
            "sparse @ dense on TPU: the sparse operand must be a 2-D matrix (sparse_dim 2)"
        )
    rows, cols = a._ind[0], a._ind[1]
    out = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.promote_types(a.dtype, b.dtype), device=_tpu())
    return out.index_add(0, rows, a._val.unsqueeze(1) * b.index_select(0, cols))


@_sparse(aten.addmm.default, aten._sparse_addmm.default)
def addmm(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> torch.Tensor:
    return _dense_of(bias) * beta + mm(a, b) * alpha


@_sparse(aten.mul.Tensor, aten.mul.Scalar)
def mul(a: Any, b: Any) -> Any:
    if (
        isinstance(a, TpuSparseTensor)
        and not isinstance(b, TpuSparseTensor)
        and (not isinstance(b, torch.Tensor) or b.dim() == 0)
    ):
        return TpuSparseTensor(a._ind, a._val * b, a.shape, a._coal)
    if (
        isinstance(b, TpuSparseTensor)
        and not isinstance(a, TpuSparseTensor)
        and (not isinstance(a, torch.Tensor) or a.dim() == 0)
    ):
        return mul(b, a)
    raise NotImplementedError("mul of a sparse TPU tensor: only by a scalar (call .to_dense() first)")


@_sparse(aten.div.Tensor, aten.div.Scalar)
def div(a: TpuSparseTensor, b: Any) -> TpuSparseTensor:
    if isinstance(b, torch.Tensor) and b.dim() != 0:
        raise NotImplementedError("div of a sparse TPU tensor: only by a scalar")
    return TpuSparseTensor(a._ind, a._val / b, a.shape, a._coal)


@_sparse(aten.neg.default)
def neg(a: TpuSparseTensor) -> TpuSparseTensor:
    return TpuSparseTensor(a._ind, -a._val, a.shape, a._coal)


@_sparse(aten.add.Tensor)
def add(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    if isinstance(a, TpuSparseTensor) and isinstance(b, TpuSparseTensor):
        if a.shape != b.shape:
            raise RuntimeError(f"add: sparse sizes differ: {list(a.shape)} vs {list(b.shape)}")
        return TpuSparseTensor(torch.cat([a._ind, b._ind], 1), torch.cat([a._val, b._val * alpha]), a.shape)
    return _dense_of(a) + _dense_of(b) * alpha


@_sparse(aten.t.default)
def t(a: TpuSparseTensor) -> TpuSparseTensor:
    return transpose(a, 0, 1)


@_sparse(aten.transpose.int)
def transpose(a: TpuSparseTensor, d0: int, d1: int) -> TpuSparseTensor:
    d0, d1 = d0 % a.dim(), d1 % a.dim()
    if max(d0, d1) >= a._sparse_dim:
        raise NotImplementedError("transposing a dense dimension of a sparse TPU tensor is not supported")
    order = list(range(a._sparse_dim))
    order[d0], order[d1] = order[d1], order[d0]
    size = list(a.shape)
    size[d0], size[d1] = size[d1], size[d0]
    return TpuSparseTensor(a._ind[order], a._val, size, False)


@_sparse(aten.sum.default)
def sum_(a: TpuSparseTensor, *, dtype: Any = None) -> torch.Tensor:
    return a._val.sum(dtype=dtype)


@_sparse(aten.clone.default)
def clone(a: TpuSparseTensor, *, memory_format: Any = None) -> TpuSparseTensor:
    return TpuSparseTensor(a._ind.clone(), a._val.clone(), a.shape, a._coal)


@_sparse(aten.detach.default, aten.alias.default)
def detach(a: TpuSparseTensor) -> TpuSparseTensor:
    return TpuSparseTensor(a._ind, a._val, a.shape, a._coal)


@_sparse(aten.is_same_size.default)
def is_same_size(a: Any, b: Any) -> bool:
    return tuple(a.shape) == tuple(b.shape)


@_sparse(aten._has_compatible_shallow_copy_type.default)
def _compatible(a: Any, b: Any) -> bool:
    return type(a) is type(b)


@_sparse(aten.copy_.default)
def copy_(self: TpuSparseTensor, src: Any, non_blocking: bool = False) -> TpuSparseTensor:
    """``load_state_dict`` into a sparse buffer: take the source's components (sizes must match)."""
    if not src.is_sparse:
        raise RuntimeError("copy_ into a sparse TPU tensor needs a sparse source")
    if tuple(src.shape) != tuple(self.shape):
        raise RuntimeError(f"copy_: sparse sizes differ: {list(self.shape)} vs {list(src.shape)}")
    self._ind = src._indices().to(_tpu(), torch.int64)
    self._val = src._values().to(_tpu(), self.dtype)
    self._coal = src.is_coalesced()
    self._sparse_dim = src.sparse_dim()
    return self
