"""Full OpInfo conformance run of the "tpu" device against CPU (PyTorch's op_db).

    python benchmarks/opinfo_full.py [--dtypes float32,int64,bfloat16] [--max-samples 8] [--json out.json]
        [--only NAME,...] [--write-known]

Prints pass / known-unsupported / failed counts and the float32 pass rate. "failed" = a silent wrong
answer (mismatch), or an error not declared in backend/opinfo_known_unsupported.json, or a declared entry
that now passes (stale: remove it). --write-known rewrites the known-unsupported list from this run's errors
(never from mismatches).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import torch

from tpu_workbench import backend
from tpu_workbench.backend.conformance import (
    KNOWN_UNSUPPORTED_FILE,
    entry_name,
    load_known_unsupported,
    op_db,
    run_entry,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="float32,int64,bfloat16")
    p.add_argument("--max-samples", type=int, default=8)
    p.add_argument("--json", default=None, help="write every outcome here")
    p.add_argument("--only", default=None, help="comma-separated op names")
    p.add_argument("--shard", default=None, help="i/n: run every n-th entry starting at i")
    p.add_argument("--write-known", action="store_true")
    a = p.parse_args(argv)
    backend.register()
    dtypes = [getattr(torch, d) for d in a.dtypes.split(",")]
    known = load_known_unsupported()
    only = set(a.only.split(",")) if a.only else None
    entries = [op for op in op_db() if only is None or op.name in only or entry_name(op) in only]
    if a.shard:
        i, n = (int(v) for v in a.shard.split("/"))
        entries = entries[i::n]
    t0 = time.time()
    outcomes = []
    counts = collections.Counter()
    per_dtype = collections.defaultdict(collections.Counter)
    for op in entries:
        for dt in dtypes:
            print(f"... {entry_name(op)} {dt}", file=sys.stderr, flush=True)
            r = run_entry(op, dt, a.max_samples)
            declared = r.key in known
            if r.status == "pass":
                cat = "stale-known" if declared else "pass"
            elif r.status == "unsupported":
                cat = "known-unsupported" if declared else "failed"
            elif r.status == "mismatch":
                cat = "failed"
            else:
                cat = "skip"
            counts[cat] += 1
            per_dtype[r.dtype][cat] += 1
            outcomes.append({**r.__dict__, "category": cat})
            if cat in ("failed", "stale-known"):
                print(f"{cat:18} {r.status:12} {r.key:50} {r.detail[:160]}", flush=True)
    dt = time.time() - t0
    print(f"\nentries {len(entries)} x dtypes {a.dtypes}  ({dt:.0f} s)")
    for d, c in sorted(per_dtype.items()):
        ran = c["pass"] + c["known-unsupported"] + c["failed"] + c["stale-known"]
        rate = 100.0 * (c["pass"] + c["stale-known"]) / ran if ran else 0.0
        print(
            f"  {d:9} pass {c['pass'] + c['stale-known']:4}  known-unsupported {c['known-unsupported']:4}  "
            f"failed {c['failed']:4}  skip {c['skip']:4}  pass rate {rate:.1f}%"
        )
    mism = sum(1 for o in outcomes if o["status"] == "mismatch")
    print(
        f"TOTAL pass {counts['pass'] + counts['stale-known']}  known-unsupported {counts['known-unsupported']}  "
        f"failed {counts['failed']}  (silent wrong answers: {mism})  skip {counts['skip']}"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(outcomes, f, indent=1)
    if a.write_known:
        new = {
            o["op"] + "|" + o["dtype"]: o["detail"][:200] for o in outcomes if o["status"] == "unsupported"
        }
        if only is None and a.shard is None:
            known = new
        else:
            known = {
                k: v for k, v in known.items() if k not in {o["op"] + "|" + o["dtype"] for o in outcomes}
            }
            known.update(new)
        KNOWN_UNSUPPORTED_FILE.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
        print(f"wrote {len(known)} entries to {KNOWN_UNSUPPORTED_FILE}")
    return 1 if counts["failed"] or counts["stale-known"] else 0


if __name__ == "__main__":
    sys.exit(main())
