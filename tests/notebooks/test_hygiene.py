"""The committed notebooks: every one notebooks/_build.py defines exists (and no other), carries no outputs
or execution counts, starts with a code cell tagged ``parameters`` (papermill convention), never downloads
anything, and matches the generator."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

NB_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def _generator():
    spec = importlib.util.spec_from_file_location("nb_build", NB_DIR / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NAMES = sorted(_generator().NOTEBOOKS)


def _load(name: str):
    return nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)


def test_every_generated_notebook_is_committed_and_no_other():
    assert {"01_migrate", "02_throughput", "03_mfu", "04_tco", "05_scaling"} <= set(NAMES)
    assert sorted(p.stem for p in NB_DIR.glob("[0-9]*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_valid_and_no_outputs(name):
    nb = _load(name)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name} cell {i} has stored outputs"
            assert cell.execution_count is None, f"{name} cell {i} has an execution count"
    raw = json.loads((NB_DIR / f"{name}.ipynb").read_text(encoding="utf-8"))
    assert "widgets" not in raw.get("metadata", {}), f"{name} stores widget state"


@pytest.mark.parametrize("name", NAMES)
def test_first_code_cell_is_tagged_parameters(name):
    nb = _load(name)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in first.metadata.get("tags", []), (
        f"{name}: first code cell is not tagged 'parameters'"
    )
    assert re.search(r"^[A-Z_]+\s*(,\s*[A-Z_]+\s*)*=", first.source, re.MULTILINE), (
        "parameters are assignments"
    )
    others = [c for c in nb.cells[nb.cells.index(first) + 1 :] if "parameters" in c.metadata.get("tags", [])]
    assert not others, f"{name}: more than one parameters cell"


@pytest.mark.parametrize("name", NAMES)
def test_no_downloads_and_first_cell_is_a_title(name):
    nb = _load(name)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for banned in (
        "urlopen",
        "requests.",
        "urllib",
        "wget",
        "curl ",
        "hf_hub_download",
        "from_pretrained",
        "pip install",
        "load_dataset",
    ):
        assert banned not in code, f"{name} contains {banned!r}"
    assert not re.search(r"^\s*[!%]", code, re.MULTILINE), f"{name} uses shell escapes or magics"


def test_notebooks_match_generator():
    """The committed notebooks are what notebooks/_build.py writes (edit the generator, then rebuild)."""
    mod = _generator()
    for name, cells in mod.NOTEBOOKS.items():
        committed = [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in _load(name).cells]
        generated = [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in cells]
        assert committed == generated, (
            f"{name}.ipynb differs from notebooks/_build.py: run python notebooks/_build.py"
        )
