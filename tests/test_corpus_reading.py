"""The corpus reading's bookkeeping: a verdict follows its hunk's text, not its line numbers, and goes stale when
the tool's output for that hunk changes (benchmarks/migrate_corpus_reading.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
_spec = importlib.util.spec_from_file_location("migrate_corpus_reading", BENCH / "migrate_corpus_reading.py")
assert _spec is not None and _spec.loader is not None
reading = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = reading  # dataclasses look their module up there
_spec.loader.exec_module(reading)

LINE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30)


def _diff(path: str, start: int, old: list[str], new: list[str], context: str) -> str:
    body = [f" {context}", *(f"-{x}" for x in old), *(f"+{x}" for x in new)]
    return (
        f"--- a/./{path}\n+++ b/./{path}\n@@ -{start},{len(old) + 1} +{start},{len(new) + 1} @@\n"
        + "\n".join(body)
        + f"\n./{path}:{start}:1: TPU101 [*] a finding line ends the hunk\n"
    )


@given(st.integers(1, 5000), st.integers(1, 5000), st.lists(LINE, min_size=1, max_size=4), LINE)
def test_a_hunk_moved_by_an_edit_above_keeps_its_hash(start_a, start_b, lines, context):
    new = [f"{x}  # tpu" for x in lines]
    a = reading.split_hunks("o/r", _diff("m/x.py", start_a, lines, new, context))
    b = reading.split_hunks("o/r", _diff("m/x.py", start_b, lines, new, context))
    assert len(a) == len(b) == 1
    assert a[0].key == b[0].key
    assert a[0].file == "m/x.py"
    assert "TPU101" not in a[0].body  # the findings after the diff are not part of the hunk


@given(st.lists(LINE, min_size=1, max_size=4), LINE, LINE)
def test_a_changed_rewrite_makes_the_verdict_stale(lines, context, other):
    before = reading.split_hunks("o/r", _diff("x.py", 3, lines, ["tpu"], context))
    after = reading.split_hunks("o/r", _diff("x.py", 3, lines, ["tpu", other], context))
    row = {"repo": "o/r", "file": "x.py", "hash": before[0].key, "verdict": "right", "reason": "read"}
    stale, unread, live = reading.compare(after, [row])
    assert stale == [row] and [h.key for h in unread] == [after[0].key] and live == []
    stale, unread, live = reading.compare(before, [row])
    assert stale == [] and unread == [] and live == [row]


def test_two_files_in_one_diff_are_split_apart():
    text = _diff("a.py", 1, ["x = 'cuda'"], ["x = 'tpu'"], "") + _diff(
        "b.py", 9, ["y.cuda()"], ['y.to("tpu")'], ""
    )
    hunks = reading.split_hunks("o/r", text)
    assert [(h.file, h.body.count("\n")) for h in hunks] == [("a.py", 2), ("b.py", 2)]


def test_the_recorded_reading_is_well_formed():
    rows = reading.load_reading(reading.READING)
    assert len(rows) >= 150
    keys = [(r["repo"], r["file"], r["hash"]) for r in rows]
    assert len(keys) == len(set(keys))
    repos = {line.split()[0] for line in (BENCH / "migrate_corpus_fresh.txt").read_text().splitlines()}
    assert {r["repo"] for r in rows} <= repos
    assert all(len(r["hash"]) == 12 and json.dumps(r) for r in rows)
