"""The partial-parse path (migrate.partial) against the whole-file path, file by file, over trees of code.

Every ``.py`` and ``.ipynb`` file under the given folders is migrated twice in this process (``TPU_MIGRATE_WHOLE_FILE`` off,
then on); the result (status, new text, diff, every finding, error) must be identical. Prints each file
that differs, the CPU seconds of both paths over the files that pass the prefilter, and how many of them
took the partial path (every file big enough to hide something: ``partial.MIN_BYTES`` is lowered to 0 here).

    python benchmarks/migrate_paths_compare.py /tmp/corpus2 /tmp/corpus /tmp/corpus4
    python benchmarks/migrate_paths_compare.py --groups /tmp/corpus2    # group parsing (migrate.groups) on every file

``--groups`` lowers migrate.groups' thresholds so every file with two movable statements is migrated in groups
(one statement each) and counts the files the group path answered (the others fell back to one parse).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tpu_workbench.migrate import groups, partial, source
from tpu_workbench.migrate.one_file import migrate_text
from tpu_workbench.migrate.source import needs_parse, python_tree


def _files(roots: list[str]) -> list[str]:
    out = []
    for root in roots:
        for d, dirs, names in os.walk(root):
            dirs.sort()
            out += [os.path.join(d, n) for n in sorted(names) if n.endswith((".py", ".ipynb"))]
    return out


def _key(res: object) -> tuple:
    r, text = res  # type: ignore[misc]
    return (
        r.status,
        text,
        r.diff,
        r.error,
        [(d.line, d.col, d.code, d.message, d.fixed, d.outcome) for d in r.diagnostics],
    )


def _run(text: str, path: str, whole: bool) -> tuple[tuple, float]:
    os.environ[partial.WHOLE_FILE_ENV] = "1" if whole else "0"
    c0 = time.process_time()
    res = migrate_text(text, path)
    return _key(res), time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("roots", nargs="+")
    p.add_argument("--groups", action="store_true", help="group parsing on every file it can take")
    args = p.parse_args(argv)
    partial.MIN_BYTES = 0  # (every file that can take the partial path does: the check is for correctness)
    answered: list[bool] = []
    if args.groups:
        groups.GROUP_BYTES, groups.MIN_MOVABLE, groups.MAX_CONTEXT = 1, 0, 10**9
        real = source._migrate_groups

        def spy(*a: object, **k: object) -> object:
            r = real(*a, **k)  # type: ignore[arg-type]
            answered.append(r is not None)
            return r

        source._migrate_groups = spy  # type: ignore[assignment]
    files = _files(args.roots)
    diffs = parsed = took = 0
    cpu = {True: 0.0, False: 0.0}
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            continue
        notebook = f.endswith(".ipynb")  # (its code cells are joined into one module: see migrate.notebook)
        if not notebook and not needs_parse(text):
            continue
        parsed += 1
        tree = None if notebook else python_tree(text)[0]
        took += tree is not None and partial.reduce(text, tree) is not None
        got = {}
        for whole in (False, True):
            got[whole], sec = _run(text, f, whole)
            cpu[whole] += sec
        if got[True] != got[False]:
            diffs += 1
            a, b = got[False], got[True]
            what = [
                n
                for n, x, y in zip(("status", "text", "diff", "error", "findings"), a, b, strict=True)
                if x != y
            ]
            print(f"DIFFERS {f}: {', '.join(what)}", flush=True)
    os.environ.pop(partial.WHOLE_FILE_ENV, None)
    print(
        f"{len(files)} files, {parsed} past the prefilter (notebooks: all), {took} .py took the partial path"
        + (f" ({len(answered)} tried groups, {sum(answered)} answered)" if args.groups else "")
        + f"; differences: {diffs}; "
        f"CPU s partial {cpu[False]:.1f}, whole {cpu[True]:.1f} ({cpu[False] / max(cpu[True], 1e-9):.2f}x); "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
