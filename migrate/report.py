"""Output formats: text (ruff-like), JSON, SARIF 2.1.0, GitHub annotations and the Markdown summary."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from .outcomes import converted_percent, count_outcomes
from .results import Diagnostic, FileResult, RunResult
from .rules import all_rules

FORMATS = ("text", "json", "sarif", "github")
#: Statuses of files that needed attention and were left as they were, with how the text output says it.
LEFT_UNTOUCHED = {"over-limit": "skipped", "not-writable": "not written"}


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def _where(f: FileResult) -> str:
    return f"{f.path}:{f.line}:{f.col}" if f.line else f.path


def text_lines(result: RunResult) -> list[str]:
    out = []
    for f in result.files:
        if f.status == "unparsable":
            out.append(f"{_where(f)}: E999 could not be parsed, left untouched: {f.error}")
        elif f.status in LEFT_UNTOUCHED:
            out.append(f"{f.path}: {LEFT_UNTOUCHED[f.status]}: {f.error}")
        out.extend(d.format() for d in f.diagnostics)
        if f.note:
            out.append(f"{f.path}: note: {f.note}")
    return out


def summary_line(result: RunResult, write: bool) -> str:
    """One line for stderr: files, what was (or would be) migrated, findings and the converted share."""
    status = Counter(f.status for f in result.files)
    c = count_outcomes(result.diagnostics)
    processed = len(result.files) - status["interrupted"]
    parts = [f"{plural(processed, 'file')} checked"]
    if status["changed"] or not sum(c.values()):
        parts.append(f"{status['changed']:,} {'migrated' if write else 'would be migrated'}")
    for key, words in (
        ("unparsable", "could not be parsed"),
        ("over-limit", "over the per-file limits"),
        ("not-writable", "not writable"),
    ):
        if status[key]:
            parts.append(f"{status[key]:,} {words}")
    if sum(c.values()):
        parts.append(
            f"{c['rewritten']:,} rewritten, {c['warned']:,} rewritten with a warning, "
            f"{c['flagged']:,} flagged"
        )
        unwritten = [f for f in result.files if f.status == "not-writable"] if write else []
        if unwritten:  # their fixes were computed but never reached the disk: not converted
            fixes = sum(d.outcome != "flagged" for f in unwritten for d in f.diagnostics)
            done = c["rewritten"] + c["warned"] - fixes
            parts.append(
                f"{100.0 * done / sum(c.values()):.1f}% converted ({fixes:,} fix(es) in "
                f"{plural(len(unwritten), 'file')} not written, listed above)"
            )
        else:
            parts.append(f"{result.converted_percent:.1f}% converted")
    else:
        parts.append("no findings, nothing to convert")
    line = "; ".join(parts) + "."
    if result.interrupted:
        written = f", {status['changed']:,} written" if write else ""
        head = (
            f"interrupted (Ctrl-C): {processed:,} of {plural(len(result.files), 'file')} done{written}; "
            f"{status['interrupted']:,} not processed, left as they were"
        )
        line = head + "." if not processed else f"{head}. Of those done: {line}"
    return line


def _diag_json(d: Diagnostic) -> dict:
    return {
        "path": d.path,
        "line": d.line,
        "col": d.col,
        "code": d.code,
        "message": d.message,
        "fixed": d.fixed,
        "outcome": d.outcome,
    }


def _percent(diags: list[Diagnostic]) -> float | None:
    """The converted share, or None when there is nothing to convert."""
    return round(converted_percent(diags), 2) if diags else None


def to_json(result: RunResult) -> str:
    files = [
        {
            "path": f.path,
            "status": f.status,
            "error": f.error or None,
            "error_position": [f.line, f.col] if f.line else None,
            "note": f.note or None,
            "diagnostics": [_diag_json(d) for d in f.diagnostics],
        }
        for f in result.files
    ]
    return json.dumps(
        {
            "files": files,
            "converted_percent": _percent(result.diagnostics),
            "counts": count_outcomes(result.diagnostics),
            "interrupted": result.interrupted,
        },
        indent=2,
    )


def _split_path(path: str) -> tuple[str, str | None]:
    """'nb.ipynb:cell_3' -> ('nb.ipynb', 'cell_3')."""
    if ".ipynb:cell_" in path:
        file, cell = path.rsplit(":", 1)
        return file, cell
    return path, None


def _region(f: FileResult) -> dict:
    return {"startLine": f.line, "startColumn": f.col} if f.line else {"startLine": 1}


def to_sarif(result: RunResult) -> str:
    rules = [
        {
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.rationale},
            "defaultConfiguration": {"level": "error" if r.outcome == "flagged" else "warning"},
        }
        for r in all_rules()
    ]
    level = {"rewritten": "note", "warned": "warning", "flagged": "error"}
    results = []
    for d in result.diagnostics:
        file, cell = _split_path(d.path)
        msg = d.message + (f" ({cell})" if cell else "")
        results.append(
            {
                "ruleId": d.code,
                "level": level[d.outcome],
                "message": {"text": msg},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": file},
                            "region": {"startLine": d.line, "startColumn": d.col},
                        }
                    }
                ],
            }
        )
    notifications = []
    for f in result.files:
        where = {"physicalLocation": {"artifactLocation": {"uri": f.path}, "region": _region(f)}}
        if f.status == "unparsable":
            results.append(
                {
                    "ruleId": "E999",
                    "level": "error",
                    "message": {"text": f.error or "unparsable"},
                    "locations": [where],
                }
            )
        elif f.status in LEFT_UNTOUCHED:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": f"{LEFT_UNTOUCHED[f.status]}: {f.error}"},
                    "locations": [where],
                }
            )
    run = {
        "tool": {"driver": {"name": "tpu-migrate", "rules": rules}},
        "results": results,
        "invocations": [
            {
                "executionSuccessful": not notifications and not result.interrupted,
                "toolExecutionNotifications": notifications,
            }
        ],
    }
    return json.dumps(
        {"version": "2.1.0", "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "runs": [run]},
        indent=2,
    )


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def to_github(result: RunResult) -> str:
    kind = {"rewritten": "notice", "warned": "warning", "flagged": "error"}
    out = []
    for d in result.diagnostics:
        file, cell = _split_path(d.path)
        title = f"{d.code}" + (f" {cell}" if cell else "")
        out.append(
            f"::{kind[d.outcome]} file={file},line={d.line},col={d.col},title={title}::{_escape(d.message)}"
        )
    for f in result.files:
        if f.status == "unparsable":
            pos = f",line={f.line},col={f.col}" if f.line else ""
            out.append(f"::error file={f.path}{pos},title=E999::could not be parsed: {_escape(f.error)}")
        elif f.status in LEFT_UNTOUCHED:
            out.append(
                f"::error file={f.path},title=tpu-migrate::{LEFT_UNTOUCHED[f.status]}: {_escape(f.error)}"
            )
    return "\n".join(out)


def markdown_report(result: RunResult) -> str:
    """Per rule and per file: rewritten / warned / flagged counts and a HIPIFY-like converted percentage."""
    summaries = {r.code: r.summary for r in all_rules()}
    diags = result.diagnostics
    c = count_outcomes(diags)
    status = Counter(f.status for f in result.files)
    others = "".join(
        f", {status[k]} {words}"
        for k, words in (
            ("over-limit", "over the per-file limits"),
            ("not-writable", "not writable"),
            ("interrupted", "not processed (interrupted)"),
        )
        if status[k]
    )
    converted = (
        f"- **Converted: {converted_percent(diags):.1f}%** (rewritten + warned over all findings)"
        if diags
        else "- **Converted: nothing to convert** (no CUDA or torch_xla code found)"
    )
    lines = [
        "# tpu-migrate report",
        "",
        f"- Files: {len(result.files)} ({status['changed']} changed, {status['unchanged']} unchanged, "
        f"{status['skipped']} skipped by the prefilter, {status['unparsable']} unparsable{others})",
        f"- Findings: {sum(c.values())} ({c['rewritten']} rewritten, {c['warned']} rewritten with a warning, "
        f"{c['flagged']} flagged for a human)",
        converted,
        "",
        "## By rule",
        "",
        "| Rule | Summary | Rewritten | Warned | Flagged |",
        "|---|---|---:|---:|---:|",
    ]
    per_rule: dict[str, Counter] = defaultdict(Counter)
    for d in diags:
        per_rule[d.code][d.outcome] += 1
    for code in sorted(per_rule):
        k = per_rule[code]
        summary = summaries.get(code, "").replace("|", "\\|")
        lines.append(f"| {code} | {summary} | {k['rewritten']} | {k['warned']} | {k['flagged']} |")
    lines += [
        "",
        "## By file",
        "",
        "| File | Status | Rewritten | Warned | Flagged | Converted |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for f in sorted(result.files, key=lambda f: f.path):
        if f.status in ("skipped", "interrupted") and not f.diagnostics:
            continue
        k = count_outcomes(f.diagnostics)
        pct = f"{converted_percent(f.diagnostics):.0f}%" if f.diagnostics else "-"
        lines.append(f"| {f.path} | {f.status} | {k['rewritten']} | {k['warned']} | {k['flagged']} | {pct} |")
    untouched = [f for f in result.files if f.status == "unparsable" or f.status in LEFT_UNTOUCHED]
    if untouched:
        lines += ["", "## Left untouched", ""]
        lines += [f"- {_where(f)}: {f.status}: {f.error}" for f in untouched]
    return "\n".join(lines) + "\n"
