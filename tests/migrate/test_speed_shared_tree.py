"""Python's own tree is built once per file (too_deep's check, then the SourceMap), and the depth check walks it
level by level: the answer, including the line it names, must be the depth-first walk's it replaced."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate._spans import SourceMap
from tpu_workbench.migrate.one_file import _deep_stack
from tpu_workbench.migrate.source import MAX_TREE_DEPTH, python_tree


def _depth_first(source: str) -> str | None:
    """The walk used before (a stack of (node, depth), children pushed in order)."""
    stack = [(ast.parse(source), 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            line = getattr(node, "lineno", 0)
            where = f" (line {line})" if line else ""
            return f"an expression nested over {MAX_TREE_DEPTH:,} levels deep{where}: Python itself cannot compile it"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def _chain(n: int) -> str:
    return "y = x " + "+ 1 " * n + "\n"


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from([10, 2_500, 2_995, 3_000, 3_200]), min_size=1, max_size=4))
def test_the_level_walk_names_the_same_line_as_the_depth_first_walk(sizes):
    source = "".join(f"def f{i}(x):\n    {_chain(n)}" if i % 2 else _chain(n) for i, n in enumerate(sizes))
    with _deep_stack():
        tree, why = python_tree(source)
        assert why == _depth_first(source)
    assert tree is not None


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nx = 1\n\n\ndef f():\n    return x.cuda()\n",
        "@d\nclass A:\n    pass\n# end\n",
        "x = (\n 1)\n",
    ],
)
def test_a_source_map_from_the_shared_tree_is_the_one_it_builds_itself(source):
    module = cst.parse_module(source)
    own, shared = SourceMap(source, module), SourceMap(source, module, ast.parse(source))
    assert own.ok and shared.ok and own.starts == shared.starts and own.texts() == shared.texts()


def test_a_tree_python_could_not_build_means_no_source_map():
    source = "x = 1\n"
    assert not SourceMap(source, cst.parse_module(source), None).ok
