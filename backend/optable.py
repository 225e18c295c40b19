"""Our op registry against TorchTPU 0.2.0's (backend/fidelity.py holds the table): both, only ours, only
theirs, per overload and per op. ``python -m tpu_workbench.backend.optable`` prints the counts and lists."""

from __future__ import annotations

from typing import Any

import torch

from tpu_workbench.backend import dispatch
from tpu_workbench.backend.fidelity import absent_on_torchtpu, compare, torchtpu_op_names, torchtpu_table
from tpu_workbench.backend.ops.registry import REGISTRY


def _overload(name: str) -> Any:
    packet, _, overload = name.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, packet, None), overload or "default", None)


def our_overloads() -> set[str]:
    """The aten overloads that run here: a lowering in our registry, plus (among the real table's names) those
    our dispatcher derives (in-place and ``out=`` forms of a lowering, decompositions)."""

    ours = {op.name() for op in REGISTRY if hasattr(op, "name") and op.name().startswith("aten::")}
    for name in torchtpu_table() - ours:
        op = _overload(name)
        if op is not None and dispatch.runs_here(op):
            ours.add(name)
    return ours


def main() -> None:
    """``python -m tpu_workbench.backend.optable``: the counts and the lists."""
    ours = our_overloads()
    res = compare(ours)
    print(
        f"TorchTPU 0.2.0 table: {len(torchtpu_table())} overloads over {len(torchtpu_op_names())} ops; ours: {len(ours)}"
    )
    for level, r in (("overloads", res), ("ops", compare(ours, per_op=True))):
        print(f"{level}: " + ", ".join(f"{k} {len(r[k])}" for k in ("both", "only_ours", "only_theirs")))
    refused = [n for n in res["only_ours"] if (op := _overload(n)) is not None and absent_on_torchtpu(op)]
    print(
        f"only ours and refused in fidelity mode (no CompositeExplicitAutograd kernel either): {len(refused)}"
    )
    print("ops only theirs:", ", ".join(compare(ours, per_op=True)["only_theirs"]))


if __name__ == "__main__":
    main()
