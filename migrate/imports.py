"""Import bookkeeping after the rule pass: drop obsolete imports nothing uses, add the needed ones once.

Deliberately simpler (and ~10x cheaper) than libcst's Add/RemoveImportsVisitor: a name counts as used if
it appears anywhere as an identifier or as a whole string literal (``__all__``), so an import is only
removed when nothing in the file can refer to it. Removing too little is safe; too much is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import libcst as cst

from . import _walk as walk
from .names import TRIVIA_TYPES, node_types
from .rules._util import pure

#: Imports a migration makes obsolete; removed only when unused.
REMOVABLE = re.compile(
    r"^(torch_xla(\.|$)|torch\.cuda(\.|$)"
    r"|transformers(\.utils(\.import_utils)?)?\.is_torch_cuda_available$)"
)


def _full(node: cst.CSTNode) -> str:
    return cst.helpers.get_full_name_for_node(node) or ""


def _bound_name(alias: cst.ImportAlias, from_import: bool, torch_elsewhere: bool = True) -> str:
    """The name an import makes used-or-not: ``import torch.cuda.amp`` binds ``torch``, but is needed only while
    something still says ``torch.cuda`` (torch itself is imported anyway)."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    if from_import:
        return _full(alias.name)
    full = _full(alias.name)
    return "torch.cuda" if full.startswith("torch.cuda") and torch_elsewhere else full.split(".")[0]


class _Used(cst.CSTVisitor):
    #: migrate._walk need not enter these at all.
    SKIP_TYPES = TRIVIA_TYPES

    def __init__(self) -> None:
        self.names: set[str] = set()
        #: Every import statement (and whether it is a from-import).
        self.imports: list[tuple[cst.Import | cst.ImportFrom, bool]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) in TRIVIA_TYPES:  # no names inside
            return False
        # CSTVisitor.on_visit, with the visit_<Type> method looked up once per type, not per node
        hook = _USED_HOOKS.get(type(node), _NO_HOOK)
        if hook is _NO_HOOK:
            hook = _USED_HOOKS[type(node)] = getattr(_Used, f"visit_{type(node).__name__}", None)
        return hook is None or hook(self, node) is not False

    # No per-attribute or leave hooks: skip libcst's name-based look-up for every node and field.
    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    #: Tells migrate._walk there are no attribute hooks to call.
    NO_ATTRIBUTE_HOOKS = True

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def visit_Import(self, node: cst.Import) -> bool:
        self.imports.append((node, False))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.imports.append((node, True))
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        # `xm = None` in `except ImportError:` rebinds the name; it does not use the import
        return type(node.target) is not cst.Name

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value == "cuda" and isinstance(node.value, cst.Name) and node.value.value == "torch":
            self.names.add("torch.cuda")  # (what keeps a plain `import torch.cuda.amp` needed)
        # Only the value can use an imported name: in `torch.autocast` the attribute `autocast` is not the
        # `autocast` of `from torch_xla.amp import autocast`.
        node.value.visit(self)
        return False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        body = node.value.strip("rRbBuU")[1:-1]
        if body.isidentifier():
            self.names.add(body)


#: node type -> _Used's visit_<Type> function (libcst's no-op ones included), filled as types are met.
_USED_HOOKS: dict[type, Any] = {}
_NO_HOOK = object()


def removable_aliases(stmt: cst.Import | cst.ImportFrom) -> list[tuple[cst.ImportAlias, str]]:
    """(alias, dotted name) pairs of an import statement that a migration may remove."""
    if isinstance(stmt, cst.Import):
        return [(a, _full(a.name)) for a in stmt.names if REMOVABLE.match(_full(a.name))]
    if stmt.relative or stmt.module is None or isinstance(stmt.names, cst.ImportStar):
        return []
    mod = _full(stmt.module)
    return [
        (a, f"{mod}.{_full(a.name)}")
        for a in stmt.names
        if REMOVABLE.match(mod) or REMOVABLE.match(f"{mod}.{_full(a.name)}")
    ]


#: Exceptions that a failed import raises, or that catch it.
_IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def probing_try(node: cst.Try) -> bool:
    """A ``try`` that records whether its import worked: a handler catches the import error and a flag is set
    by the body, an ``else`` or a handler (TorchServe's ``try: import torch_xla...; XLA_AVAILABLE = True /
    except ImportError: XLA_AVAILABLE = False``). Without the import the flag is always True and a CPU-only
    machine takes the XLA branch, so its torch_xla imports stay (the flag says what its name says: torch_xla
    is importable). A ``try`` whose body uses the import (``return xm.xla_device()``) is not a probe."""
    caught = False
    for h in node.handlers:
        kinds = h.type.elements if type(h.type) is cst.Tuple else [h.type] if h.type is not None else []
        names = {_full(k.value if type(k) is cst.Element else k) for k in kinds}  # type: ignore[arg-type]
        caught = caught or h.type is None or bool(names & _IMPORT_FAILURES)
    if not caught:
        return False
    body = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    imported = _imported_names(body)
    blocks = [body, *(list(h.body.body) for h in node.handlers if isinstance(h.body, cst.IndentedBlock))]
    if node.orelse is not None and isinstance(node.orelse.body, cst.IndentedBlock):
        blocks.append(list(node.orelse.body.body))
    return any(_sets_flag(stmt, imported) for block in blocks for stmt in block)


def _imported_names(body: Sequence[cst.BaseStatement]) -> set[str]:
    out: set[str] = set()
    for s in body:
        for b in s.body if type(s) is cst.SimpleStatementLine else ():
            if type(b) in (cst.Import, cst.ImportFrom) and not isinstance(b.names, cst.ImportStar):
                out.update(_bound_name(a, type(b) is cst.ImportFrom, False) for a in b.names)
    return out


def _sets_flag(stmt: cst.BaseStatement, imported: set[str]) -> bool:
    """``NAME = <constant>`` (``True``, ``False``, ``None``, a number or string) for a name the try's
    imports do not bind (``xm = None`` in the handler only rebinds the import)."""
    if type(stmt) is not cst.SimpleStatementLine:
        return False
    for b in stmt.body:
        if type(b) is cst.Assign and all(
            type(t.target) is cst.Name and t.target.value not in imported for t in b.targets
        ):
            v = b.value
            if (type(v) is cst.Name and v.value in ("True", "False", "None")) or type(v) in (
                cst.Integer,
                cst.SimpleString,
            ):
                return True
    return False


def _only_pass(block: cst.BaseSuite) -> bool:
    return isinstance(block, cst.IndentedBlock) and all(
        isinstance(s, cst.SimpleStatementLine) and all(isinstance(b, cst.Pass) for b in s.body)
        for s in block.body
    )


def emptied_if(original: cst.CSTNode, updated: cst.CSTNode) -> bool:
    """An ``if`` (no ``else``) whose every statement a migration removed, with a side-effect-free test:
    ``if is_torch_xla_available(): import torch_xla`` or ``if flags.debug: print(met.metrics_report())``.
    Dropping it is what a person would do; an ``if ...: pass`` left behind is noise."""
    return (
        isinstance(original, cst.If)
        and isinstance(updated, cst.If)
        and updated.orelse is None
        and not _only_pass(original.body)
        and _only_pass(updated.body)
        and pure(original.test)
    )


_NO_IMPORTS_INSIDE = node_types(
    cst.BaseExpression, cst.BaseSmallStatement, cst.EmptyLine, cst.TrailingWhitespace
)


class _Remover(cst.CSTTransformer):
    def __init__(
        self,
        used: set[str],
        on_remove: Callable[[cst.CSTNode, str], None],
        torch_elsewhere: bool,
        keep_xla: bool = False,
    ):
        super().__init__()
        self.used = used
        #: A torch_xla import is still used: the file still needs torch_xla, and its other torch_xla imports may
        #: be there for their side effects (op and backend registrations), so all of them stay.
        self.keep_xla = keep_xla
        #: Whether another top-level import binds `torch` (then `import torch.cuda.amp` is not what binds it).
        self.torch_elsewhere = torch_elsewhere
        self.on_remove = on_remove
        self.originals: dict[int, cst.CSTNode] = {}
        #: Whether anything was removed or replaced (else the tree is the input's, code for code).
        self.changed = False
        #: The functions around the statement being visited, innermost last, with the names each uses.
        self._functions: list[cst.FunctionDef] = []
        self._function_used: dict[int, tuple[set[str], bool]] = {}
        #: The bodies of the ``try`` statements that probe for an import (see :func:`probing_try`), and how
        #: many of them hold the statement being visited.
        self._probe_bodies: set[int] = set()
        self._probing = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        t = type(node)
        if t is cst.FunctionDef:
            self._functions.append(node)  # type: ignore[arg-type]
        elif t is cst.Try and probing_try(node):  # type: ignore[arg-type]
            self._probe_bodies.add(id(node.body))  # type: ignore[attr-defined]
        elif t is cst.IndentedBlock and id(node) in self._probe_bodies:
            self._probing += 1
        # Imports are statements: expressions and other small statements cannot hold one.
        return type(node) not in _NO_IMPORTS_INSIDE

    def leave_FunctionDef(self, original, updated):
        self._functions.pop()
        return updated

    def _used_here(self) -> tuple[set[str], bool]:
        """The names used where the import being filtered binds, and whether a torch_xla import bound there is
        still used. An import inside a function binds a local: only that function (nested code included) can
        use it, so fairseq's `import torch_xla.core.xla_model as xm` in a function whose `xm` calls were all
        rewritten goes, whatever other functions keep (a `global xm` there counts as a use)."""
        if not self._functions:
            return self.used, self.keep_xla
        func = self._functions[-1]
        found = self._function_used.get(id(func))
        if found is None:
            used = _Used()
            walk.visit(func, used)
            names = used.names
            keep = any(
                name.startswith("torch_xla") and _bound_name(a, from_import, self.torch_elsewhere) in names
                for node, from_import in used.imports
                for a, name in removable_aliases(node)
            )
            found = self._function_used[id(func)] = (names, keep)
        return found

    # No per-attribute hooks: skip libcst's name-based look-up for every field.
    #: Tells migrate._walk there are no attribute hooks to call.
    NO_ATTRIBUTE_HOOKS = True

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def _filter(self, node, from_import: bool):
        aliases = removable_aliases(node)
        if not aliases:
            return node
        used, keep_xla = self._used_here()
        keep_xla = keep_xla or self._probing > 0
        drop = {
            id(a)
            for a, name in aliases
            if _bound_name(a, from_import, self.torch_elsewhere) not in used
            and not (keep_xla and name.startswith("torch_xla"))
        }
        if not drop:
            return node
        self.changed = True
        for a, name in removable_aliases(node):
            if id(a) in drop:
                self.on_remove(node, name)
        keep = [a for a in node.names if id(a) not in drop]
        if not keep:
            return cst.RemovalSentinel.REMOVE
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(names=keep)

    def leave_Import(self, original, updated):
        return self._filter(updated, False)

    def leave_ImportFrom(self, original, updated):
        if isinstance(updated.names, cst.ImportStar):
            return updated
        return self._filter(updated, True)

    def leave_If(self, original, updated):
        if emptied_if(original, updated):
            self.changed = True
            return cst.RemovalSentinel.REMOVE
        return updated

    def leave_IndentedBlock(self, original, updated):
        if id(original) in self._probe_bodies:
            self._probing -= 1
        if not updated.body:
            self.changed = True
        body = _carry(updated.body, original.body)
        return updated.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])

    def leave_Module(self, original, updated):
        return updated.with_changes(body=_carry(updated.body, original.body))


def _carry(new_body: Sequence[cst.BaseStatement], old_body: Sequence[cst.BaseStatement]):
    """Comments and blank lines above a removed import line move to the next statement."""
    if len(new_body) == len(old_body):
        return list(new_body)
    kept_ids = {id(s) for s in new_body}
    out: list[cst.BaseStatement] = []
    pending: list[cst.EmptyLine] = []
    new_iter = iter(new_body)
    nxt = next(new_iter, None)
    for old in old_body:
        if nxt is not None and (id(nxt) == id(old) or id(old) not in kept_ids and _same_slot(old, nxt)):
            stmt = nxt
            if pending:
                stmt = stmt.with_changes(leading_lines=[*pending, *stmt.leading_lines])
                pending = []
            out.append(stmt)
            nxt = next(new_iter, None)
        else:
            pending.extend(getattr(old, "leading_lines", ()))
    while nxt is not None:
        out.append(nxt)
        nxt = next(new_iter, None)
    return out


def _same_slot(old: cst.BaseStatement, new: cst.BaseStatement) -> bool:
    """A statement changed by the remover (fewer aliases) still holds its place."""
    if isinstance(old, cst.SimpleStatementLine) and isinstance(new, cst.SimpleStatementLine):
        return old.leading_lines == new.leading_lines and len(new.body) <= len(old.body)
    return type(old) is type(new)


def remove_unused(
    module: cst.Module, on_remove: Callable[[cst.CSTNode, str], None], also_used: Iterable[str] = ()
) -> cst.Module:
    """``module`` without the unused removable imports; ``module`` itself when none is. ``also_used``: names
    used by statements not in ``module`` (migrate.groups migrates them apart)."""
    used = _Used()
    walk.visit(module, used)
    used.names.update(also_used)
    torch_elsewhere = _binds_torch_elsewhere(module)
    keep_xla = any(
        name.startswith("torch_xla") and _bound_name(a, from_import, torch_elsewhere) in used.names
        for node, from_import in used.imports
        for a, name in removable_aliases(node)
    )
    remover = _Remover(used.names, on_remove, torch_elsewhere, keep_xla)
    new = walk.visit(module, remover)
    return new if remover.changed else module


def names_used(module: cst.Module) -> set[str]:
    """The names :func:`remove_unused` counts as used in ``module``."""
    used = _Used()
    walk.visit(module, used)
    return used.names


def _binds_torch_elsewhere(module: cst.Module) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                    a.asname is None
                    and _full(a.name).split(".")[0] == "torch"
                    and not _full(a.name).startswith("torch.cuda")
                    for a in small.names
                ):
                    return True
    return False


def binds(module: cst.Module, name: str) -> bool:
    """True when the file has an ``import name`` (or ``import name.sub``) anywhere: at the top, inside a
    module-level ``try``/``if`` (``try: import torch`` / ``except ImportError: ...``: the file runs without
    torch) or inside the functions that use it (a lazy import, as DeepSpeed's accelerator modules do). The
    rewrites that ask for ``torch`` replace code that already said ``torch.``, so the name is bound where
    they are; an unconditional import added at the top would break a file that runs without torch."""
    if _top_level_import(module, name):
        return True  # (the common case, without generating the module's code)
    pattern = re.compile(
        rf"^[ \t]*import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*"
        rf"{re.escape(name)}(?:\.\w+)*(?![\w.])(?![ \t]+as\b)",
        re.M,
    )
    return pattern.search(module.code) is not None


def _top_level_import(module: cst.Module, name: str) -> bool:
    """A plain top-level ``import name`` / ``import name.sub`` (no ``as``): what :func:`binds` looks for."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                    a.asname is None and (_full(a.name) == name or _full(a.name).startswith(name + "."))
                    for a in small.names
                ):
                    return True
    return False


def add_imports(module: cst.Module, names: Sequence[str]) -> cst.Module:
    """``import name`` after the last top-level import of the file's leading import block
    (after the docstring and ``from __future__`` imports when there is none)."""
    missing = [n for n in sorted(set(names)) if not binds(module, n)]
    if not missing:
        return module
    body = list(module.body)
    insert = 0
    for i, stmt in enumerate(body):
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and (
                isinstance(stmt.body[0], (cst.Import, cst.ImportFrom))
                or (
                    i == 0
                    and isinstance(stmt.body[0], cst.Expr)
                    and isinstance(stmt.body[0].value, cst.SimpleString)
                )
            )
        ):
            insert = i + 1
        else:
            break
    new = [cst.SimpleStatementLine([cst.Import([cst.ImportAlias(cst.parse_expression(n))])]) for n in missing]
    if insert == 0 and body:
        # comments above the first statement (a TODO among them) stay with it, below the import
        first = body[0]
        if not first.leading_lines or first.leading_lines[0].comment is not None:
            body[0] = first.with_changes(leading_lines=[cst.EmptyLine(), *first.leading_lines])
    elif insert == 1 and isinstance(body[0].body[0], cst.Expr):
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
    body[insert:insert] = new
    return module.with_changes(body=body)


def torch_alias(old: cst.Module, new: cst.Module) -> str | None:
    """``X`` of a top-level ``import torch as X`` in ``new`` when the original module ``old`` uses the name
    ``torch`` nowhere outside its imports (every ``torch`` in ``new`` is then the rewrite's own), else None."""
    alias = None
    for stmt in new.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for a in small.names:
                        if (
                            _full(a.name) == "torch"
                            and a.asname is not None
                            and isinstance(a.asname.name, cst.Name)
                        ):
                            alias = a.asname.name.value
    if alias is None:
        return None
    seen = _NameSeen("torch")
    walk.visit(old, seen)
    return None if seen.found else alias


class _NameSeen(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.found = name, False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.found = True


class _RenameRoot(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


def rename_root(module: cst.Module, old: str, new: str) -> cst.Module:
    """``module`` with every name ``old`` outside imports renamed ``new`` (unchanged statements stay the
    same objects)."""
    return walk.visit(module, _RenameRoot(old, new))
