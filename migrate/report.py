"""Output formats: text (ruff-like), JSON, SARIF 2.1.0, GitHub annotations and the Markdown summary."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from .results import Diagnostic, FileResult, converted_percent, count_outcomes

if TYPE_CHECKING:  # pragma: no cover
    from .results import RunResult

FORMATS = ("text", "json", "sarif", "github")


def text_lines(result: RunResult) -> list[str]:
    out = []
    for f in result.files:
        if f.status == "unparsable":
            out.append(f"{f.path}:1:1: E999 could not be parsed, left untouched: {f.error}")
        out.extend(d.format() for d in f.diagnostics)
    return out


def summary_line(result: RunResult, write: bool) -> str:
    status = Counter(f.status for f in result.files)
    c = count_outcomes(result.diagnostics)
    verb = "migrated" if write else "would be migrated"
    parts = [f"{len(result.files)} files checked", f"{status['changed']} {verb}"]
    if status["unparsable"]:
        parts.append(f"{status['unparsable']} could not be parsed")
    parts.append(f"{c['rewritten']} rewritten, {c['warned']} rewritten with a warning, {c['flagged']} flagged")
    parts.append(f"{result.converted_percent:.1f}% converted")
    return "; ".join(parts) + "."


def _diag_json(d: Diagnostic) -> dict:
    return {"path": d.path, "line": d.line, "col": d.col, "code": d.code, "message": d.message,
            "fixed": d.fixed, "outcome": d.outcome}


def to_json(result: RunResult) -> str:
    files = [{"path": f.path, "status": f.status, "error": f.error or None,
              "diagnostics": [_diag_json(d) for d in f.diagnostics]} for f in result.files]
    return json.dumps({"files": files, "converted_percent": round(result.converted_percent, 2),
                       "counts": count_outcomes(result.diagnostics)}, indent=2)


def _split_path(path: str) -> tuple[str, str | None]:
    """'nb.ipynb:cell_3' -> ('nb.ipynb', 'cell_3')."""
    if ".ipynb:cell_" in path:
        file, cell = path.rsplit(":", 1)
        return file, cell
    return path, None


def to_sarif(result: RunResult) -> str:
    from .rules import all_rules

    rules = [{"id": r.code, "name": r.name, "shortDescription": {"text": r.summary},
              "fullDescription": {"text": r.rationale},
              "defaultConfiguration": {"level": "error" if r.outcome == "flagged" else "warning"}}
             for r in all_rules()]
    level = {"rewritten": "note", "warned": "warning", "flagged": "error"}
    results = []
    for d in result.diagnostics:
        file, cell = _split_path(d.path)
        msg = d.message + (f" ({cell})" if cell else "")
        results.append({"ruleId": d.code, "level": level[d.outcome], "message": {"text": msg},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": file},
                                                            "region": {"startLine": d.line,
                                                                       "startColumn": d.col}}}]})
    for f in result.files:
        if f.status == "unparsable":
            results.append({"ruleId": "E999", "level": "error", "message": {"text": f.error or "unparsable"},
                            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.path},
                                                                "region": {"startLine": 1}}}]})
    return json.dumps({"version": "2.1.0",
                       "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
                       "runs": [{"tool": {"driver": {"name": "tpu-migrate", "rules": rules}},
                                 "results": results}]}, indent=2)


def to_github(result: RunResult) -> str:
    kind = {"rewritten": "notice", "warned": "warning", "flagged": "error"}
    out = []
    for d in result.diagnostics:
        file, cell = _split_path(d.path)
        title = f"{d.code}" + (f" {cell}" if cell else "")
        msg = d.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        out.append(f"::{kind[d.outcome]} file={file},line={d.line},col={d.col},title={title}::{msg}")
    for f in result.files:
        if f.status == "unparsable":
            out.append(f"::error file={f.path},line=1,title=E999::could not be parsed: {f.error}")
    return "\n".join(out)


def markdown_report(result: RunResult) -> str:
    """Per rule and per file: rewritten / warned / flagged counts and a HIPIFY-like converted percentage."""
    from .rules import all_rules

    summaries = {r.code: r.summary for r in all_rules()}
    diags = result.diagnostics
    c = count_outcomes(diags)
    status = Counter(f.status for f in result.files)
    lines = [
        "# tpu-migrate report", "",
        f"- Files: {len(result.files)} ({status['changed']} changed, {status['unchanged']} unchanged, "
        f"{status['skipped']} skipped by the prefilter, {status['unparsable']} unparsable)",
        f"- Findings: {sum(c.values())} ({c['rewritten']} rewritten, {c['warned']} rewritten with a warning, "
        f"{c['flagged']} flagged for a human)",
        f"- **Converted: {converted_percent(diags):.1f}%** (rewritten + warned over all findings)", "",
        "## By rule", "", "| Rule | Summary | Rewritten | Warned | Flagged |", "|---|---|---:|---:|---:|",
    ]
    per_rule: dict[str, Counter] = defaultdict(Counter)
    for d in diags:
        per_rule[d.code][d.outcome] += 1
    for code in sorted(per_rule):
        k = per_rule[code]
        summary = summaries.get(code, "").replace("|", "\\|")
        lines.append(f"| {code} | {summary} | {k['rewritten']} | {k['warned']} | {k['flagged']} |")
    lines += ["", "## By file", "", "| File | Status | Rewritten | Warned | Flagged | Converted |",
              "|---|---|---:|---:|---:|---:|"]
    for f in sorted(result.files, key=lambda f: f.path):
        if f.status == "skipped" and not f.diagnostics:
            continue
        k = count_outcomes(f.diagnostics)
        pct = f"{converted_percent(f.diagnostics):.0f}%" if f.diagnostics else "-"
        lines.append(f"| {f.path} | {f.status} | {k['rewritten']} | {k['warned']} | {k['flagged']} | {pct} |")
    unparsable = [f for f in result.files if f.status == "unparsable"]
    if unparsable:
        lines += ["", "## Could not be parsed (left untouched)", ""]
        lines += [f"- {f.path}: {f.error}" for f in unparsable]
    return "\n".join(lines) + "\n"


def file_result_json(f: FileResult) -> dict:
    return {"path": f.path, "status": f.status, "diagnostics": [_diag_json(d) for d in f.diagnostics]}
