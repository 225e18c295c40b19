"""Where `tpu-migrate --check` spends its CPU on a tree of .py files, against a bare libcst parse of all of them.

One process, CPU seconds (on a shared machine they compare better than wall time). For every file: the prefilter;
for the files it passes: Python's own parse with the depth check (source.python_tree), the bare libcst parse and the
whole migration (migrate_text: parse, rules, flow layer, positions, code, diff). The issue-31 target is
check <= 0.5x the bare parse of ALL files; this shows which share of the gap is the parse of the files that need it
and which is everything after it.

    python benchmarks/bench_migrate_stages.py /tmp/corpus2
    python benchmarks/bench_migrate_stages.py /tmp/corpus2 --profile 40   # + cProfile, 40 rows by cumulative time
    python benchmarks/bench_migrate_stages.py /tmp/corpus2 --check-jobs 1,2  # + `tpu-migrate --check` wall and CPU

``--check-jobs`` runs the real command (``--check --no-diff -q --jobs N --exclude '*.ipynb'``, so it covers the
same .py files as the bare parse) after the stages, and sets its wall and CPU (its processes' user+system time)
against the bare parse's, measured in the same run with the load average printed.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import resource
import subprocess
import sys
import time

import libcst as cst

from tpu_workbench.migrate.one_file import migrate_text
from tpu_workbench.migrate.source import needs_parse, python_tree


def python_files(root: str) -> list[str]:
    found = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".py")]
    return sorted(found)


def _cpu(fn, *args) -> float:
    start = time.process_time()
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - an unparsable file costs what it costs
        pass
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="a folder of .py files")
    p.add_argument("--profile", type=int, default=0, metavar="ROWS", help="also cProfile the migrations")
    p.add_argument("--profile-out", default="", metavar="FILE", help="also write the cProfile stats to FILE")
    p.add_argument(
        "--check-jobs", default="", metavar="N,N", help="also time `tpu-migrate --check` with these --jobs"
    )
    args = p.parse_args(argv)
    texts: list[tuple[str, str]] = []
    for path in python_files(args.root):
        try:
            with open(path, encoding="utf-8") as fh:
                texts.append((path, fh.read()))
        except (OSError, UnicodeDecodeError):
            continue
    total_bytes = sum(len(t) for _, t in texts)
    wall = time.monotonic()
    bare_all = sum(_cpu(cst.parse_module, t) for _, t in texts)
    bare_wall = time.monotonic() - wall
    start = time.process_time()
    passed = [(p, t) for p, t in texts if needs_parse(t)]
    prefilter = time.process_time() - start
    passed_bytes = sum(len(t) for _, t in passed)
    ast_s = sum(_cpu(python_tree, t) for _, t in passed)
    parse_s = sum(_cpu(cst.parse_module, t) for _, t in passed)
    # timed without the profiler (it inflated this figure ~2.5x), then profiled in a second, untimed loop
    migrate_s = sum(_cpu(migrate_text, t, p) for p, t in passed)
    prof = cProfile.Profile() if args.profile or args.profile_out else None
    if prof is not None:
        prof.enable()
        for p, t in passed:
            _cpu(migrate_text, t, p)
        prof.disable()
    print(
        f"# host {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"files {len(texts)} ({total_bytes / 1e6:.2f} MB); bare libcst parse of all: {bare_all:.1f} s CPU")
    print(
        f"prefilter {prefilter:.2f} s: passes {len(passed)} files, {passed_bytes / 1e6:.2f} MB "
        f"({passed_bytes / max(total_bytes, 1):.0%} of the bytes)"
    )
    print(f"  their ast parse + depth check {ast_s:.1f} s; their bare libcst parse {parse_s:.1f} s")
    print(
        f"  their migration {migrate_s:.1f} s = {migrate_s / max(parse_s, 1e-9):.1f}x their parse, "
        f"{(migrate_s + prefilter) / max(bare_all, 1e-9):.2f}x the bare parse of all (target <= 0.5x)"
    )
    if prof is not None and args.profile:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    if prof is not None and args.profile_out:
        prof.dump_stats(args.profile_out)
    if args.check_jobs:
        print(f"bare libcst parse of all: {bare_wall:.1f} s wall, {bare_all:.1f} s CPU (one process)")
        for jobs in (int(j) for j in args.check_jobs.split(",")):
            cpu, took = _check(args.root, jobs)
            print(
                f"tpu-migrate --check --jobs {jobs}: {took:.1f} s wall ({took / max(bare_wall, 1e-9):.2f}x the bare "
                f"parse's wall), {cpu:.1f} s CPU ({cpu / max(bare_all, 1e-9):.2f}x its CPU); "
                f"load {os.getloadavg()[0]:.1f}"
            )
    return 0


def _check(root: str, jobs: int) -> tuple[float, float]:
    """CPU (user+system of the command and its workers) and wall seconds of one `tpu-migrate --check`."""
    exe = os.path.join(os.path.dirname(sys.executable), "tpu-migrate")
    cmd = [exe, "--check", "--no-diff", "-q", "--jobs", str(jobs), "--exclude", "*.ipynb", root]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    took = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, took


if __name__ == "__main__":
    sys.exit(main())
