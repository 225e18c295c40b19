"""Record what tpu-migrate produces for every file of some trees, and compare a later run with the record.

A speed change must not change any output. ``--save`` writes, per file (``.py`` and ``.ipynb``): the status,
a hash of the new text (the bytes --write would write), every finding (line, col, code, message, fixed,
outcome) and the error with its position. ``--compare`` migrates the same files again and lists every
difference (a file missing on either side counts). Exit status 1 when anything differs.

    python benchmarks/migrate_output_snapshot.py --save /tmp/snap.json /tmp/corpus2 /tmp/corpus
    python benchmarks/migrate_output_snapshot.py --compare /tmp/snap.json /tmp/corpus2 /tmp/corpus
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from tpu_workbench.migrate.one_file import compute_file
from tpu_workbench.migrate.selection import as_rule_set

_SUFFIXES = (".py", ".ipynb")


def files_under(roots: list[str]) -> list[str]:
    """Every .py / .ipynb file under ``roots``, sorted (symlinks to files included, as the CLI does)."""
    found: list[str] = []
    for root in roots:
        if os.path.isfile(root):
            found.append(root)
            continue
        for d, _, names in os.walk(root):
            found.extend(os.path.join(d, n) for n in names if n.endswith(_SUFFIXES))
    return sorted(found)


def record(path: str) -> dict:
    """One file's output: status, hash of the new bytes, findings, error."""
    c = compute_file(path, write=True, rules=as_rule_set(None, None, None))
    r = c.result
    return {
        "status": r.status,
        "new": hashlib.sha256(c.data).hexdigest() if c.data is not None else None,
        "diff": hashlib.sha256(r.diff.encode("utf-8", "surrogatepass")).hexdigest(),
        "findings": [[d.line, d.col, d.code, d.message, d.fixed, d.outcome] for d in r.diagnostics],
        "error": [r.error, r.line, r.col],
    }


def snapshot(roots: list[str], jobs: int) -> dict[str, dict]:
    paths = files_under(roots)
    if jobs <= 1:
        return {p: record(p) for p in paths}
    with ProcessPoolExecutor(jobs) as pool:
        return dict(zip(paths, pool.map(record, paths, chunksize=4), strict=True))


def differences(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """Human-readable lines, one per differing field of a file (or a file on one side only)."""
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            out.append(f"{path}: only in the {'new run' if a is None else 'snapshot'}")
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                if key == "findings":
                    gone = [f for f in a[key] if f not in b[key]]
                    came = [f for f in b[key] if f not in a[key]]
                    out.append(f"{path}: findings differ; before only {gone[:3]}; now only {came[:3]}")
                else:
                    out.append(f"{path}: {key} {a.get(key)!r} -> {b.get(key)!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", metavar="FILE", help="write a snapshot of the output over DIR...")
    mode.add_argument("--compare", metavar="FILE", help="re-run over DIR... and list differences from FILE")
    p.add_argument("roots", nargs="+", metavar="DIR")
    p.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    args = p.parse_args(argv)
    start = time.monotonic()
    now = snapshot(args.roots, args.jobs)
    took = time.monotonic() - start
    changed = sum(1 for r in now.values() if r["status"] == "changed")
    print(f"{len(now)} files ({changed} changed) in {took:.1f} s wall")
    if args.save:
        with open(args.save, "w", encoding="utf-8") as fh:
            json.dump(now, fh, indent=0, sort_keys=True)
        print(f"saved {args.save}")
        return 0
    with open(args.compare, encoding="utf-8") as fh:
        old = json.load(fh)
    diffs = differences(old, now)
    for line in diffs:
        print(line)
    print(f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
