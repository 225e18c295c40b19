"""Speed of tpu-migrate on real code: `--check` over every .py of installed packages vs a bare libcst parse.

Prints, for the whole tree and for the files that need rewriting: wall time of tpu-migrate's check
(prefilter + parse + rules + diff, nothing written) with --jobs 1 and --jobs 2, and the wall time of
just parsing every file with libcst (one process). Targets: whole tree <= 0.5x parse-all;
files needing rewrites <= 2x their bare parse; --jobs 2 faster than --jobs 1.

    python benchmarks/bench_migrate.py                 # torch, jax, libcst, numpy, ... (several minutes)
    python benchmarks/bench_migrate.py --subset 2000   # a fixed random subset of the files
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import sysconfig
import time

import libcst as cst

from tpu_workbench.migrate.engine import run_files

PACKAGES = ("torch", "jax", "jaxlib", "libcst", "numpy", "pandas", "hypothesis", "matplotlib")


def package_files(packages: tuple[str, ...]) -> list[str]:
    site = sysconfig.get_paths()["purelib"]
    files: list[str] = []
    for pkg in packages:
        for folder, _dirs, names in os.walk(os.path.join(site, pkg)):
            files.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sorted(files)


def parse_all(files: list[str]) -> tuple[float, int]:
    """Seconds to read and parse every file with libcst (files libcst rejects are counted, not timed out)."""
    failed = 0
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        try:
            cst.parse_module(data)
        except Exception:  # noqa: BLE001 - a benchmark counts failures, it does not stop on them
            failed += 1
    return time.perf_counter() - t0, failed


def check(files: list[str], jobs: int) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    res = run_files(files, jobs=jobs)
    elapsed = time.perf_counter() - t0
    counts: dict[str, int] = {}
    for f in res.files:
        counts[f.status] = counts.get(f.status, 0) + 1
    return elapsed, counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subset", type=int, default=0, help="use a fixed random subset of N files (0 = all)")
    p.add_argument("--packages", default=",".join(PACKAGES))
    args = p.parse_args()
    files = package_files(tuple(args.packages.split(",")))
    if args.subset and args.subset < len(files):
        files = sorted(random.Random(0).sample(files, args.subset))
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    print(
        f"files: {len(files)} ({mb:.1f} MB) from {args.packages}; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )

    t_parse, failed = parse_all(files)
    print(f"libcst parse, all files, 1 process:        {t_parse:8.2f} s  ({failed} unparsable)", flush=True)
    t1, counts = check(files, 1)
    print(
        f"tpu-migrate --check, all files, --jobs 1:  {t1:8.2f} s  = {t1 / t_parse:.2f}x parse  {counts}",
        flush=True,
    )
    t2, _ = check(files, 2)
    print(
        f"tpu-migrate --check, all files, --jobs 2:  {t2:8.2f} s  = {t2 / t_parse:.2f}x parse  "
        f"(speed-up {t1 / t2:.2f}x)",
        flush=True,
    )

    res = run_files(files, jobs=2)
    changed = [f.path for f in res.files if f.status == "changed"]
    t_parse_c, _ = parse_all(changed)
    print(f"files that need rewriting: {len(changed)}", flush=True)
    print(f"libcst parse, those files, 1 process:      {t_parse_c:8.2f} s", flush=True)
    c1, _ = check(changed, 1)
    print(
        f"tpu-migrate --check, those, --jobs 1:      {c1:8.2f} s  = {c1 / t_parse_c:.2f}x parse", flush=True
    )
    c2, _ = check(changed, 2)
    print(
        f"tpu-migrate --check, those, --jobs 2:      {c2:8.2f} s  = {c2 / t_parse_c:.2f}x parse  "
        f"(speed-up {c1 / c2:.2f}x)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
