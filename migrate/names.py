"""Cheap qualified-name resolution from a file's import table.

libcst's QualifiedNameProvider runs a full scope analysis, which costs several parses. Most files bind
each imported name once and never rebind it, and then the import table alone is exact: `xm.xla_device`
is `torch_xla.core.xla_model.xla_device` wherever it appears. A file that rebinds an imported name (a
parameter called `xm`, an assignment to `pl`, a comprehension variable `device`) is handled by tracking
Python's scopes; only `global`/`nonlocal` of such a name makes :func:`needs_scopes` say so, and the
caller falls back to libcst's full scope analysis.
"""

from __future__ import annotations

import re

import libcst as cst

from . import _walk as walk

#: Top-level packages whose names the rules resolve.
RELEVANT_ROOTS = frozenset({"torch", "torch_xla", "os"})


#: Punctuation, operators and whitespace: no names, statements or strings inside; visitors that only
#: care about those skip these subtrees.
TRIVIA = (
    cst.BaseParenthesizableWhitespace,
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.AssignEqual,
    cst.Colon,
    cst.Semicolon,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ImportStar,
    cst.Asynchronous,
)
_TABLE_SKIP = (*TRIVIA, cst.Name, cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)


def node_types(*bases: type) -> frozenset[type]:
    """Every class that is one of ``bases`` or derives from one: ``type(n) in node_types(...)`` is
    ``isinstance(n, bases)`` without ABCMeta's slow instance check (every libcst node class is an ABC)."""
    out: set[type] = set()
    todo = list(bases)
    while todo:
        cls = todo.pop()
        if cls not in out:
            out.add(cls)
            todo.extend(cls.__subclasses__())
    return frozenset(out)


TRIVIA_TYPES = node_types(*TRIVIA)
_TABLE_SKIP_TYPES = node_types(*_TABLE_SKIP)


def _names_in(target: cst.CSTNode, out: set[str]) -> None:
    t = type(target)  # (exact types: these classes have no subclasses; see node_types)
    if t is cst.Name:
        out.add(target.value)
    elif t is cst.Tuple or t is cst.List:
        for el in target.elements:
            _names_in(el.value, out)
    elif t is cst.StarredElement:
        _names_in(target.value, out)


#: What a binding that is not an import maps to in a scope.
LOCAL = None
_NO_HOOK = object()
#: A call that imports a module by name and returns it (pytest's importorskip, importlib's import_module).
_IMPORTING_CALL = re.compile(r"(?:pytest\.)?importorskip|(?:importlib\.)?import_module")


class Scope:
    """Names bound in one Python scope: name -> qualified name (an import) or ``LOCAL`` (anything else).

    A name bound several ways in one scope (``try: from torch._C import X`` / ``except: X = None``)
    resolves as libcst's scope analysis resolves it: to the first, in sorted order, of its imports.
    """

    __slots__ = ("kind", "names")

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "module", "function", "class" or "comprehension"
        self.names: dict[str, str | None] = {}

    def bind(self, name: str, qualified: str | None) -> None:
        old = self.names.get(name, LOCAL)
        if qualified is LOCAL or (old is not LOCAL and old < qualified):
            self.names.setdefault(name, LOCAL)
        else:
            self.names[name] = qualified


def _param_names(params: cst.Parameters) -> list[str]:
    out = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            out.append(star.name.value)
    return out


class ImportTable(cst.CSTVisitor):
    """Every import in the file, by scope (guarded and nested ones included), and every other binding.

    Python scoping is static: a name bound anywhere in a function body is local to the whole body. So
    one walk finds, per scope, what each name is bound to; :meth:`qname` then resolves a reference from
    the scopes around it (innermost first, class bodies seen only from directly inside). A scope is
    keyed by the nodes it covers: a def's, class's or lambda's body, and for a comprehension every part
    but the first ``for``'s iterable (Python evaluates that one outside). A file where that is not exact
    (a torch/torch_xla/os name declared global/nonlocal) is left to libcst's full scope analysis
    (:meth:`needs_scopes`).
    """

    #: Tells migrate._walk there are no attribute hooks to call.
    NO_ATTRIBUTE_HOOKS = True
    #: Nothing below these binds a name (a Name that is a lambda's whole body included).
    SKIP_TYPES = _TABLE_SKIP_TYPES

    def __init__(self) -> None:
        self.module_scope = Scope("module")
        #: id(node) -> the scope that node lies in, for the nodes where a scope starts (a def's, class's
        #: or lambda's body; each part of a comprehension but its first iterable).
        self.scopes: dict[int, Scope] = {}
        self._stack: list[Scope] = [self.module_scope]
        #: Comprehension nodes: this walk binds their variables in their scope (see _comprehension).
        self._comprehensions: set[int] = set()
        #: Names whose resolution this table cannot make exact (see needs_scopes).
        self._unsure: set[str] = set()
        self._hooks: dict[type, object] = {}
        #: id(AssignTarget) -> the module a call imports into it (see visit_Assign).
        self._imported_by_call: dict[int, object] = {}

    @property
    def bindings(self) -> dict[str, str]:
        """Module-level imports (name -> qualified name)."""
        return {n: q for n, q in self.module_scope.names.items() if q is not None}

    def on_visit(self, node: cst.CSTNode) -> bool:
        scope = self.scopes.get(id(node))
        if scope is not None:  # (pushed even for a skipped node: on_leave pops it)
            self._stack.append(scope)
        if type(node) in _TABLE_SKIP_TYPES:  # nothing below binds a name
            return False
        # CSTVisitor.on_visit, with the visit_<Type> method looked up once per type, not per node
        hook = self._hooks.get(type(node), _NO_HOOK)
        if hook is _NO_HOOK:
            hook = self._hooks[type(node)] = getattr(self, f"visit_{type(node).__name__}", None)
        return hook is None or hook(node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if id(original_node) in self.scopes:
            self._stack.pop()
        if id(original_node) in self._comprehensions:
            self._stack.pop()

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    # ------------------------------------------------------------------ bindings
    def _bind(self, name: str, qualified: str | None = LOCAL) -> None:
        self._stack[-1].bind(name, qualified)

    def _bind_all(self, target: cst.CSTNode) -> None:
        names: set[str] = set()
        _names_in(target, names)
        for n in names:
            self._bind(n)

    def _new_scope(self, key: cst.CSTNode, kind: str, names: list[str] = ()) -> None:  # type: ignore[assignment]
        scope = Scope(kind)
        for n in names:
            scope.bind(n, LOCAL)
        self.scopes[id(key)] = scope

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
            name = (
                a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else obj
            )
            self._bind(name, LOCAL if node.relative else f"{mod}.{obj}")  # relative: not ours, but it shadows
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value)
        self._new_scope(node.body, "function", _param_names(node.params))

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._new_scope(node.body, "function", _param_names(node.params))  # defaults are evaluated outside

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name.value)
        self._new_scope(node.body, "class")

    def _comprehension(self, node: cst.ListComp | cst.SetComp | cst.DictComp | cst.GeneratorExp) -> None:
        scope = Scope("comprehension")
        self._comprehensions.add(id(node))
        self._stack.append(scope)  # (on_leave pops it) the variables below bind here
        first = node.for_in
        parts = (node.key, node.value) if isinstance(node, cst.DictComp) else (node.elt,)
        for part in (*parts, first.target, *first.ifs, first.inner_for_in):
            if part is not None:  # everything but first.iter, which Python evaluates in the enclosing scope
                self.scopes[id(part)] = scope

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``torch = pytest.importorskip("torch")`` (axolotl's kernel tests), ``np = importlib.import_module("numpy")``:
        an import by call, bound like ``import torch``."""
        value = node.value
        if (
            len(node.targets) == 1
            and type(node.targets[0].target) is cst.Name
            and type(value) is cst.Call
            and value.args
            and type(value.args[0].value) is cst.SimpleString
            and _IMPORTING_CALL.fullmatch(cst.helpers.get_full_name_for_node(value.func) or "")
        ):
            self._imported_by_call[id(node.targets[0])] = value.args[0].value.evaluated_value  # type: ignore[assignment]

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        mod = self._imported_by_call.get(id(node))
        if isinstance(mod, str) and re.fullmatch(r"[A-Za-z_][\w.]*", mod):
            self._bind(node.target.value, mod)  # type: ignore[attr-defined]
            return
        self._bind_all(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_all(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_all(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind_all(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_all(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind_all(node.name)

    def visit_Del(self, node: cst.Del) -> None:
        self._bind_all(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        names: set[str] = set()
        _names_in(node.target, names)
        target = next((s for s in reversed(self._stack) if s.kind != "comprehension"), self.module_scope)
        for n in names:
            target.bind(n, LOCAL)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._bind(node.name.value)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._bind(node.name.value)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self._bind(node.rest.value)

    def visit_Global(self, node: cst.Global) -> None:
        self._unsure.update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self._unsure.update(n.name.value for n in node.names)

    # ------------------------------------------------------------------ queries
    def needs_scopes(self) -> bool:
        """True when this table could resolve a name the rules care about wrongly: one declared
        ``global`` or ``nonlocal`` (this table would bind its assignments in the wrong scope).

        Only names ever bound to an import of the packages the rules look at count (torch,
        torch_xla, os): a rebound ``np`` or ``jnp`` cannot change a migration.
        """
        relevant: set[str] = set()
        for scope in (self.module_scope, *self.scopes.values()):
            relevant.update(
                n for n, q in scope.names.items() if q is not None and q.split(".")[0] in RELEVANT_ROOTS
            )
        return bool(self._unsure & relevant)

    def lookup(self, name: str, scopes: list[Scope]) -> tuple[bool, str | None]:
        """(found, qualified name or LOCAL) for ``name`` seen from inside ``scopes`` (outermost first)."""
        last = len(scopes) - 1
        for i in range(last, -1, -1):
            scope = scopes[i]
            if scope.kind == "class" and i != last:
                continue  # a class body's names are not visible from its methods
            if name in scope.names:
                return True, scope.names[name]
        if name in self.module_scope.names:
            return True, self.module_scope.names[name]
        return False, None

    def qname(self, node: cst.CSTNode, scopes: list[Scope] | None = None) -> str | None:
        parts: list[str] = []
        while type(node) is cst.Attribute:  # (exact types: neither class has subclasses)
            parts.append(node.attr.value)
            node = node.value
        if type(node) is not cst.Name:
            return None
        root = node.value
        found, qualified = self.lookup(root, scopes or [])
        if found and qualified is None or not found and (not parts or root not in ("torch", "torch_xla")):
            return None  # (most names: a local, or not an import; decided before building the dotted text)
        rest = "." + ".".join(reversed(parts)) if parts else ""
        if found:
            return canonical(qualified + rest)
        return canonical(root + rest)  # the import lives in another notebook cell, or is about to be added


#: Submodules whose public names torch.cuda re-exports (their ``__all__`` in torch 2.13): the rules know
#: ``torch.cuda.max_memory_allocated``, and ``torch.cuda.memory.max_memory_allocated`` is the same function.
_REEXPORTED = {
    "torch.cuda.memory": frozenset(
        "caching_allocator_alloc caching_allocator_delete caching_allocator_disabled caching_allocator_enable "
        "get_per_process_memory_fraction set_per_process_memory_fraction empty_cache memory_stats "
        "memory_stats_as_nested_dict reset_accumulated_memory_stats reset_peak_memory_stats "
        "reset_max_memory_allocated reset_max_memory_cached host_memory_stats host_memory_stats_as_nested_dict "
        "reset_accumulated_host_memory_stats reset_peak_host_memory_stats memory_allocated max_memory_allocated "
        "memory_reserved max_memory_reserved memory_cached max_memory_cached memory_snapshot memory_summary "
        "list_gpu_processes mem_get_info get_allocator_backend CUDAPluggableAllocator change_current_allocator "
        "MemPool use_mem_pool".split()
    ),
    "torch.cuda.random": frozenset(
        "get_rng_state get_rng_state_all set_rng_state set_rng_state_all manual_seed manual_seed_all seed "
        "seed_all initial_seed".split()
    ),
}


#: Other libraries' names for a torch device check (transformers' is_torch_cuda_available is
#: torch.cuda.is_available; LLaMA-Factory gates its device code on it).
_SAME_AS = {
    **dict.fromkeys(
        (
            "transformers.is_torch_cuda_available",
            "transformers.utils.is_torch_cuda_available",
            "transformers.utils.import_utils.is_torch_cuda_available",
        ),
        "torch.cuda.is_available",
    ),
}


def canonical(qname: str) -> str:
    """``torch.cuda.memory.memory_allocated`` -> ``torch.cuda.memory_allocated`` (one name per function)."""
    if qname in _SAME_AS:
        return _SAME_AS[qname]
    if qname.startswith(("torch.cuda.memory.", "torch.cuda.random.")):
        module, _, rest = qname.rpartition(".")
        if rest in _REEXPORTED.get(module, ()):
            return f"torch.cuda.{rest}"
    return qname


def import_table(module: cst.Module) -> ImportTable:
    table = ImportTable()
    walk.visit(module, table)
    return table
