"""The verdict: per command (before vs after) and overall, with the exit status it maps to."""

from __future__ import annotations

from tpu_workbench.bench.assess.options import EXIT_BAD_INPUT, EXIT_NEEDS_CHANGES, EXIT_RUNS_ON_TPU
from tpu_workbench.bench.assess.torchtpu_gaps import gaps


def _on_tpu(probe: dict) -> bool | None:
    """True when a model's parameters or inputs were on the tpu; None when no model call was observed."""
    mods = probe.get("modules") or []
    if not mods:
        return None
    return any("tpu" in m.get("param_devices", []) or "tpu" in m.get("input_devices", []) for m in mods)


def _recompiles(probe: dict) -> list[dict]:
    out = [
        {"module": m["class"], "distinct_shapes": m["distinct_shapes"], "shapes": m["shapes"][:8]}
        for m in probe.get("modules") or []
        if m.get("distinct_shapes", 0) > 1
    ]
    return out


def _torchtpu_gaps(cprobe: dict, tprobe: dict) -> dict:
    """TorchTPU 0.2.0 gaps from what reached the "tpu" device; from the CPU run's ops when the tpu run
    dispatched nothing (its names can include CPU-only kernels: said in ``torchtpu_gaps_from``)."""
    device = sorted(tprobe.get("device_ops") or {})
    used, source = (device, "tpu device") if device else (cprobe.get("aten_ops", []), "cpu run")
    return {"aten_ops_used": len(used), "torchtpu_gaps_from": source, "torchtpu_020_gaps": gaps(used)}


def judge_command(c: dict) -> dict:
    cpu, tpu = c.get("cpu", {}), c.get("tpu", {})
    tprobe = tpu.get("probe") or {}
    on_tpu = _on_tpu(tprobe)
    if cpu.get("status") != "pass":
        outcome = "fails on cpu too"
    elif tpu.get("status") == "pass" and on_tpu is False:
        outcome = "passes, but the model stayed off the tpu"
    elif tpu.get("status") == "pass":
        outcome = "runs on tpu" if on_tpu else "passes on tpu (no model call observed)"
    elif tpu.get("status") == "timeout":
        outcome = "times out on tpu"
    else:
        outcome = "breaks after migration"
    return {
        **c,
        "outcome": outcome,
        "on_tpu": on_tpu,
        "tpu_recompiles": {"shapes": _recompiles(tprobe), "dynamo": tprobe.get("recompiles", [])},
        "cpu_fallback_ops": tprobe.get("cpu_fallback_ops", {}),
        **_torchtpu_gaps(cpu.get("probe") or {}, tprobe),
    }


def overall(data: dict) -> dict:
    cmds = data["commands"]
    mig = data["migration"]
    changes = f"{mig['rewritten']} rewrites, {mig['warned']} warnings, {mig['flagged']} flagged lines"
    if not cmds:
        return {
            "exit_status": EXIT_NEEDS_CHANGES,
            "headline": f"not verified: no command ran (name --run/--tests, or confirm the {len(data['candidates'])} "
            f"proposed with --candidates); migration: {changes}",
        }
    ran = [c for c in cmds if c["outcome"] != "fails on cpu too"]
    if not ran:
        return {
            "exit_status": EXIT_BAD_INPUT,
            "headline": "every command fails before the migration, on cpu: nothing to compare (not the migration's doing)",
        }
    good = [c for c in ran if c["outcome"] in ("runs on tpu", "passes on tpu (no model call observed)")]
    runs = len(good) == len(ran)
    head = (
        f"runs on tpu: {len(good)}/{len(ran)} commands that pass on cpu pass after the migration"
        if runs
        else f"needs changes: {len(ran) - len(good)}/{len(ran)} commands that pass on cpu do not run on tpu after the migration"
    )
    counts: dict[str, int] = {}
    for c in ran:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    head += " (" + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ")"
    missing = sorted({op for c in ran for op in c.get("tpu", {}).get("missing_ops", [])})
    return {
        "torchtpu_020_gaps": sorted({g["op"] for c in cmds for g in c.get("torchtpu_020_gaps", [])}),
        "exit_status": EXIT_RUNS_ON_TPU if runs else EXIT_NEEDS_CHANGES,
        "headline": head + f"; migration: {changes}",
        "missing_ops": missing,
        "fails_on_cpu_too": [c["command"] for c in cmds if c["outcome"] == "fails on cpu too"],
    }
