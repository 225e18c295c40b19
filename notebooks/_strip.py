"""Strip what running a notebook adds (outputs, execution counts, widget state), so saved notebooks commit clean.

Two ways to use it (set up once per clone, see README.md):

    git config filter.strip-notebook-outputs.clean "python notebooks/_strip.py --filter"
        # .gitattributes routes notebooks/*.ipynb through it: `git add` stores the stripped notebook while
        # the file you saved in JupyterLab keeps its outputs
    python notebooks/_strip.py notebooks/*.ipynb
        # rewrite files in place; exit status 1 if any changed (usable as a pre-commit hook)

A notebook that is already clean comes out byte for byte as it went in: the JSON is written as nbformat
writes it (sorted keys, one-space indent). Plain ``json``, not nbformat: git runs a clean filter on every
``git add`` and ``git status``, and importing nbformat (its schema validator) can take seconds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def strip(nb: dict) -> dict:
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)  # JupyterLab's timing record
    nb.get("metadata", {}).pop("widgets", None)  # saved widget state
    return nb


def strip_text(text: str) -> str:
    return json.dumps(strip(json.loads(text)), sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--filter"]:
        sys.stdout.write(strip_text(sys.stdin.read()))
        return 0
    changed = []
    for name in argv:
        path = Path(name)
        before = path.read_text(encoding="utf-8")
        after = strip_text(before)
        if after != before:
            path.write_text(after, encoding="utf-8")
            changed.append(name)
    for name in changed:
        print(f"stripped outputs from {name}", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
