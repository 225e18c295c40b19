"""Write a migrated notebook by replacing only the ``source`` values of the cells that changed.

Re-serializing the whole notebook with ``json.dumps`` rewrites lines nobody touched wherever the file was not
written the way ``json.dumps`` writes (``\\u001B`` escapes in pip's coloured outputs, ``\\u00e9`` escapes for
non-ASCII text, another float spelling): the diff then shows output lines that did not change. The spans of the
``source`` values are found with the ``json`` module's own scanner; the result is used only when it parses back to
exactly the migrated notebook.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Layout(Exception):
    """The text does not have the notebook layout the scanner follows."""


def _skip_ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _expect(text: str, i: int, ch: str) -> int:
    i = _skip_ws(text, i)
    if text[i : i + 1] != ch:
        raise _Layout(f"expected {ch!r} at {i}")
    return i + 1


def _members(text: str, i: int):
    """Yield (key, value start, value end) of the object starting at ``i``; the last yield is (None, end, end)."""
    i = _expect(text, i, "{")
    i = _skip_ws(text, i)
    if text[i : i + 1] == "}":
        yield None, i + 1, i + 1
        return
    while True:
        i = _skip_ws(text, i)
        if text[i : i + 1] != '"':
            raise _Layout(f"expected a key at {i}")
        key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        i = _expect(text, i, ":")
        start = _skip_ws(text, i)
        _, end = _DECODER.raw_decode(text, start)
        yield key, start, end
        i = _skip_ws(text, end)
        if text[i : i + 1] == ",":
            i += 1
            continue
        if text[i : i + 1] == "}":
            yield None, i + 1, i + 1
            return
        raise _Layout(f"expected ',' or '}}' at {i}")


def source_spans(text: str) -> list[tuple[int, int] | None]:
    """The (start, end) of each cell's ``source`` value in ``text``, in cell order (None for a cell without one)."""
    for key, start, _end in _members(text, 0):
        if key != "cells":
            continue
        spans: list[tuple[int, int] | None] = []
        i = _expect(text, start, "[")
        i = _skip_ws(text, i)
        if text[i : i + 1] == "]":
            return spans
        while True:
            found = None
            last = i
            for k, s, e in _members(text, i):
                if k == "source":
                    found = (s, e)
                last = e
            spans.append(found)
            i = _skip_ws(text, last)
            if text[i : i + 1] == ",":
                i = _skip_ws(text, i + 1)
                continue
            if text[i : i + 1] == "]":
                return spans
            raise _Layout(f"expected ',' or ']' at {i}")
    raise _Layout("no cells")


def _value_text(value: Any, text: str, start: int, indent: int) -> str:
    """``value`` written as nbformat writes it where the old value began: continuation lines carry the indent of
    the line that holds the key."""
    line_start = text.rfind("\n", 0, start) + 1
    prefix = text[line_start : line_start + len(text[line_start:]) - len(text[line_start:].lstrip(" \t"))]
    lines = json.dumps(value, indent=indent, ensure_ascii=False).split("\n")
    return "\n".join([lines[0], *(prefix + line for line in lines[1:])])


def splice(text: str, nb: dict, changed: set[int], indent: int) -> str | None:
    """``text`` with the ``source`` of the cells numbered in ``changed`` (0-based) replaced by their value in
    ``nb``; None when the layout cannot be followed or the result does not parse back to ``nb``."""
    try:
        spans = source_spans(text)
    except (_Layout, json.JSONDecodeError, IndexError):
        return None
    cells = nb.get("cells", [])
    if len(spans) != len(cells):
        return None
    out: list[str] = []
    at = 0
    for n in sorted(changed):
        span = spans[n]
        if span is None:
            return None
        start, end = span
        out += [text[at:start], _value_text(cells[n]["source"], text, start, indent)]
        at = end
    out.append(text[at:])
    new = "".join(out)
    try:
        return new if json.loads(new) == nb else None
    except json.JSONDecodeError:
        return None
