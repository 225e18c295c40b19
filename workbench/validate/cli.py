"""``tpu-bench validate``: parser setup and command (registered by workbench/cli.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tpu_workbench.bench import argtypes

EPILOG = """\
examples:
  tpu-bench validate --list
  tpu-bench validate --arch llama --arch 'qwen2*' --arch bert,vit --out validation/
  tpu-bench validate --jobs 2 --timeout 180 --out validation/full        (every model type)
  tpu-bench validate --model my_models:build_model --out validation/mine  (your own model)

Each architecture is a tiny random-weight model built from its transformers config (offline, nothing is
downloaded), run in its own process: forward + backward on the CPU (reference) and on the device.
tier 1 = it runs on the device with no op run on the CPU; tier 2 = outputs and parameter gradients agree
with the CPU (float32). Writes <out>/records.jsonl (results schema, provenance "measured") and
<out>/report.md. A --model factory returns a transformers model (inputs are built from its config) or
(model, inputs) with inputs a dict of keyword arguments or a tuple of positional ones.
"""


#: Parallel validation runs: each is a process holding a model and a device; more than this is a typo.
MAX_JOBS = 256


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "validate",
        help="model-zoo validation: every transformers architecture, tiny, on the device",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument(
        "--arch",
        action="append",
        default=[],
        metavar="NAME",
        help="model_type to validate: repeatable, comma list or glob ('qwen*'); default: all",
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="your own model: a function returning a model or (model, inputs); repeatable",
    )
    p.add_argument(
        "--jobs",
        type=argtypes.integer(1, MAX_JOBS),
        default=1,
        help=f"runs in parallel (one process each), 1 to {MAX_JOBS}",
    )
    p.add_argument(
        "--timeout",
        type=argtypes.number(0.0, 86400.0),
        default=180.0,
        help="seconds per architecture, in (0, 86400]",
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=["local", "ray"],
        help="executor engine: local (a process per run, default) or ray (pip install '.[ray]')",
    )
    p.add_argument(
        "--ray-address", default=None, help="with --engine ray: a running cluster (default: start one here)"
    )
    p.add_argument(
        "--out",
        type=argtypes.OUTPUT_DIR,
        default="validation",
        help="folder for records.jsonl, report.md and logs/",
    )
    p.add_argument("--device", default="tpu", help="device to validate (default tpu)")
    p.add_argument(
        "--compile",
        default="family",
        choices=["family", "all", "none"],
        help="torch.compile(backend='tpu') forward: one per family (default), every run, or none",
    )
    p.add_argument(
        "--no-generate", action="store_true", help="skip the generate() check of generative models"
    )
    p.add_argument(
        "--jax-cache",
        default="auto",
        help="JAX compilation cache shared by the runs ('auto' = <out>/jax-cache, 'none' = off)",
    )
    p.add_argument(
        "--harness-only",
        action="store_true",
        help="only build each architecture and run the CPU reference (what the harness covers)",
    )
    p.add_argument(
        "--list", action="store_true", help="list the architectures and the class each is validated with"
    )
    p.add_argument(
        "--json", action="store_true", help="with --list: JSON; otherwise print the summary as JSON"
    )
    p.add_argument("--no-progress", action="store_true", help="no per-architecture progress lines on stderr")
    return p


def run(args) -> int:
    from tpu_workbench.bench.devices import check_device  # lazy: startup
    from tpu_workbench.bench.validate import orchestrate, zoo  # lazy: startup
    from tpu_workbench.bench.validate.sweep import SweepOptions  # lazy: startup

    if args.list:
        rows = orchestrate.listing()
        if args.arch:
            names = {a.model_type for a in zoo.select(args.arch)}
            rows = [r for r in rows if r["model_type"] in names]
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            for r in rows:
                print(f"{r['model_type']:<40} {r['family']:<24} {r['class']}")
            print(f"{len(rows)} architectures")
        return 0
    device = check_device(args.device)
    if args.engine == "ray" and args.ray_address:
        from tpu_workbench.bench.executor.ray_engine import check_address  # lazy: startup

        check_address(args.ray_address)  # before any work: Ray itself retries for minutes
    if args.arch:
        zoo.select(args.arch)  # validate names before starting anything
    options = SweepOptions(
        jobs=args.jobs,
        timeout=args.timeout,
        out=Path(args.out),
        device=device,
        jax_cache=None if args.jax_cache == "none" else args.jax_cache,
        engine=args.engine,
        ray_address=args.ray_address,
    )
    result = orchestrate.run_validation(
        args.arch,
        user_models=args.model,
        options=options,
        generate=not args.no_generate,
        compile=args.compile,
        progress=not args.no_progress,
        harness_only=args.harness_only,
    )
    s = result.summary
    if args.json:
        print(json.dumps({k: v for k, v in s.items() if k != "options"}, default=str))
    else:
        print(
            f"{s['architectures']} architectures, {s['built']} built ({s['built_pct']}%), tier 1 {s['tier1']} "
            f"({s['tier1_pct']}% of the {s['ran_on_device']} run), tier 2 {s['tier2']} ({s['tier2_pct']}%); generate "
            f"{s['generate_pass']}/{s['generate_run']}, compile {s['compile_pass']}/{s['compile_run']}; "
            f"{result.wall_s:,.0f} s"
        )
        for label, archs in s["failure_classes"][:10]:
            print(f"  {len(archs):>4}  {label}  ({', '.join(archs[:6])}{' …' if len(archs) > 6 else ''})")
        if s["device_overloads"]:
            for kind in ("absent_on_torchtpu", "missing_here"):
                listed = ", ".join(f"{op} ({', '.join(a[:4])})" for op, a in s[kind].items()) or "none"
                print(f"  ops {kind.replace('_', ' ').replace('torchtpu', 'TorchTPU 0.2.0')}: {listed}")
        print(f"records: {result.records_path}\nreport:  {result.report_path}")
    if args.harness_only:
        return 0 if s["built"] == s["architectures"] else 1
    return 0 if s["built"] and s["tier1"] == s["ran_on_device"] else 1
