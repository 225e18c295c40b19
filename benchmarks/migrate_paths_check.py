"""``tpu-migrate --check`` over a tree against a bare libcst parse of the same files, in the same run, with the
partial-parse path (migrate.partial) on and off.

The bare parse is one process parsing every ``.py`` file under the tree with ``libcst.parse_module`` (CPU
seconds; it is what the issue's "0.5x a bare parse" compares with). Each check runs ``tpu-migrate --check
--no-diff --quiet --jobs N TREE`` as a child process: wall seconds and the CPU seconds of it and its workers.

    python benchmarks/migrate_paths_check.py /tmp/corpus2 --jobs 1 2
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def _files(root: str) -> list[str]:
    out = []
    for d, dirs, names in os.walk(root):
        dirs.sort()
        out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    return out


def bare_parse(root: str) -> tuple[float, int]:
    """CPU seconds to libcst-parse every .py file (unparsable ones count until they fail), and the count."""
    import libcst as cst

    files = _files(root)
    c0 = time.process_time()
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            cst.parse_module(text)
        except Exception:  # noqa: BLE001, S112 - a bare parse only times what parses
            continue
    return time.process_time() - c0, len(files)


def check(root: str, jobs: int, whole: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds (the command and its workers) of one --check run, and its exit status."""
    exe = os.path.join(os.path.dirname(sys.executable), "tpu-migrate")
    env = {**os.environ, "TPU_MIGRATE_WHOLE_FILE": "1" if whole else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(
        [exe, "--check", "--no-diff", "--quiet", "--jobs", str(jobs), root],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    ).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = p.parse_args(argv)
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load {os.getloadavg()}"
    )
    bare, n = bare_parse(args.root)
    print(f"bare libcst parse of {n} .py files: {bare:.1f} s CPU", flush=True)
    for jobs in args.jobs:
        for whole in (False, True):
            wall, cpu, rc = check(args.root, jobs, whole)
            print(
                f"--check --jobs {jobs} {'whole-file' if whole else 'partial   '}: wall {wall:6.1f} s ({wall / bare:.2f}x), "
                f"CPU {cpu:6.1f} s ({cpu / bare:.2f}x), exit {rc}, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
