"""Parse only what can change: the top-level statements no rule can touch are hidden from libcst.

libcst's parse (and everything after it: the rule pass, the flow layer's scopes) costs in proportion to the
text it is given, and most of a large file holds no device code. Python's own ``ast`` (C, already built for
the depth check) finds, per top-level statement, what the rules and the flow layer could need from it; each
statement that cannot matter is replaced by a placeholder expression spanning the same lines
(a triple-quoted string ``@@7@@`` … : one token, where parentheses would make each line break inside an
``EmptyLine`` node of libcst's), so line numbers, the leading comments and blank lines of every statement, and the
order of the module body stay as they were. After the migration each placeholder is swapped back for the
original text.

A statement is kept (parsed) when it, or the blank/comment lines around it,

- holds a trigger of the prefilter (``prefilter.PREFILTER``), a device or backend name in any case inside any
  word (``CUDAExecutionProvider``, ``use_nccl``; ``device_map``), a device-check word of the flow layer, or
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
import bisect
import builtins
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from . import keep_words
from .flow import _ALIAS, _WORTH
from .prefilter import PREFILTER, names_project_kernel
from .transform import _IDEMPOTENT  # (a setter repeated on the next line is dropped: transform._drop_repeat)

#: Set to 1 to migrate every file whole (the reference path).
WHOLE_FILE_ENV = "TPU_MIGRATE_WHOLE_FILE"
#: Below this share of the bytes hidden, the partial path is not worth its bookkeeping.
MIN_HIDDEN_SHARE = 0.15
#: Files smaller than this are parsed whole: on ML corpora (after the flow layer's scopes became cheap) the
#: selection's cost on the files it then rejects outweighs the gain on the ones it takes (net +4% CPU on
#: /tmp/corpus2 with 4 kB: +4-5%, 2026-12-04); big files are where it pays (a 5 MB file: 1.5x its parse, not 2.1x).
MIN_BYTES = 64_000

_WORD = re.compile(r"(?!\d)\w+")
_IMPORT = keep_words.IMPORT
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
    #: The top-level statements of :attr:`text`, in order (what migrate.groups splits into groups).
    pieces: list[Piece]

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
class Piece:
    """One top-level statement (or placeholder) of the reduced text, for migrate.groups."""

    first: int  # 1-based first line (decorators included)
    last: int
    #: Its statements in :attr:`Reduced.tree`.
    stubs: list[ast.stmt]
    size: int  # bytes of its lines
    #: Kept and linked to nothing outside itself (no import, device check, flow link, rebinding, first
    #: statement, statement after an import, ...): it may be migrated in a group of its own.
    movable: bool = False
    #: A def or class: a group may end after it (the next statement's rule state does not depend on it).
    cut_after: bool = False
    kept: bool = True  # (False: a placeholder of migrate.partial)


@dataclass
class _Unit:
    """Top-level statements sharing lines (``a = 1; b = 2`` is one libcst statement)."""

    first: int  # 1-based first line (decorators included)
    last: int
    stmts: list[ast.stmt]
    words: frozenset[str] = frozenset()  # words of its text and of the gaps around it
    keep: bool = False
    top: bool = True  # a top-level statement (else a class member)
    slash: bool = False  # its text holds a ``/``
    #: In the flow layer's reachable part (a device check's word, or linked to such a unit): its bindings
    #: spread the closure.
    flow: bool = False
    walrus: bool = False  # its text holds a ``:=``
    #: Binds an imported name or a helper's (names.ImportTable, source._defines read it).
    rebinds: bool = False
    #: Kept as the rest of a block a check may end (flow.Flow._rest_of_block).
    after: bool = False
    #: Followed by indented comment lines (libcst gives them to its block's footer).
    tail: bool = False
    _exports: frozenset[str] | None = None
    _divisors: frozenset[str] | None = None

    @property
    def exports(self) -> frozenset[str]:
        """Module-level bindings and attributes stored (computed when first asked)."""
        if self._exports is None:
            self._exports = _exports(self.stmts, self.walrus, top=self.top)
        return self._exports

    @property
    def divisors(self) -> frozenset[str]:
        if self._divisors is None:
            self._divisors = _divisors(self.stmts) if self.slash else frozenset()
        return self._divisors


#: Words that generic rule hooks react to without a trigger or a rule's qualified name in the statement.
_HOOK_WORDS = keep_words.HOOK_WORDS
#: Device and backend names in any case and any word (``'CUDAExecutionProvider'``, ``use_nccl``): rules read
#: strings and names more widely than the prefilter's triggers, so any statement holding one is parsed.
_DEVICE_TEXT = re.compile("(?i)" + keep_words.DEVICE_TEXT)
_ORDINAL_JOIN = re.compile(keep_words.ORDINAL_JOIN)


@lru_cache(maxsize=1)
def _rule_words() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """The rules' qualified names (calls, statements, refs), their prefixes, the words a statement naming one
    of them must hold (see migrate.keep_words.rule_words), and the helpers' names."""
    keys, prefixes = keep_words.rule_keys()
    words = keep_words.rule_words(_IDEMPOTENT)
    return keys, prefixes, frozenset(words), keep_words.helper_names()


@lru_cache(maxsize=1)
def _methods() -> re.Pattern[str]:
    return re.compile(keep_words.methods_pattern())


@dataclass
class _File:
    """What the selection reads from one file."""

    source: str
    lines: list[str]
    starts: list[int]
    sensitive: set[str]
    imported: set[str]
    helpers: frozenset[str]
    #: Names a device check is imported as (flow._ALIAS).
    check_aliases: set[str]
    #: Imported names and the helpers' (a statement binding one is kept).
    rebindable: set[str]
    triggers: _Hits
    worth: _Hits
    imports: _Hits

    def line_end(self, line: int) -> int:
        """Offset just past line ``line``'s newline (the text's end for the last line)."""
        return self.starts[line] if line < len(self.starts) else len(self.source)


def reduce(source: str, tree: ast.Module) -> Reduced | None:
    """The reduced text for ``source`` (parsed by ``ast`` as ``tree``), or None: parse it whole."""
    if len(source) < MIN_BYTES or "\r" in source or '"@@' in source or len(tree.body) < 3:
        return None
    if names_project_kernel(source):
        return None  # (a rule matches the project's own CUDA extension by a name no trigger holds: parse it whole)
    lines = source.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    units = _units(tree.body)
    if units is None:
        return None
    hits = [
        _Hits(source, [rx for w, rx in PREFILTER if w in source] + [_methods(), _DEVICE_TEXT, _ORDINAL_JOIN]),
        _Hits(source, [_WORTH]),
        _Hits(source, [_IMPORT]),
    ]
    if _at_most(source, starts, units, hits) < MIN_HIDDEN_SHARE * len(source):
        return None  # (decided before the costlier tests: most files end here)
    _keys, _prefixes, words, helpers = _rule_words()
    found = keep_words.aliases(keep_words.import_nodes(tree, source, starts))
    if found is None:
        return None
    aliases, imported = found
    f = _File(
        source,
        lines,
        starts,
        aliases | words,
        imported,
        helpers,
        set(_ALIAS.findall(source)),
        imported | helpers,
        *hits,
    )
    _seed(f, units, len(source), top=True)
    _close(units, set(), set())
    bound = set().union(*(u.exports for u in units if u.flow))
    used = set().union(*(u.words for u in units if u.flow))
    holes: list[_Unit] = [u for u in units if not u.keep]
    for k, u in enumerate(units):
        if u.keep and len(u.stmts) == 1 and type(u.stmts[0]) is ast.ClassDef:
            end = starts[units[k + 1].first - 1] if k + 1 < len(units) else len(source)
            holes += _hidden_members(f, u.stmts[0], end, bound, used)
    builtin = _BUILTINS & used  # (flow.Flow._shadowing: a builtin's name bound at module level)
    for u in holes:
        if u.top and not u.words.isdisjoint(builtin) and not u.exports.isdisjoint(builtin):
            u.keep = u.rebinds = True
    holes = [u for u in holes if not u.keep]
    hidden_bytes = sum(f.line_end(u.last) - starts[u.first - 1] for u in holes)
    if not holes or hidden_bytes < MIN_HIDDEN_SHARE * len(source):
        return None
    return _build(f, units, sorted(holes, key=lambda u: u.first))


def _at_most(source: str, starts: list[int], units: list[_Unit], hits: list[_Hits]) -> int:
    """An upper bound of the bytes :func:`reduce` can hide: top-level statements (after the first) and members
    of top-level classes (after the first) whose own lines hold no trigger, device-check word or import."""

    def span(u: _Unit) -> tuple[int, int]:
        return starts[u.first - 1], starts[u.last] if u.last < len(starts) else len(source)

    total = 0
    for k, u in enumerate(units):
        a, b = span(u)
        if k and not any(h.meets(a, b) for h in hits):
            total += b - a
        elif len(u.stmts) == 1 and type(u.stmts[0]) is ast.ClassDef:
            members = _units(u.stmts[0].body) or []
            for m in members[1:]:
                a, b = span(m)
                if not any(h.meets(a, b) for h in hits):
                    total += b - a
    return total


def _seed(f: _File, units: list[_Unit], end: int, *, top: bool) -> None:
    """Mark the units kept for what they hold themselves (see the module docstring); ``end``: where the text
    after the last unit stops (the next top-level statement for a class's members)."""
    source, starts = f.source, f.starts
    after_check = False  # a device check that may end its block: the rest of the block is its region
    for k, u in enumerate(units):
        gap_start = starts[units[k - 1].last] if k else starts[u.first - 1] if not top else 0
        gap_end = starts[units[k + 1].first - 1] if k + 1 < len(units) else end
        text = source[gap_start:gap_end]
        after = source[f.line_end(u.last) : gap_end]
        indent = len(f.lines[u.first - 1]) - len(f.lines[u.first - 1].lstrip())
        u.words = frozenset(_WORD.findall(text))
        worth = f.worth.meets(gap_start, gap_end)
        imports = f.imports.meets(gap_start, gap_end)
        u.flow = worth or imports or not u.words.isdisjoint(f.check_aliases)  # (flow.reachable's seeds)
        u.after = after_check
        u.tail = any(
            _indent(ln) > indent or (not top and k + 1 == len(units) and _indent(ln))
            for ln in after.split("\n")
        )
        u.keep = (
            k == 0
            or after_check
            or u.flow
            or not u.words.isdisjoint(f.sensitive)
            or f.triggers.meets(gap_start, gap_end)
            or u.tail
        )
        if any(type(s) is ast.Assert or (type(s) is ast.If and _ends(s.body)) for s in u.stmts):
            after_check = True  # (flow.Flow._rest_of_block: a check here may control the rest of the block)
        u.top, u.slash, u.walrus = top, "/" in text, ":=" in text
        if not f.rebindable.isdisjoint(g for m in _BINDING.findall(text) for g in m if g):
            u.rebinds = _binds(
                u, f.rebindable
            )  # (a rebound import changes how names resolve: names.ImportTable)
            u.keep = u.keep or u.rebinds


def _ends(body: list[ast.stmt]) -> bool:
    """A block that always leaves at its end (flow._ends, on ``ast``; any call named exit counts)."""
    last = body[-1] if body else None
    if type(last) in (ast.Return, ast.Raise, ast.Continue, ast.Break):
        return True
    if type(last) is ast.Expr and type(last.value) is ast.Call:
        fn = last.value.func
        return (fn.attr if type(fn) is ast.Attribute else getattr(fn, "id", "")) in ("exit", "_exit")
    return False


#: Words that may be bound where they stand (an assignment, a parameter, a def, an ``as`` …; more than that is
#: fine: it only makes :func:`_binds` look).
_BINDING = re.compile(
    r"(?<![\w.])(\w+)\s*(?:=(?!=)|:|,|\)|\]|\}|\bin\b)"
    r"|\b(?:def|class|as|global|nonlocal|lambda|del|import)\s+(\w+)|\*\s*(\w+)\b(?!\s*\.)"
)


class _Hits:
    """Where some regexes match in a text: does any match meet the span [a, b)? (One search of the whole text
    instead of one per statement; a match crossing a span's edge counts for both sides.)"""

    def __init__(self, text: str, regexes: list[re.Pattern[str]]) -> None:
        spans = sorted((m.start(), m.end()) for rx in regexes for m in rx.finditer(text))
        self.starts = [a for a, _ in spans]
        self.reach: list[int] = []  # the furthest end among the matches so far
        far = -1
        for _, e in spans:
            far = max(far, e)
            self.reach.append(far)

    def meets(self, a: int, b: int) -> bool:
        i = bisect.bisect_left(self.starts, b)
        return i > 0 and self.reach[i - 1] > a


def _binds(u: _Unit, names: set[str]) -> bool:
    """``u`` binds one of ``names`` anywhere (module level, a class, a function, a parameter)."""
    return any(
        (type(n) is ast.Name and type(n.ctx) is not ast.Load and n.id in names)
        or (type(n) is ast.arg and n.arg in names)
        or (type(n) in _SCOPES and type(n) is not ast.Lambda and n.name in names)
        or (type(n) in (ast.Global, ast.Nonlocal) and not names.isdisjoint(n.names))
        or (type(n) in (ast.ExceptHandler, ast.MatchAs, ast.MatchStar) and n.name in names)
        or (type(n) is ast.MatchMapping and n.rest in names)
        or (type(n) in (ast.Import, ast.ImportFrom) and any((a.asname or a.name) in names for a in n.names))
        for s in u.stmts
        for n in ast.walk(s)
    )


def _indent(line: str) -> int:
    """Indentation of a non-blank line (0 for a blank one)."""
    stripped = line.lstrip(" \t\f")
    return len(line) - len(stripped) if stripped else 0


def _hidden_members(f: _File, cls: ast.ClassDef, end: int, bound: set[str], used: set[str]) -> list[_Unit]:
    """The members of a kept top-level class that no rule can touch (same tests as for top-level statements,
    with the class's own names and every attribute stored, self's included, in the closure); a member that
    stores an attribute on anything else or declares a global is kept (the flow layer's reachable part reads
    those from the class's text)."""
    members = _units(cls.body)
    if members is None or len(members) < 2 or members[0].first == cls.lineno:
        return []
    for m in members:
        line = f.lines[m.first - 1]
        decorated = bool(getattr(m.stmts[0], "decorator_list", ()))
        if _indent(line) != (len(line) - len(line.lstrip()) if decorated else m.stmts[0].col_offset) or (
            decorated and not line.lstrip().startswith("@")
        ):
            return []  # (the member does not start its own line)
    _seed(f, members, end, top=False)
    for m in members:
        if not m.keep and _reaches_out(m.stmts):
            m.keep = True
    _close(members, bound, used)
    return [m for m in members if not m.keep]


def _reaches_out(stmts: list[ast.stmt]) -> bool:
    for s in stmts:
        for n in ast.walk(s):
            if type(n) in (ast.Global, ast.Nonlocal):
                return True
            if type(n) is ast.Attribute and type(n.ctx) is not ast.Load:
                v = n.value
                if not (type(v) is ast.Name and v.id in ("self", "cls")):
                    return True
    return False


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


def _exports(stmts: list[ast.stmt], walrus: bool, *, top: bool) -> frozenset[str]:
    """What ``stmts`` bind at module level (names, defs, globals) and the attributes they store (on anything but
    self/cls for top-level statements; flow.reachable's _module_bindings, a superset). Statements and their
    targets only: expressions are entered for ``:=`` alone (``walrus``: the text holds one)."""
    out: set[str] = set()
    own = ("self", "cls") if top else ()

    def target(t: ast.AST, module: bool) -> None:
        todo = [t]
        while todo:
            n = todo.pop()
            if type(n) is ast.Name:
                if module:
                    out.add(n.id)
            elif type(n) is ast.Attribute:
                if not (type(n.value) is ast.Name and n.value.id in own):
                    out.add(n.attr)
            elif type(n) in (ast.Tuple, ast.List, ast.Starred):
                todo.extend(ast.iter_child_nodes(n))

    todo: list[tuple[ast.AST, bool]] = [(s, True) for s in stmts]
    while todo:
        n, module = todo.pop()
        t = type(n)
        if t in (ast.Import, ast.ImportFrom):
            continue
        if t in _DEFS:
            if module:
                out.add(n.name)  # type: ignore[attr-defined]
            todo.extend((c, False) for c in n.body)  # type: ignore[attr-defined]
            continue
        if t in (ast.Global, ast.Nonlocal):
            out.update(n.names)  # type: ignore[attr-defined]
        elif t in (ast.Assign, ast.Delete):
            for x in n.targets:  # type: ignore[attr-defined]
                target(x, module)
        elif t in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor):
            target(n.target, module)  # type: ignore[attr-defined]
        elif t in (ast.With, ast.AsyncWith):
            for item in n.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    target(item.optional_vars, module)
        elif t is ast.ExceptHandler:
            if module and n.name:  # type: ignore[attr-defined]
                out.add(n.name)  # type: ignore[attr-defined]
        elif t is ast.match_case and module:
            for p in ast.walk(n.pattern):  # type: ignore[attr-defined]
                name = getattr(p, "name", None) or getattr(p, "rest", None)
                if isinstance(name, str):
                    out.add(name)
        if walrus and module:
            for e in ast.walk(n):
                if type(e) is ast.NamedExpr:
                    target(e.target, True)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo.extend((c, module) for c in getattr(n, field, ()) or ())
    return frozenset(out)


def _divisors(stmts: list[ast.stmt]) -> frozenset[str]:
    """The names and attribute names in what ``stmts`` divide by (flow.Flow._divisors, a superset)."""
    out: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if type(n) is ast.BinOp and type(n.op) in (ast.Div, ast.FloorDiv):
                out.update(_last_words(n.right))
            elif type(n) is ast.AugAssign and type(n.op) in (ast.Div, ast.FloorDiv):
                out.update(_last_words(n.value))
    return frozenset(out)


def _last_words(node: ast.AST) -> Iterable[str]:
    """Every name and attribute name in a divisor (a superset of the flow layer's last name)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr


def _close(units: list[_Unit], bound: set[str], used: set[str]) -> None:
    """Keep, to a fixed point, every unit linked to the flow layer's part: it names something a part unit
    binds, or divides by a word a part unit uses (flow.Flow._divisors). ``bound`` and ``used`` start with
    what the enclosing level's part holds."""
    bound, used = set(bound), set(used)
    done: set[int] = set()
    while True:
        for i, u in enumerate(units):
            if u.flow and i not in done:
                done.add(i)
                bound |= u.exports
                used |= u.words
        changed = False
        for u in units:
            if not u.flow and (
                not u.words.isdisjoint(bound)
                or (u.slash and not u.words.isdisjoint(used) and not u.divisors.isdisjoint(used))
            ):
                u.keep = u.flow = changed = True
        if not changed:
            return


def _build(f: _File, units: list[_Unit], holes: list[_Unit]) -> Reduced:
    source, lines, starts = f.source, f.lines, f.starts
    parts: list[str] = []
    placed: list[tuple[str, str]] = []
    at = 0
    for u in holes:
        a = starts[u.first - 1]
        b = a + sum(len(ln) + 1 for ln in lines[u.first - 1 : u.last]) - 1  # (end of its last line)
        first = lines[u.first - 1]
        indent = first[: len(first) - len(first.lstrip(" \t\f"))]
        span = u.last - u.first + 1
        placeholder = f'{indent}"""@@{len(placed)}@@' + "\n" * (span - 1) + '"""'
        parts.append(source[at:a])
        parts.append(placeholder)
        placed.append((placeholder, source[a:b]))
        at = b
    parts.append(source[at:])
    # Only what SourceMap reads (first lines, decorators' lines), so the original tree can be freed before the
    # parse (on a 5 MB file it is hundreds of MB).
    body: list[ast.stmt] = []
    pieces: list[Piece] = []
    for k, u in enumerate(units):
        stubs = [_stub(s, s.lineno) for s in u.stmts] if u.keep else [_stub(None, u.first)]
        body.extend(stubs)
        size = f.line_end(u.last) - starts[u.first - 1]
        movable = (
            u.keep
            and k > 0
            and not (u.flow or u.after or u.rebinds or u.tail)
            and not any(type(s) in (ast.Import, ast.ImportFrom) for s in units[k - 1].stmts)
        )
        cut = len(u.stmts) == 1 and type(u.stmts[0]) in _DEFS
        pieces.append(Piece(u.first, u.last, stubs, size, movable, cut, u.keep))
    return Reduced("".join(parts), ast.Module(body=body, type_ignores=[]), placed, pieces)


def _stub(stmt: ast.stmt | None, line: int) -> ast.stmt:
    """A statement that says where ``stmt`` starts (a placeholder's statement for None)."""
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        out: ast.stmt = ast.ClassDef() if type(stmt) is ast.ClassDef else ast.FunctionDef()
        out.decorator_list = [ast.Name(lineno=d.lineno) for d in decorators]  # type: ignore[attr-defined]
    else:
        out = ast.Pass()
    out.lineno = line
    return out
