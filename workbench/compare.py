"""Side-by-side tables of result files: throughput and MFU per device, and ratios to a baseline.

Only measured records are compared with each other (a ratio between a run here and a projection would
mix provenance); projected and published records in the same files are listed in their own table, so
none is dropped without a word.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tpu_workbench.bench import tables
from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.results import variant_label

KEYS = ["workload", "phase", "precision", "batch", "seq"]
#: A cell whose step-time IQR is above this share of its median step is flagged noisy: its median is no
#: steadier than that, so a ratio built on it means little (typical quiet runs stay under 5%).
NOISY_IQR_PCT = 20.0


def _label(row) -> str:
    return variant_label(row)


def compare_table(df: pd.DataFrame, *, baseline: str | None = None, pool: bool = False) -> pd.DataFrame:
    """One row per (workload, phase, precision, batch, seq), device variant (e.g. ``tpu+compiled``) and
    source file, with median tokens/s, MFU, the peak basis and ``ratio`` = tokens/s ÷ the baseline variant's
    (from the same file when it has one, else the only baseline row of that cell).

    Several records of the same cell in one file (repeated runs) are reduced to their median; records from
    different files are kept apart (they may come from other hosts or other code) unless ``pool``. A cell
    whose IQR is above :data:`NOISY_IQR_PCT` of its median step is marked ``noisy``.
    """
    measured = df[df["provenance"] == "measured"].copy()
    if measured.empty:
        raise WorkbenchError("no measured records in the given files")
    measured["variant"] = measured.apply(_label, axis=1)
    files = sorted(measured["file"].dropna().unique()) if "file" in measured else []
    apart = not pool and len(files) > 1
    if apart:
        measured["source"] = measured["file"].map(_short_names(files))
    variants = sorted(measured["variant"].unique())
    if baseline is None:
        baseline = "cpu" if "cpu" in variants else variants[0]
    if baseline not in variants:
        raise WorkbenchError(unknown("baseline device", baseline, variants))
    keys = [k for k in KEYS if k in measured]
    measured[keys] = measured[keys].fillna("-")
    by = [*keys, "variant", *(["source"] if apart else [])]
    agg = (
        measured.groupby(by, dropna=False)
        .agg(
            tokens_per_s=("tokens_per_s", "median"),
            step_median_s=("step_median_s", "median"),
            iqr_pct=("step_iqr_s", "median"),
            mfu=("mfu", "median"),
            runs=("record_id", "count"),
            peak_tflops=("peak_tflops", "median"),
            peak_basis=("peak_basis", "first"),
            platform=("platform", "first"),
        )
        .reset_index()
    )
    agg["iqr_pct"] = 100 * agg["iqr_pct"] / agg["step_median_s"]
    agg["noisy"] = agg["iqr_pct"] > NOISY_IQR_PCT
    agg["ratio_vs_" + baseline] = _ratios(agg, keys, baseline, apart)
    agg["mfu_pct"] = 100 * agg["mfu"]
    agg["step_ms"] = 1e3 * agg["step_median_s"]
    return agg.drop(columns=["mfu", "step_median_s"])


def _short_names(files: list[str]) -> dict[str, str]:
    """Each file by its name, or by its path where two share a name."""
    names = [Path(f).name for f in files]
    return {f: (n if names.count(n) == 1 else f) for f, n in zip(files, names, strict=True)}


def _ratios(agg: pd.DataFrame, keys: list[str], baseline: str, apart: bool) -> list[float]:
    """tokens/s ÷ the baseline's for the same cell: from the same source file when files are kept apart and
    it has one there; else the only baseline row of the cell; else no ratio (NaN), never an average."""
    base_rows = agg[agg["variant"] == baseline]
    out = []
    for _, row in agg.iterrows():
        cell = base_rows
        for k in keys:
            cell = cell[cell[k] == row[k]]
        if apart and len(cell) > 1:
            cell = cell[cell["source"] == row["source"]]
        out.append(row.tokens_per_s / cell["tokens_per_s"].iloc[0] if len(cell) == 1 else float("nan"))
    return out


def other_records_table(df: pd.DataFrame) -> pd.DataFrame:
    """Projected and published records, one row each: what, where (chip × count), tokens/s per chip, MFU."""
    rows = []
    for r in df[df["provenance"] != "measured"].to_dict("records"):
        n = r.get("n_chips")
        rows.append(
            {
                "provenance": r["provenance"],
                "workload": r["workload"],
                "phase": r["phase"],
                "chip": r.get("chip") or r.get("device"),
                "chips": int(n) if isinstance(n, int | float) and n == n and n >= 1 else None,
                "batch": r.get("batch"),
                "seq": r.get("seq"),
                "tokens/s per chip": r.get("tokens_per_s_per_chip"),
                "tokens": r.get("tokens_kind"),
                "MFU %": 100 * r["mfu"] if isinstance(r.get("mfu"), float) and r["mfu"] == r["mfu"] else None,
                "source": _source_note(r),
            }
        )
    return pd.DataFrame(rows)


def _source_note(r: dict) -> str:
    src = r.get("source") or {}
    if r["provenance"] == "projected":
        return f"{src.get('model', '?')} v{src.get('model_version', '?')}"
    return str(src.get("title") or src.get("url") or "")


def format_table(table: pd.DataFrame) -> str:
    """Fixed-width text in the workbench number format; ratios read ``1.000x``; the peak bases are
    listed under the table."""
    notes = sorted(set(table["peak_basis"].dropna()))
    noisy = int(table["noisy"].sum()) if "noisy" in table else 0
    table = table.drop(columns=["peak_basis"])
    if "noisy" in table:
        table["noisy"] = table["noisy"].map({True: "NOISY", False: ""})
    ratios = {c: _ratio for c in table.columns if c.startswith("ratio_vs_")}
    lines = [f"MFU peak basis: {n}" for n in notes]
    if noisy:
        lines.append(
            f"NOISY: {noisy} row(s) with a step-time IQR above {NOISY_IQR_PCT:g}% of the median: their "
            "figures and ratios are uncertain (rerun with a longer --budget on an idle machine)"
        )
    if "source" in table:
        lines.append("rows from different files are kept apart (--pool merges them)")
    return tables.text(table, formats=ratios) + "\n" + "\n".join(lines)


def _ratio(value: object) -> str:
    return "-" if value is None or value != value else f"{value:.3f}x"
