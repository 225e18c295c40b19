"""tpu-migrate on real repositories: --check, --write, a second --write; every output parsed; residue counted.

The corpus is a manifest of public repositories at fixed commits (``migrate_corpus.txt``: one
``owner/name commit`` per line; their code is never committed here). Each repository is copied to a
scratch folder and migrated there exactly as a user would (``python -m tpu_workbench.migrate.cli`` with ``--check``,
then ``--write`` twice); the script prints one row per repository:

* files / parsed: ``.py`` + ``.ipynb`` files, and how many the prefilter let through;
* changed: files the first ``--write`` changed; findings by outcome (rewritten / warned / flagged);
* 2nd write: files the second ``--write`` changed (must be 0: one run reaches the fixed point);
* bad parse: migrated files that no longer parse (``ast`` and libcst) although the original did;
* residue: code lines (comments stripped) still holding ``torch_xla``, ``.cuda(``, a ``"cuda"`` literal,
  ``torch.cuda.``; TODO comments added.

    python benchmarks/migrate_corpus.py --mirror /work/.mirror --extract /tmp/corpus   # from bare git dirs
    python benchmarks/migrate_corpus.py --corpus /tmp/corpus --diffs /tmp/corpus-diffs  # keep the diffs

``--corpus DIR`` expects ``DIR/owner+name/`` trees (what ``--extract`` writes); ``--only`` restricts the
run to some repositories (substring of the name).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = HERE / "migrate_corpus.txt"
SOURCE_SUFFIXES = (".py", ".ipynb")

#: Idioms that a migrated file should no longer hold in code (comments and TODO lines are not code).
RESIDUE = {
    "torch_xla": re.compile(r"\btorch_xla\b"),
    ".cuda(": re.compile(r"\.cuda\("),
    '"cuda"': re.compile(r"""['"]cuda(?::\d+)?['"]"""),
    "torch.cuda.": re.compile(r"\btorch\.cuda\."),
}
TODO = re.compile(r"#\s*TODO\(tpu-migrate TPU\d+\)")


def read_manifest(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, commit = line.split()
            out.append((name, commit))
    return out


def extract(mirror: Path, dest: Path, repos: list[tuple[str, str]]) -> None:
    """Copy the .py/.ipynb files of each repository at its commit out of a bare git mirror."""
    for name, commit in repos:
        git_dir = mirror / name.replace("/", "+") / "repo"
        if (git_dir / ".git").is_dir():  # (a mirror the fetch tool left as a checkout)
            git_dir = git_dir / ".git"
        target = dest / name.replace("/", "+")
        if target.exists():
            continue
        listing = (
            subprocess.run(
                ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit],
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        blobs = []
        for entry in listing:
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob" and mode != "120000" and path.endswith(SOURCE_SUFFIXES):
                blobs.append((sha, path))
        cat = subprocess.Popen(
            ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert cat.stdin is not None and cat.stdout is not None
        for sha, path in blobs:
            cat.stdin.write(sha.encode() + b"\n")
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if len(header) < 3 or header[1] == b"missing":
                continue
            data = cat.stdout.read(int(header[2]))
            cat.stdout.read(1)
            out = target / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        cat.stdin.close()
        cat.wait()
        print(f"extracted {name}@{commit[:10]}: {len(blobs)} files", file=sys.stderr)


@dataclass
class Row:
    name: str
    commit: str
    files: int = 0
    parsed: int = 0
    changed: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {"rewritten": 0, "warned": 0, "flagged": 0})
    second: int = 0
    second_files: list[str] = field(default_factory=list)
    bad_parse: list[str] = field(default_factory=list)
    unparsable: int = 0
    residue: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESIDUE, 0))
    todos: int = 0
    seconds: float = 0.0


#: The folder holding the ``migrate`` package that is run (``--code``: e.g. an older snapshot to compare).
CODE = [ROOT]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(CODE[0])}


def _cli(args: list[str], cwd: Path) -> tuple[int, dict]:
    cmd = [
        sys.executable,
        "-m",
        "tpu_workbench.migrate.cli",
        "--output-format",
        "json",
        "-q",
        "--jobs",
        "2",
        *args,
    ]
    env = _env()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    try:
        data = json.loads(out.stdout) if out.stdout.strip() else {}
    except json.JSONDecodeError:
        data = {"raw": out.stdout}
    _check_ran(out, cwd)
    return out.returncode, data


def _check_ran(out: subprocess.CompletedProcess, cwd: Path) -> None:
    """Stop on a run that failed: an exit status the CLI does not give, a traceback, or a failure without output
    (an interpreter that died importing the tool, or found no tool, exits 1, the status of "would change": read
    as such, every row said 0 changed)."""
    failed = out.returncode not in (0, 1, 3) or "Traceback (most recent call last)" in out.stderr
    if failed or (out.returncode != 0 and not out.stdout.strip()):  # (no output: `No module named ...`)
        raise SystemExit(f"tpu-migrate failed ({out.returncode}) in {cwd}:\n{out.stderr[-3000:]}")


def _sources(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in _sources(tree)}


def _code_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        stripped = line.split("#", 1)[0] if "#" in line else line
        if stripped.strip():
            out.append(stripped)
    return out


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        cst.parse_module(text)
    except Exception:  # noqa: BLE001 - any failure is "does not parse"
        return False
    return True


def _notebook_code(text: str) -> str:
    try:
        nb = json.loads(text)
    except json.JSONDecodeError:
        return ""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    src = []
    for c in cells:
        if c.get("cell_type") == "code":
            body = c.get("source", "")
            body = "".join(body) if isinstance(body, list) else body
            src.append("\n".join(ln for ln in body.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    return "\n".join(src)


def run_repo(name: str, commit: str, tree: Path, diffs: Path | None) -> Row:
    row = Row(name, commit)
    with tempfile.TemporaryDirectory(prefix="migrate-corpus-") as tmp:
        work = Path(tmp) / name.replace("/", "+")
        shutil.copytree(tree, work, symlinks=True)
        before = _snapshot(work)
        row.files = len(before)
        t0 = time.perf_counter()
        _rc, check = _cli(["--check", "."], work)
        files = check.get("files", []) if isinstance(check, dict) else []
        row.parsed = sum(1 for f in files if f.get("status") != "skipped")
        row.unparsable = sum(1 for f in files if f.get("status") == "unparsable")
        for f in files:
            for d in f.get("diagnostics", []):
                row.outcomes[d["outcome"]] = row.outcomes.get(d["outcome"], 0) + 1
        if diffs is not None:
            _rc, shown = _cli_text(work)
            diffs.mkdir(parents=True, exist_ok=True)
            (diffs / f"{name.replace('/', '+')}.diff").write_text(shown)
        _cli(["--write", "."], work)
        once = _snapshot(work)
        _cli(["--write", "."], work)
        twice = _snapshot(work)
        row.seconds = time.perf_counter() - t0
        row.changed = sum(1 for k in once if once[k] != before.get(k))
        row.second_files = sorted(k for k in twice if twice[k] != once.get(k))
        row.second = len(row.second_files)
        for rel, data in once.items():
            if data == before.get(rel):
                continue
            text = data.decode("utf-8", "replace")
            old = before[rel].decode("utf-8", "replace")
            code_new, code_old = (
                (text, old) if rel.endswith(".py") else (_notebook_code(text), _notebook_code(old))
            )
            if _parses(code_old) and not _parses(code_new):
                row.bad_parse.append(rel)
            row.todos += len(TODO.findall(text))
            for key, rx in RESIDUE.items():
                row.residue[key] += sum(1 for ln in _code_lines(code_new) if rx.search(ln))
    return row


def _cli_text(cwd: Path) -> tuple[int, str]:
    """The default run (diffs and findings as text), for reading hunks."""
    cmd = [sys.executable, "-m", "tpu_workbench.migrate.cli", "-q", "--jobs", "2", "."]
    env = _env()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    _check_ran(out, cwd)
    return out.returncode, out.stdout


def print_table(rows: list[Row]) -> None:
    head = [
        "repository",
        "commit",
        "files",
        "parsed",
        "changed",
        "rewr",
        "warn",
        "flag",
        "2nd write",
        "bad parse",
        "unparsable",
        "torch_xla",
        ".cuda(",
        '"cuda"',
        "torch.cuda.",
        "TODOs",
        "s",
    ]
    lines = [head]
    for r in rows:
        lines.append(
            [
                r.name,
                r.commit[:10],
                r.files,
                r.parsed,
                r.changed,
                r.outcomes["rewritten"],
                r.outcomes["warned"],
                r.outcomes["flagged"],
                r.second,
                len(r.bad_parse),
                r.unparsable,
                *r.residue.values(),
                r.todos,
                f"{r.seconds:.0f}",
            ]
        )
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    print("| " + " | ".join(str(c).ljust(w) for c, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in lines[1:]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    for r in rows:
        for f in r.second_files:
            print(f"second --write changed {r.name}: {f}")
        for f in r.bad_parse:
            print(f"migrated file does not parse {r.name}: {f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument("--manifest", type=Path, default=MANIFEST, help="owner/name commit per line")
    p.add_argument("--corpus", type=Path, help="folder holding owner+name/ trees")
    p.add_argument("--mirror", type=Path, help="folder of bare git mirrors (owner+name/repo) to extract from")
    p.add_argument(
        "--extract", type=Path, metavar="DIR", help="extract the manifest's trees into DIR, then run"
    )
    p.add_argument(
        "--only", action="append", default=[], help="run only repositories whose name contains this"
    )
    p.add_argument("--diffs", type=Path, help="write each repository's first-run diff into this folder")
    p.add_argument("--code", type=Path, default=ROOT, help="folder holding the migrate package to run")
    a = p.parse_args(argv)
    CODE[0] = a.code.resolve()
    repos = read_manifest(a.manifest)
    if a.only:
        repos = [(n, c) for n, c in repos if any(o in n for o in a.only)]
    corpus = a.corpus
    if a.extract is not None:
        if a.mirror is None:
            p.error("--extract needs --mirror")
        extract(a.mirror, a.extract, repos)
        corpus = a.extract
    if corpus is None:
        p.error("give --corpus DIR (or --mirror M --extract DIR)")
    rows = []
    for name, commit in repos:
        tree = corpus / name.replace("/", "+")
        if not tree.is_dir():
            print(f"skipped {name}: {tree} not found", file=sys.stderr)
            continue
        row = run_repo(name, commit, tree, a.diffs)
        rows.append(row)
        print(
            f"done {name}: {row.files} files, {row.changed} changed, second --write changed {row.second}, "
            f"bad parse {len(row.bad_parse)} ({row.seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    print_table(rows)
    bad = sum(r.second + len(r.bad_parse) for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
