"""libcst's scope analysis (ScopeProvider), at a fraction of its cost, with the very same answers.

``MetadataWrapper(m).resolve(ScopeProvider)`` spends most of its time in libcst's traversal, not in the
analysis: ``node.visit(visitor)`` rebuilds every node it passes, even for a read-only visitor, and the
wrapper walks the whole tree once more per provider batch after each provider's own walk. Here libcst's
own visitors (ExpressionContextVisitor, ScopeVisitor: the same analysis code, state and hook order) walk
the tree through :func:`_read`, which calls the same hooks in libcst's child order without rebuilding
anything; their methods that recurse by hand (``node.body.visit(self)``) are restated below with
``_read(node.body, self)`` and nothing else changed (from libcst 1.9, MIT licence). Two things no answer
depends on are left out: punctuation and whitespace nodes (names.TRIVIA: no names inside, no hooks) are not
entered, so they get no scope, and per-field hooks are not called (these visitors have one pair,
ClassDef.bases, which libcst never reaches: visit_ClassDef returns False). libcst is not patched.
tests/migrate/test_flow_scopes.py compares every node's scope, every assignment's references and every
qualified name with libcst's own provider, and checks those two omissions still hold in the installed libcst.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack

import libcst as cst
from libcst import CSTVisitor, MaybeSentinel
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ExpressionContextProvider, Scope, ScopeProvider
from libcst.metadata.expression_context_provider import ExpressionContext, ExpressionContextVisitor
from libcst.metadata.scope_provider import (
    _ASSIGNMENT_LIKE_NODES,
    AnnotationScope,
    ClassScope,
    ComprehensionScope,
    FunctionScope,
    ScopeVisitor,
)

from ._walk import _PLANS, _plan
from .names import TRIVIA, node_types

_SEQUENCES = ("visit_sequence", "visit_body_sequence")
_MISSING = object()
_SKIP = node_types(*TRIVIA)
_ASSIGNMENT_LIKE = node_types(*_ASSIGNMENT_LIKE_NODES)
_LOAD, _STORE, _DEL = ExpressionContext.LOAD, ExpressionContext.STORE, ExpressionContext.DEL


def scopes(module: cst.Module) -> Mapping[cst.CSTNode, Scope | None]:
    """``MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)``: node -> its scope."""
    contexts = ExpressionContextProvider()
    _read(module, _Contexts(contexts, _LOAD))  # (ExpressionContextProvider.visit_Module)
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts._computed}
    visitor = _Scopes(provider)  # (ScopeProvider.visit_Module)
    _read(module, visitor)
    visitor.infer_accesses()
    return provider._computed


def _read(node: cst.CSTNode, visitor: CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor (on_visit, children in libcst's order, on_leave),
    without rebuilding nodes and without entering trivia."""
    if visitor.on_visit(node):
        plan = _PLANS.get(type(node), _MISSING)
        if plan is _MISSING:
            plan = _plan(type(node))
        if plan is None:
            node._visit_and_replace_children(visitor)  # (libcst's own walk, for the few such types)
        else:
            for name, kind in plan:
                value = getattr(node, name)
                if kind in _SEQUENCES:
                    for child in value or ():
                        if type(child) not in _SKIP:
                            _read(child, visitor)
                elif value is not None and value is not MaybeSentinel.DEFAULT and type(value) not in _SKIP:
                    _read(value, visitor)
    visitor.on_leave(node)


def _opt(node: cst.CSTNode | None, visitor: CSTVisitor) -> None:
    if node is not None:
        _read(node, visitor)


class _Dispatch:
    """CSTVisitor's on_visit / on_leave, with the ``visit_<Type>`` / ``leave_<Type>`` function looked up once
    per node type and class (libcst formats the name and looks it up for every node)."""

    _visits: dict[type, object]
    _leaves: dict[type, object]

    def on_visit(self, node: cst.CSTNode) -> bool:
        t = type(node)
        try:
            hook = self._visits[t]
        except KeyError:
            hook = self._visits[t] = getattr(type(self), f"visit_{t.__name__}", None)
        return hook is None or hook(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        t = type(original_node)
        try:
            hook = self._leaves[t]
        except KeyError:
            hook = self._leaves[t] = getattr(type(self), f"leave_{t.__name__}", None)
        if hook is not None:
            hook(self, original_node)


class _Contexts(_Dispatch, ExpressionContextVisitor):
    """libcst's ExpressionContextVisitor; its hand-made recursion through :func:`_read`."""

    _visits: dict[type, object] = {}
    _leaves: dict[type, object] = {}

    def _as(self, context: ExpressionContext) -> _Contexts:
        return _Contexts(self.provider, context)

    def visit_Assign(self, node: cst.Assign) -> bool:
        for target in node.targets:
            _read(target, self._as(_STORE))
        _read(node.value, self)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        _read(node.target, self._as(_STORE))
        _read(node.annotation, self)
        _opt(node.value, self)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        _read(node.target, self._as(_STORE))
        _read(node.value, self)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        _read(node.target, self._as(_STORE))
        _read(node.value, self)
        return False

    def visit_AsName(self, node: cst.AsName) -> bool:
        _read(node.name, self._as(_STORE))
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        _read(node.target, self._as(_STORE))
        _read(node.iter, self)
        for i in node.ifs:
            _read(i, self)
        _opt(node.inner_for_in, self)
        return False

    def visit_For(self, node: cst.For) -> bool:
        _read(node.target, self._as(_STORE))
        _read(node.iter, self)
        _read(node.body, self)
        _opt(node.orelse, self)
        return False

    def visit_Del(self, node: cst.Del) -> bool:
        _read(node.target, self._as(_DEL))
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.provider.set_metadata(node, self.context)
        _read(node.value, self._as(_LOAD))
        return False

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        self.provider.set_metadata(node, self.context)
        _read(node.value, self._as(_LOAD))
        if isinstance(node.slice, Sequence):
            for sli in node.slice:
                _read(sli, self._as(_LOAD))
        else:
            _read(node.slice, self._as(_LOAD))
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        _read(node.name, self._as(_STORE))
        _read(node.body, self)
        for child in (*node.bases, *node.keywords, *node.decorators):
            _read(child, self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        _read(node.name, self._as(_STORE))
        _read(node.params, self)
        _read(node.body, self)
        for decorator in node.decorators:
            _read(decorator, self)
        _opt(node.returns, self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        _read(node.name, self._as(_STORE))
        _opt(node.annotation, self)
        _opt(node.default, self)
        return False


class _Scopes(_Dispatch, ScopeVisitor):
    """libcst's ScopeVisitor; its hand-made recursion through :func:`_read`, and its on_leave testing the
    node's type against a set (libcst's isinstance over a tuple of ABCs costs more than the rest)."""

    _visits: dict[type, object] = {}
    _leaves: dict[type, object] = {}

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.provider.set_metadata(original_node, self.scope)
        if type(original_node) in _ASSIGNMENT_LIKE:
            self.scope._assignment_count += 1
        _Dispatch.on_leave(self, original_node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        stack = self._ScopeVisitor__top_level_attribute_stack
        if stack[-1] is None:
            stack[-1] = node
        _read(node.value, self)  # explicitly not visiting attr
        if stack[-1] is node:
            stack[-1] = None
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        self._ScopeVisitor__top_level_attribute_stack.append(None)
        hints = self._ScopeVisitor__in_type_hint_stack
        hints.append(False)
        qnames = {qn.name for qn in self.scope.get_qualified_names_for(node)}
        if "typing.NewType" in qnames or "typing.TypeVar" in qnames:
            _read(node.func, self)
            hints[-1] = True
            for arg in node.args[1:]:
                _read(arg, self)
            return False
        if "typing.cast" in qnames:
            _read(node.func, self)
            if len(node.args) > 0:
                hints.append(True)
                _read(node.args[0], self)
                hints.pop()
                for arg in node.args[1:]:
                    _read(arg, self)
            return False
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        self._string_annotation(node)
        return False

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> bool:
        return not self._string_annotation(node)

    def _string_annotation(self, node: cst.SimpleString | cst.ConcatenatedString) -> bool:
        """libcst's _handle_string_annotation."""
        if (
            self._ScopeVisitor__in_type_hint_stack[-1] or self._ScopeVisitor__in_annotation_stack[-1]
        ) and not self._ScopeVisitor__in_ignored_subscript:
            value = node.evaluated_value
            if value:
                top_level_annotation = self._ScopeVisitor__last_string_annotation is None
                if top_level_annotation:
                    self._ScopeVisitor__last_string_annotation = node
                try:
                    mod = cst.parse_module(value)
                    _read(mod, self)
                except cst.ParserSyntaxError:
                    pass  # (as CPython: an unparsable string annotation is no annotation)
                if top_level_annotation:
                    self._ScopeVisitor__last_string_annotation = None
                return True
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.scope.record_assignment(node.name.value, node)
        self.provider.set_metadata(node.name, self.scope)
        with ExitStack() as stack:
            if node.type_parameters:
                stack.enter_context(self._new_scope(AnnotationScope, node, None))
                _read(node.type_parameters, self)
            with self._new_scope(FunctionScope, node, get_full_name_for_node(node.name)):
                _read(node.params, self)
                _read(node.body, self)
            for decorator in node.decorators:
                _read(decorator, self)
            _opt(node.returns, self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        with self._new_scope(FunctionScope, node):
            _read(node.params, self)
            _read(node.body, self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        self.scope.record_assignment(node.name.value, node)
        self.provider.set_metadata(node.name, self.scope)
        with self._switch_scope(self.scope.parent):
            for field in (node.default, node.annotation):
                _opt(field, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        _opt(node.value, self)  # (the keyword is neither an assignment nor an access)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.record_assignment(node.name.value, node)
        self.provider.set_metadata(node.name, self.scope)
        for decorator in node.decorators:
            _read(decorator, self)
        with ExitStack() as stack:
            if node.type_parameters:
                stack.enter_context(self._new_scope(AnnotationScope, node, None))
                _read(node.type_parameters, self)
            for base in node.bases:
                _read(base, self)
            for keyword in node.keywords:
                _read(keyword, self)
            with self._new_scope(ClassScope, node, get_full_name_for_node(node.name)):
                for statement in node.body.body:
                    _read(statement, self)
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return self._comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return self._comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return self._comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return self._comprehension(node)

    def _comprehension(self, node: cst.ListComp | cst.SetComp | cst.DictComp | cst.GeneratorExp) -> bool:
        """libcst's _visit_comp_alike."""
        for_in = node.for_in
        _read(for_in.iter, self)
        self.provider.set_metadata(for_in, self.scope)
        with self._new_scope(ComprehensionScope, node):
            _read(for_in.target, self)
            self.scope._assignment_count += 1  # things from here on can refer to the target
            for condition in for_in.ifs:
                _read(condition, self)
            _opt(for_in.inner_for_in, self)
            if isinstance(node, cst.DictComp):
                _read(node.key, self)
                _read(node.value, self)
            else:
                _read(node.elt, self)
        return False

    def visit_For(self, node: cst.For) -> bool:
        _read(node.target, self)
        self.scope._assignment_count += 1
        for child in (node.iter, node.body, node.orelse, node.asynchronous):
            _opt(child, self)
        return False

    def visit_TypeAlias(self, node: cst.TypeAlias) -> bool:
        self.scope.record_assignment(node.name.value, node)
        with self._new_scope(AnnotationScope, node, None):
            _opt(node.type_parameters, self)
            _read(node.value, self)
        return False

    def visit_TypeVar(self, node: cst.TypeVar) -> bool:
        self.scope.record_assignment(node.name.value, node)
        _opt(node.bound, self)
        return False
