"""The style CI holds, inside the test command: ``ruff check`` and ``ruff format --check`` over the whole tree
(the rules and exclusions are pyproject.toml's [tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("ruff is not installed: pip install -e '.[dev]'")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_is_clean() -> None:
    out = _ruff("check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    out = _ruff("format", "--no-cache", "--check", ".")
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-4000:] + out.stderr[-2000:]
