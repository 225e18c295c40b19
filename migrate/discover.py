"""Find the files to migrate: honours .gitignore, skips VCS/venv/build folders, stays inside the tree."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pathspec

SUFFIXES = (".py", ".pyi", ".ipynb")
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".venv",
        "venv",
        ".env",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        "node_modules",
        "site-packages",
        "dist-packages",
        "build",
        "dist",
        ".eggs",
        "__pypackages__",
    }
)


#: Build outputs by name, unless the folder is a Python package.
_OUTPUT_DIRS = frozenset({"build", "dist"})


def _is_venv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.exists(
        os.path.join(path, "conda-meta")
    )


def _load_gitignore(folder: str) -> pathspec.PathSpec | None:
    gi = os.path.join(folder, ".gitignore")
    if not os.path.isfile(gi):
        return None
    with open(gi, encoding="utf-8", errors="replace") as fh:
        return pathspec.GitIgnoreSpec.from_lines(fh)


def walk(root: str, exclude: Iterable[str] = ()) -> Iterator[str]:
    """Python files and notebooks under ``root``, sorted, without following symlinks out of it."""
    excl = pathspec.GitIgnoreSpec.from_lines(list(exclude)) if exclude else None
    # (folder, spec) pairs: a .gitignore applies to paths relative to its own folder.
    specs: list[tuple[str, pathspec.PathSpec]] = []
    for parent in _git_parents(root):
        spec = _load_gitignore(parent)
        if spec is not None:
            specs.append((parent, spec))

    def ignored(path: str, is_dir: bool) -> bool:
        for folder, spec in specs:
            rel = os.path.relpath(path, folder)
            if rel.startswith(".."):
                continue
            rel = rel.replace(os.sep, "/") + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
        if excl is not None:
            rel = os.path.relpath(path, root).replace(os.sep, "/") + ("/" if is_dir else "")
            if excl.match_file(rel):
                return True
        return False

    for folder, dirs, files in os.walk(root, followlinks=False):
        spec = _load_gitignore(folder)
        if spec is not None:
            specs.append((folder, spec))
        keep = []
        for d in sorted(dirs):
            full = os.path.join(folder, d)
            if d in _OUTPUT_DIRS and os.path.isfile(os.path.join(full, "__init__.py")):
                pass  # a package of the project named dist or build (mmengine.dist), not a build's output
            elif d in SKIP_DIRS or d.endswith(".egg-info") or os.path.islink(full) or _is_venv(full):
                continue
            if ignored(full, True):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            if not f.endswith(SUFFIXES):
                continue
            full = os.path.join(folder, f)
            if os.path.islink(full):  # an alias of a file found anyway, or a way out of the tree
                continue
            if not os.path.isfile(full) or ignored(full, False):
                continue
            yield full


def _git_parents(root: str) -> list[str]:
    """Folders from the enclosing git work tree (if any) down to ``root``: their .gitignore files apply."""
    root_abs = Path(os.path.abspath(root))
    chain = [root_abs, *root_abs.parents]
    for i, p in enumerate(chain):
        if (p / ".git").exists():
            return [str(q) for q in reversed(chain[: i + 1])][:-1]
    return []


class OutsideTree(ValueError):
    """A path named on the command line leads, through a symlink, out of the tree it is named in."""


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([path, root]) == root


def check_named(paths: Iterable[str], follow_symlinks: bool = False) -> None:
    """The walk never follows a symlink; a named path may, but only to a place inside the folder that holds
    the link (``follow_symlinks`` lifts that): ``tpu-migrate --write src/*`` must not write through
    ``src/l.py -> ../elsewhere.py``. Every link on the way is checked (``src/sub/x.py`` with ``sub`` a link).
    Raises :class:`OutsideTree` naming the link and where it leads."""
    if follow_symlinks:
        return
    for p in paths:
        if not os.path.exists(p) or os.path.realpath(p) == os.path.abspath(p):
            continue  # no symlink on the way
        for link in _links_on_the_way(p):
            holder = os.path.dirname(link)
            if not _inside(link, holder):
                raise OutsideTree(
                    f"{p} leads through the symlink {link} to {os.path.realpath(link)}, outside "
                    f"{os.path.realpath(holder)}; not followed (name the real path, or pass --follow-symlinks)"
                )


def _links_on_the_way(path: str) -> list[str]:
    """The symlinks among the prefixes of ``path`` as it was typed (``a``, ``a/b``, ``a/b/c.py``)."""
    parts = Path(path).parts
    prefixes = [os.path.join(*parts[: i + 1]) for i in range(len(parts))]
    return [os.path.abspath(q) for q in prefixes if os.path.islink(q)]


def _identity(path: str) -> tuple[int, int] | str:
    """One key per file on disk: hard links and symlinks to one file are one file (migrated once)."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


def discover(paths: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Expand files and folders into a sorted list of files, each file on disk once (explicit files always
    kept, unless they name a file already listed)."""
    out: list[str] = []
    seen: set[tuple[int, int] | str] = set()
    exclude = list(exclude)
    for p in paths:
        found = [p] if os.path.isfile(p) else list(walk(p, exclude)) if os.path.isdir(p) else []
        for f in found:
            key = _identity(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out
