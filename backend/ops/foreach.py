"""``_foreach_*`` ops (the optimizers' multi-tensor paths): the per-tensor ATen op over each list element, in
strict eager as one executable for the whole list where that is equivalent (see ``_run_batched``).

Registered for every ``aten::_foreach_*`` overload found in the dispatcher, so new overloads are
covered without a hand-kept list.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.graph import increment_version

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend import lazy
from tpu_workbench.backend._jax import t2j_dtype
from tpu_workbench.backend.op_jit import op_jit, reads_host_values
from tpu_workbench.backend.operands import view_operand
from tpu_workbench.backend.ops.registry import lookup, lower
from tpu_workbench.backend.tensor import TpuTensor, payload, set_value

_SPECIAL = {"norm": "linalg_vector_norm", "powsum": "linalg__powsum"}
_WITH_SCALAR = {"maximum": "clamp_min", "minimum": "clamp_max"}  # torch's kernels for a Scalar other


def _make(op: Any) -> Any:
    packet = op.overloadpacket.__name__  # e.g. _foreach_add_
    inplace = packet.endswith("_")
    base = packet[len("_foreach_") :].rstrip("_")
    if base in _WITH_SCALAR and private.overload_name(op) in ("Scalar", "ScalarList"):
        base = _WITH_SCALAR[base]
    target_name = _SPECIAL.get(base, base) + ("_" if inplace and base not in _SPECIAL else "")
    target = getattr(torch.ops.aten, target_name, None)
    copy_back = target is None and inplace  # no per-tensor in-place op (maximum_): functional op, then copy_
    if copy_back:
        target = getattr(torch.ops.aten, _SPECIAL.get(base, base))
    args_schema = private.schema(op).arguments
    list_pos = [
        i
        for i, a in enumerate(args_schema)
        if str(a.type) in ("List[Tensor]", "Tensor[]", "List[number]", "Scalar[]", "List[Scalar]")
    ]
    kw_pos = {
        i: ("value" if a.name == "scalars" else a.name)
        for i, a in enumerate(args_schema)
        if not a.kwarg_only
        and (a.name in ("value", "alpha") or (a.name == "scalars" and base in ("addcmul", "addcdiv")))
    }
    scalars_tensor = [i for i, a in enumerate(args_schema) if a.name == "scalars" and str(a.type) == "Tensor"]

    def per_tensor_calls(args: tuple, kwargs: dict) -> list[tuple[list, dict]]:
        n = len(args[list_pos[0]]) if list_pos else 0
        calls = []
        for i in range(n):
            a = list(args)
            for p in list_pos:
                if p < len(a):
                    a[p] = a[p][i]
            for p in scalars_tensor:
                if p < len(a):
                    a[p] = a[p][i].item()
            kw = dict(kwargs)
            for p in sorted(kw_pos, reverse=True):  # positional in the foreach schema, kwarg-only per tensor
                if p < len(a):
                    kw[kw_pos[p]] = a.pop(p)
            for k, v in kwargs.items():
                if k == "scalars" and isinstance(v, torch.Tensor):
                    kw[k] = v[i].item()
            if base in ("norm", "powsum"):
                kw.pop("dtype", None) if kwargs.get("dtype") is None else None
            calls.append((a, kw))
        return calls

    def impl(*args: Any, **kwargs: Any) -> Any:
        calls = per_tensor_calls(args, kwargs)
        if not copy_back:
            batched = _run_batched(target, calls)
            if batched is not None:
                if inplace:
                    _written(args[list_pos[0]])
                return None if inplace else batched
        results = []
        for a, kw in calls:
            r = target(*a, **kw)
            if copy_back:
                a[0].copy_(r)
            results.append(r)
        if inplace:
            _written(args[list_pos[0]])
        return None if inplace else results

    return impl


def _written(tensors: Any) -> None:
    """Bump the version counters of the tensors an in-place foreach op wrote, as CUDA's foreach kernels do
    (``increment_version``): no autograd layer above a foreach op does it, and the per-tensor ops run here, below
    that layer. Without it an optimizer step on weights that a retained graph saved went unnoticed and the second
    backward used the new weights (PyTorch-GAN's softmax_gan; the CPU and CUDA raise "modified by an inplace
    operation")."""
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    if tensors:
        increment_version(tensors)


# ----------------------------------------------------------------------------- one executable per call
# An optimizer's foreach op over 20 parameters is 20 per-tensor ops, each a dispatch and an executable of its
# own. In strict eager the per-tensor lowering runs instead over the whole list inside one executable
# (backend/op_jit.py caches it per signature; fused eager records it as one node), when that gives what the
# loop gives: every tensor a TPU tensor,
# no tensor written by one element and read or written by another (the loop would let a later element see an
# earlier write), and every in-place result already of its tensor's shape and dtype. Otherwise the loop runs.
_PER_TENSOR: dict[Any, Any] = {}  # (packet, argument kinds) -> (lowering fn, in-place) or None
_BATCHES: dict[Any, tuple] = {}  # lowering fn -> (batched fn, its executable)


def _kind(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return "T"
    if v.__class__ in (int, float, bool, complex):
        return "S"
    return "N" if v is None else "O"


def _accepts(arg: Any, kind: str) -> bool:
    t = str(arg.type)
    if t == "Tensor":
        return kind == "T"
    if t in ("Scalar", "number", "float", "int", "bool", "complex"):
        return kind == "S"
    if t.startswith("Optional[Tensor]") or t == "Tensor?":
        return kind in ("T", "N")
    return kind != "T"


def _overload_for(packet: Any, kinds: tuple, kw_names: tuple) -> Any:
    """The overload of ``packet`` that a call with these argument kinds resolves to (None: not exactly one)."""
    found = []
    for name in packet.overloads():
        op = getattr(packet, name)
        args = private.schema(op).arguments
        positional = [a for a in args if not a.kwarg_only]
        by_name = {a.name: a for a in args}
        if len(kinds) > len(positional) or any(n not in by_name for n in kw_names):
            continue
        if any(a.alias_info is not None and a.alias_info.is_write and a.kwarg_only for a in args):
            continue  # an .out overload
        missing = [
            a
            for a in positional[len(kinds) :] + [a for a in args if a.kwarg_only]
            if a.name not in kw_names and not a.has_default_value()
        ]
        if not missing and all(_accepts(a, k) for a, k in zip(positional, kinds, strict=False)):
            found.append(op)
    return found[0] if len(found) == 1 else None


def _per_tensor_lowering(packet: Any, a: list, kw: dict) -> tuple[Any, bool] | None:
    """(the lowering the per-tensor op runs, whether it writes its first argument), or None to loop."""
    key = (packet, tuple(_kind(v) for v in a), tuple(kw), tuple(_kind(v) for v in kw.values()))
    hit = _PER_TENSOR.get(key, False)
    if hit is not False:
        return hit
    target = _overload_for(packet, key[1], key[2])
    low = None
    inplace = packet.__name__.endswith("_")
    if target is not None:
        low = lookup(target)
        if low is None and inplace:
            functional = getattr(
                getattr(torch.ops.aten, packet.__name__[:-1], None), private.overload_name(target), None
            )
            low = lookup(functional) if functional is not None else None
    ok = (
        low is not None
        and not low.raw
        and not low.jit
        and low.check is None
        and not reads_host_values(low.fn)
        and not low.fn.__module__.startswith("tpu_workbench.backend.ops.random")
    )
    hit = _PER_TENSOR[key] = (low.fn, inplace) if ok else None
    return hit


def _batch_of(fn: Any) -> tuple:
    """(the batched function, its strict-eager executable). The batched function takes a template id and the
    leaves (arrays and floats, all top-level arguments, so fused eager lifts the floats and a learning-rate
    schedule does not make a new program per step); the template says where each leaf goes."""
    hit = _BATCHES.get(fn)
    if hit is None:

        def batched(template_id: int, *leaves: Any) -> tuple:
            it = iter(leaves)
            out = []
            for arg_spec, kw_spec in _TEMPLATES_BY_ID[template_id]:
                a = [next(it) if s is _LEAF else s for s in arg_spec]
                k = {name: next(it) if s is _LEAF else s for name, s in kw_spec}
                out.append(fn(*a, **k))
            return tuple(out)

        hit = _BATCHES[fn] = (batched, op_jit(batched))
    return hit


class _Leaf:
    """Marks a leaf's place in a template (a singleton: templates compare by it)."""

    def __repr__(self) -> str:
        return "<leaf>"


_LEAF = _Leaf()
_TEMPLATE_IDS: dict[tuple, int] = {}
_TEMPLATES_BY_ID: dict[int, tuple] = {}
_MAX_TEMPLATES = 4096
_template_counter = [0]


def _template_id(template: tuple) -> int:
    """A small int standing for a template (ids are never reused: clearing the bounded table only makes later
    calls build new programs)."""
    i = _TEMPLATE_IDS.get(template)
    if i is None:
        if len(_TEMPLATE_IDS) > _MAX_TEMPLATES:
            _TEMPLATE_IDS.clear()
            _TEMPLATES_BY_ID.clear()
        _template_counter[0] += 1
        i = _TEMPLATE_IDS[template] = _template_counter[0]
        _TEMPLATES_BY_ID[i] = template
    return i


def _root_id(t: TpuTensor) -> int:
    return id(t._root if t._root is not None else t)


class _Unbatchable(Exception):
    pass


def _slot(v: Any, leaves: list, reads: list, i: int, strict: bool) -> Any:
    """A per-tensor argument's place in the template (leaves collected); raises _Unbatchable for anything
    but TPU tensors, floats and plain static values. In strict eager a view not computed yet (an optimizer's
    transposed gradient) is computed inside the executable."""
    c = v.__class__
    if c is TpuTensor:
        reads.append((_root_id(v), i))
        root = v._root
        leaves.append(
            view_operand(v, not strict) if root is not None and root._gen != v._seen else payload(v)
        )
        return _LEAF
    if c is float:
        leaves.append(v)
        return _LEAF
    if c is int or c is bool or v is None or c is str:
        return v
    if c in (list, tuple) and all(x.__class__ in (int, bool) for x in v):
        return tuple(v)
    raise _Unbatchable


def _run_batched(target: Any, calls: list[tuple[list, dict]]) -> list | None:
    """The results (in-place: ``[]``, the tensors written), or None where the per-tensor loop must run."""
    if not calls:
        return None
    low = _per_tensor_lowering(target, *calls[0])
    if low is None:
        return None
    fn, inplace = low
    leaves: list = []
    reads: list = []
    template = []
    strict = not lazy.active()
    try:
        for i, (a, kw) in enumerate(calls):
            template.append(
                (
                    tuple(_slot(v, leaves, reads, i, strict) for v in a),
                    tuple((k, _slot(v, leaves, reads, i, strict)) for k, v in kw.items()),
                )
            )
    except _Unbatchable:
        return None
    if inplace:
        writers: dict[int, int] = {}
        for i, (a, _) in enumerate(calls):
            if writers.setdefault(_root_id(a[0]), i) != i:
                return None  # one tensor written twice
        if any(writers.get(root, i) != i for root, i in reads):
            return None  # a tensor written by one element and read by another: the loop's order matters
    batched, exe = _batch_of(fn)
    tid = _template_id(tuple(template))
    out = exe(tid, *leaves) if strict else lazy.call(batched, (tid, *leaves), None, exe)
    if not all(hasattr(r, "shape") for r in out):
        return None  # a per-tensor op with several results: the loop wraps them
    if not inplace:
        return [TpuTensor(r) for r in out]
    for (a, _), r in zip(calls, out, strict=True):
        t = a[0]
        if tuple(r.shape) != tuple(t.shape) or r.dtype != t2j_dtype(t.dtype):
            return None  # nothing written yet: the loop casts or raises as the per-tensor op does
    for (a, _), r in zip(calls, out, strict=True):
        set_value(a[0], r)
    return []


def _register_all() -> None:
    seen = set()
    for name in private.dispatch_get_all_op_names():
        if not name.startswith("aten::_foreach_") or name.split(".")[0] in seen:
            continue
        seen.add(name.split(".")[0])
        packet = getattr(torch.ops.aten, name.split("::")[1].split(".")[0], None)
        if packet is None:
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if any(
                a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
                for a in private.schema(op).arguments
            ):
                continue  # .out overloads: the dispatcher derives them
            try:
                lower(op, raw=True)(_make(op))
            except AttributeError:
                continue


_register_all()
