"""How much of `tpu-migrate --check` an exact "skip this file" test could save (issue 31, lever (a)).

For every .py file the text prefilter passes, runs the whole migration and counts the files that end unchanged
with no diagnostic: those are the only ones a skip may drop without changing --check's output, so their CPU is
the upper bound of any skip test. It also tries the cheap test "a trigger remains once comments are blanked
(tokenize)" and counts how many files it would skip and how many of those the full pass does NOT leave quiet
(a skip there would be a wrong answer). Strings cannot be blanked: device strings ('cuda') are triggers.

    python benchmarks/bench_migrate_skippable.py /tmp/corpus4
"""

from __future__ import annotations

import argparse
import io
import os
import pathlib
import time
import tokenize

from tpu_workbench.migrate.prefilter import needs_parse
from tpu_workbench.migrate.source import migrate_source


def _without_comments(source: str) -> str | None:
    """The source's tokens less its comments, or None when it does not tokenize."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(source).readline)
        return " ".join(t.string for t in toks if t.type != tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=pathlib.Path)
    root = ap.parse_args().root
    files = passed = quiet = skip = wrong_skip = 0
    cpu_all = cpu_quiet = 0.0
    for path in sorted(root.rglob("*.py")):
        try:
            source = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        files += 1
        if not needs_parse(source):
            continue
        passed += 1
        t0 = time.process_time()
        try:
            result = migrate_source(source, str(path))
        except Exception:  # noqa: BLE001 - an unparsable file is reported by --check, never skipped
            continue
        spent = time.process_time() - t0
        cpu_all += spent
        is_quiet = not result.changed and not result.diagnostics
        if is_quiet:
            quiet += 1
            cpu_quiet += spent
        code = _without_comments(source)
        if code is not None and not needs_parse(code):
            skip += 1
            wrong_skip += not is_quiet
    print(
        f"{root}: load {os.getloadavg()[0]:.2f}; {files} .py files, {passed} pass the prefilter, {quiet} end"
    )
    print(f"  unchanged with no diagnostic: {cpu_quiet:.2f} of {cpu_all:.2f} CPU s = upper bound of a skip")
    print(f"  comment-blanking test would skip {skip} files, {wrong_skip} of them NOT quiet")


if __name__ == "__main__":
    main()
