"""Entry points assess proposes when the user names none: scripts with a ``__main__`` guard and a tests folder.
They are proposals: they run only when the user confirms (``--candidates``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tpu_workbench.bench.assess.workspace import python_files

MAX_SCRIPTS = 5


def _has_main_guard(path: Path) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
                isinstance(n, ast.Constant) and n.value == "__main__" for n in names
            ):
                return True
    return False


def propose(root: Path) -> list[dict]:
    """``[{"kind": "run"|"tests", "command": ..., "why": ...}]``: top-level scripts first, then by depth."""
    out: list[dict] = []
    tests = [d for d in ("tests", "test") if (root / d).is_dir()]
    if tests:
        out.append(
            {"kind": "tests", "command": f"python -m pytest -x -q {tests[0]}", "why": f"a {tests[0]}/ folder"}
        )
    scripts = [
        p
        for p in python_files(root)
        if p.suffix == ".py" and not p.name.startswith(("test_", "setup")) and _has_main_guard(p)
    ]
    scripts.sort(key=lambda p: (len(p.relative_to(root).parts), str(p)))
    for p in scripts[:MAX_SCRIPTS]:
        rel = p.relative_to(root)
        out.append({"kind": "run", "command": f"python {rel}", "why": "a script with a __main__ guard"})
    return out
