"""What makes a statement worth the rule pass: the words both migrate.partial (which top-level statements to
parse) and migrate._quiet (which compound statements the rule pass may skip) look for.

One list for both, so a rule that reacts to a new word cannot be seen by one and missed by the other. Nothing
here imports the rule pass (migrate.transform): the setters transform repeats are handed in.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from functools import lru_cache

from .prefilter import needs_parse
from .rules._helpers import all_helpers
from .rules.base import all_rules

#: Words generic rule hooks react to without a trigger or a rule's name (``add_argument(default="nccl")``).
HOOK_WORDS = frozenset({"add_argument"})
#: Device and backend names, matched in any case inside any word.
DEVICE_TEXT = r"cuda|nccl|cudnn|xla|tpu|nvidia|device_map"
IMPORT = re.compile(r"\bimport\b")
#: A device name joined with an ordinal at run time (``self.map_location + ":" + str(gpu_id)``): the name may
#: hold a device a rule renames, so the statement is worth the rule pass though it names no device itself.
ORDINAL_JOIN = r"""\+\s*(?:':'|":")\s*\+"""


@lru_cache(maxsize=1)
def rule_keys() -> tuple[frozenset[str], frozenset[str]]:
    """The rules' qualified names (calls, statements, refs) and their prefixes."""
    keys: set[str] = set()
    prefixes: set[str] = set()
    for r in all_rules():
        keys.update(r.calls, r.statements, r.refs)
        prefixes.update(r.ref_prefixes)
    return frozenset(keys), frozenset(prefixes)


def rule_words(setters: Iterable[str]) -> set[str]:
    """The words a statement naming a rule's name must hold: last parts of the rules' names (a chain naming a
    key that holds a trigger holds the trigger itself, or an alias: see :func:`aliases`), of the ``setters``
    the rule pass drops when repeated, the generic hooks' words and the words rules declare (``Rule.words``)."""
    keys, prefixes = rule_keys()
    words = set(HOOK_WORDS) | {q.rsplit(".", 1)[-1] for q in setters}
    words.update(q.rsplit(".", 1)[-1] for q in keys | prefixes if not needs_parse(q))
    for r in all_rules():
        words.update(r.words)
    return words


def helper_names() -> frozenset[str]:
    return frozenset(h.name for h in all_helpers())


def methods_pattern() -> str:
    """A call of a method some rule hooks by its name (``x.to(3)``): a dot, the name, a parenthesis."""
    names = sorted({m for r in all_rules() for m in r.methods})
    return r"\.\s*(?:" + "|".join(map(re.escape, names)) + r")\s*\("


def import_nodes(tree: ast.Module, source: str, starts: list[int]) -> list[ast.AST]:
    """Every import statement: the top-level ones, and those inside a statement whose text says ``import``."""
    out: list[ast.AST] = []
    for s in tree.body:
        if type(s) in (ast.Import, ast.ImportFrom):
            out.append(s)
        elif s.end_lineno is not None:
            end = starts[s.end_lineno] if s.end_lineno < len(starts) else len(source)
            if IMPORT.search(source, starts[s.lineno - 1], end):
                out.extend(n for n in ast.walk(s) if type(n) in (ast.Import, ast.ImportFrom))
    return out


def aliases(nodes: Iterable[ast.AST]) -> tuple[set[str], set[str]] | None:
    """Names imports bind to a rule's qualified name (or one under a rule's prefix, or one holding a trigger),
    and every name any import binds; None for a star import. A use of any other imported name that
    resolves to a rule's name holds that name's last part."""
    keys, prefixes = rule_keys()
    out: set[str] = set()
    every: set[str] = set()

    def add(bound: str, qname: str) -> None:
        every.add(bound)
        if (
            qname in keys
            or qname in prefixes
            or any(qname.startswith(p + ".") for p in prefixes)
            or needs_parse(qname)
        ):
            out.add(bound)

    for node in nodes:
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
