"""``_foreach_*`` ops (the optimizers' multi-tensor paths): one loop over the per-tensor ATen op.

Registered for every ``aten::_foreach_*`` overload found in the dispatcher, so new overloads are
covered without a hand-kept list.
"""

from __future__ import annotations

from typing import Any

import torch

from backend import _torch_private as private
from backend.ops.registry import lower

_SPECIAL = {"norm": "linalg_vector_norm", "powsum": "linalg__powsum"}
_WITH_SCALAR = {"maximum": "clamp_min", "minimum": "clamp_max"}  # torch's kernels for a Scalar other


def _make(op: Any) -> Any:
    packet = op.overloadpacket.__name__  # e.g. _foreach_add_
    inplace = packet.endswith("_")
    base = packet[len("_foreach_"):].rstrip("_")
    if base in _WITH_SCALAR and private.overload_name(op) in ("Scalar", "ScalarList"):
        base = _WITH_SCALAR[base]
    target_name = _SPECIAL.get(base, base) + ("_" if inplace and base not in _SPECIAL else "")
    target = getattr(torch.ops.aten, target_name, None)
    copy_back = target is None and inplace  # no per-tensor in-place op (maximum_): functional op, then copy_
    if copy_back:
        target = getattr(torch.ops.aten, _SPECIAL.get(base, base))
    args_schema = private.schema(op).arguments
    list_pos = [i for i, a in enumerate(args_schema) if str(a.type) in ("List[Tensor]", "Tensor[]", "List[number]",
                                                                        "Scalar[]", "List[Scalar]")]
    kw_pos = {i: ("value" if a.name == "scalars" else a.name) for i, a in enumerate(args_schema)
              if not a.kwarg_only and (a.name in ("value", "alpha") or (a.name == "scalars" and base in (
                  "addcmul", "addcdiv")))}
    scalars_tensor = [i for i, a in enumerate(args_schema) if a.name == "scalars" and str(a.type) == "Tensor"]

    def impl(*args: Any, **kwargs: Any) -> Any:
        n = len(args[list_pos[0]]) if list_pos else 0
        results = []
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
            r = target(*a, **kw)
            if copy_back:
                a[0].copy_(r)
            results.append(r)
        return None if inplace else results

    return impl


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
            if any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in private.schema(op).arguments):
                continue  # .out overloads: the dispatcher derives them
            try:
                lower(op, raw=True)(_make(op))
            except AttributeError:
                continue


_register_all()
