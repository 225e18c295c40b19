"""``tpu-bench assess``: parser setup and command (registered by workbench/cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tpu_workbench.bench import argtypes

EPILOG = """\
THIS RUNS YOUR CODE: the commands you name (and, with --candidates, the scripts and tests it proposes) run
as you, in temporary copies of PATH, one subprocess per command and phase with a timeout (killed with its
children). Your tree is only read: nothing is written or run there.

examples:
  tpu-bench assess ~/src/myrepo                                  (migration + proposed commands, nothing run)
  tpu-bench assess ~/src/myrepo --run "python train.py --device {device} --max-steps 5" --tests "pytest -x tests/unit"
  tpu-bench assess ~/src/myrepo --candidates --timeout 120 --gpu "H100 SXM" --tpu "TPU v7" --chips 64 --tokens 1e11

Each command runs twice: on "cpu" in an unmigrated copy, and on "tpu" in a copy migrated by tpu-migrate
({device} in a command becomes cpu, then tpu). Observed in the runs: pass/fail, the first error, ops without
a tpu lowering, the input shapes each model saw on tpu (each new shape compiles anew) and Dynamo's recompiles;
in the cpu run, the model's parameters and forward FLOPs per token (FlopCounterMode), projected to the chosen
GPU and TPU (the full calibrated projection for a transformers decoder, its compute term otherwise; catalog
prices; the projection's error band beside them). Writes <out>/assessment.md, .html and .json (verdict first),
<out>/logs/ and <out>/tasks.jsonl (a rerun reuses runs of an unchanged tree and command; --fresh reruns).

exit status:
  0  runs on tpu: every command that passes on cpu passes on tpu after the migration
  1  needs changes: a command breaks after the migration, the model stayed off the tpu, or nothing ran
  2  bad input: PATH is not a folder or holds no Python, every command fails on cpu too, a bad option,
     or a Ray address that does not answer
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "assess",
        help="assess a repository for the tpu: migration, runs before/after, projected cost (RUNS YOUR CODE)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("path", help="the repository's root folder (only read; work happens in copies)")
    p.add_argument("--run", action="append", default=[], metavar="CMD", help="a command to run; repeatable")
    p.add_argument("--tests", action="append", default=[], metavar="CMD", help="a test command; repeatable")
    p.add_argument("--candidates", action="store_true", help="also run the proposed scripts and tests")
    p.add_argument("--timeout", type=argtypes.POSITIVE, default=300.0, help="seconds per command and phase")
    p.add_argument("--gpu", default="H100 SXM", help="catalog GPU to project to (default 'H100 SXM')")
    p.add_argument("--tpu", default="TPU v7", help="catalog TPU to project to (default 'TPU v7')")
    p.add_argument("--chips", type=argtypes.POSITIVE_INT, default=8, help="chips of each (default 8)")
    p.add_argument("--tokens", type=argtypes.POSITIVE, default=1e9, help="training tokens projected")
    p.add_argument(
        "--default-device",
        action="store_true",
        help="in the tpu run, make 'tpu' torch's default device (tests that never name a device exercise it)",
    )
    p.add_argument("--jobs", type=argtypes.POSITIVE_INT, default=1, help="commands run at once")
    p.add_argument("--engine", default="local", choices=["local", "ray"], help="executor engine")
    p.add_argument(
        "--ray-address", default=None, help="with --engine ray: a running cluster (default: start one here)"
    )
    p.add_argument("--out", default="assessment", help="folder for the reports and logs (outside PATH)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rerun every command (default: reuse runs in <out>/tasks.jsonl of the same tree, command and options)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def run(args) -> int:
    from tpu_workbench.bench.assess import AssessOptions, assess  # lazy: startup
    from tpu_workbench.bench.catalog import load_catalog  # lazy: startup

    catalog = load_catalog()
    if args.engine == "ray" and args.ray_address:
        from tpu_workbench.bench.executor.ray_engine import check_address  # lazy: startup

        check_address(args.ray_address)  # before any work: Ray itself retries for minutes
    catalog.chip(args.gpu)  # names checked before anything runs
    catalog.chip(args.tpu)
    options = AssessOptions(
        path=Path(args.path),
        out=Path(args.out),
        run=args.run,
        tests=args.tests,
        candidates=args.candidates,
        timeout=args.timeout,
        gpu=args.gpu,
        tpu=args.tpu,
        chips=args.chips,
        tokens=args.tokens,
        workers=args.jobs,
        engine=args.engine,
        default_device=args.default_device,
        ray_address=args.ray_address,
        resume=not args.fresh,
    )
    data = assess(options, progress=not args.no_progress)
    v = data["verdict"]
    print(f"verdict: {v['headline']}")
    for kind, path in data["reports"].items():
        print(f"{kind}: {path}")
    return int(v["exit_status"])
