"""A libcst traversal that rebuilds only what changed.

libcst's ``node.visit(visitor)`` reconstructs every node of the tree, even for a read-only visitor and
even when nothing changes (a TODO in libcst itself); on a large file that costs about as much as parsing
it. :func:`visit` calls the same visitor hooks in the same order with the same sentinel rules, but reads
the children straight from the fields and builds a new node only on the path to a change: an unchanged
subtree comes back as the very same object.

The field order of each node type is taken from libcst's own ``_visit_and_replace_children`` (read once
per type), so children are visited exactly as libcst visits them; a type whose method is not the plain
``return Node(field=visit_x(self, "field", self.field, visitor), ...)`` form is handed to libcst.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst
from libcst import CSTNode, CSTVisitor, FlattenSentinel, MaybeSentinel, RemovalSentinel

_SEQ, _BODY = "visit_sequence", "visit_body_sequence"
#: helper name -> the one string object used for it (compared by identity in the walk)
_KINDS = {k: k for k in ("visit_required", "visit_optional", "visit_sentinel", _SEQ, _BODY)}
_Plan = tuple[tuple[str, str], ...]
_PLANS: dict[type, _Plan | None] = {}


def _read_plan(cls: type) -> _Plan | None:
    """(field, helper) pairs in libcst's visiting order, or None when the method is not the plain form."""
    owner = next((k for k in cls.__mro__ if "_visit_and_replace_children" in k.__dict__), None)
    if owner is None:
        return None
    try:
        fn = ast.parse(
            textwrap.dedent(inspect.getsource(owner.__dict__["_visit_and_replace_children"]))
        ).body[0]
    except (OSError, TypeError, SyntaxError):
        return None
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]  # type: ignore[attr-defined]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    ret = body[0].value
    if isinstance(ret, ast.Name) and ret.id == "self":
        return ()  # a leaf
    if not isinstance(ret, ast.Call) or ret.args:
        return None
    call = ret
    builds_own_type = (isinstance(call.func, ast.Name) and call.func.id == cls.__name__ and owner is cls) or (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "__class__"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
    )
    if not builds_own_type:
        return None  # e.g. an inherited method that builds its parent's type: let libcst do it
    plan: list[tuple[str, str]] = []
    for kw in call.keywords:
        v = kw.value
        if (
            isinstance(v, ast.Attribute)
            and isinstance(v.value, ast.Name)
            and v.value.id == "self"
            and v.attr == kw.arg
        ):
            continue  # a plain value copied over (Name.value, Integer.value ...)
        if not (
            isinstance(v, ast.Call)
            and isinstance(v.func, ast.Name)
            and v.func.id in _KINDS
            and len(v.args) == 4
        ):
            return None
        field = v.args[1]
        if not (isinstance(field, ast.Constant) and field.value == kw.arg):
            return None
        plan.append((kw.arg, _KINDS[v.func.id]))  # type: ignore[arg-type]
    return tuple(plan)


#: Types whose libcst method is not the plain form but whose order is plain all the same.
_MANUAL: dict[type, _Plan] = {
    cst.FormattedStringExpression: (
        ("whitespace_before_expression", "visit_required"),
        ("expression", "visit_required"),
        ("equal", "visit_optional"),
        ("whitespace_after_expression", "visit_required"),
        ("format_spec", _SEQ),
    ),
}


def _plan(cls: type) -> _Plan | None:
    try:
        return _PLANS[cls]
    except KeyError:
        plan = _PLANS[cls] = _MANUAL.get(cls) or _read_plan(cls)
        return plan


class _Walker:
    """One traversal; flags about the visitor are looked up once, not per node."""

    def __init__(self, visitor: Any, tick: Callable[[int, int], object] | None = None) -> None:
        self.v = visitor
        #: Called after each top-level statement of the module being walked (progress, limits).
        self.tick = tick
        self.ticked: Any = None  # the module body whose statements are ticked
        self.read_only = isinstance(visitor, CSTVisitor)
        #: Visitors that define no per-attribute hooks say so, sparing two calls per field.
        self.attr_hooks = not getattr(visitor, "NO_ATTRIBUTE_HOOKS", False)
        #: Node types the visitor ignores entirely (``on_visit`` False, ``on_leave`` a no-op that returns
        #: the node): they are not even entered. Punctuation and whitespace, mostly.
        self.skip: frozenset[type] = getattr(visitor, "SKIP_TYPES", frozenset())

    def visit(self, node: CSTNode) -> Any:
        v = self.v
        if self.tick is not None and self.ticked is None and isinstance(node, cst.Module):
            self.ticked = node.body
        if v.on_visit(node):
            plan = _PLANS.get(type(node), _MISSING)
            if plan is _MISSING:
                plan = _plan(type(node))
            updated = node._visit_and_replace_children(v) if plan is None else self.children(node, plan)
        else:
            updated = node
        if self.read_only:
            v.on_leave(node)
            return node
        result = v.on_leave(node, updated)
        if result is not updated and not isinstance(result, (CSTNode, RemovalSentinel, FlattenSentinel)):
            raise cst.CSTValidationError(
                "Expected a node of type CSTNode or a RemovalSentinel, "
                f"but got a return value of {type(result).__name__}"
            )
        return result

    def children(self, node: CSTNode, plan: _Plan) -> CSTNode:
        changes: dict[str, Any] | None = None
        hooks = self.attr_hooks
        skip = self.skip
        for field, kind in plan:
            old = getattr(node, field)
            if type(old) in skip:
                continue  # a node the visitor ignores: nothing to call
            seq = kind is _SEQ or kind is _BODY
            if seq and old is None:
                continue  # an absent optional sequence (an f-string expression's format_spec): libcst skips it
            if hooks:
                self.v.on_visit_attribute(node, field)
            if seq:
                new = self.many(old, kind is _BODY)
            elif old is None or old is MaybeSentinel.DEFAULT:
                new = old
            else:
                new = self.visit(old)
                if new is not old:
                    new = _checked(old, new, kind)
            if hooks:
                self.v.on_leave_attribute(node, field)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[field] = new
        return node if changes is None else node.with_changes(**changes)

    def many(self, children: Any, body: bool) -> Any:
        """Visit a sequence; return the original object when no child changed."""
        out: list[CSTNode] | None = None
        skip = self.skip
        tick = self.tick if children is self.ticked else None
        for i, child in enumerate(children):
            new = child if type(child) in skip else self.visit(child)
            if tick is not None:
                tick(i + 1, len(children))
            if new is child:
                if out is not None:
                    out.append(new)
                continue
            if out is None:
                out = list(children[:i])
            if isinstance(new, RemovalSentinel):
                continue
            if isinstance(new, FlattenSentinel):
                for n in new:
                    if not (body and not child._is_removable() and n._is_removable()):
                        out.append(n)
            elif not (body and not child._is_removable() and new._is_removable()):
                out.append(new)
        return children if out is None else tuple(out)


_MISSING: Any = object()


def _checked(child: CSTNode, result: Any, kind: str) -> Any:
    """libcst's rules for a replaced single child (sentinels allowed only where the field allows)."""
    if isinstance(result, FlattenSentinel):
        raise TypeError(
            f"We got a FlattenSentinel while visiting a {type(child).__name__}. This node's parent "
            "does not allow for it to be replaced with a sequence."
        )
    if isinstance(result, RemovalSentinel):
        if kind == "visit_required":
            raise TypeError(
                f"We got a RemovalSentinel while visiting a {type(child).__name__}. This node's "
                "parent does not allow it to be removed."
            )
        return None if kind == "visit_optional" else MaybeSentinel.DEFAULT
    return result


def visit(node: CSTNode, visitor: Any, tick: Callable[[int, int], object] | None = None) -> Any:
    """``node.visit(visitor)`` without rebuilding unchanged nodes (same hooks, order and results).

    ``tick(done, total)`` is called after each top-level statement when ``node`` is a module.
    """
    return _Walker(visitor, tick).visit(node)


_NO_PLAN = object()


def child_nodes(node: CSTNode, skip: frozenset[type] = frozenset()) -> list[CSTNode]:
    """``node.children`` (the same nodes in the same order) read straight from the fields: libcst's property runs a
    visitor over the node, which costs more than the whole analysis on a large file. ``skip``: node types
    left out (with what is under them)."""
    plan = _PLANS.get(type(node), _NO_PLAN)
    if plan is _NO_PLAN:
        plan = _plan(type(node))
    if plan is None:
        return [c for c in node.children if type(c) not in skip]
    out: list[CSTNode] = []
    for name, kind in plan:
        value = getattr(node, name)
        if kind == "visit_sequence" or kind == "visit_body_sequence":
            if value is not None:
                for c in value:
                    if type(c) not in skip:
                        out.append(c)
        elif value is not None and value is not MaybeSentinel.DEFAULT and type(value) not in skip:
            out.append(value)  # (a planned field holds a node, None or MaybeSentinel.DEFAULT)
    return out


def every_node(node: CSTNode) -> Iterator[CSTNode]:
    """``node`` and every node below it, nested definitions included (pre-order, children reversed)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(child_nodes(n))
