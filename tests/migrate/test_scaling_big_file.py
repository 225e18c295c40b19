"""A big generated file: the diff is the one difflib would print, and the stages and the rewrite's
statement counts are reported as the file goes (the time and memory figures per size are in
benchmarks/bench_migrate_scaling.py, not in timed asserts)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tpu_workbench.migrate import migrate_source
from tpu_workbench.migrate.limits import STAGES, Watch
from tpu_workbench.migrate.one_file import unified_diff

ROOT = Path(__file__).resolve().parents[2]


def _generated(n: int) -> str:
    out = ["import torch\n\n"]
    for i in range(n):
        body = "    y = x.cuda()\n    torch.cuda.synchronize()\n" if i % 2 == 0 else "    y = x + 1\n"
        out.append(f"def f_{i}(x):\n{body}    return y * {i}\n\n\n")
    return "".join(out)


def _pairs():
    """(old, new) texts: the example projects and their golden migrations, and a generated file with
    changes spread all over it."""
    for before in sorted((ROOT / "examples").glob("*/*.py")):
        after = ROOT / "tests" / "migrate" / "golden" / before.parent.name / before.name
        if after.exists():
            yield before.parent.name, before.read_text(), after.read_text()
    src = _generated(300)
    yield "generated", src, migrate_source(src).new_source


@pytest.mark.parametrize(
    ("name", "old", "new"), list(_pairs()), ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None
)
def test_diff_is_the_one_difflib_prints(name, old, new):
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert unified_diff(old, new, name) == "".join(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))


class _Recorder(Watch):
    def __init__(self) -> None:
        self.stages: list[str] = []
        self.ticks: list[tuple[int, int]] = []

    def stage(self, name: str) -> None:
        self.stages.append(name)

    def tick(self, done: int, total: int) -> None:
        self.ticks.append((done, total))


def test_stages_and_statement_counts_are_reported_in_order():
    src = _generated(200)
    rec = _Recorder()
    res = migrate_source(src, "gen.py", watch=rec)
    assert res.changed and len(res.diagnostics) == 200
    assert rec.stages == [s for s in STAGES if s in rec.stages]  # in the documented order
    assert rec.stages[:4] == ["parsing", "resolving names", "rewriting", "locating findings"]
    total = 1 + 200  # the import, then each function
    assert rec.ticks == [(i, total) for i in range(1, total + 1)]


def test_a_file_with_nothing_to_rewrite_stops_after_locating_findings():
    rec = _Recorder()
    assert not migrate_source("import torch\nok = 1\nd = torch.device\n", watch=rec).changed
    assert "generating code" not in rec.stages
