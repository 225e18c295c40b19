"""Notebooks: code cells only, magics masked, outputs/metadata untouched, byte-identical when unchanged."""

from __future__ import annotations

import json

from tpu_workbench.migrate import migrate_paths
from tpu_workbench.migrate.notebook import migrate_notebook


def _nb(*cells, outputs=None) -> str:
    out = []
    for kind, src in cells:
        c = {"cell_type": kind, "metadata": {"tags": ["x"]}, "source": src.splitlines(keepends=True)}
        if kind == "code":
            c.update(execution_count=3, outputs=outputs or [])
        out.append(c)
    return (
        json.dumps(
            {
                "cells": out,
                "metadata": {"kernelspec": {"name": "python3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )
        + "\n"
    )


def test_cells_share_imports_and_diagnostics_name_the_cell():
    text = _nb(
        ("markdown", "Uses `torch.cuda.is_available()`"),
        ("code", "import torch\n%time x = 1\n!nvidia-smi"),
        ("code", "y = 2\nok = torch.cuda.is_available()"),
    )
    res = migrate_notebook(text, "nb.ipynb")
    nb = json.loads(res.new_source)
    assert nb["cells"][0]["source"] == ["Uses `torch.cuda.is_available()`"]
    assert nb["cells"][1]["source"] == ["import torch\n", "%time x = 1\n", "!nvidia-smi"]
    assert nb["cells"][2]["source"] == ["y = 2\n", "ok = torch.accelerator.is_available()"]
    assert [d.format().split(" [*]")[0] for d in res.diagnostics] == ["nb.ipynb:cell_3:2:6: TPU201"]


def test_outputs_and_metadata_untouched():
    outputs = [{"output_type": "stream", "name": "stdout", "text": ["cuda\n"]}]
    text = _nb(("code", "import torch\nd = 'cuda'"), outputs=outputs)
    nb = json.loads(migrate_notebook(text).new_source)
    assert nb["cells"][0]["outputs"] == outputs and nb["cells"][0]["metadata"] == {"tags": ["x"]}
    assert nb["cells"][0]["execution_count"] == 3 and nb["metadata"] == {"kernelspec": {"name": "python3"}}


def test_unchanged_notebook_is_byte_identical(tmp_path):
    text = _nb(("code", "import torch\n# cuda in a comment only\nx = 1"))
    odd = text.replace("\n", "\r\n")
    for t in (text, odd):
        assert migrate_notebook(t).new_source == t
    p = tmp_path / "nb.ipynb"
    p.write_text(text)
    res = migrate_paths([str(tmp_path)], write=True)
    assert res.files[0].status == "unchanged" and p.read_text() == text


def test_cell_magics_python_kept_others_skipped():
    text = _nb(("code", "%%time\nimport torch\nd = 'cuda'"), ("code", "%%bash\necho cuda"))
    nb = json.loads(migrate_notebook(text).new_source)
    assert nb["cells"][0]["source"] == ["%%time\n", "import torch\n", "d = 'tpu'"]
    assert nb["cells"][1]["source"] == ["%%bash\n", "echo cuda"]


def test_idempotent_and_flag_todo_once():
    text = _nb(("code", "import torch\nm = torch.cuda.mem_get_info()"))
    once = migrate_notebook(text).new_source
    assert migrate_notebook(once).new_source == once
    assert once.count("TODO(tpu-migrate TPU204)") == 1


def test_bad_notebook_is_unparsable(tmp_path):
    p = tmp_path / "bad.ipynb"
    p.write_text("{not json cuda")
    assert migrate_paths([str(p)]).files[0].status == "unparsable"
    p.write_text(_nb(("code", "def f(:\n  'cuda'")))
    assert migrate_paths([str(p)]).files[0].status == "unparsable"


def test_shell_and_line_magics_continued_with_a_backslash_are_one_unit(tmp_path):
    setup = "!pip install torch \\\n    transformers \\\n    accelerate\n%env A=1 \\\n  B=2\nimport torch"
    untouched = "x = 1\n!ls \\\n  -l\n%time y = \\\n    2"
    text = _nb(("code", setup), ("code", untouched), ("code", "d = torch.zeros(1, device='cuda')"))
    p = tmp_path / "nb.ipynb"
    p.write_text(text)
    res = migrate_paths([str(p)], write=True).files[0]
    assert res.status == "changed"  # migrated, not skipped as unparsable
    nb = json.loads(p.read_text())
    assert "".join(nb["cells"][0]["source"]) == setup
    assert "".join(nb["cells"][1]["source"]) == untouched
    assert nb["cells"][2]["source"] == ["d = torch.zeros(1, device='tpu')"]
    assert [d.format().split(" [*]")[0] for d in res.diagnostics] == [f"{p}:cell_3:1:27: TPU101"]
    again = migrate_paths([str(p)], write=True).files[0]
    assert again.status == "unchanged"


def test_unchanged_notebook_with_continued_magics_is_byte_identical():
    text = _nb(("code", "!apt-get install -y \\\n  graphviz\nimport torch\nx = 1"))
    assert migrate_notebook(text).new_source == text and not migrate_notebook(text).changed


def test_automagic_pip_lines_are_masked_but_python_that_starts_with_pip_is_not():
    text = _nb(
        ("code", "pip install -q -U langchain faiss-cpu\nconda install -y \\\n  numpy\nimport torch"),
        ("code", "pip = ['a']\nok = pip in ['x']\nd = torch.zeros(1, device='cuda')"),
    )
    res = migrate_notebook(text, "nb.ipynb")
    nb = json.loads(res.new_source)
    assert (
        "".join(nb["cells"][0]["source"])
        == "pip install -q -U langchain faiss-cpu\nconda install -y \\\n  numpy\nimport torch"
    )
    assert nb["cells"][1]["source"][-1] == "d = torch.zeros(1, device='tpu')"


def test_magic_alone_in_a_block_keeps_the_block_and_survives_an_emptied_if():
    cell = (
        "import torch\nif torch.cuda.is_available():\n    !nvidia-smi\n    torch.cuda.empty_cache()\n"
        "if IN_COLAB:\n    !pip install -q \\\n        transformers\nelif OTHER:\n    %pip install x\n"
        "d = torch.zeros(1, device='cuda')"
    )
    res = migrate_notebook(_nb(("code", cell)), "nb.ipynb")
    out = "".join(json.loads(res.new_source)["cells"][0]["source"])
    assert (
        res.changed and out.count("!nvidia-smi") == 1 and "!pip install -q \\\n        transformers\n" in out
    )
    assert "%pip install x" in out and "device='tpu'" in out
