"""tpu-migrate on one ever larger generated file: time and peak memory per size (is it linear?).

Each size runs in a fresh Python process (so the peak resident memory is that file's alone) through
``tpu_workbench.migrate.engine.process_file`` (read, parse, rewrite, diff; nothing is written). Half of the generated
functions need two rewrites (``x.cuda()``, ``torch.cuda.synchronize()``), half need none; ``--clean``
generates functions that need none (only the import does), to time the parse-and-walk path alone.

    python benchmarks/bench_migrate_scaling.py                       # 1k … 37k functions (37k ≈ 3.7 MB)
    python benchmarks/bench_migrate_scaling.py --sizes 1000 2000 4000 --timeout 120
    PYTHONPATH=/path/to/other/checkout python benchmarks/bench_migrate_scaling.py   # another version

CPU seconds are the figure to compare on a shared machine (wall time includes waiting for a core);
"per 1k functions" staying flat means linear. Prints one row per size and the host/versions line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

SIZES = (1000, 2000, 4000, 8000, 16000, 37000)

_CHILD = r"""
import json, resource, sys, time
from tpu_workbench.migrate.engine import process_file
import inspect
kw = {}
if "limits" in inspect.signature(process_file).parameters:  # (older versions have no per-file limits)
    from tpu_workbench.migrate.limits import NO_LIMITS
    kw["limits"] = NO_LIMITS  # the benchmark wants the full time
t0, c0 = time.perf_counter(), time.process_time()
r = process_file(sys.argv[1], **kw)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak, "status": r.status, "findings": len(r.diagnostics),
                  "diff_lines": r.diff.count("\n")}))
"""

_BARE_CHILD = r"""
import json, resource, sys, time
import libcst
text = open(sys.argv[1], encoding="utf-8").read()
c0 = time.process_time()
libcst.parse_module(text)
cpu = time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"cpu": cpu, "peak": peak}))
"""


def generate(n: int, rewrites: bool = True) -> str:
    """``n`` small functions; with ``rewrites`` every other one holds two CUDA idioms."""
    out = ["import torch\n", "import torch_xla.core.xla_model as xm\n\n"]
    for i in range(n):
        if rewrites and i % 2 == 0:
            out.append(
                f"def f_{i}(x, scale={i}):\n    y = x.cuda()\n    torch.cuda.synchronize()\n"
                f"    return y * scale + {i}\n\n\n"
            )
        else:
            out.append(
                f"def f_{i}(x, scale={i}):\n    y = x + 1\n    z = y * scale\n"
                f"    return z - {i} if z else None\n\n\n"
            )
    return "".join(out)


def measure(path: str, timeout: float, child: str = _CHILD) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", child, path],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return {"timeout": time.perf_counter() - start}
    except subprocess.CalledProcessError as exc:
        return {
            "error": exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else f"exit {exc.returncode}"
        }
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="numbers of functions")
    p.add_argument("--clean", action="store_true", help="functions that need no rewrite")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per size before giving up")
    p.add_argument(
        "--bare", action="store_true", help="also time a bare libcst parse of each file (its own process)"
    )
    args = p.parse_args(argv)

    from importlib.metadata import version

    from tpu_workbench import migrate

    print(
        f"# host {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, libcst "
        f"{version('libcst')}, migrate from "
        f"{os.path.dirname(migrate.__file__)}, {time.strftime('%Y-%m-%d')}, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"# {'clean functions' if args.clean else 'half of the functions need two rewrites'}; one process per size"
    )
    print(
        f"{'functions':>9} {'MB':>6} {'CPU s':>8} {'wall s':>8} {'CPU s/1k fn':>11} {'peak MiB':>9} "
        f"{'peak B/src B':>12} {'findings':>8}  status"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = os.path.join(tmp, f"gen_{n}.py")
            text = generate(n, rewrites=not args.clean)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            r = measure(path, args.timeout)
            mb = len(text) / 1e6
            if "timeout" in r or "error" in r:
                why = f"gave up after {r['timeout']:.0f} s" if "timeout" in r else r["error"]
                print(
                    f"{n:>9} {mb:>6.2f} {'-':>8} {'-':>8} {'-':>11} {'-':>9} {'-':>12} {'-':>8}  {why}",
                    flush=True,
                )
                continue
            print(
                f"{n:>9} {mb:>6.2f} {r['cpu']:>8.1f} {r['wall']:>8.1f} {r['cpu'] / n * 1000:>11.2f} "
                f"{r['peak'] / 2**20:>9.0f} {r['peak'] / len(text):>12.0f} {r['findings']:>8}  {r['status']}",
                flush=True,
            )
            if args.bare:
                b = measure(path, args.timeout, _BARE_CHILD)
                if "cpu" in b:
                    print(
                        f"{'':>9} bare libcst parse: {b['cpu']:.1f} CPU s, peak {b['peak'] / 2**20:.0f} MiB; "
                        f"migration / parse: {r['cpu'] / b['cpu']:.2f}x CPU, {r['peak'] / b['peak']:.2f}x memory",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
