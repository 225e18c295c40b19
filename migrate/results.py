"""Result types shared by the engine, the CLI and the notebook API (plain dataclasses, no torch). They know
nothing of formatting: ``report`` formats them (``report.markdown_report(run)``), so the import goes one way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .outcomes import converted_percent

Outcome = Literal["rewritten", "warned", "flagged"]
#: skipped: the prefilter found nothing to migrate; over-limit: a per-file time/memory limit was hit;
#: not-writable: --write left a read-only file alone; interrupted: Ctrl-C came before the file was done.
Status = Literal["changed", "unchanged", "unparsable", "skipped", "over-limit", "not-writable", "interrupted"]


@dataclass(frozen=True)
class Diagnostic:
    """One finding. ``fixed`` is True when the source was rewritten for it (``[*]`` in text output)."""

    path: str
    line: int
    col: int
    code: str
    message: str
    fixed: bool
    outcome: Outcome

    def format(self) -> str:
        star = " [*]" if self.fixed else ""
        return f"{self.path}:{self.line}:{self.col}: {self.code}{star} {self.message}"


@dataclass
class MigrationResult:
    """The outcome of migrating one source string."""

    new_source: str
    changed: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass
class FileResult:
    """The outcome for one file; ``diff`` is a unified diff (empty when unchanged). For an unparsable
    file ``line``/``col`` say where Python's parser stopped (0: unknown); ``note`` is something the user
    should know about a written file (e.g. written in place to keep its hard links)."""

    path: str
    status: Status
    diagnostics: list[Diagnostic] = field(default_factory=list)
    diff: str = ""
    error: str = ""
    line: int = 0
    col: int = 0
    note: str = ""


@dataclass
class RunResult:
    """The outcome of a run over many paths; ``interrupted`` when Ctrl-C stopped it (the files not done
    have status ``interrupted`` and were left as they were)."""

    files: list[FileResult] = field(default_factory=list)
    interrupted: bool = False

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for f in self.files for d in f.diagnostics]

    @property
    def converted_percent(self) -> float:
        return converted_percent(self.diagnostics)
