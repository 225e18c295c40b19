"""Where each top-level statement of a parsed module lies in its source, so most of a file is never
regenerated.

Generating a whole module's code with libcst costs about a third of parsing it, and a migration needed
it twice (positions for the diagnostics, then the new text). Python's own ``ast`` (C, ~20x faster than
libcst) gives each top-level statement's first line; with the statement's leading blank/comment lines
that is its start offset. Then

- positions are computed by generating code for the few statements that hold a finding, and
- the new text is the old text with only the changed statements regenerated.

Every statement whose text is regenerated or dropped is first checked: libcst's code for the original
statement must equal its slice of the source, byte for byte. Any doubt (``ast`` cannot parse it, the
statements do not line up, a check fails) answers None and the caller does the whole module the slow
way, so the output is always exactly what libcst alone would give.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable

import libcst as cst

from ._positions import Spans, line_starts_of, node_hooks, position_lookup, recorded_codegen, reusing_codegen

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: SourceMap(tree=) default: parse the source here.
_PARSE = object()
_BACKSLASH_LINE = re.compile(r"(?:^|[\r\n])[ \t\f]*\\(?:\r\n|\r|\n)")


class SourceMap:
    """Offsets of ``module.body`` statements in ``source`` (``ok`` False when they could not be found)."""

    def __init__(self, source: str, module: cst.Module, tree: ast.Module | None | object = _PARSE) -> None:
        """``tree``: ``ast.parse(source)`` when the caller already has it, None when that failed."""
        #: A file without a final newline: libcst's tree still ends with the newline its parser added (the
        #: module's ``default_newline``; ``Module.code`` pops it again). Spans and positions are found in the
        #: source with that newline put back, so such a file (9 of the 59 files held-out-2 checks) no
        #: longer costs two whole-module code generations; :meth:`splice` drops that newline again when the
        #: new module still ends with the original's last token (:meth:`_ends_as_before`).
        self.added = "" if module.has_trailing_newline else module.default_newline
        self.source = source + self.added
        self.module = module
        self.line_starts = line_starts_of(source)
        self.index = {id(s): i for i, s in enumerate(module.body)}
        self._checked: dict[int, bool] = {}
        #: Node spans of the checked statements, for copying their unchanged parts (see _positions).
        self._spans: Spans = {}
        self._starts: dict[int, dict[int, int]] = {}
        #: Code of new statements already generated: id -> (statement, code); a second splice after the
        #: import clean-up regenerates only the statements it changed.
        self._generated: dict[int, tuple[cst.CSTNode, str]] = {}
        self.starts = self._find_starts(tree)
        self.ok = self.starts is not None

    def _find_starts(self, tree: ast.Module | None | object) -> list[int] | None:
        m = self.module
        if not m.body or _BACKSLASH_LINE.search(self.source):
            return None  # libcst folds a line holding only a backslash into a neighbour: spans would be off
        if tree is _PARSE:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # SyntaxWarnings (odd escapes) are not ours to print
                    tree = ast.parse(self.source)
            except Exception:  # noqa: BLE001 - any failure just means "do it the slow way"
                return None
        if not isinstance(tree, ast.Module):
            return None
        stmts = tree.body
        starts: list[int] = []
        k = 0
        for s in m.body:
            if k >= len(stmts):
                return None
            a = stmts[k]
            first = a.lineno
            lead = len(s.leading_lines)
            decorators = getattr(s, "decorators", ())
            if decorators:
                if not (isinstance(a, _DEFS) and a.decorator_list):
                    return None
                first = min(d.lineno for d in a.decorator_list)
                lead += len(decorators[0].leading_lines)
            line = first - lead
            if not 1 <= line <= len(self.line_starts):
                return None
            starts.append(self.line_starts[line - 1])
            k += len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1
        if k != len(stmts):
            return None
        footer = "".join(m.code_for_node(f) for f in m.footer)
        self.footer_start = len(self.source) - len(footer)
        if self.source[self.footer_start :] != footer or (starts and starts[-1] > self.footer_start):
            return None
        header = "".join(m.code_for_node(h) for h in m.header)
        if self.source[: starts[0]] != header:
            return None
        return starts

    def span(self, i: int) -> tuple[int, int]:
        assert self.starts is not None
        end = self.starts[i + 1] if i + 1 < len(self.starts) else self.footer_start
        return self.starts[i], end

    def texts(self) -> list[str] | None:
        """The source of each top-level statement, or None when the statements could not be found."""
        if not self.ok:
            return None
        source = self.source[: len(self.source) - len(self.added)]  # (the file's own text, as read)
        return [source[slice(*self.span(i))] for i in range(len(self.module.body))]

    def check(self, i: int) -> bool:
        """libcst regenerates statement ``i`` exactly as its slice of the source."""
        if i not in self._checked:
            start, end = self.span(i)
            code, starts, spans = recorded_codegen(self.module.body[i], self.module, start)
            ok = self._checked[i] = code == self.source[start:end]
            if ok:
                self._spans.update(spans)
                self._starts[i] = starts
        return self._checked[i]

    def positions(self, stmt: cst.CSTNode) -> Callable[[cst.CSTNode], tuple[int, int] | None] | None:
        """``node -> (line, column + 1)`` for nodes inside top-level ``stmt``; None if not possible."""
        i = self.index.get(id(stmt))
        if not self.ok or i is None or not self.check(i):
            return None
        return position_lookup(self._starts[i], self.line_starts)

    @node_hooks()  # (once around every statement it generates)
    def splice(self, new: cst.Module) -> str | None:
        """The code of ``new`` (this module after a rewrite), reusing the source of every top-level
        statement that is still the very same object; None when that cannot be done safely."""
        kept = self.splice_check(new)
        if kept is None:
            return None
        parts = [self.source[: self.starts[0]]]  # type: ignore[index]
        run_start: int | None = None
        run_end = 0
        for s, i in zip(new.body, kept, strict=True):
            if i is not None and run_start is not None and self.span(i)[0] == run_end:
                run_end = self.span(i)[1]  # extend a run of untouched neighbours
                continue
            if run_start is not None:
                parts.append(self.source[run_start:run_end])
                run_start = None
            if i is not None:
                run_start, run_end = self.span(i)
            else:
                parts.append(self._code_of_new(s))
        if run_start is not None:
            parts.append(self.source[run_start:run_end])
        parts.append(self.source[self.footer_start :])
        code = "".join(parts)
        # Module.code pops the last token, the newline the parser added: here the original's own (splice_check)
        return code[: len(code) - len(self.added)]

    @node_hooks()  # (once around every statement it generates)
    def pieces(self, new: cst.Module) -> list[tuple[int | None, str]] | None:
        """Like :meth:`splice`, one entry per statement of ``new``: (index of the very same old statement, or
        None for a new one; its code with its leading lines). The header is ``source[:starts[0]]`` and the
        footer ``source[footer_start:]`` (checked unchanged). For migrate.groups, which reassembles a file
        from the statements of several partial parses."""
        if self.added or self.splice_check(new) is None:
            return None
        out: list[tuple[int | None, str]] = []
        for s in new.body:
            i = self.index.get(id(s))
            out.append(
                (i, self.source[slice(*self.span(i))]) if i is not None else (None, self._code_of_new(s))
            )
        return out

    def splice_check(self, new: cst.Module) -> list[int | None] | None:
        """The old index of each statement of ``new`` (None: a new one) when :meth:`splice` can work."""
        old = self.module
        if not self.ok or new.header is not old.header and new.header != old.header:
            return None
        if (
            new.footer != old.footer
            or new.has_trailing_newline != old.has_trailing_newline
            or new.default_newline != old.default_newline
            or new.default_indent != old.default_indent
        ):
            return None
        kept = [self.index.get(id(s)) for s in new.body]
        last = -1
        for i in kept:
            if i is not None:
                if i <= last:
                    return None  # reordered or repeated: not a plain edit
                last = i
        kept_set = {i for i in kept if i is not None}
        for i in range(len(old.body)):  # every statement not copied as is must have a verified span
            if i not in kept_set and not self.check(i):
                return None
        if self.added and not self._ends_as_before(new, kept):
            return None
        return kept

    def _ends_as_before(self, new: cst.Module, kept: list[int | None]) -> bool:
        """Without a final newline: ``new``'s last token is the original's, which is the added newline (a
        non-empty footer's, checked equal to the source with it, or the very same last statement's, checked
        here), so :meth:`splice` may drop it as ``Module.code`` does. A new last statement: not known."""
        if new.footer:
            return True
        last = len(self.module.body) - 1
        return bool(kept) and kept[-1] == last and self.check(last)

    def _code_of_new(self, stmt: cst.CSTNode) -> str:
        hit = self._generated.get(id(stmt))
        if hit is not None and hit[0] is stmt:
            return hit[1]
        code = reusing_codegen(stmt, self.module, self._spans, self.source)
        self._generated[id(stmt)] = (stmt, code)
        return code
