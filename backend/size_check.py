"""Refuse an op whose output would not fit in a 64-bit byte count, before JAX sees it.

XLA computes an array's byte size while it builds a program and aborts the whole process
(``absl::BadStatusOrAccess`` through ``std::terminate``) when that product overflows: ``torch.empty(1 << 62,
device="tpu")`` killed the interpreter. PyTorch's CPU and CUDA kernels raise ``RuntimeError: Storage size
calculation overflowed with sizes=[...]`` for the same call. Outputs can only grow that large from integer
arguments (a factory's size, ``expand``, ``repeat``, an ``arange`` range, ``one_hot``'s classes, an upsample's
output size), so only ops with such arguments get a check, built once per op from its schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private

_LIMIT = 1 << 63  # bytes: XLA (and torch) keep sizes in int64
_SIZE_ARGS = frozenset({"size", "sizes", "output_size", "shape", "repeats"})
_COUNT_ARGS = frozenset({"num_classes", "n", "m"})  # one_hot, eye, randperm: a count of elements per row
_RANGE_OPS = frozenset({"arange", "range", "linspace", "logspace"})
# Ops whose size argument re-shapes an existing tensor (the product is its numel): no check, no cost.
_SAME_NUMEL = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "view_copy",
        "unflatten",
        "_reshape_copy",
        "resize_",
        "resize_as_",
        "set_",
        "sum_to_size",
    }
)


def _is_int_list(arg: Any) -> bool:
    t = str(arg.type)
    return t.startswith(("int[", "SymInt[", "List[int]", "List[SymInt]")) or t in ("int[]", "SymInt[]")


def _product(v: Any) -> int:
    n = 1
    for d in v:
        if isinstance(d, torch.SymInt):
            return 0  # symbolic: a trace decides later
        d = int(d)
        if d > 0:
            n *= d
    return n


def _itemsize(args: tuple, kwargs: dict) -> int:
    dtype = kwargs.get("dtype")
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.element_size()
    return torch.get_default_dtype().itemsize


def _negative(sizes: list[int]) -> RuntimeError:
    d = next(d for d in sizes if d < 0)
    return RuntimeError(f"Trying to create tensor with negative dimension {d}: {sizes}")


def _overflow(sizes: list[int]) -> RuntimeError:
    return RuntimeError(f"Storage size calculation overflowed with sizes={sizes}")


def _range_length(a: tuple, kwargs: dict, names: list[str]) -> int:
    bound = dict(zip(names, a, strict=False))
    bound.update(kwargs)
    start, end, step = bound.get("start", 0), bound.get("end"), bound.get("step", 1)
    if "steps" in bound:
        steps = bound["steps"]
        return int(steps) if isinstance(steps, int) else 0
    if end is None and "start" in bound and len(a) == 1:
        start, end = 0, bound["start"]
    if not all(isinstance(v, (int, float)) for v in (start, end, step)) or not step:
        return 0
    length = (end - start) / step
    return math.ceil(length) if math.isfinite(length) and length > 0 else 0


def size_check_for(func: Any) -> Callable[[tuple, dict], None] | None:
    """A check of one call's arguments, or None when ``func`` cannot grow an output from integers."""
    name = func.name().split("::")[-1].split(".")[0]
    if name in _SAME_NUMEL:
        return None
    args = list(private.schema(func).arguments)
    names = [a.name for a in args]
    sized = [(i, a.name) for i, a in enumerate(args) if a.name in _SIZE_ARGS and _is_int_list(a)]
    counted = [
        (i, a.name) for i, a in enumerate(args) if a.name in _COUNT_ARGS and str(a.type) in ("int", "SymInt")
    ]
    ranged = name in _RANGE_OPS
    if not (sized or counted or ranged):
        return None
    times_self = name in ("repeat", "one_hot")  # the output is self's elements times the argument
    # A negative size is refused as CPU and CUDA refuse it (XLA would fail to build the program with an
    # MLIR or broadcast error); expand's -1 means "keep this dimension" and its meta kernel judges the rest.
    refuse_negative = not name.startswith("expand")
    resampled = "upsample" in name  # an empty resampled output is refused too (it divided by zero here)

    def check(a: tuple, k: dict) -> None:
        numel = 1
        for i, arg_name in sized + counted:
            v = a[i] if i < len(a) else k.get(arg_name)
            if v is None:
                continue
            if refuse_negative and isinstance(v, (list, tuple)):
                ints = [int(d) for d in v if isinstance(d, int)]
                if resampled and any(d <= 0 for d in ints):
                    raise RuntimeError(
                        f"Input and output sizes should be greater than 0, but got output_size {ints}"
                    )
                if any(d < 0 for d in ints):
                    raise _negative(ints)
            elif name == "eye" and isinstance(v, int) and v < 0:
                raise RuntimeError(f"{arg_name} must be greater or equal to 0, got {v}")
            if isinstance(v, (list, tuple)):
                numel *= _product(v)
            elif isinstance(v, int) and v > 0:
                numel *= v
        if name == "eye" and len([1 for i, _ in counted if i < len(a)]) == 1:
            numel *= numel  # eye(n) is n x n
        if ranged:
            numel *= max(_range_length(a, k, names), 1)
        if times_self and a and isinstance(a[0], torch.Tensor):
            numel *= max(a[0].numel(), 1)
        if numel * _itemsize(a, k) >= _LIMIT:
            if sized and not times_self:
                i, arg_name = sized[0]
                v = a[i] if i < len(a) else k.get(arg_name)
                raise _overflow([int(d) for d in v])
            raise _overflow([numel])

    return check
