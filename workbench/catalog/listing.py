"""Text listing of the catalog for ``tpu-bench catalog list``: one line per chip, then its prices with
their kind, date and stale flag (so an old or year-only price is never shown as current)."""

from __future__ import annotations

import datetime as dt

from tpu_workbench.bench.catalog import Catalog


def format_list(catalog: Catalog, today: dt.date | None = None) -> str:
    today = today or dt.date.today()
    head = (
        f"{'chip':<22} {'dev/chip':>8} {'BF16 TF/s':>9} {'FP8 TF/s':>8} {'HBM GB':>7} {'HBM GB/s':>8} "
        f"{'scale-up GB/s':>14} {'topology':<9} {'domain':>6} {'out Gb/s':>8} {'TDP W':>6}"
    )
    lines = [head]
    n_stale = 0
    for c in catalog.chips():
        peak = c.peak_tflops
        out = f"{c.scaleout_gbits_per_s_per_chip:>8,.0f}" if c.scaleout_gbits_per_s_per_chip else f"{'-':>8}"
        lines.append(
            f"{c.name:<22} {c.devices_per_chip:>8} {peak.get('bf16', float('nan')):>9,.0f} "
            f"{peak.get('fp8', float('nan')):>8,.0f} {c.hbm_gb:>7.0f} {c.hbm_bw_gbps:>8,.0f} "
            f"{c.scaleup_bw_gbps:>8,.0f} {c.scaleup_direction:<5} {c.scaleup_topology:<9} "
            f"{c.scaleup_domain:>6} {out} {c.tdp_w or float('nan'):>6.0f}"
        )
        for p in c.prices:
            stale = p.staleness(today)
            n_stale += bool(stale)
            flag = f"  STALE: {stale}" if stale else ""
            lines.append(
                f"{'':<4}{p.tier:<16} {p.kind:<17} ${p.usd_per_chip_hour:>7.3f}/chip-hr  {p.date:<10}{flag}"
            )
        if not c.prices:
            lines.append(f"{'':<4}(no price in the catalog)")
    lines.append("")
    lines.append(
        f"prices: {n_stale} stale as of {today.isoformat()} (dated only by year, older than a year, or "
        "superseded); compare chips only within one price kind. HBM GB is 10^9 bytes (TPU GiB "
        "converted); `catalog show NAME` gives sources and disputed figures."
    )
    return "\n".join(lines)
