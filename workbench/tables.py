"""One number format for every table the workbench prints: terminal text, markdown reports, notebooks.

Numbers keep ``digits`` significant figures with thousands separators (23,812 not 2.38e+04); only
magnitudes outside [1e-4, 1e12) use exponent notation; NaN and None read "-".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import pandas as pd

Formatter = Callable[[object], str]


def fmt(value: object, digits: int = 3) -> str:
    """``value`` as table text: floats to ``digits`` significant figures, ints with separators."""
    if value is None or isinstance(value, bool):
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if math.isinf(value) or value == 0:
            return str(value) if math.isinf(value) else "0"
        size = abs(value)
        if size >= 1e12 or size < 1e-4:
            return f"{value:.{digits}g}"
        decimals = digits - 1 - math.floor(math.log10(size))
        return f"{value:,.{max(decimals, 0)}f}"
    return str(value)


def _cells(df: pd.DataFrame, digits: int, formats: Mapping[str, Formatter] | None) -> list[list[str]]:
    formats = formats or {}
    rows = []
    for row in df.itertuples(index=False):
        rows.append(
            [
                formats[c](v) if c in formats else fmt(_plain(v), digits)
                for c, v in zip(df.columns, row, strict=True)
            ]
        )
    return rows


def _plain(value: object) -> object:
    """numpy scalars as Python numbers, so ``fmt`` sees int/float."""
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, str | bytes) else value


def markdown(df: pd.DataFrame | None, digits: int = 3, formats: Mapping[str, Formatter] | None = None) -> str:
    """GitHub markdown table (``|`` and newlines in cells escaped); an empty frame reads "(none)"."""
    if df is None or len(df) == 0:
        return "_(none)_\n"

    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(escape(str(c)) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in _cells(df, digits, formats)]
    return "\n".join(lines) + "\n"


def text(df: pd.DataFrame, digits: int = 3, formats: Mapping[str, Formatter] | None = None) -> str:
    """Fixed-width text for a terminal: numbers right-aligned, words left-aligned."""
    if len(df) == 0:
        return "(none)"
    cells = _cells(df, digits, formats)
    numeric = [
        pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns
    ]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(df.columns)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line([str(c) for c in df.columns]), *(line(r) for r in cells)])


def styled(df: pd.DataFrame, digits: int = 3):
    """A pandas Styler with the same number format and no index (for notebooks)."""
    return df.style.format(lambda v: fmt(_plain(v), digits)).hide(axis="index")
