"""``tpu-migrate --check`` over a tree against a bare libcst parse of the same files, in the same run, with the
partial-parse path (migrate.partial) on and off.

The bare parse is one process parsing every file the check reads with ``libcst.parse_module`` (CPU seconds;
it is what the issue's "0.5x a bare parse of all its files" compares with): each ``.py`` file, and each
notebook's code cells joined into one module with IPython magics masked (``--check`` reads notebooks too;
until 2026-12-05 they were checked but left out of the bare parse, which overstated the ratio: on the held-out-2
tree 67 notebooks were about a third of the check's CPU). The ``.py``-only bare parse is printed beside it. Each check runs ``tpu-migrate --check
--no-diff --quiet --jobs N TREE`` as a child process: wall seconds and the CPU seconds of it and its workers.

    python benchmarks/migrate_paths_check.py /tmp/corpus2 --jobs 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _files(root: str, suffix: str = ".py") -> list[str]:
    out = []
    for d, dirs, names in os.walk(root):
        dirs.sort()
        out += [os.path.join(d, n) for n in sorted(names) if n.endswith(suffix)]
    return out


def _notebook_code(text: str) -> str:
    """A notebook's code cells as one module, magics masked (what tpu-migrate parses of it); cells under a
    non-Python cell magic (``%%bash``) are left out, as the tool leaves them."""
    from tpu_workbench.migrate.notebook import _PY_CELL_MAGICS, _mask

    parts: list[str] = []
    for cell in json.loads(text).get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        raw = cell.get("source", "")
        source = "".join(raw) if isinstance(raw, list) else str(raw)
        if source.startswith("%%"):
            first, _, source = source.partition("\n")
            if first.split()[0] not in _PY_CELL_MAGICS:
                continue
        chunk = _mask(source, [])
        parts.append(chunk if chunk.endswith("\n") else chunk + "\n")
    return "".join(parts)


def bare_parse(root: str, notebooks: bool = True) -> tuple[float, int]:
    """CPU seconds to libcst-parse every .py file and (``notebooks``) every notebook's code cells
    (unparsable ones count until they fail), and the number of files."""
    import libcst as cst

    files = _files(root) + (_files(root, ".ipynb") if notebooks else [])
    c0 = time.process_time()
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            cst.parse_module(_notebook_code(text) if f.endswith(".ipynb") else text)
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
    bare_py, n_py = bare_parse(args.root, notebooks=False)
    bare, n = bare_parse(args.root)
    print(
        f"bare libcst parse of {n} files (.py and notebooks' code cells): {bare:.1f} s CPU "
        f"(the {n_py} .py files alone: {bare_py:.1f} s; ratios below are against all files)",
        flush=True,
    )
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
