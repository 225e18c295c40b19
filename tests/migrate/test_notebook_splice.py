"""A migrated notebook rewrites only the ``source`` of the cells that changed (held-out check 7: taming-transformers'
notebook came back with every ``\\u001B`` of pip's coloured output rewritten as ``\\u001b``: the same JSON, but
a diff full of output lines nobody touched)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate._nbsplice import source_spans
from tpu_workbench.migrate.notebook import migrate_notebook

_ANSI_OUTPUT = {
    "name": "stdout",
    "output_type": "stream",
    "text": ["\u001b[K     |\u2588\u2588| 563kB 17.7MB/s \n", "caf\u00e9 \u001b[31mERROR\u001b[0m\n"],
}


def _nb(sources: list[str], ensure_ascii: bool, upper_escapes: bool, indent: int = 1) -> str:
    cells = [
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {"id": f"c{i}"},
            "outputs": [_ANSI_OUTPUT],
            "source": src.splitlines(keepends=True),
        }
        for i, src in enumerate(sources)
    ]
    nb = {
        "cells": cells,
        "metadata": {"accelerator": "GPU", "x": 1.0e-05},
        "nbformat": 4,
        "nbformat_minor": 0,
    }
    text = json.dumps(nb, indent=indent, ensure_ascii=ensure_ascii) + "\n"
    if upper_escapes:  # another writer's spelling of the same characters
        text = text.replace("\\u001b", "\\u001B").replace("\\u00e9", "\\u00E9")
    return text


def _changed_lines(old: str, new: str) -> list[str]:
    a, b = old.splitlines(), new.splitlines()
    return [y for x, y in zip(a, b, strict=False) if x != y] + b[len(a) :]


def test_only_the_changed_source_line_differs_in_a_notebook_json_dumps_would_respell():
    text = _nb(
        ["import torch\n", "model = model.cuda().eval()\n", "x = 1\n"], ensure_ascii=True, upper_escapes=True
    )
    out = migrate_notebook(text, "nb.ipynb").new_source
    assert _changed_lines(text, out) == ['    "model = model.to(\\"tpu\\").eval()\\n"']
    assert "\\u001B[K" in out and "\\u00E9" in out  # the outputs keep the file's own spelling


@settings(max_examples=40, deadline=None)
@given(
    sources=st.lists(
        st.sampled_from(
            [
                "import torch\n",
                "x = torch.zeros(2).cuda()\n",
                "y = 'caf\u00e9'\nprint(y)\n",
                "if torch.cuda.is_available():\n    dev = 'cuda'\n",
                "!pip install x\n",
                "",
                "z = 3",
            ]
        ),
        min_size=1,
        max_size=5,
    ),
    ensure_ascii=st.booleans(),
    upper=st.booleans(),
    indent=st.sampled_from([1, 2]),
)
def test_the_splice_gives_the_same_notebook_as_writing_it_whole_and_leaves_other_cells_alone(
    sources, ensure_ascii, upper, indent
):
    text = _nb(sources, ensure_ascii, upper, indent)
    res = migrate_notebook(text, "nb.ipynb")
    new = json.loads(res.new_source)
    old = json.loads(text)
    assert new["metadata"] == old["metadata"]
    spans_old, spans_new = source_spans(text), source_spans(res.new_source)
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"], strict=True)):
        assert a["outputs"] == b["outputs"]
        if a["source"] == b["source"]:  # an unchanged cell keeps its bytes
            (s0, e0), (s1, e1) = spans_old[i], spans_new[i]
            assert text[s0:e0] == res.new_source[s1:e1]
    if not res.changed:
        assert res.new_source == text


def test_source_spans_follow_the_cells_in_order():
    text = _nb(["a = 1\n", "b = 2\nc = 3\n"], ensure_ascii=False, upper_escapes=False)
    spans = source_spans(text)
    assert [json.loads(text[s:e]) for s, e in spans] == [["a = 1\n"], ["b = 2\n", "c = 3\n"]]
