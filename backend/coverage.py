"""Core ATen coverage, computed from the lowering registry; and, for one run, the ops the device dispatched.

``python -m tpu_workbench.backend.coverage`` prints a table (direct / decomposed / missing) over every ATen overload
tagged ``torch.Tag.core``; ``--json`` prints the same data as JSON. "direct" means a lowering in
``tpu_workbench.backend.ops`` (exact overload or its packet); "decomposed" means the dispatcher reaches lowerings through
a PyTorch decomposition, a derived in-place/out= form, or a CompositeImplicitAutograd kernel.

``recording()`` counts every overload that reaches the "tpu" dispatcher (the PrivateUse1 level: an op that
CompositeImplicitAutograd decomposes above the device never arrives, so it is never reported) and
``device_ops(counts)`` says for each whether TorchTPU 0.2.0 has it (backend/fidelity.py) and whether it runs
here. ``python -m tpu_workbench.backend.coverage --script train.py [ARGS]`` runs a script under the recorder.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import runpy
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend.fidelity import STAND_INS


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


class _Depth(threading.local):
    n = 0


@contextlib.contextmanager
def recording() -> Iterator[collections.Counter[str]]:
    """Count, by overload name (``aten::add.Tensor``), the ops that reach the "tpu" dispatcher while inside.
    Only the outermost call counts: the forms the dispatcher derives (an in-place op run as its functional
    form) are its own business, not the model's."""
    from tpu_workbench.backend import dispatch as dispatch_module  # lazy: jax
    from tpu_workbench.backend import tensor as tensor_module  # lazy: jax

    counts: collections.Counter[str] = collections.Counter()
    inner = dispatch_module.dispatch
    depth = _Depth()

    def counted(func: Any, types: Any = (), args: tuple = (), kwargs: dict | None = None) -> Any:
        if depth.n:
            return inner(func, types, args, kwargs)
        name = func.name()
        counts[STAND_INS.get(name, name)] += 1
        depth.n += 1
        try:
            return inner(func, types, args, kwargs)
        finally:
            depth.n -= 1

    # the tensor type's handler and the module attribute the factory kernels look up at call time
    tensor_module.set_dispatch_handler(counted)
    dispatch_module.dispatch = counted
    try:
        yield counts
    finally:
        dispatch_module.dispatch = inner
        tensor_module.set_dispatch_handler(inner)


def _overload(name: str) -> Any:
    packet, _, overload = name.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, packet, None), overload or "default", None)


def _runs_here(name: str) -> bool:
    from tpu_workbench.backend import dispatch  # lazy: jax

    if name in STAND_INS.values():
        return True
    op = _overload(name)
    return op is not None and dispatch.runs_here(op)


def device_ops(counts: dict[str, int]) -> dict[str, Any]:
    """For the overloads a run dispatched (``recording()``): each one's calls, TorchTPU 0.2.0 status
    (``fidelity.torchtpu_status``) and whether it runs here; then the two lists a user acts on."""
    from tpu_workbench.backend.fidelity import STATUSES, torchtpu_status  # lazy: startup

    rows = {
        name: {"calls": n, "torchtpu_0_2_0": torchtpu_status(name), "here": _runs_here(name)}
        for name, n in sorted(counts.items())
        if name.startswith("aten::")
    }
    return {
        "overloads": rows,
        "counts": {s: sum(r["torchtpu_0_2_0"] == s for r in rows.values()) for s in STATUSES},
        "absent_on_torchtpu": [n for n, r in rows.items() if r["torchtpu_0_2_0"] == "absent"],
        "missing_here": [n for n, r in rows.items() if not r["here"]],
    }


def format_device_ops(r: dict[str, Any], everything: bool = False) -> list[str]:
    """The listing: the ops that will fail on a real TPU, the ops missing here, and the counts."""
    lines = []
    if everything:
        lines += [
            f"{n:<60} {row['calls']:>6}  torchtpu {row['torchtpu_0_2_0']:<10} here {'yes' if row['here'] else 'NO'}"
            for n, row in r["overloads"].items()
        ]
    c = r["counts"]
    lines.append(
        f"{len(r['overloads'])} overloads reached the device; TorchTPU 0.2.0: registered {c['registered']}, "
        f"another overload of the op {c['sibling']}, composite {c['composite']}, absent {c['absent']}"
    )
    lines.append(
        "absent on TorchTPU 0.2.0 (fails on a real TPU): " + (", ".join(r["absent_on_torchtpu"]) or "none")
    )
    lines.append("missing here (no lowering in this backend): " + (", ".join(r["missing_here"]) or "none"))
    return lines


def _run_script(argv: list[str]) -> dict[str, Any]:
    from tpu_workbench import backend  # lazy: the device must be registered

    backend.register()
    saved = sys.argv
    sys.argv = list(argv)
    error = None
    try:
        with recording() as counts:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        error = None if exc.code in (0, None) else f"SystemExit({exc.code})"
    except Exception as exc:  # noqa: BLE001 - the listing up to the failure is the point
        error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        sys.argv = saved
    return {"script": argv, "error": error, **device_ops(counts)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tpu_workbench.backend.coverage", description=__doc__.splitlines()[0]
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--missing", action="store_true", help="list only missing overloads")
    p.add_argument(
        "--script",
        nargs=argparse.REMAINDER,
        metavar="PATH ARGS",
        help="run a Python script (its tensors on 'tpu') and list the ops it dispatched against TorchTPU 0.2.0",
    )
    a = p.parse_args(argv)
    if a.script:
        r = _run_script(a.script)
        if a.json:
            json.dump(r, sys.stdout, indent=1)
            print()
        else:
            print("\n".join(format_device_ops(r, everything=not a.missing)))
            if r["error"]:
                print(f"the script failed: {r['error']}")
        return 1 if r["error"] else 0
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
