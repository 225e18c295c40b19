"""The rule protocol and the registry.

A rule is one class with a stable code, a summary, a rationale and a before/after example. It plugs
into the single libcst pass of :mod:`tpu_workbench.migrate.transform` through a few hooks, each keyed by what it
matches, so the transformer dispatches by dictionary lookup instead of asking every rule about every
node:

* ``calls``      – qualified names of callables; ``call()`` returns the replacement expression.
* ``statements`` – qualified names of calls (or assignment targets) that must be rewritten as a whole
  statement (``xm.mark_step()`` is deleted, ``xm.master_print(x)`` becomes an ``if``); ``statement()``.
* ``refs`` / ``ref_prefixes`` – qualified names of attribute/name references; ``ref()``.
* ``methods``    – method names on unresolved receivers (``x.cuda()``); ``method()``.
* ``node_types`` – libcst node classes for everything else; ``visit_node()`` / ``leave_node()``.

Hooks return ``None`` to leave the node alone. Rules report through the context: ``ctx.report`` for a
rewrite (``fixed=True``) and ``ctx.flag`` for a finding a human must handle, which also puts one
``# TODO(tpu-migrate TPUnnn): ...`` comment above the statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar, Literal, Protocol

import libcst as cst

Outcome = Literal["rewritten", "warned", "flagged"]
#: How a contextual rule claims a string literal: (code, outcome, message, replacement body or None).
StringClaim = tuple[str, Outcome, str, "str | None"]


class Context(Protocol):
    """What a rule may ask of the pass (the transformer implements it; rules never import it).

    Kept apart from the transformer as LibCST keeps ``CodemodContext`` apart from its codemods: the rules
    depend on this small surface only, so the traversal can change without touching them.
    """

    #: Per-file scratch space (rule instances are shared between files).
    scratch: dict[str, object]
    #: id(literal) -> its claim (see :meth:`claim_string`).
    string_claims: dict[int, StringClaim]
    #: The whole source text of the file.
    source_text: str
    #: Answers that depend on :attr:`source_text` alone (shared by the passes over one file).
    text_memo: dict[object, object]
    #: The module being migrated (the original tree).
    module: cst.Module | None

    def qname(self, node: cst.CSTNode) -> str | None:
        """Qualified name of a Name/Attribute bound by an import (``xm.xla_device`` ->
        ``torch_xla.core.xla_model.xla_device``), else None."""

    def enabled(self, code: str) -> bool:
        """Whether the rule ``code`` is selected for this run."""

    def is_known(self, qname: str, called: bool) -> bool:
        """Whether some rule (selected or not) handles ``qname`` (as a call when ``called``)."""

    def is_called(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is the callee of a call."""

    def enclosing_definitions(self) -> list[cst.FunctionDef | cst.ClassDef]:
        """The defs and classes around the node being visited, outermost first (original nodes)."""

    def in_loop(self) -> bool:
        """Whether a ``for``/``while`` of the innermost def (or of the module) surrounds the node being visited."""

    def in_try(self) -> bool:
        """Whether a ``try`` of the innermost def (or of the module) surrounds the node being visited."""

    def is_target(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is an assignment, deletion or loop target."""

    def is_condition(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is the whole test of the enclosing ``if``/``while``."""

    def statement(self) -> cst.CSTNode | None:
        """The innermost statement being visited."""

    def in_claimed_statement(self) -> bool:
        """Whether the statement being visited is rewritten as a whole by a statement rule."""

    def report(self, node: cst.CSTNode, message: str, *, code: str, outcome: Outcome = "rewritten") -> None:
        """Record a rewrite (``outcome`` rewritten or warned)."""

    def flag(self, node: cst.CSTNode, message: str, *, code: str) -> None:
        """Record a finding for a human; one ``# TODO(tpu-migrate CODE)`` goes above the statement."""

    def need_import(self, module: str) -> None:
        """The rewritten file needs ``import module``."""

    def need_helper(self, name: str) -> None:
        """The rewritten file needs the local replacement ``name`` (see :mod:`._helpers`)."""

    def claim_statement(
        self,
        stmt: cst.SimpleStatementLine,
        rule: Rule,
        qname: str = "",
        call: cst.Call | None = None,
        target: cst.BaseExpression | None = None,
    ) -> None:
        """``rule.statement`` rewrites ``stmt`` as a whole; nothing inside is rewritten on its own."""

    def claim_string(
        self, node: cst.SimpleString, code: str, outcome: Outcome, message: str, value: str | None = None
    ) -> None:
        """A contextual rule decides how a literal is reported (and, with ``value``, rewritten)."""

    def previous_statement(self, stmt: cst.CSTNode) -> cst.CSTNode | None:
        """The statement before ``stmt`` in its block (original tree), or None."""

    def statements(self) -> list[cst.CSTNode]:
        """The statements around the node being visited, outermost first (original tree)."""

    def suppress_current_statement(self) -> None:
        """No other rule touches what is inside the statement being visited."""

    def skip_inside(self, node: cst.CSTNode) -> None:
        """No rule touches the children of ``node`` (from a ``visit_node`` hook)."""

    def keep_branch(self) -> None:
        """Called while the test of an ``if``/``while`` is being left: its body is CUDA's own branch (the test was
        kept for CUDA), so no rule touches it."""


class Rule:
    """Base class; subclasses set the class attributes and implement the hooks they declare."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    rationale: ClassVar[str] = ""
    before: ClassVar[str] = ""
    after: ClassVar[str] = ""
    #: The typical outcome; a rule may report another one for a given occurrence.
    outcome: ClassVar[Outcome] = "rewritten"
    #: Every torch API (dotted path) the rule can write into user code.
    emits: ClassVar[tuple[str, ...]] = ()
    #: Rules that must also be selected for the before/after example (contextual rules ride on others).
    requires: ClassVar[tuple[str, ...]] = ()
    #: Set on the instances of a file left as written (CUDA-only or SPMD): a flagging rule flags there and never
    #: rewrites (code that must stay CUDA's cannot take half a TPU rewrite).
    flag_only: bool = False

    calls: ClassVar[frozenset[str]] = frozenset()
    statements: ClassVar[frozenset[str]] = frozenset()
    refs: ClassVar[frozenset[str]] = frozenset()
    ref_prefixes: ClassVar[tuple[str, ...]] = ()
    methods: ClassVar[frozenset[str]] = frozenset()
    #: Words a statement holds when a generic hook of this rule may match it by something other than a trigger
    #: or one of its names above (a call looked up in a table): migrate.keep_words enters such statements.
    words: ClassVar[frozenset[str]] = frozenset()
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = ()

    def call(self, ctx: Context, orig: cst.Call, node: cst.Call, qname: str) -> cst.BaseExpression | None:
        """Default for a statement-only API used inside an expression: flag it."""
        ctx.flag(orig, f"`{qname}` cannot be rewritten in this position; rewrite it by hand", code=self.code)
        return None

    def statement(
        self,
        ctx: Context,
        orig: cst.SimpleStatementLine,
        node: cst.SimpleStatementLine,
        qname: str,
        call: cst.Call | None,
        target: cst.BaseAssignTargetExpression | None,
    ) -> Sequence[cst.BaseStatement] | cst.RemovalSentinel | None:
        return None

    def ref(
        self, ctx: Context, orig: cst.BaseExpression, node: cst.BaseExpression, qname: str
    ) -> cst.BaseExpression | None:
        return None

    def method(self, ctx: Context, orig: cst.Call, node: cst.Call) -> cst.BaseExpression | None:
        return None

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        return None

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        return None

    @classmethod
    def doc(cls) -> str:
        """The page printed by ``tpu-migrate rules CODE``."""
        return (
            f"{cls.code} {cls.name} ({cls.family}, {cls.outcome})\n\n{cls.summary}\n\n"
            f"Why: {cls.rationale}\n\nBefore:\n{_indent(cls.before)}\n\nAfter:\n{_indent(cls.after)}\n"
        )


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.strip("\n").splitlines())


_REGISTRY: dict[str, type[Rule]] = {}


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: adds a rule to the registry (codes are unique and stable)."""
    if not cls.code or cls.code in _REGISTRY:
        raise ValueError(f"rule code missing or duplicated: {cls.code!r}")
    _REGISTRY[cls.code] = cls
    return cls


def all_rules() -> list[type[Rule]]:
    """Every registered rule, in code order (importing :mod:`tpu_workbench.migrate.rules` registers the families)."""
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


def _matches(code: str, patterns: Iterable[str]) -> bool:
    return any(p == "ALL" or code.startswith(p.upper()) for p in patterns)


def select_rules(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> list[type[Rule]]:
    """Rules enabled by ``--select`` / ``--ignore`` (codes or prefixes such as ``TPU5``)."""
    rules = all_rules()
    if select:
        sel = list(select)
        unknown = [p for p in sel if p != "ALL" and not any(r.code.startswith(p.upper()) for r in rules)]
        if unknown:
            raise ValueError(f"unknown rule code or prefix: {', '.join(unknown)}")
        rules = [r for r in rules if _matches(r.code, sel)]
    if ignore:
        rules = [r for r in rules if not _matches(r.code, ignore)]
    return rules
