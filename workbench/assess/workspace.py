"""The input check and the copies: assess never runs or writes anything in the user's tree."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError

#: not copied: version control, environments and caches (big, and nothing to migrate)
SKIP = {".git", ".hg", ".svn", ".venv", "venv", "env", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox"}  # fmt: skip


def check_input(path: str | Path) -> Path:
    """The repository folder, resolved; a clear error when it is not a folder or holds no Python."""
    p = Path(path).expanduser()
    if not p.exists():
        raise WorkbenchError(f"{path}: no such folder")
    if not p.is_dir():
        raise WorkbenchError(f"{path}: not a folder (assess takes a repository's root folder)")
    if not any(True for _ in python_files(p)):
        raise WorkbenchError(f"{path}: holds no Python (.py or .ipynb) file")
    return p.resolve()


def python_files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        for name in sorted(filenames):
            if name.endswith((".py", ".ipynb")):
                yield Path(dirpath) / name


def copy_tree(src: Path, dest: Path) -> Path:
    """A copy of ``src`` at ``dest`` without symlinks leading out (they are copied as links, not followed)."""
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(*SKIP))
    return dest


def tree_digest(root: str | Path) -> str:
    """SHA-256 over every file's relative path, mode and bytes (links: their target): equal digests, equal trees."""
    h = hashlib.sha256()
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(root)).encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
                continue
            h.update(oct(p.stat().st_mode).encode())
            h.update(p.read_bytes())
    return h.hexdigest()
