"""The single libcst pass: dispatches nodes to the enabled rules and collects diagnostics.

The transformer implements the rules' :class:`tpu_workbench.migrate.rules.base.Context`: it resolves qualified names (so
``import torch_xla.core.xla_model as anything`` and ``from torch import cuda`` work and a local ``xs``
is never touched), records diagnostics at original positions, and places at most one
``# TODO(tpu-migrate CODE)`` comment per code above a statement, never a second one on a re-run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence

import libcst as cst
from libcst.metadata import QualifiedNameProvider, QualifiedNameSource

from ._fstring import requote_fields
from ._positions import node_hooks, start_positions
from ._quiet import quiet_statements
from ._spans import SourceMap
from ._walk import child_nodes
from .imports import emptied_if, removable_aliases
from .names import TRIVIA_TYPES, ImportTable, Scope, canonical, node_types
from .results import Diagnostic, Outcome
from .rules._util import pure
from .rules.base import Rule

_STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# Exact-type sets for the per-node checks (isinstance on libcst's ABC classes is slow).
_STATEMENTS = node_types(*_STATEMENT_TYPES)
_IMPORTS = node_types(cst.Import, cst.ImportFrom)
_BINDING_TARGETS = node_types(cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)
_REFS = node_types(cst.Name, cst.Attribute)
_ATTRIBUTE, _CALL, _ASNAME, _DEL = (node_types(c) for c in (cst.Attribute, cst.Call, cst.AsName, cst.Del))
_NAMED_BINDERS = node_types(cst.Param, cst.FunctionDef, cst.ClassDef)
_DEFINITIONS = node_types(cst.FunctionDef, cst.ClassDef)
_LOOPS = node_types(cst.For, cst.While)
_TRIES = node_types(cst.Try, cst.TryStar)
_IF = node_types(cst.If)
_FSTRING = node_types(cst.FormattedString)
_IF_WHILE = node_types(cst.If, cst.While)
_NAME = node_types(cst.Name)
_EXPRESSIONS = node_types(cst.BaseExpression)
_SIMPLE_LINE, _MODULE, _INDENTED = (
    node_types(c) for c in (cst.SimpleStatementLine, cst.Module, cst.IndentedBlock)
)
_TODO = re.compile(r"#\s*TODO\(tpu-migrate (TPU\d+)\)")
TODO_PREFIX = "TODO(tpu-migrate"


class _Index:
    """Rules arranged by hook key, built once per (select, ignore) choice."""

    def __init__(
        self, rules: Sequence[type[Rule]], all_rules: Sequence[type[Rule]], *, flag_only: bool = False
    ):
        self.rules = [r() for r in rules]
        for r in self.rules:
            r.flag_only = flag_only
        self.codes = {r.code for r in rules}
        self.by_call: dict[str, Rule] = {}
        self.by_stmt: dict[str, Rule] = {}
        self.by_ref: dict[str, Rule] = {}
        self.by_method: dict[str, list[Rule]] = {}
        self.by_visit: dict[type, list[Rule]] = {}
        self.by_leave: dict[type, list[Rule]] = {}
        self.prefixes: list[tuple[str, Rule]] = []
        for r in self.rules:
            for q in r.calls:
                self.by_call[q] = r
            for q in r.statements:
                self.by_stmt[q] = r
            for q in r.refs:
                self.by_ref[q] = r
            for m in r.methods:
                self.by_method.setdefault(m, []).append(r)
            # only the hooks a rule implements: most rules that see a node type either visit or leave it
            for t in r.node_types:
                if type(r).visit_node is not Rule.visit_node:
                    self.by_visit.setdefault(t, []).append(r)
                if type(r).leave_node is not Rule.leave_node:
                    self.by_leave.setdefault(t, []).append(r)
            for p in r.ref_prefixes:
                self.prefixes.append((p, r))
        self.prefixes.sort(key=lambda pr: -len(pr[0]))
        # Names some rule knows about, whether or not it is selected: the catch-alls skip them.
        self.known_calls = frozenset(q for r in all_rules for q in (*r.calls, *r.statements))
        self.known_refs = frozenset(q for r in all_rules for q in r.refs)


class MigrationTransformer(cst.CSTTransformer):
    """Names resolved from the file's import table; positions computed once at the end (lazily)."""

    #: migrate._walk need not enter these at all (on_visit/on_leave ignore them).
    SKIP_TYPES = TRIVIA_TYPES

    def __init__(
        self, index: _Index, path: str, source_lines: Sequence[str], table: ImportTable | None = None
    ):
        super().__init__()
        self.table = table
        self._reports: list[tuple[cst.CSTNode, cst.CSTNode | None, str, str, bool, Outcome]] = []
        self._import_nodes: dict[str, cst.CSTNode] = {}
        self.index = index
        self.path = path
        self.lines = source_lines
        self.diagnostics: list[Diagnostic] = []
        self.needed_imports: set[str] = set()
        #: Names of the local replacements (rules/_helpers.py) the rewritten file needs.
        self.helpers: set[str] = set()
        #: True when a helper is used by a module-level statement (it must be defined before that).
        self._stack: list[cst.CSTNode] = []
        #: id(node) -> its top-level statement, for nodes whose position may be reported.
        self._tops: dict[int, cst.CSTNode] = {}
        #: The scopes around the node being visited (see ImportTable.scopes).
        self._scopes: list[Scope] = []
        self._scope_starts = table.scopes if table is not None else {}
        self._pending: dict[int, list[tuple[str, str]]] = {}
        self._inner: set[int] = set()
        #: id(callee) -> the call, for every call seen so far.
        self._called: dict[int, cst.Call] = {}
        self._stmt_claims: dict[int, tuple[Rule, str, cst.Call | None, cst.BaseExpression | None]] = {}
        self._claimed_calls: set[int] = set()
        self._skip: set[int] = set()
        self._skip_depth = 0
        #: Nodes left exactly as written, themselves included (the code a kept device check controls).
        self.frozen: set[int] = set()
        self._targets: set[int] = set()
        #: Per-file scratch space for rules (rule instances are shared between files).
        self.scratch: dict[str, object] = {}
        self.source_text = "\n".join(source_lines)
        #: Answers that depend on :attr:`source_text` alone: shared by every rule pass over one file
        #: (migrate.groups runs one per group of a big file; see source._rule_pass).
        self.text_memo: dict[object, object] = {}
        #: ``ast.parse(source_text)`` when the caller has it (migrate.source), else None: parsed when needed.
        self.source_tree: ast.Module | None = None
        self._carry: tuple[int, Sequence[cst.EmptyLine]] | None = None
        #: depth -> the setter call of the last simple statement left at that depth (see _drop_repeat).
        self._last_setter: dict[int, str | None] = {}
        self.import_positions: dict[str, tuple[int, int]] = {}
        self.module: cst.Module | None = None
        self.string_claims: dict[int, tuple[str, Outcome, str, str | None]] = {}
        #: ``module.code`` when :meth:`finalize` computed positions (same code generation), else None.
        self.module_code: str | None = None
        #: ids of compound statements whose children no rule can match (see migrate._quiet): not entered.
        self._quiet: set[int] = set()

    # ----------------------------------------------------------------- context API for the rules
    def qname(self, node: cst.CSTNode) -> str | None:
        """Qualified name of an original Name/Attribute bound by an import, else None.

        Resolved from the scopes around the node being visited: ask about the current node or parts of
        it outside any lambda or comprehension nested in it (rules/ tests check fast == libcst scopes).
        """
        assert self.table is not None
        return self.table.qname(node, self._scopes)

    def finalize(self, module: cst.Module, smap: SourceMap | None = None) -> None:
        """Resolve the positions of what was reported (only when something was).

        With a :class:`SourceMap`, only the top-level statements that hold a finding are generated;
        otherwise the whole module is, and that code generation also yields ``module.code`` (kept in
        :attr:`module_code`), so the byte-for-byte check afterwards needs no second pass.
        """
        if not self._reports and not self._import_nodes:
            return
        positions = self._positions_by_statement(smap) if smap is not None and smap.ok else None
        if positions is None:
            positions, self.module_code = start_positions(module)

        def pos(node: cst.CSTNode | None) -> tuple[int, int] | None:
            return positions(node) if node is not None else None  # type: ignore[misc]

        for node, fallback, code, message, fixed, outcome in self._reports:
            line, col = pos(node) or pos(fallback) or (1, 1)
            self.diagnostics.append(Diagnostic(self.path, line, col, code, message, fixed, outcome))
        self._reports.clear()
        for name, node in self._import_nodes.items():
            self.import_positions[name] = pos(node) or (1, 1)

    def _positions_by_statement(
        self, smap: SourceMap
    ) -> Callable[[cst.CSTNode], tuple[int, int] | None] | None:
        by_top: dict[int, Callable[[cst.CSTNode], tuple[int, int] | None]] = {}
        with node_hooks():  # (once around all the statements generated: see _positions.node_hooks)
            for top in {id(t): t for t in self._tops.values()}.values():
                found = smap.positions(top)
                if found is None:
                    return None
                by_top[id(top)] = found
        tops = self._tops

        def pos(node: cst.CSTNode) -> tuple[int, int] | None:
            top = tops.get(id(node))
            return by_top[id(top)](node) if top is not None else None

        return pos

    def _note_top(self, *nodes: cst.CSTNode | None) -> None:
        """Remember the top-level statement around nodes whose position will be asked for."""
        top = self._stack[0] if self._stack else None
        for n in nodes:
            if n is not None and top is not None:
                self._tops.setdefault(id(n), top)

    def is_known(self, qname: str, called: bool) -> bool:
        return qname in self.index.known_refs or (called and qname in self.index.known_calls)

    def enclosing_definitions(self) -> list[cst.FunctionDef | cst.ClassDef]:
        return [s for s in self._stack if type(s) in _DEFINITIONS]  # type: ignore[misc]

    def in_try(self) -> bool:
        for s in reversed(self._stack):
            if type(s) in _DEFINITIONS:
                return False
            if type(s) in _TRIES:
                return True
        return False

    def in_loop(self) -> bool:
        for s in reversed(self._stack):
            if type(s) in _DEFINITIONS:
                return False
            if type(s) in _LOOPS:
                return True
        return False

    def is_called(self, node: cst.CSTNode) -> bool:
        return id(node) in self._called

    def enabled(self, code: str) -> bool:
        return code in self.index.codes

    def _fallback(self) -> cst.CSTNode | None:
        return self._stack[-1] if self._stack else None

    def report(self, node: cst.CSTNode, message: str, *, code: str, outcome: Outcome = "rewritten") -> None:
        """Record a rewrite (``outcome`` rewritten or warned)."""
        self._reports.append((node, self._fallback(), code, _short(message), True, outcome))
        self._note_top(node, self._fallback())

    def flag(self, node: cst.CSTNode, message: str, *, code: str) -> None:
        """Record a finding for a human and put a TODO comment above the enclosing statement.

        A flagged callee keeps its call whole: `torch.cuda.get_device_properties("cuda")` stays as written (its
        arguments are not visited yet when the callee is left), never half-migrated."""
        call = self._called.get(id(node))
        if call is not None:
            self._skip.update(id(a) for a in call.args)
        message = _short(message)
        self._reports.append((node, self._fallback(), code, message, False, "flagged"))
        self._note_top(node, self._fallback())
        if self._stack:
            pend = self._pending.setdefault(id(self._stack[-1]), [])
            if all(c != code for c, _ in pend):
                pend.append((code, message))

    def need_import(self, module: str) -> None:
        self.needed_imports.add(module)

    def need_helper(self, name: str) -> None:
        self.helpers.add(name)

    def claim_statement(
        self,
        stmt: cst.SimpleStatementLine,
        rule: Rule,
        qname: str = "",
        call: cst.Call | None = None,
        target: cst.BaseExpression | None = None,
    ) -> None:
        """A statement-level rule takes the whole line; nothing inside it is rewritten on its own."""
        self._stmt_claims[id(stmt)] = (rule, qname, call, target)
        if call is not None:
            self._claimed_calls.add(id(call))

    def statements(self) -> list[cst.CSTNode]:
        return list(self._stack)

    def previous_statement(self, stmt: cst.CSTNode) -> cst.CSTNode | None:
        """The statement just before ``stmt`` in its own block (original tree), or None when it is first.

        Call it for the statement being visited or left; it searches only the enclosing statement's
        blocks (or the module), so it is cheap enough for a rule that fires now and then.
        """
        parent: cst.CSTNode | None = (
            self._stack[-2] if len(self._stack) >= 2 and self._stack[-1] is stmt else None
        )
        todo: list[cst.CSTNode] = [parent if parent is not None else self.module]  # type: ignore[list-item]
        while todo:
            node = todo.pop()
            body = getattr(node, "body", None)
            if isinstance(body, (list, tuple)):  # Module.body, IndentedBlock.body
                for i, s in enumerate(body):
                    if s is stmt:
                        return body[i - 1] if i else None
                continue
            todo.extend(
                c for c in child_nodes(node) if type(c) not in _STATEMENTS and type(c) not in _EXPRESSIONS
            )
        return None

    def suppress_current_statement(self) -> None:
        """No other rule touches what is inside the statement being visited."""
        if self._stack:
            self._skip.add(id(self._stack[-1]))

    def keep_branch(self) -> None:
        if self._stack and type(self._stack[-1]) in _IF_WHILE:
            self._skip.add(id(self._stack[-1].body))  # type: ignore[attr-defined]

    def skip_inside(self, node: cst.CSTNode) -> None:
        """No rule touches the children of ``node`` (call from a ``visit_node`` hook)."""
        self._skip.add(id(node))

    def statement(self) -> cst.CSTNode | None:
        """The innermost statement being visited (call from a ``visit_node`` hook)."""
        return self._stack[-1] if self._stack else None

    def is_condition(self, node: cst.CSTNode) -> bool:
        """True when ``node`` is the whole test of the enclosing ``if``/``while`` (no parentheses needed)."""
        top = self._stack[-1] if self._stack else None
        return isinstance(top, (cst.If, cst.While)) and top.test is node

    def in_claimed_statement(self) -> bool:
        """True inside a statement that a statement-level rule rewrites as a whole."""
        return any(id(s) in self._stmt_claims for s in self._stack)

    def is_target(self, node: cst.CSTNode) -> bool:
        """True for an assignment/deletion/loop target (rewriting it would break the code)."""
        return id(node) in self._targets

    def claim_string(
        self, node: cst.SimpleString, code: str, outcome: Outcome, message: str, value: str | None = None
    ) -> None:
        """A contextual rule (comparison, argparse default …) decides how a literal is reported."""
        self.string_claims.setdefault(id(node), (code, outcome, message, value))

    # ----------------------------------------------------------------- traversal
    def on_visit(self, node: cst.CSTNode) -> bool:
        t = type(node)
        if t in TRIVIA_TYPES:  # no rule looks at punctuation or whitespace
            return False
        if t in _MODULE:
            self.module = node  # type: ignore[assignment]
            self._quiet = quiet_statements(node, self.source_text, _IDEMPOTENT, self.source_tree)  # type: ignore[arg-type]
        scope = self._scope_starts.get(id(node))
        if scope is not None:
            self._scopes.append(scope)
        if t in _STATEMENTS:
            self._stack.append(node)
        elif t in _INDENTED and self._last_setter:  # a new block: no line before its first one
            self._last_setter = {d: k for d, k in self._last_setter.items() if d <= len(self._stack)}
        is_import = t in _IMPORTS
        if is_import:
            for _alias, name in removable_aliases(node):  # type: ignore[arg-type]
                if name not in self._import_nodes:
                    self._import_nodes[name] = node
                    self._note_top(node)
        if t in _ATTRIBUTE:
            self._inner.add(id(node.value))  # type: ignore[attr-defined]
            self._inner.add(id(node.attr))  # type: ignore[attr-defined]
        elif t in _CALL:
            self._called[id(node.func)] = node  # type: ignore[attr-defined,assignment]
        elif t in _BINDING_TARGETS:
            self._targets.add(id(node.target))  # type: ignore[attr-defined]
        elif t in _ASNAME:
            self._targets.add(id(node.name))  # type: ignore[attr-defined]
        elif t in _DEL:
            self._targets.add(id(node.target))  # type: ignore[attr-defined]
        elif t in _NAMED_BINDERS:  # a parameter's, function's or class's own name binds; it refers to nothing
            self._targets.add(id(node.name))  # type: ignore[attr-defined]
        if id(node) in self.frozen:
            self._skip_depth += 1
        if not self._skip_depth:
            for rule in self.index.by_visit.get(t, ()):
                rule.visit_node(self, node)
            if t in _SIMPLE_LINE and id(node) not in self._stmt_claims:
                self._claim_by_qname(node)  # type: ignore[arg-type]
        if id(node) in self._skip:
            self._skip_depth += 1
        return not is_import and id(node) not in self._quiet

    # No per-attribute hooks: skip libcst's name-based look-up for every field.
    #: Tells migrate._walk there are no attribute hooks to call.
    NO_ATTRIBUTE_HOOKS = True

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def _claim_by_qname(self, line: cst.SimpleStatementLine) -> None:
        if len(line.body) != 1:
            return
        small = line.body[0]
        call: cst.Call | None = None
        target = None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
        elif isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(small.value, cst.Call):
                call = small.value
        if call is not None:
            q = self.qname(call.func)
            if q and q in self.index.by_stmt:
                self.claim_statement(line, self.index.by_stmt[q], q, call, target)
                return
        if target is not None and isinstance(target, (cst.Attribute, cst.Name)):
            q = self.qname(target)
            if q and q in self.index.by_stmt:
                self.claim_statement(line, self.index.by_stmt[q], q, None, target)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        t = type(original)
        if t in TRIVIA_TYPES:
            return updated
        result: object = updated
        if id(original) in self._skip:
            self._skip_depth -= 1
        if not self._skip_depth:
            if t in _CALL:
                result = self._leave_call(original, updated)  # type: ignore[arg-type]
            elif t in _REFS:
                result = self._leave_ref(original, updated)  # type: ignore[arg-type]
            if result is updated:
                for rule in self.index.by_leave.get(t, ()):
                    r = rule.leave_node(self, original, updated)
                    if r is not None:
                        result = r
                        break
        if id(original) in self.frozen:
            self._skip_depth -= 1
        if t in _FSTRING and result is not original and isinstance(result, cst.FormattedString):
            result = requote_fields(result)  # (a rule's "tpu" inside f"{...}": see migrate._fstring)
        if type(result) in _INDENTED and not result.body:  # type: ignore[attr-defined]
            result = result.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        if t in _SIMPLE_LINE and id(original) in self._stmt_claims:
            result = self._leave_claimed(original, result)  # type: ignore[arg-type]
        if self._scopes and id(original) in self._scope_starts:
            self._scopes.pop()
        if t in _IF and not self._pending.get(id(original)) and emptied_if(original, result):  # type: ignore[arg-type]
            result = cst.RemovalSentinel.REMOVE
        if t in _STATEMENTS:
            result = self._drop_repeat(original, result)
            result = self._attach_todos(original, result)
            result = self._carry_lines(original, result)
            self._stack.pop()
        return result

    def _drop_repeat(self, original: cst.CSTNode, result: object) -> object:
        """A rewritten setter line equal to the line before it (``torch.manual_seed(s)`` twice, once written by
        the user, once from ``torch.cuda.manual_seed(s)``) says nothing new: it goes."""
        depth = len(self._stack)
        for d in [d for d in self._last_setter if d > depth]:
            del self._last_setter[d]
        key = _setter_key(result)
        if key is not None and result is not original and self._last_setter.get(depth) == key:
            return cst.RemovalSentinel.REMOVE
        self._last_setter[depth] = key
        return result

    def _carry_lines(self, original: cst.CSTNode, result: object) -> object:
        """Blank lines and comments above a deleted statement move to the next one at the same depth."""
        depth = len(self._stack)
        if self._carry is not None and self._carry[0] > depth:
            self._carry = None
        if isinstance(result, cst.RemovalSentinel):
            lines = list(getattr(original, "leading_lines", ()))
            if self._carry is not None and self._carry[0] == depth:
                lines = [*self._carry[1], *lines]
            self._carry = (depth, lines) if lines else self._carry
            return result
        if self._carry is not None and self._carry[0] == depth:
            carried = self._carry[1]
            self._carry = None
            if isinstance(result, cst.FlattenSentinel):
                nodes = list(result.nodes)
                nodes[0] = nodes[0].with_changes(leading_lines=_merge_lines(carried, nodes[0].leading_lines))
                return cst.FlattenSentinel(nodes)
            if isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return result.with_changes(leading_lines=_merge_lines(carried, result.leading_lines))
        return result

    def _leave_call(self, orig: cst.Call, node: cst.Call) -> cst.BaseExpression:
        if id(orig) in self._claimed_calls:
            return node
        q = self.qname(orig.func)
        if q is not None:
            rule = self.index.by_call.get(q) or self.index.by_stmt.get(q)
            if rule is not None:
                return rule.call(self, orig, node, q) or node
        if isinstance(orig.func, cst.Attribute):
            for rule in self.index.by_method.get(orig.func.attr.value, ()):
                r = rule.method(self, orig, node)
                if r is not None:
                    return r
        return node

    def _leave_ref(self, orig: cst.BaseExpression, node: cst.BaseExpression) -> cst.BaseExpression:
        if id(orig) in self._inner:
            return node
        if type(orig) in _NAME and id(orig) in self._targets:
            return node  # a bare name being bound (``xm = None``, ``def f(xm)``) is not a use of an import
        q = self.qname(orig)
        if q is None:
            return node
        rule = self.index.by_ref.get(q)
        if rule is not None:
            return rule.ref(self, orig, node, q) or node
        for prefix, rule in self.index.prefixes:
            if q == prefix or q.startswith(prefix + "."):
                r = rule.ref(self, orig, node, q)
                return r or node
        return node

    def _leave_claimed(self, orig: cst.SimpleStatementLine, node: object):
        rule, q, _call, _target = self._stmt_claims[id(orig)]
        if not isinstance(node, cst.SimpleStatementLine):
            return node
        small = node.body[0]
        call = getattr(small, "value", None)
        call = call if isinstance(call, cst.Call) else None
        target = small.targets[0].target if isinstance(small, cst.Assign) else None
        r = rule.statement(self, orig, node, q, call, target)
        if r is None:
            return node
        if isinstance(r, cst.RemovalSentinel):
            return r
        new = list(r)
        if not new:
            return cst.RemovalSentinel.REMOVE
        new[0] = new[0].with_changes(leading_lines=[*node.leading_lines, *new[0].leading_lines])
        return cst.FlattenSentinel(new) if len(new) > 1 else new[0]

    def _existing_todos(self, stmt: cst.CSTNode) -> set[str]:
        """TODO codes already above ``stmt`` (its leading lines; the module header for the first one)."""
        lines = list(getattr(stmt, "leading_lines", ()))
        if self.module is not None and self.module.body and self.module.body[0] is stmt:
            lines = [*self.module.header, *lines]
        found: set[str] = set()
        for ln in lines:
            if ln.comment is not None:
                m = _TODO.search(ln.comment.value)
                if m:
                    found.add(m.group(1))
        return found

    def _attach_todos(self, orig: cst.CSTNode, result: object):
        pend = self._pending.pop(id(orig), None)
        if not pend or isinstance(result, cst.RemovalSentinel):
            return result
        have = self._existing_todos(orig)
        # A re-run over flagged code reads it differently (the 'tpu' the first run wrote beside a kept 'cuda' is
        # "another device"), but it is the same finding: one TODO per statement.
        if have:
            return result
        new_lines = [
            cst.EmptyLine(indent=True, comment=cst.Comment(f"# {TODO_PREFIX} {c}): {_one_line(m)}"))
            for c, m in pend
        ]
        if not new_lines:
            return result
        if isinstance(result, cst.FlattenSentinel):
            nodes = list(result.nodes)
            nodes[0] = nodes[0].with_changes(leading_lines=[*nodes[0].leading_lines, *new_lines])
            return cst.FlattenSentinel(nodes)
        assert isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        return result.with_changes(leading_lines=[*result.leading_lines, *new_lines])


#: Calls whose repetition on the next line changes nothing.
_IDEMPOTENT = frozenset(
    {
        "torch.manual_seed",
        "torch.set_float32_matmul_precision",
        "torch.set_default_device",
        "torch.accelerator.synchronize",
        "torch.use_deterministic_algorithms",
    }
)


def _setter_key(stmt: object) -> str | None:
    if type(stmt) not in _SIMPLE_LINE or len(stmt.body) != 1:  # type: ignore[attr-defined]
        return None
    small = stmt.body[0]  # type: ignore[attr-defined]
    call = small.value if isinstance(small, cst.Expr) else None
    if (
        not isinstance(call, cst.Call)
        or cst.helpers.get_full_name_for_node(call.func) not in _IDEMPOTENT
        or not all(pure(a.value) for a in call.args)
    ):
        return None
    return _EMPTY_MODULE.code_for_node(call)


_EMPTY_MODULE = cst.Module(body=[])


def _merge_lines(carried: Sequence[cst.EmptyLine], own: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines above a deleted statement, then the next one's own; a run of blank lines where the two meet
    is as long as the longer of the two runs (deleting a line between paragraphs leaves one gap, not two)."""
    lines = [*carried, *own]
    if not carried or not own or carried[-1].comment is not None or own[0].comment is not None:
        return lines
    tail = next((i for i, ln in enumerate(reversed(carried)) if ln.comment is not None), len(carried))
    head = next((i for i, ln in enumerate(own) if ln.comment is not None), len(own))
    blanks = [*carried[len(carried) - tail :], *own[:head]][: max(tail, head)]
    return [*carried[: len(carried) - tail], *blanks, *own[head:]]


def _short(message: str) -> str:
    """Conventional aliases read better than qualified names in messages."""
    return message.replace("torch_xla.core.xla_model.", "xm.").replace("torch_xla.runtime.", "xr.")


def _one_line(message: str) -> str:
    return " ".join(message.split())


class PreciseMigrationTransformer(MigrationTransformer):
    """Full scope analysis, for files that rebind an imported name (see migrate.names)."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def qname(self, node: cst.CSTNode) -> str | None:
        names = self.get_metadata(QualifiedNameProvider, node, None)
        if not names:
            # An unbound `torch.` / `torch_xla.` chain (the import lives in another notebook cell, or is
            # about to be added): resolve it by its text so a second pass finds nothing new.
            full = (
                cst.helpers.get_full_name_for_node(node)
                if isinstance(node, (cst.Name, cst.Attribute))
                else None
            )
            if full and full.split(".")[0] in ("torch", "torch_xla") and full not in ("torch", "torch_xla"):
                return canonical(full)
            return None
        found = sorted(q.name for q in names if q.source is QualifiedNameSource.IMPORT)
        return canonical(found[0]) if found else None
