"""Validation records (the project's results schema, provenance ``measured``) and the markdown report.

One record per architecture (``workload = "hf:<model_type>"``, ``phase = "validate"``) with the outcome in
``extra``; one summary record (``phase = "validate-summary"``) with the sweep's figures. The report is
computed from records only, so a committed ``records.jsonl`` regenerates its ``report.md``.
"""

from __future__ import annotations

import collections
import platform
from pathlib import Path
from typing import Any

from tpu_workbench.backend import comparison as compare
from tpu_workbench.bench.provenance import git_revision, host_info, now_utc, versions
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.validate import classify, inputs, rounding

PHASE, SUMMARY_PHASE = "validate", "validate-summary"


def measured_source(device: str) -> dict[str, Any]:
    """Host, versions (transformers too), git revision, date and the platform of the device."""
    from tpu_workbench.bench.devices import describe_device  # lazy: heavy

    info = describe_device(device)
    ver = versions()
    try:
        import transformers  # lazy: heavy

        ver["transformers"] = transformers.__version__
    except Exception:  # noqa: BLE001
        ver["transformers"] = "not importable"
    return {
        "kind": "measured",
        "host": host_info(),
        "versions": ver,
        "git_revision": git_revision(),
        "date": now_utc(),
        "device": device,
        "device_name": info.name,
        "platform": info.platform,
        "emulated": info.is_emulated,
        "machine": platform.machine(),
    }


def record_for(result: dict, source: dict, wall_s: float, options: dict, log: str | None = None) -> Record:
    """One architecture's outcome as a Record."""
    failure = classify.classify(result)
    status = result.get("status", "fail")
    extra = {
        "status": status,
        "harness_ok": status != "harness",
        "tier1": result.get("tier1"),
        "tier2": result.get("tier2"),
        "failure_class": failure,
        "failed_stage": result.get("failed_stage"),
        "error": (result.get("error") or "")[:2000],
        "error_type": result.get("error_type"),
        "stages": result.get("stages"),
        "agreement": result.get("agreement"),
        "cpu_rescued": result.get("cpu_rescued"),
        "device_ops": result.get("device_ops"),
        "generate": _strip(result.get("generate")),
        "generate_class": classify.check_class(result.get("generate")),
        "compile": _strip(result.get("compile")),
        "compile_class": classify.check_class(result.get("compile")),
        "fallback_from": result.get("fallback_from"),
        "family": result.get("family"),
        "wall_s": wall_s,
        "exitcode": result.get("exitcode"),
        "log": log,
        "options": options,
        "tolerances": compare.TOLERANCES,
    }
    config = {
        "model_type": result.get("model_type"),
        "model_class": result.get("model_class"),
        "config_class": result.get("config_class"),
        "parameters": result.get("parameters"),
        "inputs": result.get("inputs"),
        "shrunk": result.get("shrunk"),
    }
    return Record(
        provenance="measured",
        workload=f"hf:{result.get('model_type')}",
        phase=PHASE,
        device=source["device"],
        platform=source["platform"],
        device_name=source["device_name"],
        chip=None if source.get("emulated") else source.get("device_name"),
        precision="fp32",
        batch=inputs.BATCH,
        seq=inputs.SEQ,
        tokens_kind="n/a",
        unit="architectures",
        config=config,
        source=source,
        extra=extra,
        created=now_utc(),
        compiled=False,
    )


def _strip(check: dict | None) -> dict | None:
    if not check:
        return check
    return {k: v for k, v in check.items() if k != "traceback"}


def summarise(records: list[Record]) -> dict[str, Any]:
    """Pass rates and failure classes of a set of architecture records."""
    rows = [r for r in records if r.phase == PHASE]
    built = [r for r in rows if r.extra.get("harness_ok")]
    ran = [r for r in built if r.extra.get("status") != "built"]  # "built": harness-only, not run on a device
    tier1 = [r for r in ran if r.extra.get("tier1")]
    tier2 = [r for r in ran if r.extra.get("tier2")]
    gen = [r for r in built if r.extra.get("generate") and r.extra["generate"].get("status") != "harness"]
    comp = [r for r in built if r.extra.get("compile")]
    classes: dict[str, list[str]] = collections.defaultdict(list)
    for r in ran:
        if r.extra.get("failure_class"):
            classes[r.extra["failure_class"]].append(r.config.get("model_type"))
    harness = {
        r.config.get("model_type"): r.extra.get("failure_class")
        for r in rows
        if not r.extra.get("harness_ok")
    }

    def pct(n: int, d: int) -> float | None:
        return round(100.0 * n / d, 1) if d else None

    absent: dict[str, list[str]] = collections.defaultdict(list)
    missing: dict[str, list[str]] = collections.defaultdict(list)
    overloads: set[str] = set()
    for r in rows:
        ops = r.extra.get("device_ops") or {}
        overloads.update(ops.get("overloads", {}))
        for name in ops.get("absent_on_torchtpu", []):
            absent[name].append(str(r.config.get("model_type")))
        for name in ops.get("missing_here", []):
            missing[name].append(str(r.config.get("model_type")))

    return {
        "architectures": len(rows),
        "built": len(built),
        "built_pct": pct(len(built), len(rows)),
        "ran_on_device": len(ran),
        "tier1": len(tier1),
        "tier1_pct": pct(len(tier1), len(ran)),
        "tier2": len(tier2),
        "tier2_pct": pct(len(tier2), len(ran)),
        "generate_run": len(gen),
        "generate_pass": sum(1 for r in gen if r.extra["generate"].get("status") == "pass"),
        "compile_run": len(comp),
        "compile_pass": sum(1 for r in comp if r.extra["compile"].get("status") == "pass"),
        "failure_classes": sorted(
            ([k, sorted(v)] for k, v in classes.items()), key=lambda kv: (-len(kv[1]), kv[0])
        ),
        "harness_failures": dict(sorted(harness.items())),
        "device_overloads": len(overloads),
        "absent_on_torchtpu": dict(sorted(absent.items())),
        "missing_here": dict(sorted(missing.items())),
        "wall_s_sum": round(sum(r.extra.get("wall_s") or 0 for r in rows), 1),
    }


def summary_record(records: list[Record], source: dict, wall_s: float, options: dict) -> Record:
    figures = summarise(records)
    figures["sweep_wall_s"] = round(wall_s, 1)
    return Record(
        provenance="measured",
        workload="hf:*",
        phase=SUMMARY_PHASE,
        device=source["device"],
        platform=source["platform"],
        device_name=source["device_name"],
        precision="fp32",
        tokens_kind="n/a",
        unit="architectures",
        source=source,
        extra={**figures, "options": options, "tolerances": compare.TOLERANCES},
        created=now_utc(),
    )


def _mark(value: Any) -> str:
    return {True: "yes", False: "**no**", None: "–"}.get(value, str(value))


def _check(check: dict | None) -> str:
    if not check:
        return "–"
    return {"pass": "yes", "fail": "**no**", "harness": "n/a"}.get(
        check.get("status"), check.get("status", "?")
    )


def markdown(records: list[Record], title: str = "Model-zoo validation") -> str:
    """The report: provenance, figures, ranked failure classes, harness failures, one row per architecture."""
    rows = sorted((r for r in records if r.phase == PHASE), key=lambda r: str(r.config.get("model_type")))
    summaries = [r for r in records if r.phase == SUMMARY_PHASE]
    s = summarise(rows)
    src = (summaries[-1] if summaries else rows[0]).source if (summaries or rows) else {}
    wall = summaries[-1].extra.get("sweep_wall_s") if summaries else None
    opts = (summaries[-1].extra.get("options") if summaries else None) or {}
    ver = src.get("versions", {})
    host = src.get("host", {})
    out = [
        f"# {title}",
        "",
        f"Measured {src.get('date', '?')} on `{host.get('hostname', '?')}` ({host.get('os', '?')}, "
        f"{host.get('cpu_count', '?')} CPUs), device `{src.get('device', '?')}` = {src.get('platform', '?')}; "
        f"torch {ver.get('torch', '?')}, jax {ver.get('jax', '?')}, transformers {ver.get('transformers', '?')}, "
        f"python {ver.get('python', '?')}; git {src.get('git_revision', '?')}.",
        "",
        "Every architecture is a tiny random-weight model built from its config class (float32, eval mode, "
        f"batch {inputs.BATCH}, {inputs.SEQ} text tokens; weight matrices the model initialises to zero, such as "
        "MoE router gates, get small seeded noise, because exact ties make top-k choices implementation-defined "
        "on every device), run forward and backward on the CPU (the reference) "
        "and on the device. **Tier 1**: forward and backward complete on the device with no op run on the CPU "
        "(no fallback, no backward rescue). **Tier 2**: tier 1 and every forward output and parameter "
        f"gradient agrees with the CPU: max|Δ| ≤ {compare.FORWARD_ATOL:g} + {compare.FORWARD_RTOL:g}·max|cpu| "
        f"per output tensor, ≤ {compare.GRAD_ATOL:g} + {compare.GRAD_RTOL:g}·max|cpu| per gradient. "
        "A tensor over its tolerance is judged once more against a float64 CPU run, as torch._dynamo's accuracy "
        f"check does: it passes if the device is within {compare.FP64_MULTIPLIER:g}x the CPU float32 run's own error "
        "against float64 (rounding noise, e.g. gradients that are analytically zero). One still over it passes "
        f"only if the device is within {compare.NOISE_MULTIPLIER:g}x the CPU run's own rounding noise, the largest "
        f"spread of {rounding.SAMPLES} Monte Carlo arithmetic reruns of the CPU reference (every op's inputs moved "
        "by one float32 epsilon, top-k/sort ties broken at random): a near-tie, such as a ReLU input within "
        "rounding of zero, that a different valid rounding flips. Those tensors are listed per architecture. "
        "A model that draws random "
        "numbers in its forward cannot agree (the generators differ, as the CPU's and CUDA's do): its difference "
        "is named so, and is not a pass. "
        "A harness failure (the tiny config or its inputs do not run on the CPU either) is never a pass and "
        "is listed apart. *Tolerance used* is the worst max|Δ| / limit over the tensors (at most 1 passes).",
        "",
    ]
    if opts:
        out += [
            f"Options: {', '.join(f'{k}={v}' for k, v in opts.items())}."
            + (f" Sweep wall time {wall:,.0f} s." if wall else ""),
            "",
        ]
    out += [
        "## Figures",
        "",
        "| | count | rate |",
        "|---|---:|---:|",
        f"| architectures (model types) | {s['architectures']} | |",
        f"| built by the harness | {s['built']} | {s['built_pct']}% of all |",
        f"| built and run on the device | {s['ran_on_device']} | |",
        f"| tier 1 (runs on the device) | {s['tier1']} | {s['tier1_pct']}% of run |",
        f"| tier 2 (agrees with the CPU) | {s['tier2']} | {s['tier2_pct']}% of run |",
        f"| generate() with KV cache, tokens equal | {s['generate_pass']} / {s['generate_run']} | |",
        f'| torch.compile(backend="tpu") forward agrees | {s["compile_pass"]} / {s["compile_run"]} | |',
        "",
    ]
    out += [
        "## Failure classes (built architectures), by how many each blocks",
        "",
        "| class | architectures | which |",
        "|---|---:|---|",
    ]
    for label, archs in s["failure_classes"]:
        shown = ", ".join(archs[:12]) + (f" … (+{len(archs) - 12})" if len(archs) > 12 else "")
        out.append(f"| {_cell(label)} | {len(archs)} | {shown} |")
    checks: dict[str, list[str]] = collections.defaultdict(list)
    for r in rows:
        for key in ("generate_class", "compile_class"):
            if r.extra.get(key):
                checks[f"{key.split('_')[0]}: {r.extra[key]}"].append(str(r.config.get("model_type")))
    if checks:
        out += [
            "",
            "### generate / compile check failures",
            "",
            "| class | architectures | which |",
            "|---|---:|---|",
        ]
        for label, archs in sorted(checks.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(f"| {_cell(label)} | {len(archs)} | {', '.join(archs[:12])} |")
    out += [
        "",
        "## TorchTPU 0.2.0 op table: what the device dispatched",
        "",
        f"{s['device_overloads']} distinct ATen overloads reached the device (the PrivateUse1 level: ops decomposed "
        "above it by CompositeImplicitAutograd are not counted), each looked up in the released TorchTPU 0.2.0 "
        "wheel's op table (backend/torchtpu_0_2_0_ops.json) and in this backend's registry.",
        "",
        "| overload | absent on TorchTPU 0.2.0 (fails on a real TPU) / missing here | architectures |",
        "|---|---|---|",
    ]
    for kind, table in (
        ("absent on TorchTPU 0.2.0", s["absent_on_torchtpu"]),
        ("missing here", s["missing_here"]),
    ):
        for name, archs in table.items():
            out.append(f"| {name} | {kind} | {', '.join(archs[:12])}{' …' if len(archs) > 12 else ''} |")
    out += [
        "",
        "## Harness failures (not built: listed with the reason, never counted as a pass)",
        "",
        "| architecture | stage | reason |",
        "|---|---|---|",
    ]
    for r in rows:
        if not r.extra.get("harness_ok"):
            out.append(
                f"| {r.config.get('model_type')} | {r.extra.get('failed_stage')} | "
                f"{_cell((r.extra.get('error') or '')[:200])} |"
            )
    out += [
        "",
        "## Every architecture",
        "",
        "| architecture | class validated | family | params | tier 1 | tier 2 | tolerance used (fwd / grad) "
        "| generate | compile | failure | s |",
        "|---|---|---|---:|---|---|---|---|---|---|---:|",
    ]
    for r in rows:
        e = r.extra
        agr = e.get("agreement") or {}
        err = "–"
        if agr:
            err = (
                f"{agr.get('forward', {}).get('worst_tol_used', 0):.2g} / "
                f"{agr.get('gradients', {}).get('worst_tol_used', 0):.2g}"
            )
        failure = e.get("failure_class") or ""
        if not e.get("harness_ok"):
            failure = "harness: " + failure
        out.append(
            f"| {r.config.get('model_type')} | {r.config.get('model_class') or '–'} | {e.get('family') or '–'} | "
            f"{r.config.get('parameters') or '–'} | {_mark(e.get('tier1'))} | {_mark(e.get('tier2'))} | {err} | "
            f"{_check(e.get('generate'))} | {_check(e.get('compile'))} | {_cell(failure[:120])} | "
            f"{e.get('wall_s', 0):.0f} |"
        )
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_report(records: list[Record], path: Path, title: str = "Model-zoo validation") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(records, title), encoding="utf-8")
    return path


def merge(*record_sets: list[Record]) -> list[Record]:
    """Architecture records of several runs, one per architecture: a later set replaces an earlier one's
    record of the same architecture, except that a harness-only success ("built": the device was not run)
    never replaces a device result. A later harness *failure* does: the later code cannot build the model,
    so the earlier device result is of a configuration it no longer makes (summaries dropped)."""
    out: dict[str, Record] = {}
    for records in record_sets:
        for r in records:
            if r.phase != PHASE:
                continue
            name = str(r.config.get("model_type"))
            old = out.get(name)
            if (
                old is not None
                and r.extra.get("status") == "built"
                and old.extra.get("status") in ("pass", "tier1", "fail")
            ):
                continue  # a harness-only check never replaces a device result
            out[name] = r
    return [out[n] for n in sorted(out)]
