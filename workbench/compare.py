"""Side-by-side tables of result files: throughput and MFU per device, and ratios to a baseline.

Only measured records are compared with each other (a ratio between a run here and a projection would
mix provenance); projected and published records in the same files are listed in their own table, so
none is dropped without a word.
"""

from __future__ import annotations

import pandas as pd

from tpu_workbench.bench import tables
from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.results import variant_label

KEYS = ["workload", "phase", "precision", "batch", "seq"]


def _label(row) -> str:
    return variant_label(row)


def compare_table(df: pd.DataFrame, *, baseline: str | None = None) -> pd.DataFrame:
    """One row per (workload, phase, precision, batch, seq) and device variant (e.g. ``tpu+compiled``),
    with median tokens/s, MFU, the peak basis and ``ratio`` = tokens/s ÷ the baseline variant's.

    Several records of the same cell (repeated runs) are reduced to their median.
    """
    measured = df[df["provenance"] == "measured"].copy()
    if measured.empty:
        raise WorkbenchError("no measured records in the given files")
    measured["variant"] = measured.apply(_label, axis=1)
    variants = sorted(measured["variant"].unique())
    if baseline is None:
        baseline = "cpu" if "cpu" in variants else variants[0]
    if baseline not in variants:
        raise WorkbenchError(unknown("baseline device", baseline, variants))
    keys = [k for k in KEYS if k in measured]
    measured[keys] = measured[keys].fillna("-")
    agg = (
        measured.groupby([*keys, "variant"], dropna=False)
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
    base = agg[agg["variant"] == baseline].set_index(keys)["tokens_per_s"]
    agg["ratio_vs_" + baseline] = [
        row.tokens_per_s / base.get(tuple(row[k] for k in keys), float("nan"))
        if tuple(row[k] for k in keys) in base.index
        else float("nan")
        for _, row in agg.iterrows()
    ]
    agg["mfu_pct"] = 100 * agg["mfu"]
    agg["step_ms"] = 1e3 * agg["step_median_s"]
    return agg.drop(columns=["mfu", "step_median_s"])


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
    table = table.drop(columns=["peak_basis"])
    ratios = {c: _ratio for c in table.columns if c.startswith("ratio_vs_")}
    return tables.text(table, formats=ratios) + "\n" + "\n".join(f"MFU peak basis: {n}" for n in notes)


def _ratio(value: object) -> str:
    return "-" if value is None or value != value else f"{value:.3f}x"
