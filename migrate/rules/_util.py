"""Small helpers shared by the rule families: building nodes from text, reading literals."""

from __future__ import annotations

import re

import libcst as cst

from .._walk import child_nodes

_EMPTY = cst.Module(body=[])

#: A plain (non-bytes, single-line) string literal: prefix, quote, body.
_SIMPLE = re.compile(r"^(?P<prefix>[rRuU]?)(?P<q>'|\")(?P<body>[^'\"\\\n]*)(?P=q)$")


def mentions(ctx, word: str) -> bool:
    """Whether the file's text holds ``word``, searched once per file: rules ask per node, and a search of the
    whole text each time is quadratic in the file's size (a 5 MB file: minutes)."""
    cache = ctx.scratch.setdefault("mentions", {})
    found = cache.get(word)
    if found is None:
        found = cache[word] = word in ctx.source_text
    return found


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


def drop_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in names)]
    if not args or args[-1] is call.args[-1]:
        return call.with_changes(args=args)
    # The new last argument takes the old last one's comma: a multi-line call keeps its trailing comma and its
    # `)` on a line of its own, a one-line call keeps none.
    return call.with_changes(args=[*args[:-1], args[-1].with_changes(comma=call.args[-1].comma)])


def set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Replace keyword ``name`` or append it."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])


def separator(elements) -> cst.Comma:
    """The comma between the elements of a display (one element per line stays one per line)."""
    if len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
        return elements[-2].comma
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def append_elements(elements, values: list[cst.BaseExpression]) -> list:
    """List/tuple/set elements with ``values`` appended, keeping the display's layout and comma style."""
    elements = list(elements)
    if not elements:
        return [cst.Element(v) for v in values]
    last = elements[-1]
    trailing = last.comma
    sep = separator(elements)
    out = [*elements[:-1], last.with_changes(comma=sep)]
    for i, v in enumerate(values):
        out.append(cst.Element(v, comma=trailing if i == len(values) - 1 else sep))
    return out


def unwrap_block(orig: cst.CSTNode, block: cst.BaseSuite) -> cst.FlattenSentinel | None:
    """The statements of ``block`` in place of the compound statement ``orig`` (an unwrapped ``with``), the
    comments above ``orig`` carried onto the first; None when there is no indented block to lift."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return None
    inner = list(block.body)
    inner[0] = inner[0].with_changes(leading_lines=[*orig.leading_lines, *inner[0].leading_lines])  # type: ignore[attr-defined]
    return cst.FlattenSentinel(inner)


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


def full_name(node: cst.CSTNode) -> str:
    """``torch.cuda.synchronize`` for that Name/Attribute chain, else an empty string."""
    return cst.helpers.get_full_name_for_node(node) or ""


#: Calls a condition may make and still be dropped with its emptied ``if``: availability checks and the like.
_PURE_CALL = re.compile(
    r"^(?:(?:torch|os|sys)\.[\w.]+|(?:\w+\.)*is_\w+|_tpu_\w+|len|isinstance|hasattr|getattr|"
    r"callable|bool|int|str|float)$"
)
_IMPURE = (cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda)


def pure(node: cst.CSTNode) -> bool:
    """True when evaluating ``node`` cannot do anything but compute a value (cheap and conservative)."""
    if isinstance(node, _IMPURE):
        return False
    if isinstance(node, cst.Call) and not _PURE_CALL.match(full_name(node.func)):
        return False
    return all(pure(c) for c in child_nodes(node))
