"""Start positions of nodes and the module's code from one code generation.

Equivalent to ``MetadataWrapper(module).resolve(PositionProvider)`` for the start of each node (line
1-based, column 1-based here), but it only counts characters while generating code and turns offsets
into lines and columns once at the end; the generated text is ``module.code`` and comes for free.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState

#: Line breaks exactly as libcst's PositionProvider counts them.
_NEWLINE = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        self.starts: dict[cst.CSTNode, int] = {}
        self._stack: list[int] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        if node not in self.starts:  # a syntactic position recorded inside wins
            self.starts[node] = start

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Iterator[None]:
        start = self.offset
        try:
            yield
        finally:
            self.starts[node] = self.starts[start_node] if start_node is not None else start


def start_positions(module: cst.Module) -> tuple[Callable[[cst.CSTNode], tuple[int, int] | None], str]:
    """(``node -> (line, column + 1)`` or None for a node not in ``module``, ``module.code``)."""
    state = _OffsetState(module.default_indent, module.default_newline)
    module._codegen(state)
    code = "".join(state.tokens)
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(code)]
    starts = state.starts

    def pos(node: cst.CSTNode) -> tuple[int, int] | None:
        off = starts.get(node)
        if off is None:
            return None
        i = bisect_right(line_starts, off) - 1
        return (i + 1, off - line_starts[i] + 1)

    return pos, code
