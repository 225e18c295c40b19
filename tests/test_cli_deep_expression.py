"""A 10,000-term one-line expression (issue 34): Python itself cannot compile it, and libcst needs minutes on it.
tpu-migrate refuses it in about a second, from Python's own C parser, with one line naming the file — instead of
running until ``--max-file-seconds`` (300 s by default)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpu_workbench.migrate.one_file import _deep_stack
from tpu_workbench.migrate.source import MAX_TREE_DEPTH, UnparsableError, migrate_source, too_deep

BIN = Path(sys.executable).parent


def chain(n: int) -> str:
    return "import torch\nx = torch.zeros(1)\ny = x.cuda() " + "+ 1 " * n + "\n"


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_a_line_too_deep_for_python_is_refused_by_name_in_seconds(tmp_path, n):
    src = tmp_path / "deep.py"
    src.write_text(chain(n))
    before = src.read_bytes()
    started = time.monotonic()
    out = subprocess.run(
        [str(BIN / "tpu-migrate"), "--write", str(src)], capture_output=True, text=True, timeout=120
    )
    took = time.monotonic() - started
    assert out.returncode == 3, out  # a file not migrated (as any unparsable file)
    lines = [ln for ln in out.stdout.splitlines() if "deep.py" in ln]
    assert len(lines) == 1 and f"nested over {MAX_TREE_DEPTH:,} levels deep" in lines[0], out.stdout
    assert "Traceback" not in out.stderr and "1 could not be parsed" in out.stderr
    assert src.read_bytes() == before and took < 20, took  # was: until --max-file-seconds (300 s)


def test_the_depth_limit_sits_between_what_python_compiles_and_what_it_refuses():
    compile(chain(2_000), "ok.py", "exec")  # CPython 3.11 compiles this: so must tpu-migrate migrate it
    assert too_deep(chain(2_000)) is None
    assert too_deep(chain(MAX_TREE_DEPTH)) is not None  # the Expr/BinOp/... levels above the chain count too
    assert too_deep("def f(:\n") is None  # a syntax error: libcst says where, as for every file
    with _deep_stack(), pytest.raises(UnparsableError, match="levels deep"):
        migrate_source(chain(10_000))


def test_a_deep_but_compilable_line_is_still_migrated():
    with _deep_stack():
        result = migrate_source(chain(1_000))
    assert result.changed and 'x.to("tpu")' in result.new_source
