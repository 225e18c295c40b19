"""Cheap qualified-name resolution from a file's import table.

libcst's QualifiedNameProvider runs a full scope analysis, which costs several parses. Most files bind
each imported name once and never rebind it, and then the import table alone is exact: `xm.xla_device`
is `torch_xla.core.xla_model.xla_device` wherever it appears. When a file rebinds an imported name (a
parameter called `xm`, an assignment to `pl`, two imports under one alias), :func:`needs_scopes` says
so and the caller falls back to the full scope analysis.
"""

from __future__ import annotations

import libcst as cst

#: Top-level packages whose names the rules resolve.
RELEVANT_ROOTS = frozenset({"torch", "torch_xla", "os"})


#: Punctuation, operators and whitespace: no names, statements or strings inside; visitors that only
#: care about those skip these subtrees.
TRIVIA = (
    cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
    cst.Comma, cst.Dot, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.AssignEqual, cst.Colon, cst.Semicolon, cst.BaseBinaryOp,
    cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp, cst.ImportStar, cst.Asynchronous,
)
_TABLE_SKIP = (*TRIVIA, cst.Name, cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)


def _names_in(target: cst.CSTNode, out: set[str]) -> None:
    if isinstance(target, cst.Name):
        out.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            _names_in(el.value, out)
    elif isinstance(target, cst.StarredElement):
        _names_in(target.value, out)


class ImportTable(cst.CSTVisitor):
    """name -> qualified name for every import in the file (guarded and nested ones included)."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}
        self.conflicts: set[str] = set()
        self.rebound: set[str] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _TABLE_SKIP):  # nothing below binds a name
            return False
        return super().on_visit(node)

    # No per-attribute or leave hooks: skip libcst's name-based look-up for every node and field.
    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def _bind(self, name: str, qualified: str) -> None:
        if self.bindings.get(name, qualified) != qualified:
            self.conflicts.add(name)
        self.bindings[name] = qualified

    def visit_Import(self, node: cst.Import) -> bool:
        for a in node.names:
            full = cst.helpers.get_full_name_for_node(a.name) or ""
            if a.asname is not None and isinstance(a.asname.name, cst.Name):
                self._bind(a.asname.name.value, full)
            else:
                root = full.split(".")[0]
                self._bind(root, root)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar):
            return False
        mod = cst.helpers.get_full_name_for_node(node.module) if node.module is not None else ""
        for a in node.names:
            obj = cst.helpers.get_full_name_for_node(a.name) or ""
            name = a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else obj
            if node.relative:
                self.rebound.add(name)  # relative: not one of ours, but it shadows
            else:
                self._bind(name, f"{mod}.{obj}")
        return False

    def visit_Param(self, node: cst.Param) -> None:
        self.rebound.add(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        _names_in(node.target, self.rebound)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        _names_in(node.target, self.rebound)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        _names_in(node.target, self.rebound)

    def visit_For(self, node: cst.For) -> None:
        _names_in(node.target, self.rebound)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        _names_in(node.target, self.rebound)

    def visit_AsName(self, node: cst.AsName) -> None:
        _names_in(node.name, self.rebound)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        _names_in(node.target, self.rebound)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.rebound.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.rebound.add(node.name.value)

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self.rebound.add(n.name.value)

    def needs_scopes(self) -> bool:
        """True when the import table alone could resolve a name the rules care about wrongly.

        Only bindings of the packages the rules look at count (torch, torch_xla, os): a rebound
        ``np`` or ``jnp`` cannot change a migration.
        """
        relevant = {n for n, q in self.bindings.items() if q.split(".")[0] in RELEVANT_ROOTS}
        return bool((self.conflicts | self.rebound) & relevant)

    def qname(self, node: cst.CSTNode) -> str | None:
        parts: list[str] = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        root = node.value
        rest = "".join("." + p for p in reversed(parts))
        if root in self.bindings:
            return self.bindings[root] + rest
        if root in ("torch", "torch_xla") and root not in self.rebound and rest:
            return root + rest  # the import lives in another notebook cell, or is about to be added
        return None


def import_table(module: cst.Module) -> ImportTable:
    table = ImportTable()
    module.visit(table)
    return table
