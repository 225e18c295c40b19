"""Refusals: the calls CPU and CUDA refuse, refused here too, before (or right after) the lowering runs.

A wrong answer is worse than an error. JAX clamps out-of-range gathers, drops out-of-range scatters and
accepts any dtype, so a lowering alone would return numbers where PyTorch stops: an embedding index past the
table, ``index_add_`` into row 7 of 3, ``multinomial`` of negative weights, a ``where`` with an integer
condition, ``long_tensor.add_(0.5)``. Each op here gets a check, built once per op (``refusal_for``) and run by
its dispatch plan:

- **bounds** (index-taking ops): the index tensor's min and max are read from the device (one small cached
  executable and one host transfer per call: the price of never returning a wrong row, measured by
  ``benchmarks/bounds_check_overhead.py``); inside a compiled trace the values are unknown and the check is
  skipped, as on CUDA where such a check is a device-side assert;
- **values and dtypes** (``where``'s condition, ``fill_``'s scalar, ``randperm``'s count, a boolean mask's
  shape, ``multinomial``'s weights, ``repeat_interleave``'s counts);
- **in-place writes** into an integer tensor or an expanded one: PyTorch's own meta kernel decides (cast
  rules, internal overlap), run on meta tensors of the same sizes, strides and dtypes;
- **output size** (convolution, pooling): the meta kernel's shape check ("Kernel size can't be greater than
  actual input size").

Errors are the ones PyTorch raises (class and message); an out-of-range index raises ``TpuIndexError``, an
IndexError (what CPU code catches) that is also a RuntimeError (what CUDA's device-side assert raises).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.tensor import TpuTensor, value

aten = torch.ops.aten
Check = Callable[[tuple, dict], None]


class TpuIndexError(IndexError, RuntimeError):
    """An index out of range for the op that took it (CPU raises IndexError, CUDA a RuntimeError)."""


_CHECKS: dict[Any, Check] = {}


def refusal_for(func: Any) -> Check | None:
    """The check run before ``func``'s plan, or None (most ops: no cost)."""
    return _CHECKS.get(func)


def _register(*ops: Any) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        for op in ops:
            _CHECKS[op] = fn
        return fn

    return deco


# ----------------------------------------------------------------------------- reading index values
_KERNELS: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    k = _KERNELS.get(name)
    if k is None:
        jax = jax_module()
        jnp = jax.numpy
        if name == "minmax":
            k = jax.jit(lambda v: jnp.stack([jnp.min(v), jnp.max(v)]).astype(jnp.int64))
        else:  # multinomial: (min weight, every weight finite, min row sum)
            k = jax.jit(
                lambda v: (
                    jnp.min(v).astype(jnp.float64),
                    jnp.all(jnp.isfinite(v)),
                    jnp.min(jnp.sum(v.astype(jnp.float64), axis=-1)),
                )
            )
        _KERNELS[name] = k
    return k


def _concrete(t: Any) -> Any:
    """The jax array of a TPU tensor, or None where its values are unknown (a compile trace) or it is empty."""
    if t.__class__ is not TpuTensor or t.numel() == 0:
        return None
    v = value(t)
    if isinstance(v, jax_module().core.Tracer):
        return None
    return v


#: Index tensors up to this many elements are read to the host for their bounds: a jitted min/max compiles once per
#: shape, and a loop whose indices grow by one each step (sampling tokens) would compile it on every step.
_HOST_BOUNDS = 1 << 16


def _bounds(t: Any) -> tuple[int, int] | None:
    v = _concrete(t)
    if v is None:
        return None
    jax = jax_module()
    if v.size <= _HOST_BOUNDS:
        host = jax.device_get(v)
        return int(host.min()), int(host.max())
    lo, hi = (int(x) for x in jax.device_get(_kernel("minmax")(v)))
    return lo, hi


def _check_range(op: str, index: Any, size: int, negative: bool, what: str) -> None:
    """Every value of ``index`` in [0, size) (or [-size, size) with ``negative``), else TpuIndexError."""
    b = _bounds(index)
    if b is None:
        return
    lo, hi = b
    low = -size if negative else 0
    if lo < low or hi >= size:
        bad = lo if lo < low else hi
        raise TpuIndexError(
            f"{op}: index {bad} is out of range for {what} of size {size} (valid: {low} to {size - 1})"
        )


def _dim_size(t: torch.Tensor, dim: int) -> int:
    return t.shape[dim] if t.dim() else 1


@_register(aten.embedding.default)
def _embedding(a: tuple, k: dict) -> None:
    weight, indices = a[0], a[1]
    _check_range("embedding", indices, weight.shape[0], False, "a table (dim 0)")


@_register(aten.index_add.default, aten.index_add_.default)
def _index_add(a: tuple, k: dict) -> None:
    self, dim, index = a[0], a[1], a[2]
    if (
        self.numel() or self.dim() <= 1
    ):  # (the CPU checks nothing when an N-d self is empty; a 1-d one, always)
        _check_range("index_add", index, _dim_size(self, dim), False, f"dimension {dim}")


@_register(aten.index_select.default)
def _index_select(a: tuple, k: dict) -> None:
    self, dim, index = a[0], a[1], a[2]
    _check_range("index_select", index, _dim_size(self, dim), False, f"dimension {dim}")


@_register(aten.index_copy.default, aten.index_copy_.default)
def _index_copy(a: tuple, k: dict) -> None:
    self, dim, index, source = a[0], a[1], a[2], a[3]
    if (
        not isinstance(source, torch.Tensor) or source.numel()
    ):  # (the CPU copies nothing from an empty source)
        _check_range("index_copy", index, _dim_size(self, dim), False, f"dimension {dim}")


@_register(
    aten.index_fill.int_Scalar,
    aten.index_fill_.int_Scalar,
    aten.index_fill.int_Tensor,
    aten.index_fill_.int_Tensor,
)
def _index_fill(a: tuple, k: dict) -> None:
    self, dim, index = a[0], a[1], a[2]
    _check_range("index_fill", index, _dim_size(self, dim), True, f"dimension {dim}")


@_register(aten.take.default)
def _take(a: tuple, k: dict) -> None:
    self, index = a[0], a[1]
    _check_range("take", index, self.numel(), True, "a tensor of that many elements")


@_register(aten.multinomial.default)
def _multinomial(a: tuple, k: dict) -> None:
    v = _concrete(a[0])
    if v is None:
        return
    lo, finite, row = jax_module().device_get(_kernel("multinomial")(v))
    if lo < 0 or not finite:
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    if row <= 0:
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")


@_register(aten.repeat_interleave.Tensor)
def _repeat_interleave(a: tuple, k: dict) -> None:
    b = _bounds(a[0])
    if b is not None and b[0] < 0:
        raise RuntimeError(f"repeat_interleave: repeats can not be negative (got {b[0]})")


# ----------------------------------------------------------------------------- values and dtypes
@_register(aten.where.self)
def _where(a: tuple, k: dict) -> None:
    cond = a[0]
    if isinstance(cond, torch.Tensor) and cond.dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {_name(cond.dtype)}"
        )


def _name(dt: torch.dtype) -> str:
    return _type_name(dt)


_C_NAMES = {torch.int8: "int8_t", torch.int16: "int16_t", torch.int32: "int", torch.int64: "long int"}


def _check_fits(v: Any, dtype: torch.dtype) -> None:
    if dtype not in _C_NAMES or isinstance(v, torch.Tensor) or isinstance(v, bool):
        return
    info = torch.iinfo(dtype)
    if isinstance(v, (int, float)) and v == v and not (info.min <= v <= info.max):
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES[dtype]} without overflow")


@_register(aten.fill_.Scalar, aten.fill.Scalar)
def _fill(a: tuple, k: dict) -> None:
    _check_fits(a[1], a[0].dtype)


@_register(aten.full.default)
def _full(a: tuple, k: dict) -> None:
    dt = k.get("dtype")
    if dt is not None:
        _check_fits(a[1], dt)


@_register(aten.pow.Tensor_Scalar, aten.pow_.Scalar)
def _pow_scalar(a: tuple, k: dict) -> None:
    """The CPU converts the exponent to the tensor's dtype: a float16 tensor to the power 1e30 raises."""
    self, e = a[0], a[1]
    if self.dtype == torch.float16 and isinstance(e, float) and math.isfinite(e) and abs(e) > 65504.0:
        raise RuntimeError("value cannot be converted to type c10::Half without overflow")


@_register(aten.randperm.default, aten.randperm.generator)
def _randperm(a: tuple, k: dict) -> None:
    n = a[0]
    if isinstance(n, int) and n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")


def _masks(self: torch.Tensor, indices: Any) -> None:
    """A boolean mask must match the dims it indexes (JAX would index with whatever it is given)."""
    pos = 0
    for idx in indices or ():
        if idx is None:
            pos += 1
            continue
        if idx.dtype in (torch.bool, torch.uint8):
            for j, s in enumerate(idx.shape):
                if pos + j >= self.dim():
                    raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
                if s != self.shape[pos + j]:
                    raise IndexError(
                        f"The shape of the mask {list(idx.shape)} at index {j} does not match the shape of the "
                        f"indexed tensor {list(self.shape)} at index {pos + j}"
                    )
            pos += idx.dim()
        else:
            pos += 1


#: Advanced indexing (read and write): bounds and boolean-mask shapes checked here; dispatch lets their index
#: tensors stay on the host (as CUDA accepts CPU indices).
INDEX_TENSOR_OPS = (
    aten.index.Tensor,
    aten._unsafe_index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._unsafe_index_put.default,
    aten._index_put_impl_.default,
)


@_register(*INDEX_TENSOR_OPS)
def _index(a: tuple, k: dict) -> None:
    _masks(a[0], a[1] if len(a) > 1 else k.get("indices"))


def _dtype_refusal(
    ops: list, refused: Callable[[Any], bool], message: str, operands: slice = slice(0, 1)
) -> None:
    """Ops that refuse a dtype on every device (the check sits above the kernels, in PyTorch's own op)."""

    def check(a: tuple, k: dict) -> None:
        for t in a[operands]:
            dt = t.dtype if isinstance(t, torch.Tensor) else torch.bool if isinstance(t, bool) else None
            if dt is not None and refused(dt):
                raise (NotImplementedError if message.startswith("!") else RuntimeError)(message.lstrip("!"))

    for op in ops:
        if op is not None:
            _CHECKS[op] = _both(_CHECKS[op], check) if op in _CHECKS else check


def _both(first: Check, second: Check) -> Check:
    def check(a: tuple, k: dict) -> None:
        first(a, k)
        second(a, k)

    return check


def _ops(*names: str) -> list:
    out = []
    for n in names:
        packet, _, overload = n.partition(".")
        out.append(getattr(getattr(aten, packet, None), overload or "default", None))
    return out


_dtype_refusal(
    _ops("sub.Tensor", "sub_.Tensor", "sub.Scalar", "sub_.Scalar", "rsub.Tensor", "rsub.Scalar"),
    lambda d: d == torch.bool,
    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use "
    "the `~` or `logical_not()` operator instead.",
    slice(0, 2),
)
_dtype_refusal(
    _ops("sign", "sign_"),
    lambda d: d.is_complex,
    "!Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead.",
)
_dtype_refusal(
    _ops("clamp", "clamp_", "clamp.Tensor", "clamp_.Tensor", "clamp_min", "clamp_min_", "clamp_min.Tensor",
         "clamp_min_.Tensor", "clamp_max", "clamp_max_", "clamp_max.Tensor", "clamp_max_.Tensor", "relu", "relu_"),
    lambda d: d.is_complex,
    "!clamp is not supported for complex types",
)  # fmt: skip
_dtype_refusal(_ops("relu", "relu_"), lambda d: d == torch.bool, "Boolean inputs not supported for relu")
for _n in ("maximum", "minimum", "fmax", "fmin"):
    _dtype_refusal(
        _ops(_n), lambda d: d.is_complex, f"{_n} not implemented for complex tensors.", slice(0, 2)
    )
_dtype_refusal(_ops("argmax"), lambda d: d == torch.bool, "argmax(): does not support bool input")
_dtype_refusal(_ops("argmin"), lambda d: d == torch.bool, "argmin(): does not support bool input")
_dtype_refusal(_ops("argmax"), lambda d: d.is_complex, "argmax(): does not support complex input")
_dtype_refusal(_ops("argmin"), lambda d: d.is_complex, "argmin(): does not support complex input")


# ----------------------------------------------------------------------------- PyTorch's meta kernel decides
def _meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_meta(v) for v in x)
    return x


_META_MESSAGES = (
    "Kernel size can't be greater",
    "Output size is too small",
    "pad should be",
    "output size is too small",
)


def _key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.stride(), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_key(v) for v in x)
    if isinstance(x, (bool, int, float, complex)):
        return (type(x), x)  # (a kernel size's value decides; True and 1 differ in type)
    return x if isinstance(x, (str, type(None), torch.dtype, torch.device)) else id(x)


_VERDICTS: dict[Any, str | None] = {}


def _meta_decides(func: Any) -> Check:
    """Run ``func`` on meta tensors like the arguments (cached per sizes/strides/dtypes) and raise its refusal."""

    def check(a: tuple, k: dict) -> None:
        key = (func, _key(a), _key(tuple(sorted(k.items()))))
        if key not in _VERDICTS:
            verdict = None
            try:
                func(*_meta(a), **_meta(k))
            except (RuntimeError, ValueError) as exc:
                if any(m in str(exc) for m in _META_MESSAGES):
                    verdict = str(exc).split("\n")[0]
            if len(_VERDICTS) > 65536:
                _VERDICTS.clear()
            _VERDICTS[key] = verdict
        if _VERDICTS[key] is not None:
            raise RuntimeError(_VERDICTS[key])

    return check


def check_inplace_cast(result: torch.dtype, out: torch.dtype) -> None:
    """An in-place result of type ``result`` written into ``out``: refused where PyTorch's ``can_cast`` says no."""
    if not torch.can_cast(result, out):
        raise RuntimeError(
            f"result type {_type_name(result)} can't be cast to the desired output type {_type_name(out)}"
        )


def _type_name(dt: torch.dtype) -> str:
    return torch.empty(0, dtype=dt).type()[len("torch.") : -len("Tensor")]


def inplace_check(func: Any) -> Check:
    """For an in-place op: refuse an expanded ``self`` (several elements, one address), as PyTorch does; the
    result-type refusal runs where the result's dtype is known (``check_inplace_cast``)."""

    def check(a: tuple, k: dict) -> None:
        self = a[0]
        if self.__class__ is not TpuTensor:
            return
        if 0 in self.stride() and any(
            st == 0 and n > 1 for st, n in zip(self.stride(), self.shape, strict=True)
        ):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers to a single "
                "memory location. Please clone() the tensor before performing the operation."
            )

    return check


for _op in (
    aten.convolution.default,
    aten.max_pool2d_with_indices.default,
    aten.max_pool3d_with_indices.default,
    aten.avg_pool2d.default,
    aten.avg_pool3d.default,
):
    _CHECKS[_op] = _meta_decides(_op)


def check_one_hot(self: torch.Tensor, num_classes: int) -> int:
    """``F.one_hot``'s own checks (its composite skips them on a non-CPU device): int64 input, classes in
    [0, num_classes). Returns the number of classes (``-1``: inferred from the largest, as the CPU does)."""
    if self.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if self.numel() == 0 and num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    b = _bounds(self)
    if b is None:
        return num_classes
    if b[0] < 0:
        raise TpuIndexError(f"one_hot: Class values must be non-negative (got {b[0]}).")
    if num_classes != -1 and b[1] >= num_classes:
        raise TpuIndexError(
            f"one_hot: Class values must be smaller than num_classes (got {b[1]}, num_classes={num_classes})."
        )
    return b[1] + 1 if num_classes == -1 else num_classes
