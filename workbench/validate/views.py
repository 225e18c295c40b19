"""Tables and a chart of a validation run, for the notebook (``notebooks/06_validation.ipynb``)."""

from __future__ import annotations

from pathlib import Path

from tpu_workbench.bench.results import Record, read_records
from tpu_workbench.bench.validate import report

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "validation" / "records.jsonl"


def load(path: str | Path | None = None) -> list[Record]:
    """Records of one run (``records.jsonl`` or the folder holding it); default: the committed run."""
    path = Path(path) if path else COMMITTED
    if path.is_dir():
        path = path / "records.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"no validation records at {path}; run `tpu-bench validate --out DIR` first")
    return read_records(path)


def figures(records: list[Record]):
    """The headline figures as a one-column DataFrame."""
    import pandas as pd  # lazy: heavy

    s = report.summarise(records)
    rows = {
        "model types": s["architectures"],
        "built by the harness": f"{s['built']} ({s['built_pct']}%)",
        "tier 1 (of those run)": f"{s['tier1']} ({s['tier1_pct']}%)",
        "tier 2 (of those run)": f"{s['tier2']} ({s['tier2_pct']}%)",
        "generate() tokens equal": f"{s['generate_pass']} / {s['generate_run']}",
        "compile forward agrees": f"{s['compile_pass']} / {s['compile_run']}",
    }
    return pd.DataFrame({"value": rows})


def table(records: list[Record]):
    """One row per architecture: class, family, tiers, checks, failure class."""
    import pandas as pd  # lazy: heavy

    rows = []
    for r in records:
        if r.phase != report.PHASE:
            continue
        e = r.extra
        rows.append(
            {
                "architecture": r.config.get("model_type"),
                "class": r.config.get("model_class"),
                "family": e.get("family"),
                "built": e.get("harness_ok"),
                "tier 1": e.get("tier1"),
                "tier 2": e.get("tier2"),
                "generate": (e.get("generate") or {}).get("status"),
                "compile": (e.get("compile") or {}).get("status"),
                "failure": e.get("failure_class")
                if e.get("harness_ok")
                else f"harness: {e.get('failure_class')}",
                "seconds": e.get("wall_s"),
            }
        )
    return pd.DataFrame(rows).sort_values("architecture").reset_index(drop=True)


def failure_chart(records: list[Record], top: int = 15):
    """Horizontal bars: failure classes of built architectures, by how many each blocks."""
    import matplotlib.pyplot as plt  # lazy: heavy

    classes = report.summarise(records)["failure_classes"][:top]
    fig, ax = plt.subplots(figsize=(9, 0.4 * max(3, len(classes)) + 1))
    labels = [c if len(c) <= 70 else c[:67] + "…" for c, _ in classes][::-1]
    counts = [len(a) for _, a in classes][::-1]
    ax.barh(labels, counts, color="tab:red")
    for y, n in enumerate(counts):
        ax.text(n, y, f" {n}", va="center")
    src = next((r.source for r in records if r.source), {})
    ax.set_xlabel("architectures blocked (measured)")
    ax.set_title(
        f"Failure classes — measured {src.get('date', '?')[:10]}, {src.get('platform', '?')}", fontsize=10
    )
    if not classes:
        ax.text(0.5, 0.5, "no failures among built architectures", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig
