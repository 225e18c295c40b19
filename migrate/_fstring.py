"""Quotes inside a rewritten f-string's replacement fields.

Before Python 3.12 (PEP 701) a string inside an f-string's ``{...}`` may not use the f-string's own quote:
``f"{x.device.type == "tpu"}"`` is a syntax error on 3.11. Rules build their replacements without knowing that
they land inside an f-string, so the transformer hands every f-string whose fields changed to
:func:`requote_fields`, which gives each nested string the other quote.
"""

from __future__ import annotations

import libcst as cst

_OTHER = {'"': "'", "'": '"'}


class _Requote(cst.CSTTransformer):
    """Swap ``quote`` for the other one in plain strings (nested f-strings are fixed on their own leave)."""

    def __init__(self, quote: str) -> None:
        super().__init__()
        self.quote = quote
        self.other = _OTHER[quote]
        self.unfixable = False

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        return False

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if updated.quote != self.quote:
            return updated
        prefix = updated.prefix
        body = updated.value[len(prefix) + 1 : -1]
        if self.other in body or "\\" in body:  # (no backslashes in an f-string field before 3.12)
            self.unfixable = True
            return updated
        return updated.with_changes(value=f"{prefix}{self.other}{body}{self.other}")


def requote_fields(node: cst.FormattedString) -> cst.FormattedString:
    """``node`` with every string in its fields quoted unlike the f-string itself (unchanged when it is
    triple-quoted, or when a string cannot be requoted: the output check then refuses the file)."""
    quote = node.quote
    if quote not in _OTHER:
        return node
    fixer = _Requote(quote)
    parts = []
    changed = False
    for part in node.parts:
        if isinstance(part, cst.FormattedStringExpression):
            new = part.visit(fixer)
            changed = changed or new is not part
            parts.append(new)
        else:
            parts.append(part)
    return node.with_changes(parts=parts) if changed else node
