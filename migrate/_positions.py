"""Start positions of nodes and the module's code from one code generation.

Equivalent to ``MetadataWrapper(module).resolve(PositionProvider)`` for the start of each node (line
1-based, column 1-based here), but it only counts characters while generating code and turns offsets
into lines and columns once at the end; the generated text is ``module.code`` and comes for free.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import libcst as cst
from libcst._nodes.internal import CodegenState

#: Line breaks exactly as libcst's PositionProvider counts them.
_NEWLINE = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        #: id(node) -> start offset (ids, not nodes: a node's ``__hash__`` is a Python call, one per node; the
        #: nodes stay alive with their module while positions are asked).
        self.starts: dict[int, int] = {}
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
        self.starts.setdefault(id(node), self._stack.pop())  # a syntactic position recorded inside wins

    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _Recorded:
        return _Recorded(self, node, start_node)


class _Recorded:
    """``with state.record_syntactic_position(node)``: the node starts where the block starts (or where
    ``start_node`` does). A plain class: libcst asks for one per statement and per parameter, and a
    generator-based context manager costs about three times as much."""

    __slots__ = ("state", "node", "start_node", "start")

    def __init__(self, state: _OffsetState, node: cst.CSTNode, start_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node = state, node, start_node

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc: object) -> None:
        starts = self.state.starts
        start = starts[id(self.start_node)] if self.start_node is not None else self.start
        starts[id(self.node)] = start


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
    starts: dict[int, int], line_starts: list[int]
) -> Callable[[cst.CSTNode], tuple[int, int] | None]:
    """``node -> (line, column + 1)`` from start offsets recorded by node id (the tree they were recorded
    from must stay alive while it is asked); None for a node not recorded."""

    def pos(node: cst.CSTNode) -> tuple[int, int] | None:
        off = starts.get(id(node))
        if off is None:
            return None
        i = bisect_right(line_starts, off) - 1
        return (i + 1, off - line_starts[i] + 1)

    return pos


#: A context manager that does nothing (reusable).
_NOTHING = nullcontext()

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
def node_hooks() -> Iterator[None]:
    """Route every node's code generation through the state (libcst has no per-node hook that can skip
    a subtree). Only for the duration of one call in this process; libcst's own method is put back.

    Inside an outer ``node_hooks()`` this does nothing: setting a method on ``CSTNode`` clears the type caches
    of all its subclasses (~60 µs a swap), so callers that generate many statements route once around them
    all (a 5 MB file: 50,000 statements, ~3 s of swaps when each routed its own)."""
    if cst.CSTNode._codegen is _codegen_through_state:
        yield
        return
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
        self.starts.setdefault(id(node), start)  # a syntactic position recorded inside wins


class _ReusingState(_IndentKey, CodegenState):
    """Generates a new tree, copying the old text of every node that is the very same object as before,
    at the same indentation and with the same separators (a comma or semicolon a node adds depends on
    whether it is last): exactly the text libcst would generate for it, which is the source's."""

    def __init__(self, default_indent: str, default_newline: str, spans: Spans, source: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.old, self.source = spans, source

    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> AbstractContextManager[None]:
        return _NOTHING  # (no positions here: libcst's own is a generator per call)

    def node_codegen(self, node: cst.CSTNode, kwargs: dict) -> None:
        rec = self.old.get(id(node))
        if rec is not None and rec[0] is node and rec[3] == self.indent_key and rec[4] == kwargs:
            self.tokens.append(self.source[rec[1] : rec[2]])
            return
        node._codegen_impl(self, **kwargs)


def recorded_codegen(stmt: cst.CSTNode, module: cst.Module, offset: int) -> tuple[str, dict, Spans]:
    """Code of ``stmt`` generated from ``offset``: (code, id(node) -> start offset, spans for reuse)."""
    state = _RecordingState(module.default_indent, module.default_newline)
    state.offset = offset
    with node_hooks():
        stmt._codegen(state)
    return "".join(state.tokens), state.starts, state.spans


def reusing_codegen(new: cst.CSTNode, module: cst.Module, spans: Spans, source: str) -> str:
    """Code of ``new`` with every unchanged part copied from ``source`` (see _ReusingState)."""
    state = _ReusingState(module.default_indent, module.default_newline, spans, source)
    with node_hooks():
        new._codegen(state)
    return "".join(state.tokens)
