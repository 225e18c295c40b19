"""Small helpers shared by the rule families: building nodes from text, reading literals."""

from __future__ import annotations

import re

import libcst as cst

_EMPTY = cst.Module(body=[])

#: A plain (non-bytes, single-line) string literal: prefix, quote, body.
_SIMPLE = re.compile(r"^(?P<prefix>[rRuU]?)(?P<q>'|\")(?P<body>[^'\"\\\n]*)(?P=q)$")


def code(node: cst.CSTNode) -> str:
    """Source text of a node."""
    return _EMPTY.code_for_node(node)


def expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def stmts(text: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(text).body)


def string_body(node: cst.CSTNode) -> str | None:
    """The body of a plain string literal, or None for anything else (bytes, f-strings, escapes)."""
    if isinstance(node, cst.SimpleString):
        m = _SIMPLE.match(node.value)
        if m:
            return m.group("body")
    return None


def with_body(node: cst.SimpleString, body: str) -> cst.SimpleString:
    """The same literal (prefix and quote style kept) with a new body."""
    m = _SIMPLE.match(node.value)
    assert m is not None
    return node.with_changes(value=f"{m.group('prefix')}{m.group('q')}{body}{m.group('q')}")


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def arg(call: cst.Call, index: int, name: str | None = None) -> cst.Arg | None:
    """Positional argument ``index`` or keyword ``name``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if index < len(positional):
        return positional[index]
    return kwarg(call, name) if name else None


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def drop_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in names)]
    return call.with_changes(args=_fix_commas(args))


def _fix_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return args


def set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Replace keyword ``name`` or append it."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])


def is_int_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer)


def append_elements(elements, values: list[cst.BaseExpression]) -> list:
    """List/tuple/set elements with ``values`` appended, keeping the display's comma style."""
    elements = list(elements)
    if not elements:
        return [cst.Element(v) for v in values]
    last = elements[-1]
    trailing = last.comma
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out = [*elements[:-1], last.with_changes(comma=sep)]
    for i, v in enumerate(values):
        out.append(cst.Element(v, comma=trailing if i == len(values) - 1 else sep))
    return out


def literals(node: cst.CSTNode) -> list[cst.SimpleString]:
    """The string literals a value can evaluate to: the literal itself, both arms of ``a if c else b``,
    the operands of ``x or "cpu"``, the elements of a list or tuple (not strings used inside a call)."""
    if isinstance(node, cst.SimpleString):
        return [node]
    if isinstance(node, cst.IfExp):
        return [*literals(node.body), *literals(node.orelse)]
    if isinstance(node, cst.BooleanOperation):
        return [*literals(node.left), *literals(node.right)]
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return [s for el in node.elements for s in literals(el.value)]
    return []
