"""A notebook saved in JupyterLab (outputs, execution counts, widget state) commits without them: through the
git clean filter named in .gitattributes, and through ``notebooks/_strip.py FILES`` (pre-commit style)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "notebooks" / "04_tco.ipynb"


def _executed(path: Path) -> str:
    """The notebook as JupyterLab saves it after a run."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="hello\n"),
            nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="}),
        ]
        cell.metadata["execution"] = {"iopub.execute_input": "2026-12-01T00:00:00Z"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nbformat.writes(nb) + "\n"


def test_git_add_stores_the_notebook_without_outputs(tmp_path):
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy2(ROOT / ".gitattributes", repo / ".gitattributes")
    shutil.copy2(ROOT / "notebooks" / "_strip.py", repo / "notebooks" / "_strip.py")
    (repo / "notebooks" / "04_tco.ipynb").write_text(_executed(CLEAN), encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run(
        [
            *git,
            "config",
            "filter.strip-notebook-outputs.clean",
            f"{sys.executable} notebooks/_strip.py --filter",
        ],
        check=True,
    )
    subprocess.run([*git, "add", "notebooks/04_tco.ipynb"], check=True)
    stored = subprocess.run(
        [*git, "show", ":notebooks/04_tco.ipynb"], check=True, capture_output=True, text=True
    )
    assert stored.stdout == CLEAN.read_text(encoding="utf-8")  # byte for byte the committed clean notebook
    assert "hello" in (repo / "notebooks" / "04_tco.ipynb").read_text(
        encoding="utf-8"
    )  # the saved file keeps them


def test_strip_files_in_place_reports_what_changed(tmp_path):
    saved = tmp_path / "04_tco.ipynb"
    saved.write_text(_executed(CLEAN), encoding="utf-8")
    script = [sys.executable, str(ROOT / "notebooks" / "_strip.py")]
    first = subprocess.run([*script, str(saved)], capture_output=True, text=True)
    assert first.returncode == 1 and "stripped outputs" in first.stderr
    assert saved.read_text(encoding="utf-8") == CLEAN.read_text(encoding="utf-8")
    assert subprocess.run([*script, str(saved)]).returncode == 0  # clean stays as it is
