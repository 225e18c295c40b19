"""The hunk-by-hunk reading of tpu-migrate's output on the fresh corpus, kept honest against the current tool.

``migrate_corpus_reading.jsonl`` holds one verdict per changed hunk that a person read: repository, file, a hash of
the hunk's text (its ``-``/``+``/context lines, not its line numbers), ``right`` / ``ugly`` / ``wrong`` and why.
This script splits the current diffs (``migrate_corpus.py --diffs DIR`` writes ``DIR/owner+name.diff``) into hunks
and says which recorded verdicts no longer match the current output (the hunk changed or went away: read it again)
and which current hunks nobody has read; ``--show-unread`` prints those hunks with their hash for reading.

    python benchmarks/migrate_corpus.py --manifest benchmarks/migrate_corpus_fresh.txt --corpus /tmp/corpus2 \\
        --diffs /tmp/corpus2-diffs
    python benchmarks/migrate_corpus_reading.py --diffs /tmp/corpus2-diffs            # exit 1 if a verdict is stale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
READING = HERE / "migrate_corpus_reading.jsonl"
VERDICTS = ("right", "ugly", "wrong")


@dataclass(frozen=True)
class Hunk:
    repo: str
    file: str
    header: str
    body: str

    @property
    def key(self) -> str:
        """Hash of the hunk's text without its line numbers (a hunk shifted by an edit above it is the same)."""
        return hashlib.sha1(f"{self.file}\n{self.body}".encode()).hexdigest()[:12]


def split_hunks(repo: str, diff: str) -> list[Hunk]:
    """The hunks of one repository's text diff (``--- a/``/``+++ b/`` headers, ``@@`` hunks, then findings)."""
    hunks: list[Hunk] = []
    file, header, body = "", "", []

    def close() -> None:
        if header and body:
            hunks.append(Hunk(repo, file, header, "\n".join(body)))

    for line in diff.splitlines():
        if line.startswith("--- a/"):
            close()
            header, body = "", []
        elif line.startswith("+++ b/"):
            file = line[6:].removeprefix("./")
        elif line.startswith("@@"):
            close()
            header, body = line, []
        elif header and line[:1] in (" ", "+", "-") or (header and line == ""):
            body.append(line)
        else:
            close()
            header, body = "", []
    close()
    return hunks


def load_reading(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("verdict") not in VERDICTS or not row.get("reason"):
            raise SystemExit(f"{path.name}:{n}: verdict must be one of {VERDICTS} with a reason")
        rows.append(row)
    return rows


def compare(hunks: list[Hunk], rows: list[dict]) -> tuple[list[dict], list[Hunk], list[dict]]:
    """(stale verdicts, unread hunks, verdicts still matching the current output). A later row on the same hunk
    replaces an earlier one: the hunk's text is unchanged but what it does changed (a helper it calls, a flag
    the tool now adds beside it), so it was read again."""
    rows = list({(r["repo"], r["file"], r["hash"]): r for r in rows}.values())
    current = {(h.repo, h.file, h.key) for h in hunks}
    read = {(r["repo"], r["file"], r["hash"]) for r in rows}
    stale = [r for r in rows if (r["repo"], r["file"], r["hash"]) not in current]
    unread = [h for h in hunks if (h.repo, h.file, h.key) not in read]
    live = [r for r in rows if (r["repo"], r["file"], r["hash"]) in current]
    return stale, unread, live


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--diffs", type=Path, required=True, help="folder of owner+name.diff files (migrate_corpus.py)"
    )
    p.add_argument("--reading", type=Path, default=READING, help="the recorded verdicts (jsonl)")
    p.add_argument("--show-unread", action="store_true", help="print every unread hunk with its hash")
    p.add_argument("--only", action="append", default=[], help="repositories whose name contains this")
    a = p.parse_args(argv)
    hunks = []
    for f in sorted(a.diffs.glob("*.diff")):
        repo = f.stem.replace("+", "/", 1)
        if not a.only or any(o in repo for o in a.only):
            hunks += split_hunks(repo, f.read_text())
    rows = load_reading(a.reading) if a.reading.exists() else []
    if a.only:
        rows = [r for r in rows if any(o in r["repo"] for o in a.only)]
    stale, unread, live = compare(hunks, rows)
    if a.show_unread:
        for h in unread:
            print(f"=== {h.repo} {h.file} {h.key}\n{h.header}\n{h.body}")
    counts = Counter(r["verdict"] for r in live)
    per_repo = Counter(r["repo"] for r in live)
    print(
        f"{len(hunks)} hunks in the current output; {len(live)} read and still current "
        f"({', '.join(f'{v} {counts[v]}' for v in VERDICTS)}); {len(unread)} unread; {len(stale)} stale",
        file=sys.stderr,
    )
    for repo, n in sorted(per_repo.items()):
        print(f"  {repo}: {n} read", file=sys.stderr)
    for r in stale:
        print(f"stale (output changed, read again): {r['repo']} {r['file']} {r['hash']} was {r['verdict']}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
