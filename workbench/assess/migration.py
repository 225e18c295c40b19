"""tpu-migrate on the copy: rewrites and flags by rule, the flagged lines with their source, and an effort
estimate per file.

The estimate is a heuristic, labelled as one: a rewrite costs a review (``REVIEW_MIN``), a warning a check
(``WARN_MIN``), a flagged line a manual change (``FLAG_MIN``). It orders the files by work; it is no
measurement.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

REVIEW_MIN = 1.0
WARN_MIN = 5.0
FLAG_MIN = 20.0
EFFORT_BASIS = f"heuristic: {REVIEW_MIN:g} min per rewrite (review), {WARN_MIN:g} min per warning, {FLAG_MIN:g} min per flagged line"


def _line(path: Path, n: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[n - 1].strip() if 0 < n <= len(lines) else ""


def migrate_copy(copy: Path, original: Path) -> dict:
    """Migrate ``copy`` in place (it is ours) and summarise; paths in the summary are relative to the copy, and
    the flagged lines are quoted from ``original`` (the diagnostics' line numbers are the source's)."""
    from tpu_workbench.migrate import migrate_paths  # lazy: startup

    result = migrate_paths([str(copy)], write=True, jobs=1)
    files = []
    by_rule: Counter[tuple[str, str]] = Counter()
    for f in result.files:
        rel = str(Path(f.path).resolve().relative_to(copy.resolve()))
        counts = Counter(d.outcome for d in f.diagnostics)
        for d in f.diagnostics:
            by_rule[(d.code, d.outcome)] += 1
        flagged = [
            {"line": d.line, "code": d.code, "message": d.message, "source": _line(original / rel, d.line)}
            for d in f.diagnostics
            if d.outcome != "rewritten"
        ]
        if not f.diagnostics and f.status in ("unchanged", "skipped"):
            continue
        effort = counts["rewritten"] * REVIEW_MIN + counts["warned"] * WARN_MIN + counts["flagged"] * FLAG_MIN
        files.append(
            {
                "path": rel,
                "status": f.status,
                "error": f.error or None,
                "rewritten": counts["rewritten"],
                "warned": counts["warned"],
                "flagged": counts["flagged"],
                "effort_min": effort,
                "findings": flagged,
            }
        )
    files.sort(key=lambda r: (-r["effort_min"], r["path"]))
    rules = [{"code": c, "outcome": o, "count": n} for (c, o), n in sorted(by_rule.items())]
    return {
        "files_scanned": len(result.files),
        "files_with_findings": len(files),
        "rewritten": sum(r["rewritten"] for r in files),
        "warned": sum(r["warned"] for r in files),
        "flagged": sum(r["flagged"] for r in files),
        "unparsable": [r["path"] for r in files if r["status"] == "unparsable"],
        "converted_percent": round(result.converted_percent, 1) if result.diagnostics else None,
        "effort_min": sum(r["effort_min"] for r in files),
        "effort_basis": EFFORT_BASIS,
        "by_rule": rules,
        "files": files,
    }
