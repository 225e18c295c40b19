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
        self.starts.setdefault(node, self._stack.pop())  # a syntactic position recorded inside wins

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
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
    return position_lookup(state.starts, line_starts_of(code)), code


def line_starts_of(text: str) -> list[int]:
    """Offsets where each line of ``text`` starts (line breaks as libcst counts them)."""
    return [0] + [m.end() for m in _NEWLINE.finditer(text)]


def position_lookup(
    starts: dict[cst.CSTNode, int], line_starts: list[int]
) -> Callable[[cst.CSTNode], tuple[int, int] | None]:
    """``node -> (line, column + 1)`` from recorded start offsets; None for a node not recorded."""

    def pos(node: cst.CSTNode) -> tuple[int, int] | None:
        off = starts.get(node)
        if off is None:
            return None
        i = bisect_right(line_starts, off) - 1
        return (i + 1, off - line_starts[i] + 1)

    return pos


# ------------------------------------------------------------------------------------------------
# Regenerating a changed statement while copying its unchanged parts from the source
# ------------------------------------------------------------------------------------------------
_LIBCST_CODEGEN = cst.CSTNode._codegen


def _codegen_through_state(self: cst.CSTNode, state: CodegenState, **kwargs: object) -> None:
    hook = getattr(state, "node_codegen", None)
    if hook is None:
        _LIBCST_CODEGEN(self, state, **kwargs)
    else:
        hook(self, kwargs)


@contextmanager
def _node_hooks() -> Iterator[None]:
    """Route every node's code generation through the state (libcst has no per-node hook that can skip
    a subtree). Only for the duration of one call in this process; libcst's own method is put back."""
    cst.CSTNode._codegen = _codegen_through_state  # type: ignore[method-assign]
    try:
        yield
    finally:
        cst.CSTNode._codegen = _LIBCST_CODEGEN  # type: ignore[method-assign]


#: id(node) -> (node, start, end, indentation, keyword arguments) of one generated statement.
Spans = dict[int, tuple[cst.CSTNode, int, int, str, dict]]


#: Whitespace and punctuation: never reported, cheaper to regenerate than to look up.
_PLAIN = frozenset(
    c
    for c in (
        cst.SimpleWhitespace,
        cst.ParenthesizedWhitespace,
        cst.Newline,
        cst.Comma,
        cst.Dot,
        cst.LeftParen,
        cst.RightParen,
        cst.AssignEqual,
        cst.Colon,
        cst.Semicolon,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.TrailingWhitespace,
        cst.Comment,
    )
)


class _IndentKey:
    """Keeps the current indentation as one string, updated only when it changes."""

    indent_key = ""

    def increase_indent(self, value: str) -> None:
        super().increase_indent(value)  # type: ignore[misc]
        self.indent_key = "".join(self.indent_tokens)  # type: ignore[attr-defined]

    def decrease_indent(self) -> None:
        super().decrease_indent()  # type: ignore[misc]
        self.indent_key = "".join(self.indent_tokens)  # type: ignore[attr-defined]


class _RecordingState(_IndentKey, _OffsetState):
    """Positions, plus each node's exact span and the context its text depends on."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent, default_newline)
        self.spans: Spans = {}

    def node_codegen(self, node: cst.CSTNode, kwargs: dict) -> None:
        start = self.offset
        if type(node) in _PLAIN:  # no span kept: cheaper to regenerate than to look up
            node._codegen_impl(self, **kwargs)
        else:
            indent = self.indent_key
            node._codegen_impl(self, **kwargs)
            self.spans[id(node)] = (node, start, self.offset, indent, kwargs)
        self.starts.setdefault(node, start)  # a syntactic position recorded inside wins


class _ReusingState(_IndentKey, CodegenState):
    """Generates a new tree, copying the old text of every node that is the very same object as before,
    at the same indentation and with the same separators (a comma or semicolon a node adds depends on
    whether it is last): exactly the text libcst would generate for it, which is the source's."""

    def __init__(self, default_indent: str, default_newline: str, spans: Spans, source: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.old, self.source = spans, source

    def node_codegen(self, node: cst.CSTNode, kwargs: dict) -> None:
        rec = self.old.get(id(node))
        if rec is not None and rec[0] is node and rec[3] == self.indent_key and rec[4] == kwargs:
            self.tokens.append(self.source[rec[1] : rec[2]])
            return
        node._codegen_impl(self, **kwargs)


def recorded_codegen(stmt: cst.CSTNode, module: cst.Module, offset: int) -> tuple[str, dict, Spans]:
    """Code of ``stmt`` generated from ``offset``: (code, node -> start offset, spans for reuse)."""
    state = _RecordingState(module.default_indent, module.default_newline)
    state.offset = offset
    with _node_hooks():
        stmt._codegen(state)
    return "".join(state.tokens), state.starts, state.spans


def reusing_codegen(new: cst.CSTNode, module: cst.Module, spans: Spans, source: str) -> str:
    """Code of ``new`` with every unchanged part copied from ``source`` (see _ReusingState)."""
    state = _ReusingState(module.default_indent, module.default_newline, spans, source)
    with _node_hooks():
        new._codegen(state)
    return "".join(state.tokens)
