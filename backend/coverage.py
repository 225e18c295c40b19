"""Core ATen coverage, computed from the lowering registry.

``python -m tpu_workbench.backend.coverage`` prints a table (direct / decomposed / missing) over every ATen overload
tagged ``torch.Tag.core``; ``--json`` prints the same data as JSON. "direct" means a lowering in
``tpu_workbench.backend.ops`` (exact overload or its packet); "decomposed" means the dispatcher reaches lowerings through
a PyTorch decomposition, a derived in-place/out= form, or a CompositeImplicitAutograd kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private


def core_overloads() -> list[Any]:
    """Every ``aten`` OpOverload tagged core, sorted by name."""
    seen, out = set(), []
    for name in private.dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        packet_name = name[len("aten::") :].split(".")[0]
        if packet_name in seen:
            continue
        seen.add(packet_name)
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if torch.Tag.core in op.tags:
                out.append(op)
    return sorted(out, key=lambda o: o.name())


def classify(op: Any) -> str:
    """ "direct", "decomposed" or "missing" for one overload, from the registry and dispatcher rules."""
    from tpu_workbench.backend import dispatch  # lazy: jax (loads every lowering family)
    from tpu_workbench.backend.decompositions import decomposition_for  # lazy: jax
    from tpu_workbench.backend.ops.registry import lookup  # lazy: jax

    if lookup(op) is not None:
        return "direct"
    if op.name().startswith("aten::sym_"):
        return "decomposed"  # answered by the wrapper's metadata (sizes/strides), never dispatched
    outs = dispatch._out_args(op)
    if dispatch._is_inplace(op):
        f = dispatch._functional_of_inplace(op)
        if f is not None and (lookup(f) is not None or decomposition_for(f) is not None):
            return "decomposed"
    if outs:
        f = dispatch._functional_of_out(op, outs)
        if f is not None and (lookup(f) is not None or decomposition_for(f) is not None):
            return "decomposed"
    if decomposition_for(op) is not None:
        return "decomposed"
    if private.dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return "decomposed"
    return "missing"


def report() -> dict[str, Any]:
    from tpu_workbench import backend  # lazy: the report needs the device registered
    from tpu_workbench.backend import dispatch  # noqa: F401  # lazy: jax (loads every lowering family)

    backend.register()
    rows = [
        {
            "op": op.name()
            + ("" if private.overload_name(op) == "default" else "." + private.overload_name(op)),
            "status": classify(op),
        }
        for op in core_overloads()
    ]
    counts = {k: sum(r["status"] == k for r in rows) for k in ("direct", "decomposed", "missing")}
    from tpu_workbench.backend.ops.registry import REGISTRY  # lazy: jax

    return {
        "torch": torch.__version__,
        "core_overloads": len(rows),
        "counts": counts,
        "registry_entries": len(REGISTRY),
        "ops": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tpu_workbench.backend.coverage", description=__doc__.splitlines()[0]
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--missing", action="store_true", help="list only missing overloads")
    a = p.parse_args(argv)
    r = report()
    if a.json:
        json.dump(r, sys.stdout, indent=1)
        print()
        return 0
    for row in r["ops"]:
        if not a.missing or row["status"] == "missing":
            print(f"{row['op']:<55} {row['status']}")
    c = r["counts"]
    print(
        f"\ncore ATen overloads (torch {r['torch']}): {r['core_overloads']}  direct {c['direct']}  "
        f"decomposed {c['decomposed']}  missing {c['missing']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
