"""The ``tpu-migrate`` command line (ruff-like): diff by default, --write, --check, reports."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .limits import DEFAULT_LIMITS, Limits, parse_memory, parse_seconds

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNPARSABLE = 0, 1, 2, 3
#: Some file needed migrating and was left as it was (does not parse, over a per-file limit, read-only).
EXIT_NOT_MIGRATED = EXIT_UNPARSABLE
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
#: A file still running after this many seconds gets progress lines on stderr.
SLOW_FILE_S = 3.0

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
  tpu-migrate --output-format json . > findings.json   machine-readable findings (progress stays on stderr)
  tpu-migrate --max-file-seconds 60 --max-file-memory 2G gen/   skip files that need more, untouched
  cat train.py | tpu-migrate --write -   read stdin, print the migrated source on stdout
  tpu-migrate rules                      list every rule; `tpu-migrate rules TPU101` explains one

exit codes:
  0    nothing to report, or changes shown/written (without --check); also no files found
  1    --check: some file would change or has findings
  2    usage or configuration error (bad option or value, unknown rule code or config key, a missing
       path, a named symlink leading out of its folder, a --report that cannot be written); nothing was
       changed
  3    some file was left untouched although it needed migrating: it does not parse (a notebook that
       is not one included), it ran past a per-file limit, or it is read-only (takes precedence over
       1); the other files were migrated. Also: the --report could not be written (disk full)
  130  interrupted (Ctrl-C): files already written stay written, no file is half-written; the
       summary says how many were done

safety: every file is either old or new, never half-written; read-only files are reported and not
written; mode, owner, group and hard links are kept. A file still running after a few seconds shows
its stage on stderr; one past --max-file-seconds / --max-file-memory (default 300 s, 4G) is skipped
and left untouched.

configuration: [tool.tpu-migrate] in the nearest pyproject.toml, keys select, ignore, exclude
(gitignore-style patterns), max-file-seconds, max-file-memory. Command-line options take precedence.
Folders honour .gitignore and skip .git, virtual environments, site-packages and build folders; symlinks
are not followed by the walk, and a named one (or a link on its way) only to a place inside the
folder that holds the link, unless --follow-symlinks. Temporary files a killed run left
(.tpu-migrate-*.tmp, over a minute old) are removed by the next --write run; safety copies of an
interrupted in-place write are reported, never removed.
"""


def _codes(value: str) -> list[str]:
    return [v.strip().upper() for v in value.split(",") if v.strip()]


def _limit(parse):
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__.replace("parse_", "")  # argparse names it in "invalid ... value"
    return convert


_UNSET = object()


class _Parser(argparse.ArgumentParser):
    """Errors in one line naming the argument (the usage block is for --help)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _report_file(text: str) -> str:
    """--report checked before any file is migrated: a report that cannot be written must not fail a run
    after every file was rewritten."""
    path = os.path.abspath(text) if text else ""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name")
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if os.path.exists(path) and not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular file")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(
            f"folder {os.path.dirname(text) or '.'!r} of {text!r} does not exist"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"folder {os.path.dirname(text) or '.'!r} is not writable")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tpu-migrate",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, or - for standard input")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", "-w", action="store_true", help="apply the changes in place (atomic writes)")
    mode.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if anything would change or is flagged"
    )
    mode.add_argument(
        "--diff",
        action="store_true",
        help="print the diff and change nothing (the default; accepted as in ruff)",
    )
    p.add_argument(
        "--select",
        type=_codes,
        metavar="CODES",
        help="only these rules: comma-separated codes or prefixes (TPU101, TPU5, ALL)",
    )
    p.add_argument(
        "--ignore",
        type=_codes,
        metavar="CODES",
        help="not these rules (added to the configured ignore list): codes or prefixes",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="gitignore-style pattern to skip (repeatable)",
    )
    p.add_argument(
        "--output-format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="format of the findings on stdout (default: text)",
    )
    p.add_argument("--no-diff", action="store_true", help="do not print diffs (text format)")
    p.add_argument(
        "--report",
        type=_report_file,
        metavar="FILE.md",
        help="write a Markdown summary (per rule, per file, converted %%)",
    )
    p.add_argument(
        "--jobs", "-j", type=int, default=None, metavar="N", help="worker processes (default: all cores)"
    )
    p.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr (auto: when stderr is a terminal and there are many files)",
    )
    p.add_argument(
        "--max-file-seconds",
        type=_limit(parse_seconds),
        metavar="S",
        default=_UNSET,
        help="per-file time limit: a file still running after S seconds is skipped and left untouched "
        "(300, 90s, 10m; 0: none; default 300)",
    )
    p.add_argument(
        "--max-file-memory",
        type=_limit(parse_memory),
        metavar="SIZE",
        default=_UNSET,
        help="per-file memory limit (4G, 512M; 0: none; default 4G): a file that needs more is skipped "
        "and left untouched (Linux)",
    )
    p.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="follow a named symlink even when it leads out of its folder (the walk never follows them)",
    )
    p.add_argument("--stdin-filename", default="-", help="name used in findings for standard input")
    p.add_argument(
        "--quiet", "-q", action="store_true", help="no summary line and no progress lines on stderr"
    )
    return p


def rules_command(argv: Sequence[str]) -> int:
    from .rules import all_rules  # lazy: startup

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
            print(
                f"tpu-migrate: error: unknown rule {code!r}; `tpu-migrate rules` lists them", file=sys.stderr
            )
            status = EXIT_USAGE
            continue
        print(rule.doc())
    return status


def _progress(total: int, mode: str):
    show = mode == "always" or (mode == "auto" and total >= 50 and sys.stderr.isatty())
    if not show:
        return None, None
    from tqdm import tqdm  # lazy: heavy

    bar = tqdm(total=total, unit="file", file=sys.stderr, leave=False)
    return bar, bar.update


class _SlowFiles:
    """Progress lines on stderr for a file still running after a few seconds: its stage (and statements
    done in the rewrite), at most one line every few seconds per file."""

    EVERY_S = 5.0

    def __init__(self, bar) -> None:
        self.bar = bar
        self.last: dict[str, tuple[str, float]] = {}

    def __call__(self, path: str, text: str, elapsed: float) -> None:
        if text in ("done", "stopped"):
            if path in self.last:
                self._say(
                    f"tpu-migrate: {path}: {'done in' if text == 'done' else 'stopped after'} {elapsed:.0f} s"
                )
                del self.last[path]
            return
        if elapsed < SLOW_FILE_S:
            return
        stage = text.split(" ", 1)[0]
        prev = self.last.get(path)
        if prev is not None and prev[0] == stage and elapsed - prev[1] < self.EVERY_S:
            return
        self.last[path] = (stage, elapsed)
        self._say(f"tpu-migrate: {path}: {text} ({elapsed:.0f} s)")

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `tpu-migrate rules | head`
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:  # before any file was done (discovery, start-up)
        print(
            "tpu-migrate: interrupted (Ctrl-C) before any file was migrated; nothing was changed",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _limits(args: argparse.Namespace, cfg) -> Limits:
    seconds = (
        args.max_file_seconds
        if args.max_file_seconds is not _UNSET
        else (
            parse_seconds(cfg.max_file_seconds)
            if cfg.max_file_seconds is not None
            else DEFAULT_LIMITS.seconds
        )
    )
    memory = (
        args.max_file_memory
        if args.max_file_memory is not _UNSET
        else (parse_memory(cfg.max_file_memory) if cfg.max_file_memory is not None else DEFAULT_LIMITS.memory)
    )
    return Limits(seconds, memory)


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rules"] and not os.path.exists("rules"):
        return rules_command(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.paths:
        print(
            "tpu-migrate: error: no PATH given (use . for the current folder, - for stdin; see tpu-migrate --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE

    from .config import load_config  # lazy: startup
    from .discover import OutsideTree, check_named, discover  # lazy: startup
    from .engine import run_files, stdin_result  # lazy: startup
    from .results import RunResult  # lazy: startup
    from .selection import resolve  # lazy: startup

    files_args = [p for p in args.paths if p != "-"]
    try:
        cfg = load_config(files_args[0] if files_args else ".")
        select = args.select if args.select is not None else (cfg.select or None)
        ignore = [*cfg.ignore, *(args.ignore or [])] or None  # the command line adds to the config
        rules = resolve(select, ignore)
        limits = _limits(args, cfg)
        missing = [p for p in files_args if not os.path.exists(p)]
        if missing:
            raise ValueError(f"no such file or folder: {', '.join(missing)}")
        check_named(files_args, args.follow_symlinks)
    except (ValueError, OSError, OutsideTree) as exc:
        print(f"tpu-migrate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    result = RunResult([])
    stdin_new = None
    if "-" in args.paths:
        fr, new = stdin_result(rules, args.stdin_filename)
        result.files.append(fr)
        stdin_new = new
    files = discover(files_args, [*cfg.exclude, *args.exclude])
    if not files and stdin_new is None:
        if not args.quiet:
            print("tpu-migrate: no Python files or notebooks found; nothing to do", file=sys.stderr)
        return EXIT_OK
    _leftovers(files, files_args, args)
    bar, update = _progress(len(files), args.progress)
    slow = _SlowFiles(bar) if args.progress != "never" and not args.quiet else None
    try:
        run = run_files(
            files,
            write=args.write,
            jobs=args.jobs,
            rules=rules,
            progress=update,
            on_stage=slow,
            limits=limits,
            named=files_args,
        )
    finally:
        if bar is not None:
            bar.close()
    result.files.extend(run.files)
    result.interrupted = run.interrupted
    _print_results(args, result, stdin_new)

    if result.interrupted:
        return EXIT_INTERRUPTED
    if getattr(args, "report_failed", False) or any(
        f.status in ("unparsable", "over-limit", "not-writable") for f in result.files
    ):
        return EXIT_NOT_MIGRATED
    if args.check and any(f.status == "changed" or f.diagnostics for f in result.files):
        return EXIT_FINDINGS
    return EXIT_OK


def _leftovers(files: Sequence[str], named: Sequence[str], args: argparse.Namespace) -> None:
    """Temporary files a killed run left beside the files of this one: removed (--write) or reported."""
    from .fileio import find_leftovers  # lazy: startup

    folders = [os.path.dirname(os.path.abspath(f)) for f in files]
    folders += [os.path.abspath(p) for p in named if os.path.isdir(p)]
    found = find_leftovers(folders, remove=args.write)
    if found.removed and not args.quiet:
        print(
            f"tpu-migrate: removed {len(found.removed)} temporary file(s) an interrupted run left: "
            + ", ".join(os.path.relpath(p) for p in found.removed[:5])
            + (" ..." if len(found.removed) > 5 else ""),
            file=sys.stderr,
        )
    for path, why in found.kept:
        print(f"tpu-migrate: warning: {os.path.relpath(path)}: {why}", file=sys.stderr)


def _print_results(args: argparse.Namespace, result, stdin_new: bytes | None) -> None:
    from . import report  # lazy: startup

    out = sys.stdout
    if stdin_new is not None and args.write:
        out.flush()
        buffer = getattr(out, "buffer", None)
        if buffer is not None:
            buffer.write(stdin_new)
        else:
            out.write(stdin_new.decode("utf-8", "surrogateescape"))
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
        from .fileio import write_atomic  # lazy: startup

        try:
            write_atomic(args.report, report.markdown_report(result).encode("utf-8"))
        except OSError as exc:
            print(
                f"tpu-migrate: the report {args.report} was not written: {exc.strerror or exc}",
                file=sys.stderr,
            )
            args.report_failed = True
    if not args.quiet or result.interrupted:
        sys.stdout.flush()
        print(report.summary_line(result, args.write), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
