"""Text of the projected-vs-published comparison: calibration, validation (complete settings), validation
with assumed settings, inconsistent readings, and unanchored points, each group apart."""

from __future__ import annotations

import math

from tpu_workbench.bench.projection.calibration import (
    ACCEPTANCE,
    CALIBRATION_POINT,
    CALIBRATION_REASON,
    misses,
    summary,
)
from tpu_workbench.bench.projection.model import MODEL_NAME, MODEL_VERSION

SECTIONS = (
    ("calibration", "CALIBRATION (gemm_efficiency fitted on this point only)"),
    ("validation", f"VALIDATION (complete settings; acceptance +/-{100 * ACCEPTANCE:.0f}%)"),
    (
        "validation (assumed setting)",
        "VALIDATION WITH AN ASSUMED SETTING (the source leaves it open; not in the acceptance count)",
    ),
    ("inconsistent reading", "INCONSISTENT READINGS (the point's own figures disagree; not model error)"),
    ("unanchored", "UNANCHORED (the projection cannot be set up; never model error)"),
)


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, int | float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def _err(e) -> str:
    if e is None or (isinstance(e, float) and math.isnan(e)):
        return "-"
    flag = "" if abs(e) <= ACCEPTANCE else " !"
    return f"{100 * e:+.1f}%{flag}"


def format_table(table, *, details: bool = True) -> str:
    """Sections of the comparison; ``details`` adds each point's setting, source and consistency check."""
    eff = table.attrs.get("gemm_efficiency")
    lines = [
        f"model {MODEL_NAME} v{MODEL_VERSION}; calibration point: {CALIBRATION_POINT} "
        f"(gemm_efficiency fitted = {eff:.4f})"
        if eff
        else f"model {MODEL_NAME} v{MODEL_VERSION}",
        f"why this point: {CALIBRATION_REASON}",
        "",
    ]
    head = f"  {'point':<44} {'chip':<18} {'chips':>6} {'metric':<24} {'published':>10} {'projected':>10} {'error':>9}"
    for cat, title in SECTIONS:
        part = table[table["category"] == cat]
        if part.empty:
            continue
        lines += [title, head]
        for r in part.to_dict("records"):
            lines.append(
                f"  {r['id'][:44]:<44} {str(r['chip'])[:18]:<18} {_num(r['n_chips']):>6} "
                f"{r['metric'][:24]:<24} {_num(r['published'])[:10]:>10} {_num(r['projected']):>10} "
                f"{_err(r['rel_error']):>9}"
            )
        lines.append("")
    s = summary(table)
    if s["max_abs_error"] is not None:
        lines.append(
            f"validation: {s['within_acceptance']} of {s['validation_rows']} rows within "
            f"+/-{100 * ACCEPTANCE:.0f}%; largest |error| {100 * s['max_abs_error']:.1f}% ('!' marks rows "
            "outside the band)"
        )
    missed = misses(table)
    if missed:
        lines += [
            "",
            f"MISSES (validation rows outside +/-{100 * ACCEPTANCE:.0f}%: the setting re-checked against its "
            "source; what the model lacks is a hypothesis, not a fitted term)",
        ]
        for m in missed:
            errs = ", ".join(f"{k} {100 * v:+.1f}%" for k, v in m["errors"].items())
            lines.append(f"- {m['id']} ({errs})")
            lines.append(f"    record: {m['record_check']}")
            lines.append(f"    model: {m['hypothesis']}")
    if details:
        lines += ["", "SETTINGS, SOURCES AND CONSISTENCY CHECKS"]
        seen = set()
        for r in table.to_dict("records"):
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            lines.append(f"- {r['id']} [{r['category']}]: {r['assumptions']}")
            lines.append(f"    source: {r['source']}")
            lines.append(f"    check: {r['consistency']}")
    return "\n".join(lines)
