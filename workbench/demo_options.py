"""``tpu-bench demo``'s options: parsed (and ``--help`` answered) before the demo's heavy imports load."""

from __future__ import annotations

import argparse

from tpu_workbench.bench.samples import SAMPLES

DEFAULT_OUT = "demo-report"
STEP_KEYS = ("losses", "benchmark", "projection")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tpu-bench demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description='The end-to-end demo: migrate the sample projects, run them on "tpu" and "cpu" and '
        "check the losses agree, benchmark a small decoder on the devices present, project to the "
        "catalog chips, and write a report folder (README.md + PNGs).",
        epilog="exit status: 0 all checks passed, 1 a check failed, 2 bad arguments",
    )
    p.add_argument("--out", default=DEFAULT_OUT, help=f"report folder (default ./{DEFAULT_OUT}/)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="reduced run for tests: one sample (cuda_ddp), 3 steps, train phase only, 0.3 s budget",
    )
    p.add_argument(
        "--steps", type=_positive_int, default=None, help="training steps per migrated sample (default 5)"
    )
    p.add_argument(
        "--budget",
        type=_positive_float,
        default=None,
        help="timing budget per benchmark cell in s (default 1)",
    )
    p.add_argument(
        "--samples",
        nargs="+",
        default=None,
        choices=[s.name for s in SAMPLES],
        help="samples to migrate and run (default: all)",
    )
    p.add_argument(
        "--examples", default=None, help="folder with the sample projects (default: the bundled examples/)"
    )
    p.add_argument("--skip", nargs="+", default=[], choices=STEP_KEYS, help="leave out steps")
    return p


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value
