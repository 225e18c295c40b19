"""``tpu-bench demo``'s options: parsed (and ``--help`` answered) before the demo's heavy imports load."""

from __future__ import annotations

import argparse

from tpu_workbench.bench import argtypes
from tpu_workbench.bench.samples import SAMPLES

DEFAULT_OUT = "demo-report"
STEP_KEYS = ("losses", "benchmark", "projection")
#: Training steps per sample: the losses check compares the first steps; a thousand already takes minutes.
MAX_STEPS = 1000


def build_parser() -> argparse.ArgumentParser:
    p = argtypes.OneLineParser(
        prog="tpu-bench demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description='The end-to-end demo: migrate the sample projects, run them on "tpu" and "cpu" and '
        "check the losses agree, benchmark a small decoder on the devices present, project to the "
        "catalog chips, and write a report folder (README.md + PNGs).",
        epilog="exit status: 0 all checks passed, 1 a check failed, 2 bad arguments",
    )
    p.add_argument(
        "--out",
        type=argtypes.OUTPUT_DIR,
        default=DEFAULT_OUT,
        help=f"report folder (default ./{DEFAULT_OUT}/)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="reduced run for tests: one sample (cuda_ddp), 3 steps, train phase only, 0.3 s budget",
    )
    p.add_argument(
        "--steps",
        type=argtypes.integer(1, MAX_STEPS),
        default=None,
        help=f"training steps per migrated sample, 1 to {MAX_STEPS} (default 5)",
    )
    p.add_argument(
        "--budget",
        type=argtypes.BUDGET_S,
        default=None,
        help="timing budget per benchmark cell in s, in (0, 3600] (default 1)",
    )
    p.add_argument(
        "--samples",
        nargs="+",
        default=None,
        choices=[s.name for s in SAMPLES],
        help="samples to migrate and run (default: all)",
    )
    p.add_argument(
        "--examples",
        type=argtypes.existing_dir,
        default=None,
        help="folder with the sample projects (default: the bundled examples/)",
    )
    p.add_argument("--skip", nargs="+", default=[], choices=STEP_KEYS, help="leave out steps")
    return p
