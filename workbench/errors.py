"""Error types for bad user input; the CLI turns every one of them into exit code 2."""

from __future__ import annotations

from collections.abc import Iterable


class WorkbenchError(ValueError):
    """A bad name or setting supplied by the user (unknown chip, workload, device, ...)."""


def unknown(kind: str, name: object, choices: Iterable[object]) -> str:
    """Message naming the bad value and every valid choice, so the user never has to guess."""
    listed = ", ".join(sorted({str(c) for c in choices}))
    return f"unknown {kind} {name!r}; valid choices: {listed}"
