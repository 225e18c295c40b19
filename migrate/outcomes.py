"""Counting findings by outcome: shared by the result types and the reports (which format them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class _Finding(Protocol):
    outcome: str


def count_outcomes(diagnostics: Iterable[_Finding]) -> dict[str, int]:
    counts = {"rewritten": 0, "warned": 0, "flagged": 0}
    for d in diagnostics:
        counts[d.outcome] += 1
    return counts


def converted_percent(diagnostics: Iterable[_Finding]) -> float:
    """HIPIFY-style: share of findings converted automatically (rewritten or rewritten-with-warning)."""
    c = count_outcomes(diagnostics)
    total = sum(c.values())
    return 100.0 if total == 0 else 100.0 * (c["rewritten"] + c["warned"]) / total
