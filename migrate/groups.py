"""Migrate a big file's kept statements in groups, one libcst tree at a time (peak memory of one group).

migrate.partial hides the top-level statements no rule can touch; on a big file what is left is still one big
tree (a 5 MB file: ~2 GB). Here the kept statements that are linked to nothing outside themselves
(``Piece.movable``: no import, device check, flow link, rebinding, not the first statement nor the one after an
import) are split into runs of about :data:`GROUP_BYTES`; each group's text is the reduced text with every
other group's statements replaced by placeholders spanning the same lines, so it keeps the imports and every
statement the rules read as context. A last pass over the context alone does the import clean-up and helpers
(migrate.source._finish). Groups end only after a def or class, so the statement after a cut sees the same
rule state (transform._carry_lines, _drop_repeat) as in one parse.

At assembly any doubt answers None and the caller parses the reduced text once (the single-parse path): a
context statement or its findings differing between two passes, a statement changed that the pass does not
own, new statements that cannot be attributed to one statement. ``TPU_MIGRATE_NO_GROUPS=1`` turns groups off
(the reference for ``benchmarks/migrate_paths_compare.py``).
"""

from __future__ import annotations

import ast
import bisect
import os

from .partial import Reduced, _stub

#: Set to 1 to parse the reduced text in one piece (the single-parse partial path).
NO_GROUPS_ENV = "TPU_MIGRATE_NO_GROUPS"
#: Bytes of movable statements per group: libcst holds ~500 bytes of memory per byte of source, so ~250 MB.
GROUP_BYTES = 500_000
#: Fewer movable bytes than this: one parse is as good.
MIN_MOVABLE = 2 * GROUP_BYTES
#: More context bytes than this (parsed once per group): one parse is better.
MAX_CONTEXT = GROUP_BYTES // 2


def enabled() -> bool:
    return os.environ.get(NO_GROUPS_ENV, "") not in ("1", "true", "yes")


def plan(reduced: Reduced) -> list[list[int]] | None:
    """Indexes of :attr:`Reduced.pieces` per group (at least two groups), or None: not worth it."""
    pieces = reduced.pieces
    movable = sum(p.size for p in pieces if p.movable)
    context = sum(p.size for p in pieces if p.kept and not p.movable)
    if movable < MIN_MOVABLE or context > MAX_CONTEXT:
        return None
    groups: list[list[int]] = [[]]
    size = 0
    for i, p in enumerate(pieces):
        if not p.movable:
            continue
        groups[-1].append(i)
        size += p.size
        if size >= GROUP_BYTES and p.cut_after:
            groups.append([])
            size = 0
    groups = [g for g in groups if g]
    return groups if len(groups) >= 2 else None


def hidden_in(reduced: Reduced, members: set[int], i: int) -> bool:
    """Piece ``i`` is under a placeholder in the pass of ``members``: hidden by migrate.partial or movable and
    in another group."""
    p = reduced.pieces[i]
    return not p.kept or (p.movable and i not in members)


def group_text(reduced: Reduced, members: set[int], lines: list[int]) -> tuple[str, ast.Module]:
    """The reduced text with each run of pieces hidden in this pass (see :func:`hidden_in`) replaced by one
    placeholder over the same lines (libcst's cost is per statement too), and its statement layout (``lines``:
    offsets of the reduced text's lines). The placeholder is one triple-quoted string, its line breaks inside
    the one token: in parentheses each would be an ``EmptyLine`` node of libcst's (a group of a 5 MB file hides
    ~250,000 lines, half of its parse)."""
    text = reduced.text
    pieces = reduced.pieces
    parts: list[str] = []
    body: list[ast.stmt] = []
    at = 0
    i = 0
    while i < len(pieces):
        if not hidden_in(reduced, members, i):
            body.extend(pieces[i].stubs)
            i += 1
            continue
        j = i
        while j + 1 < len(pieces) and hidden_in(reduced, members, j + 1):
            j += 1
        first, last = pieces[i].first, pieces[j].last
        a = lines[first - 1]
        b = (lines[last] - 1) if last < len(lines) else len(text)
        parts.append(text[at:a])
        parts.append(f'"""@@g{i}@@' + "\n" * (last - first) + '"""')
        at = b
        body.append(_stub(None, first))
        i = j + 1
    parts.append(text[at:])
    return "".join(parts), ast.Module(body=body, type_ignores=[])


def line_offsets(text: str) -> list[int]:
    out = [0]
    i = text.find("\n")
    while i >= 0:
        out.append(i + 1)
        i = text.find("\n", i + 1)
    return out


def piece_at(lasts: list[int], line: int) -> int:
    """The piece a line belongs to (``lasts``: each piece's last line; a blank or comment line between two
    pieces: the next one)."""
    return bisect.bisect_left(lasts, line)


def attribute(
    pieces_of_pass: list[tuple[int | None, str]], owner: list[int], n_old: int
) -> tuple[dict[int, str], set[int]] | None:
    """Each piece's new code (leading lines included) from one pass's statements (see _spans.pieces), and the
    pieces that changed; ``owner[i]``: the piece of old statement ``i``. None when new statements stand between
    two kept ones whose changed old statements belong to more than one piece."""
    out: dict[int, list[str]] = {}
    changed: set[int] = set()
    pending: list[str] = []
    last = -1

    def flush(upto: int) -> bool:
        owners = {owner[i] for i in range(last + 1, upto)}
        if len(owners) > 1 or (pending and not owners):
            return False
        for o in owners:
            out.setdefault(o, []).extend(pending)
        changed.update(owners)
        pending.clear()
        return True

    for i, code in pieces_of_pass:
        if i is None:
            pending.append(code)
            continue
        if not flush(i):
            return None
        out.setdefault(owner[i], []).append(code)
        last = i
    if not flush(n_old):
        return None
    return {k: "".join(v) for k, v in out.items()}, changed
