"""Compound statements the rule pass need not enter: their lines hold nothing a rule reacts to.

The rule pass (migrate.transform) calls every rule hook for every node it visits, and most of a file's
functions, loops and branches hold no device code. A compound statement (``def``, ``class``, ``if``, ``for``,
``with``, ``try`` …) is *quiet* when none of its lines holds what migrate.partial's selection keeps a
top-level statement for: a prefilter trigger's word, a device or backend name in any case inside any word,
a device-check word of the flow layer, ``import``, a rule's hooked word (the last part of a rule's name,
a hooked method's name, a helper's name) or a name an import binds to a rule's name. The transformer still
visits and leaves the quiet statement itself (every hook for its own type runs as before), but not its
children: nothing inside could match a rule, so nothing inside changes and nothing is reported.

The words are migrate.keep_words', the same list migrate.partial selects statements by; a differential test
runs both passes.

Line spans come from Python's ``ast`` of the same text, paired with libcst's statements by position; any
doubt (the pairing does not match exactly, a star import, ``\\r`` line ends) answers an empty set and every
node is visited. ``TPU_MIGRATE_VISIT_ALL=1`` always visits every node (the reference for the differential
tests).
"""

from __future__ import annotations

import ast
import bisect
import os
import re
from functools import lru_cache

import libcst as cst

from . import keep_words
from .flow import _ALIAS, _WORTH
from .prefilter import PREFILTER

#: Bigger files may reach the rule pass reduced or in groups (migrate.partial, migrate.groups: their module is
#: not the whole text, and a second ``ast`` of a big text would cost memory those paths keep down): not skipped.
_MAX_BYTES = 64_000
#: Set to 1 to visit every node (the reference path).
VISIT_ALL_ENV = "TPU_MIGRATE_VISIT_ALL"
#: A word as migrate.partial's ``(?!\d)\w+`` tokens find it (or more: any start after a digit counts too).
_WHOLE = r"(?<![^\W\d])(?:"
_PLAIN = (cst.SimpleStatementLine,)
#: libcst compound statement type -> the ast types it may stand for.
_PAIRS: dict[type, tuple[type, ...]] = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.Match: (ast.Match,),
}
if hasattr(cst, "TryStar") and hasattr(ast, "TryStar"):
    _PAIRS[cst.TryStar] = (ast.TryStar,)


def enabled() -> bool:
    return os.environ.get(VISIT_ALL_ENV, "") not in ("1", "true", "yes")


def quiet_statements(
    module: cst.Module, source: str, setters: frozenset[str], tree: ast.Module | None = None
) -> set[int]:
    """ids of the compound statements of ``module`` (parsed from ``source``, or from migrate.partial's reduced
    text of it, which keeps every kept statement on its own lines) whose lines hold nothing a rule reacts to.
    ``setters``: the qualified names of the setters transform._drop_repeat drops when repeated. ``tree``:
    ``ast.parse(source)`` when the caller already has it (migrate.source parses every file once with ``ast``;
    a second parse here cost ~5 % of a check)."""
    if not enabled() or len(source) >= _MAX_BYTES or "\r" in source or "\f" in source:
        return set()
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return set()
    spans: list[tuple[int, int, int]] = []  # (id, first line, last line)
    if not _pair(module.body, tree.body, spans):
        return set()
    if not spans:
        return set()
    hits = _hit_lines(source, tree, setters)
    if hits is None:
        return set()
    return {i for i, a, b in spans if hits[b] == hits[a - 1]}


def _hit_lines(source: str, tree: ast.Module, setters: frozenset[str]) -> list[int] | None:
    """Prefix counts: ``out[n]`` = how many of lines 1..n hold something a rule may react to."""
    lines = source.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    found = keep_words.aliases(keep_words.import_nodes(tree, source, starts))
    if found is None:
        return None  # a star import: names come from elsewhere
    hit = bytearray(len(lines) + 1)
    mine = found[0] | set(_ALIAS.findall(source))
    regexes = [_static(setters)]
    if mine:
        regexes.append(re.compile(_WHOLE + "|".join(map(re.escape, sorted(mine))) + r")(?!\w)"))
    for rx in regexes:
        for m in rx.finditer(source):
            first = bisect.bisect_right(starts, m.start())
            last = bisect.bisect_right(starts, max(m.end() - 1, m.start()))
            hit[first : last + 1] = b"\x01" * (last + 1 - first)
    out = [0] * (len(lines) + 1)
    n = 0
    for k in range(1, len(lines) + 1):
        n += hit[k]
        out[k] = n
    return out


@lru_cache(maxsize=2)
def _static(setters: frozenset[str]) -> re.Pattern[str]:
    """One regex for every file-independent reason to enter a statement (see the module docstring): every
    prefilter trigger's word, ``import``, a device text, the flow layer's check words, a call of a hooked
    method, a rule's word or a helper's name as a whole word."""
    words = keep_words.rule_words(setters) | keep_words.helper_names()
    parts = [
        *(re.escape(w) for w, _rx in PREFILTER),
        "import",
        "(?i:" + keep_words.DEVICE_TEXT + ")",
        keep_words.ORDINAL_JOIN,
        _WORTH.pattern,
        keep_words.methods_pattern(),
        _WHOLE + "|".join(map(re.escape, sorted(words))) + r")(?!\w)",
    ]
    return re.compile("|".join(f"(?:{p})" for p in parts))


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])


def _pair(body: list[cst.CSTNode], stmts: list[ast.stmt], spans: list[tuple[int, int, int]]) -> bool:
    """Walk libcst's statements and ast's side by side; False when they do not line up exactly."""
    i = 0
    for s in body:
        t = type(s)
        if t in _PLAIN:
            n = len(s.body)  # type: ignore[attr-defined]  # one ast statement per small statement
            if i + n > len(stmts) or n == 0:
                return False
            last = stmts[i + n - 1].end_lineno
            if last is None:
                return False
            spans.append((id(s), stmts[i].lineno, last))
            i += n
            continue
        kinds = _PAIRS.get(t)
        if kinds is None or i >= len(stmts) or type(stmts[i]) not in kinds:
            return False
        a = stmts[i]
        i += 1
        if a.end_lineno is None or not _pair_inside(s, a, spans):  # type: ignore[arg-type]
            return False
        spans.append((id(s), _first_line(a), a.end_lineno))
    return i == len(stmts)


def _block(suite: cst.CSTNode, stmts: list[ast.stmt], spans: list[tuple[int, int, int]]) -> bool:
    if type(suite) is cst.SimpleStatementSuite:
        return len(suite.body) == len(stmts)  # type: ignore[attr-defined]
    if type(suite) is cst.IndentedBlock:
        return _pair(list(suite.body), stmts, spans)  # type: ignore[attr-defined]
    return False


def _orelse(orelse: cst.CSTNode | None, stmts: list[ast.stmt], spans: list[tuple[int, int, int]]) -> bool:
    if orelse is None:
        return not stmts
    if type(orelse) is cst.If:  # elif: ast holds it as the only statement of orelse
        return _pair([orelse], stmts, spans) if len(stmts) == 1 else False
    if type(orelse) is cst.Else:
        return _block(orelse.body, stmts, spans)  # type: ignore[attr-defined]
    return False


def _pair_inside(s: cst.CSTNode, a: ast.stmt, spans: list[tuple[int, int, int]]) -> bool:
    t = type(s)
    if t in (cst.FunctionDef, cst.ClassDef, cst.With):
        return _block(s.body, a.body, spans)  # type: ignore[attr-defined]
    if t in (cst.If, cst.For, cst.While):
        return _block(s.body, a.body, spans) and _orelse(s.orelse, a.orelse, spans)  # type: ignore[attr-defined]
    if t is cst.Match:
        cases = s.cases  # type: ignore[attr-defined]
        return len(cases) == len(a.cases) and all(  # type: ignore[attr-defined]
            _block(c.body, ac.body, spans)
            for c, ac in zip(cases, a.cases, strict=True)  # type: ignore[attr-defined]
        )
    # Try / TryStar
    handlers = s.handlers  # type: ignore[attr-defined]
    if len(handlers) != len(a.handlers):  # type: ignore[attr-defined]
        return False
    return (
        _block(s.body, a.body, spans)  # type: ignore[attr-defined]
        and all(_block(h.body, ah.body, spans) for h, ah in zip(handlers, a.handlers, strict=True))  # type: ignore[attr-defined]
        and _orelse(s.orelse, a.orelse, spans)  # type: ignore[attr-defined]
        and (
            not a.finalbody  # type: ignore[attr-defined]
            if s.finalbody is None  # type: ignore[attr-defined]
            else _block(s.finalbody.body, a.finalbody, spans)  # type: ignore[attr-defined]
        )
    )
