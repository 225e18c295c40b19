"""Parse only what can change: the top-level statements no rule can touch are hidden from libcst.

libcst's parse (and everything after it: the rule pass, the flow layer's scopes) costs in proportion to the
text it is given, and most of a large file holds no device code. Python's own ``ast`` (C, already built for
the depth check) finds, per top-level statement, what the rules and the flow layer could need from it; each
statement that cannot matter is replaced by a placeholder expression spanning the same lines
(``("@@7@@"`` … ``)``), so line numbers, the leading comments and blank lines of every statement, and the
order of the module body stay as they were. After the migration each placeholder is swapped back for the
original text.

A statement is kept (parsed) when it, or the blank/comment lines around it,

- holds a trigger of the prefilter (``source.PREFILTER``), a device-check word of the flow layer, or
  ``import``;
- names something imported from a module the rules know (``torch``, ``torch_xla`` …, always ``torch`` and
  ``torch_xla`` themselves), or a method name a rule hooks (``.to``, ``.cuda`` …);
- binds, at module level, a helper's name (the helper would not be added twice) or a builtin's name
  (the flow layer's shadowing set);
- is linked to a kept statement, to a fixed point: it names something a kept one binds at module level or
  an attribute one stores (the flow layer's ``reachable`` closure, by words), binds at module level a word a
  kept one uses (a flag or setting read there), or divides by a word a kept one uses (the flow layer's
  divisors);
- is the first statement (docstring, header), or is followed by indented comment lines (libcst gives those
  to a compound statement's block, not to the next statement).

Whole-file facts the rules read as text (``ctx.source_text`` regexes, the flag-only mode) are computed from
the whole original text: only the libcst tree is partial. Any doubt (``\\r`` line ends, a ``"@@`` already in
the file, a star import, placeholders not found back exactly once each) answers None and the caller takes
the whole-file path. ``TPU_MIGRATE_WHOLE_FILE=1`` always takes it (the reference for the differential tests
and ``benchmarks/migrate_paths_compare.py``).
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .flow import _WORTH
from .prefilter import PREFILTER, needs_parse
from .rules._helpers import all_helpers
from .rules.base import all_rules
from .transform import _IDEMPOTENT  # (a setter repeated on the next line is dropped: transform._drop_repeat)

#: Set to 1 to migrate every file whole (the reference path).
WHOLE_FILE_ENV = "TPU_MIGRATE_WHOLE_FILE"
#: Below this share of the bytes hidden, the partial path is not worth its bookkeeping.
MIN_HIDDEN_SHARE = 0.15
#: Files smaller than this are parsed whole (the selection costs more than it saves).
MIN_BYTES = 4_000

_WORD = re.compile(r"(?!\d)\w+")
_IMPORT = re.compile(r"\bimport\b")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_BUILTINS = frozenset(dir(builtins))


def enabled() -> bool:
    return os.environ.get(WHOLE_FILE_ENV, "") not in ("1", "true", "yes")


@dataclass
class Reduced:
    """The text libcst parses instead of the original, and how to put the original back."""

    text: str
    #: ``ast`` statement layout of :attr:`text` (only line numbers and decorators are read: see _spans).
    tree: ast.Module
    #: (placeholder, original text), in file order.
    holes: list[tuple[str, str]]

    def restore(self, new_text: str) -> str | None:
        """``new_text`` (the migrated reduced text) with every placeholder swapped back; None when a
        placeholder is not found exactly once, in order."""
        if new_text.count('"@@') != len(self.holes):
            return None
        parts: list[str] = []
        at = 0
        for placeholder, original in self.holes:
            i = new_text.find(placeholder, at)
            if i < 0:
                return None
            parts.append(new_text[at:i])
            parts.append(original)
            at = i + len(placeholder)
        parts.append(new_text[at:])
        return "".join(parts)


@dataclass
class _Unit:
    """Top-level statements sharing lines (``a = 1; b = 2`` is one libcst statement)."""

    first: int  # 1-based first line (decorators included)
    last: int
    stmts: list[ast.stmt]
    words: frozenset[str] = frozenset()  # words of its text and of the gaps around it
    exports: frozenset[str] = frozenset()  # module-level bindings and attributes stored
    divisors: frozenset[str] = frozenset()
    keep: bool = False


#: Words that generic rule hooks react to without a trigger or a rule's qualified name in the statement.
_HOOK_WORDS = frozenset({"add_argument"})


@lru_cache(maxsize=1)
def _rule_words() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """The rules' qualified names (calls, statements, refs), their prefixes, the words a statement naming one
    of them must hold (last parts, hooked method names, _HOOK_WORDS), and the helpers' names."""
    keys: set[str] = set()
    prefixes: set[str] = set()
    words: set[str] = set(_HOOK_WORDS) | {q.rsplit(".", 1)[-1] for q in _IDEMPOTENT}
    for r in all_rules():
        keys.update(r.calls, r.statements, r.refs)
        prefixes.update(r.ref_prefixes)
    # a chain naming a key that holds a trigger holds the trigger itself (or an alias: see _aliases)
    words.update(q.rsplit(".", 1)[-1] for q in keys | prefixes if not _trigger(q))
    return frozenset(keys), frozenset(prefixes), frozenset(words), frozenset(h.name for h in all_helpers())


@lru_cache(maxsize=1)
def _methods() -> re.Pattern[str]:
    """A call of a method some rule hooks by its name (``x.to(3)``): a dot, the name, a parenthesis."""
    names = sorted({m for r in all_rules() for m in r.methods})
    return re.compile(r"\.\s*(?:" + "|".join(map(re.escape, names)) + r")\s*\(")


def _trigger(text: str) -> bool:
    return needs_parse(text)


def reduce(source: str, tree: ast.Module) -> Reduced | None:
    """The reduced text for ``source`` (parsed by ``ast`` as ``tree``), or None: parse it whole."""
    if len(source) < MIN_BYTES or "\r" in source or '"@@' in source or len(tree.body) < 3:
        return None

    lines = source.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    units = _units(tree.body)
    if units is None:
        return None
    keys, prefixes, words, helpers = _rule_words()
    found = _aliases(tree, keys, prefixes) if _IMPORT.search(source) else (set(), set())
    if found is None:
        return None
    aliases, imported = found
    sensitive = aliases | words
    end_of = len(source)
    for k, u in enumerate(units):
        gap_start = starts[units[k - 1].last] if k else 0  # (line after the previous unit)
        gap_end = starts[units[k + 1].first - 1] if k + 1 < len(units) else end_of
        text = source[gap_start:gap_end]
        own_end = starts[u.last] if u.last < len(starts) else end_of
        after = source[own_end:gap_end]
        u.words = frozenset(_WORD.findall(text))
        u.keep = (
            k == 0
            or not u.words.isdisjoint(sensitive)
            or _IMPORT.search(text) is not None
            or _methods().search(text) is not None
            or _WORTH.search(text) is not None
            or any(w in text and rx.search(text) is not None for w, rx in PREFILTER)
            or any(ln[:1] in (" ", "\t", "\f") and ln.strip() for ln in after.split("\n"))
        )
        u.exports, binds, u.divisors = _facts(u.stmts, "/" in text)
        if not u.keep and (
            not u.exports.isdisjoint(helpers | _BUILTINS | imported) or not binds.isdisjoint(imported)
        ):
            u.keep = True  # (a rebound import changes how names resolve: see names.ImportTable.needs_scopes)
    _close(units)
    hidden = [u for u in units if not u.keep]
    hidden_bytes = sum(starts[min(u.last, len(starts) - 1)] - starts[u.first - 1] for u in hidden)
    if not hidden or hidden_bytes < MIN_HIDDEN_SHARE * len(source):
        return None
    return _build(source, lines, starts, units)


def _aliases(
    tree: ast.Module, keys: frozenset[str], prefixes: frozenset[str]
) -> tuple[set[str], set[str]] | None:
    """Names imports bind to a rule's qualified name (or one under a rule's prefix, or one holding a trigger),
    and every name any import binds; None for a star import. A use of any other imported name that
    resolves to a rule's name holds that name's last part."""
    out: set[str] = set()
    every: set[str] = set()

    def add(bound: str, qname: str) -> None:
        every.add(bound)
        if (
            qname in keys
            or qname in prefixes
            or any(qname.startswith(p + ".") for p in prefixes)
            or _trigger(qname)
        ):
            out.add(bound)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.asname, a.name) if a.asname else add(a.name.split(".")[0], a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            if not node.level and node.module:
                for a in node.names:
                    add(a.asname or a.name, f"{node.module}.{a.name}")
            else:
                every.update(a.asname or a.name for a in node.names)
    return out, every


def _units(body: list[ast.stmt]) -> list[_Unit] | None:
    units: list[_Unit] = []
    for s in body:
        first = min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))])
        last = s.end_lineno
        if last is None:
            return None
        if units and first <= units[-1].last:
            units[-1].last = max(units[-1].last, last)
            units[-1].stmts.append(s)
        else:
            units.append(_Unit(first, last, [s]))
    return units


def _facts(stmts: list[ast.stmt], divides: bool) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """What ``stmts`` bind at module level (names; attributes stored on anything but self/cls), what they bind
    elsewhere (locals, parameters), and the names and attribute names in what they divide by."""
    exports: set[str] = set()
    binds: set[str] = set()
    divisors: set[str] = set()
    todo: list[tuple[ast.AST, bool]] = [(s, True) for s in stmts]
    while todo:
        n, top = todo.pop()
        t = type(n)
        if t in _SCOPES:
            if t is not ast.Lambda:
                (exports if top else binds).add(n.name)  # type: ignore[attr-defined]
            top = False
        elif t is ast.arg:
            binds.add(n.arg)  # type: ignore[attr-defined]
        elif t is ast.Name:
            if type(n.ctx) is not ast.Load:  # type: ignore[attr-defined]
                (exports if top else binds).add(n.id)  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            v = n.value  # type: ignore[attr-defined]
            if type(n.ctx) is not ast.Load and not (type(v) is ast.Name and v.id in ("self", "cls")):  # type: ignore[attr-defined]
                exports.add(n.attr)  # type: ignore[attr-defined]
        elif t is ast.Global or t is ast.Nonlocal:
            exports.update(n.names)  # type: ignore[attr-defined]
        elif t is ast.ExceptHandler or t is ast.MatchAs or t is ast.MatchStar:
            if n.name:  # type: ignore[attr-defined]
                (exports if top else binds).add(n.name)  # type: ignore[attr-defined]
        elif t is ast.MatchMapping:
            if n.rest:  # type: ignore[attr-defined]
                (exports if top else binds).add(n.rest)  # type: ignore[attr-defined]
        elif divides and t is ast.BinOp and type(n.op) in (ast.Div, ast.FloorDiv):  # type: ignore[attr-defined]
            divisors.update(_last_words(n.right))  # type: ignore[attr-defined]
        elif divides and t is ast.AugAssign and type(n.op) in (ast.Div, ast.FloorDiv):  # type: ignore[attr-defined]
            divisors.update(_last_words(n.value))  # type: ignore[attr-defined]
        todo.extend((c, top) for c in ast.iter_child_nodes(n))
    return frozenset(exports), frozenset(binds), frozenset(divisors)


def _last_words(node: ast.AST) -> Iterable[str]:
    """Every name and attribute name in a divisor (a superset of the flow layer's last name)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr


def _close(units: list[_Unit]) -> None:
    """Keep, to a fixed point, every statement linked to a kept one (see the module docstring)."""
    bound: set[str] = set()  # what kept statements bind at module level
    used: set[str] = set()  # words of kept statements
    done: set[int] = set()
    while True:
        for i, u in enumerate(units):
            if u.keep and i not in done:
                done.add(i)
                bound |= u.exports
                used |= u.words
        changed = False
        for u in units:
            if not u.keep and (not u.words.isdisjoint(bound) or not u.divisors.isdisjoint(used)):
                u.keep = changed = True
        if not changed:
            return


def _build(source: str, lines: list[str], starts: list[int], units: list[_Unit]) -> Reduced:
    parts: list[str] = []
    body: list[ast.stmt] = []
    holes: list[tuple[str, str]] = []
    at = 0
    for u in units:
        if u.keep:
            body.extend(u.stmts)
            continue
        a = starts[u.first - 1]
        b = a + sum(len(ln) + 1 for ln in lines[u.first - 1 : u.last]) - 1  # (end of its last line)
        n = len(holes)
        span = u.last - u.first + 1
        placeholder = f'("@@{n}@@")' if span == 1 else f'("@@{n}@@"' + "\n" * (span - 1) + ")"
        parts.append(source[at:a])
        parts.append(placeholder)
        holes.append((placeholder, source[a:b]))
        at = b
        stub = ast.Expr(ast.Constant(""))
        stub.lineno, stub.col_offset, stub.end_lineno, stub.end_col_offset = u.first, 0, u.last, 1
        body.append(stub)
    parts.append(source[at:])
    return Reduced("".join(parts), ast.Module(body=body, type_ignores=[]), holes)
