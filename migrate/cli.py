"""The ``tpu-migrate`` command line (ruff-like): diff by default, --write, --check, reports."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNPARSABLE = 0, 1, 2, 3

DESCRIPTION = """\
Migrate CUDA and torch_xla PyTorch code to the native "tpu" device (TorchTPU).

By default nothing is changed: a unified diff of what would change is printed, followed by one
line per finding, `path:line:col: TPU123 [*] message` ([*] = fixed automatically). Findings that
need a human also get a `# TODO(tpu-migrate TPU123): ...` comment when the file is written.
"""

EPILOG = """\
examples:
  tpu-migrate train.py                   show the diff and the findings, change nothing
  tpu-migrate --write src/ notebooks/    migrate .py files and .ipynb code cells in place
  tpu-migrate --check .                  CI / pre-commit: exit 1 if anything would change or is flagged
  tpu-migrate --select TPU5,TPU6 src/    only the torch_xla rules (codes or prefixes)
  tpu-migrate --ignore TPU102 src/       everything except device-string comparisons
  tpu-migrate --report migration.md .    write a per-rule / per-file summary with a converted %
  cat train.py | tpu-migrate --write -   read stdin, print the migrated source on stdout
  tpu-migrate rules                      list every rule; `tpu-migrate rules TPU101` explains one

exit codes:
  0  nothing to report, or changes shown/written (without --check)
  1  --check: some file would change or has findings
  2  usage or configuration error (bad option, unknown rule code)
  3  some file could not be parsed; it was left untouched (takes precedence over 1)

configuration: [tool.tpu-migrate] in the nearest pyproject.toml, keys select, ignore, exclude
(gitignore-style patterns). Command-line options take precedence. Folders honour .gitignore and skip
.git, virtual environments, site-packages and build folders; symlinks out of the tree are not followed.
"""


def _codes(value: str) -> list[str]:
    return [v.strip().upper() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tpu-migrate", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, or - for standard input")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", "-w", action="store_true", help="apply the changes in place (atomic writes)")
    mode.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 if anything would change or is flagged")
    p.add_argument("--select", type=_codes, metavar="CODES", help="comma-separated rule codes or prefixes")
    p.add_argument("--ignore", type=_codes, metavar="CODES", help="comma-separated rule codes or prefixes")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="gitignore-style pattern to skip (repeatable)")
    p.add_argument("--output-format", choices=("text", "json", "sarif", "github"), default="text",
                   help="format of the findings on stdout (default: text)")
    p.add_argument("--no-diff", action="store_true", help="do not print diffs (text format)")
    p.add_argument("--report", metavar="FILE.md", help="write a Markdown summary (per rule, per file, converted %%)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N", help="worker processes (default: all cores)")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress bar on stderr (auto: when stderr is a terminal and there are many files)")
    p.add_argument("--stdin-filename", default="-", help="name used in findings for standard input")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    return p


def rules_command(argv: Sequence[str]) -> int:
    from .rules import all_rules

    rules = all_rules()
    if not argv:
        width = max(len(r.name) for r in rules)
        for r in rules:
            print(f"{r.code}  {r.name:<{width}}  {r.outcome:<9}  {r.summary}")
        return EXIT_OK
    status = EXIT_OK
    by_code = {r.code: r for r in rules}
    for code in argv:
        rule = by_code.get(code.upper())
        if rule is None:
            print(f"tpu-migrate: unknown rule {code!r}; `tpu-migrate rules` lists them", file=sys.stderr)
            status = EXIT_USAGE
            continue
        print(rule.doc())
    return status


def _progress(total: int, mode: str):
    show = mode == "always" or (mode == "auto" and total >= 50 and sys.stderr.isatty())
    if not show:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="file", file=sys.stderr, leave=False)
    return bar, bar.update


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `tpu-migrate rules | head`
        sys.stderr.close()
        return EXIT_OK


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rules"] and not os.path.exists("rules"):
        return rules_command(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.paths:
        parser.print_usage(sys.stderr)
        print("tpu-migrate: no PATH given (use . for the current folder, - for stdin)", file=sys.stderr)
        return EXIT_USAGE

    from .config import load_config
    from .engine import run_files, stdin_result
    from .rules.base import select_rules

    try:
        first = next((p for p in args.paths if p != "-"), ".")
        cfg = load_config(first)
        select = args.select if args.select is not None else (cfg.select or None)
        ignore = [*cfg.ignore, *(args.ignore or [])] or None  # the command line adds to the config
        select_rules(select, ignore)
    except (ValueError, OSError) as exc:
        print(f"tpu-migrate: {exc}", file=sys.stderr)
        return EXIT_USAGE

    from .discover import discover
    from .results import RunResult

    files_args = [p for p in args.paths if p != "-"]
    missing = [p for p in files_args if not os.path.exists(p)]
    if missing:
        print(f"tpu-migrate: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    result = RunResult([])
    stdin_new = None
    if "-" in args.paths:
        fr, old, new = stdin_result(select, ignore)
        if args.stdin_filename != "-":
            fr.path = args.stdin_filename
        result.files.append(fr)
        stdin_new = new
    files = discover(files_args, [*cfg.exclude, *args.exclude])
    if not files and stdin_new is None:
        if not args.quiet:
            print("tpu-migrate: no Python files or notebooks found; nothing to do", file=sys.stderr)
        return EXIT_OK
    bar, update = _progress(len(files), args.progress)
    try:
        result.files.extend(run_files(files, write=args.write, jobs=args.jobs, select=select, ignore=ignore,
                                      progress=update).files)
    finally:
        if bar is not None:
            bar.close()

    from . import report

    out = sys.stdout
    if stdin_new is not None and args.write:
        out.write(stdin_new)
        out.flush()
        out = sys.stderr  # the migrated source owns stdout
    if args.output_format == "text":
        for f in result.files:
            if f.diff and not args.write and not args.check and not args.no_diff:
                out.write(f.diff)
        for line in report.text_lines(result):
            print(line, file=out)
    elif args.output_format == "json":
        print(report.to_json(result), file=out)
    elif args.output_format == "sarif":
        print(report.to_sarif(result), file=out)
    else:
        text = report.to_github(result)
        if text:
            print(text, file=out)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(result.report_markdown())
    if not args.quiet:
        sys.stdout.flush()
        print(report.summary_line(result, args.write), file=sys.stderr)

    if any(f.status == "unparsable" for f in result.files):
        return EXIT_UNPARSABLE
    if args.check and any(f.status == "changed" or f.diagnostics for f in result.files):
        return EXIT_FINDINGS
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
