"""Where and why a source does not parse, in Python's own words.

libcst's parser reports a position that is often off (an error on line 2 came out as "@ 3:1", and its
``raw_line``/``raw_column`` point past the bad token). Python's compiler, asked for an AST only, gives
the position and message a Python user knows ("'(' was never closed", "unexpected indent"). When Python
accepts what libcst rejects, the file is valid Python that libcst cannot handle, and libcst's own
position is the best there is.
"""

from __future__ import annotations

import ast
import warnings

import libcst as cst


def describe(source: str, exc: BaseException) -> tuple[str, int, int]:
    """(message, line, column) for a source libcst failed on (``exc``); line and column are 1-based, 0
    when unknown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings (odd escapes) are not the problem here
            compile(source, "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return err.msg, err.lineno or 0, err.offset or 0
    except (ValueError, RecursionError, MemoryError) as err:  # null bytes; nesting beyond the C parser's
        return str(err) or type(err).__name__, 0, 0
    if isinstance(exc, cst.ParserSyntaxError):
        first = str(exc).splitlines()
        detail = first[1] if len(first) > 1 else first[0] if first else "syntax error"
        return (
            f"valid Python that libcst cannot parse ({detail.removeprefix('parser error: ')})",
            exc.raw_line,
            exc.raw_column + 1,
        )
    if isinstance(exc, RecursionError):
        return "valid Python, but nested too deeply for libcst", 0, 0
    return (
        f"libcst cannot parse this file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
        0,
        0,
    )
