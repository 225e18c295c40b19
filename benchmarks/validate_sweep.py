"""The whole model-zoo validation sweep: every model_type of the installed transformers, tiny, on "tpu".

    python benchmarks/validate_sweep.py --jobs 2 --timeout 180 --out /tmp/validate-full
    python benchmarks/validate_sweep.py --resume --out /tmp/validate-full     (continue / redo harness failures)

Prints the figures (model types, built, tier 1 / tier 2 rates, generate and compile checks, wall time) and
the failure classes ranked by how many architectures each blocks; records.jsonl and report.md are in --out.
Runs are ordered round-robin over families, so an interrupted sweep still covers every family.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu_workbench.bench.validate.orchestrate import run_validation  # noqa: E402
from tpu_workbench.bench.validate.sweep import SweepOptions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--out", default="validation/full")
    ap.add_argument("--arch", action="append", default=[], help="restrict to these model types / globs")
    ap.add_argument("--resume", action="store_true", help="keep built records in --out, run the rest")
    ap.add_argument("--compile", default="family", choices=["family", "all", "none"])
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--harness-only", action="store_true", help="build + CPU reference only (no device)")
    ap.add_argument("--merge", nargs="+", metavar="DIR", help="only merge these runs' records into --out")
    args = ap.parse_args(argv)
    if args.merge:
        from tpu_workbench.bench.validate.orchestrate import merge_runs

        run = merge_runs(args.merge, args.out)
        _print(run, args)
        return 0
    options = SweepOptions(jobs=args.jobs, timeout=args.timeout, out=Path(args.out))
    run = run_validation(
        args.arch or None,
        options=options,
        generate=not args.no_generate,
        compile=args.compile,
        resume=args.resume,
        order="interleave",
        harness_only=args.harness_only,
    )
    _print(run, args)
    return 0


def _print(run, args) -> None:
    s = run.summary
    print(f"host: {os.cpu_count()} CPUs, {args.jobs} jobs, timeout {args.timeout:g} s")
    print(f"model types: {s['architectures']}")
    print(f"built by the harness: {s['built']} ({s['built_pct']}%)")
    print(
        f"run on the device: {s['ran_on_device']}   tier 1: {s['tier1']} ({s['tier1_pct']}% of run)   tier 2: {s['tier2']} ({s['tier2_pct']}% of run)"
    )
    print(
        f"generate(): {s['generate_pass']}/{s['generate_run']}   compile: {s['compile_pass']}/{s['compile_run']}"
    )
    print(f"wall time: {run.wall_s:,.0f} s (sum of per-architecture wall times {s['wall_s_sum']:,.0f} s)")
    print("failure classes (built architectures):")
    for label, archs in s["failure_classes"]:
        print(f"  {len(archs):>4}  {label}: {', '.join(archs[:8])}{' …' if len(archs) > 8 else ''}")
    print(f"harness failures: {len(s['harness_failures'])} (listed in {run.report_path})")


if __name__ == "__main__":
    sys.exit(main())
