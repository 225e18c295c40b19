"""Jupyter notebooks: migrate code cells only, with IPython magics masked, everything else untouched.

Code cells share one namespace (an import in cell 1 serves cell 5), so the masked cells are joined into
one module, migrated once and split back at marker comments. Magic lines (``%time``, ``!pip``,
``x = !ls``, ``obj?``, automagic ``pip install``) become placeholder comments during the rewrite (every line of a magic continued
with a trailing backslash, so line numbers stay); a cell that starts with a
Python cell magic (``%%time``) keeps it, other cell magics (``%%bash``) skip the cell. Outputs,
metadata and the JSON layout are kept; an unchanged notebook is returned byte-identical. Diagnostics
name the cell: ``nb.ipynb:cell_3:4:1`` (cells numbered from 1, markdown included).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Iterable
from dataclasses import replace

from ._nbsplice import splice
from .results import MigrationResult
from .selection import RuleSet, as_rule_set
from .source import UnparsableError, migrate_source

_MAGIC = re.compile(r"^(\s*)([%!].*|\w[\w.]*\s*=\s*[%!].*|[\w.]+\?\??)$")
#: IPython's automagic package managers (``pip install x`` without ``%``): two names side by side are never
#: Python, unless the second is a keyword (``pip in xs``, ``conda if a else b``).
_AUTOMAGIC = re.compile(r"^(\s*)(?:pip|conda|mamba|micromamba|uv)[ \t]+([A-Za-z][\w-]*)")
_MARK = "# tpu-migrate-magic-{}"
#: Inside a block a magic stands for a statement (``if x:`` / ``    !pip install y``): an Ellipsis keeps the
#: block a block, and no rule removes it (a comment could go with an ``if`` a rewrite emptied).
_STATEMENT_MARK = "...  # tpu-migrate-magic-{}"
_PLACEHOLDER = re.compile(r"^[ \t]*(?:\.\.\.  )?# tpu-migrate-magic-(\d+)$", re.M)
_CELL = "# tpu-migrate-cell-{}"
_PY_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")


def _mask(source: str, masked: list[str]) -> str:
    """Replace each magic line by a placeholder (a comment; an Ellipsis statement inside a block); a magic
    continued with a trailing backslash (``!pip install a \\`` / ``    b``) is one unit: every line of it is
    masked, its continuation lines by comments, so line numbers stay."""
    out: list[str] = []
    continued = False
    python = _LogicalLines()
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = None if continued or not python.at_start else _MAGIC.match(body) or _automagic(body)
        if m or continued:
            indent = m.group(1) if m else body[: len(body) - len(body.lstrip())]
            mark = _STATEMENT_MARK if m and indent else _MARK
            out.append(indent + mark.format(len(masked)) + line[len(body) :])
            masked.append(body)
            continued = body.endswith("\\")
        else:
            python.feed(body)
            out.append(line)
    return "".join(out)


class _LogicalLines:
    """Where Python's logical lines start: IPython reads a magic only at the start of one, so a line inside
    open brackets, a triple-quoted string or after a backslash (``print('%d'`` / ``      %(a, b))``) is Python,
    however it begins."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the open triple quote carried to the next line
        self.backslash = False

    @property
    def at_start(self) -> bool:
        return not (self.depth or self.quote or self.backslash)

    def feed(self, line: str) -> None:
        i, n, quote = 0, len(line), self.quote
        while i < n:
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                    continue
                i += 1
                continue
            if c == "#":
                break
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            elif c in "'\"":
                quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(quote)
                continue
            i += 1
        self.quote = quote if len(quote) == 3 else ""  # (a one-quote string ends with its line)
        self.backslash = not quote and line.rstrip().endswith("\\") and "#" not in line[i : i + 1]


def _automagic(line: str) -> re.Match[str] | None:
    m = _AUTOMAGIC.match(line)
    return m if m is not None and not keyword.iskeyword(m.group(2)) else None


def _unmask(source: str, masked: list[str]) -> str:
    def put_back(m: re.Match[str]) -> str:
        return masked[int(m.group(1))]

    return _PLACEHOLDER.sub(put_back, source)


def _indent_of(text: str) -> int:
    """json.dumps indent that reproduces the file (nbformat writes indent=1)."""
    m = re.search(r"\n( +)\"", text)
    return len(m.group(1)) if m else 1


def _cells(nb: object) -> list[dict]:
    """The cells of a notebook, refusing JSON that is not one (a list, cells that are strings): such a file
    is reported unparsable rather than "0 migrated" as if its code had been checked."""
    if not isinstance(nb, dict):
        raise UnparsableError(
            f"not a notebook: the JSON is a {type(nb).__name__}, not an object with 'cells'"
        )
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise UnparsableError("not a notebook: no 'cells' list")
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise UnparsableError(f"not a notebook: cell {number} is a {type(cell).__name__}, not an object")
        raw = cell.get("source", "")
        if not (isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(x, str) for x in raw))):
            raise UnparsableError(
                f"not a notebook: cell {number}'s source is neither text nor a list of lines"
            )
    return cells


def migrate_notebook(
    text: str,
    path: str = "<notebook>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rules: RuleSet | None = None,
) -> MigrationResult:
    """Migrate the code cells of a notebook given as JSON text; raises UnparsableError on bad JSON/code
    (with the cell and the line in it)."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnparsableError(f"not valid notebook JSON: {exc}") from exc
    cells = _cells(nb)
    masked: list[str] = []
    parts: list[str] = []
    spans: list[tuple[int, int, int]] = []  # (cell number, first line in the joined module, first cell line)
    chosen: list[tuple[int, dict, str, str]] = []  # (number, cell, original source, header magic)
    line = 1
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        raw = cell.get("source", "")
        source = "".join(raw) if isinstance(raw, list) else str(raw)
        header = ""
        body = source
        if source.startswith("%%"):
            first, _, rest = source.partition("\n")
            if first.split()[0] not in _PY_CELL_MAGICS:
                continue
            header, body = first + "\n", rest
        chunk = _mask(body, masked)
        if chunk and not chunk.endswith("\n"):
            chunk += "\n"
        parts.append(_CELL.format(len(chosen)) + "\n" + chunk)
        spans.append((number, line + 1, 2 if header else 1))
        line += 1 + chunk.count("\n")
        chosen.append((number, cell, source, header))
    if not chosen:
        return MigrationResult(text, False, [])
    joined = "".join(parts)

    def in_cell(line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a line of the joined module."""
        number, start, offset = next(((n, s, o) for n, s, o in reversed(spans) if line >= s), spans[0])
        return number, max(1, line - start + offset)

    try:
        result = migrate_source(joined, path, rules=as_rule_set(rules, select, ignore))
    except UnparsableError as exc:
        if not exc.line:
            raise UnparsableError(f"code cells: {exc.message}") from exc
        number, line = in_cell(exc.line)

        def cell_line(
            m: re.Match[str],
        ) -> str:  # Python's "after 'if' statement on line 12": the joined module's
            n, ln = in_cell(int(m.group(1)))
            return f"on line {ln}" if n == number else f"on line {ln} of cell {n}"

        message = re.sub(r"on line (\d+)", cell_line, exc.message)
        raise UnparsableError(f"cell {number}, line {line}, column {exc.col}: {message}") from exc
    diagnostics = []
    for d in result.diagnostics:
        number, line = in_cell(d.line)
        diagnostics.append(replace(d, path=f"{path}:cell_{number}", line=line))
    if not result.changed:
        return MigrationResult(text, False, diagnostics)
    kept = sorted(int(n) for n in _PLACEHOLDER.findall(result.new_source))
    if kept != list(range(len(masked))):  # a rewrite dropped (or doubled) an IPython line: never write that
        raise UnparsableError("the migration would lose an IPython magic or shell line; left untouched")
    pieces = re.split(r"^# tpu-migrate-cell-(\d+)\n", result.new_source, flags=re.M)
    prefix, bodies = pieces[0], {int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces), 2)}
    changed_cells: set[int] = set()
    for idx, (number, cell, source, header) in enumerate(chosen):
        body = bodies.get(idx, "")
        if idx == 0:
            body = prefix + body  # imports added at the top belong to the first code cell
        body = header + _unmask(body, masked)
        if not source.endswith("\n") and body.endswith("\n"):
            body = body[:-1]
        if "\r\n" in source and source.count("\r\n") == source.count("\n"):
            body = body.replace("\r\n", "\n").replace("\n", "\r\n")  # (a cell written on Windows keeps CRLF)
        if body != source:
            changed_cells.add(number - 1)
            raw = cell.get("source", "")
            cell["source"] = body.splitlines(keepends=True) if isinstance(raw, list) else body
    if not changed_cells:
        return MigrationResult(text, False, diagnostics)
    out = splice(text, nb, changed_cells, _indent_of(text))  # only the changed cells' sources are rewritten
    if out is None:  # (a layout the splice cannot follow: the whole notebook is written again)
        out = json.dumps(nb, indent=_indent_of(text), ensure_ascii=False)
        if text.endswith("\n"):
            out += "\n"
    return MigrationResult(out, out != text, diagnostics)
