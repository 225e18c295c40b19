"""The short answer each of notebooks 03, 04 and 05 (and the demo report) shows first: one sentence and a
small table, computed from the projection and the serving model. Every figure is projected; a setting that
does not fit or misses the target is named with its reason, never given a number.

- :func:`cost_answer` (nb 04, demo): chips ranked by $ per million OUTPUT tokens at an interactivity target.
- :func:`mfu_answer` (nb 03): projected MFU under both FLOP conventions and decode MBU, per phase.
- :func:`scaling_answer` (nb 05): weak-scaling efficiency at the largest chip count, per chip and layout.
- :func:`replica_answer` (nb 05): serving $/M output tokens as the chips of one replica grow.
- :func:`serving_verdict` (demo report): the serving rows of its first-screen verdict table.
- :func:`source_tables` (nb 03): the user's runs and the committed examples kept apart, each row labelled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tpu_workbench.bench import analysis
from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.cost import HEADLINE_KINDS, comparable_prices
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, at_interactivity
from tpu_workbench.bench.projection.serving_validation import engine_overhead
from tpu_workbench.bench.tables import fmt


def _money(v: float) -> str:
    return f"${v:.3f}" if v >= 0.01 else f"${v:.4f}"


def cost_answer(costs: pd.DataFrame, *, target: float) -> tuple[str, pd.DataFrame]:
    """From :func:`serving_views.cost_table`: the cheapest chip in one sentence, and every chip ranked by $/M
    output tokens at ``target`` tok/s/user (chips without a price last, with why)."""
    ok = costs[costs["why not"] == ""]
    no = costs[costs["why not"] != ""].assign(answer=[f"no price: {w}" for w in costs["why not"] if w])
    if ok.empty:
        short = no[["chip", "answer", "price"]]
        return f"No chip serves this at >= {target:g} output tok/s/user: see why below.", short
    ok = ok.sort_values("$/M output")
    ok = ok.assign(answer=[f"{_money(v)} per M output tokens" for v in ok["$/M output"]])
    short = pd.concat([ok, no])[["chip", "answer", "price"]]
    best = ok.iloc[0]
    rest = "; ".join(
        f"{r['chip']} {r['$/M output'] / best['$/M output']:.2f}x" for r in ok.iloc[1:].to_dict("records")
    )
    return (
        f"Cheapest at >= {target:g} output tok/s/user (projected): {best['chip']} at "
        f"{_money(best['$/M output'])} per M output tokens ({best['price']})"
        + (f"; the others cost {rest}" if rest else "")
        + (f"; {len(no)} without a price" if len(no) else "")
        + ".",
        short,
    )


def mfu_answer(chip: str, workload: str, *, seq: int, n_chips: int = 8) -> tuple[str, pd.DataFrame]:
    """Projected MFU (causal and palm conventions) and MBU per phase of ``workload`` on ``n_chips`` x ``chip``
    (tp), and the sentence: which phase is bandwidth-bound and how far apart the conventions are."""
    records = analysis.project_phases(chip, [workload], seq=seq, n_chips=n_chips)
    table = analysis.mfu_conventions(analysis.load_frames(records))
    short = table[["phase", "MFU % (causal)", "MFU % (palm)", "MBU % (decode)"]].reset_index(drop=True)
    missing = [r.phase for r in records if r.mfu is None]
    by = {r["phase"]: r for r in short.to_dict("records")}
    parts = [f"Projected, {workload} on {n_chips} x {chip}, {seq:,} tokens:"]
    if "train" in by:
        t = by["train"]
        parts.append(
            f"training MFU is {t['MFU % (causal)']:.0f} % (causal) or {t['MFU % (palm)']:.0f} % (palm), so "
            "quote the convention;"
        )
    if "decode" in by:
        d = by["decode"]
        parts.append(
            f"decode is bandwidth-bound (MBU {d['MBU % (decode)']:.0f} % vs MFU {d['MFU % (causal)']:.1f} %)"
        )
    if missing:
        parts.append(f"; {', '.join(missing)}: does not fit, no figure")
    return " ".join(parts).rstrip(";") + ".", short


def scaling_answer(
    chips: Sequence[str], specs: Sequence[tuple[str, Sequence[str]]], counts: Sequence[int]
) -> tuple[str, pd.DataFrame]:
    """Projected weak-scaling efficiency at the largest count where each (workload, chip, layout) still
    fits (a row per workload and layout, a column per chip); the sentence names the best and worst series."""
    frames = pd.concat([analysis.scaling_frame(chips, wl, lays, counts) for wl, lays in specs])
    rows = []
    for (wl, chip, lay), g in frames.groupby(["workload", "chip", "layout"], sort=False):
        fit = g[g["fits in HBM"]]
        if fit.empty:
            rows.append({"workload": wl, "chip": chip, "layout": lay, "answer": "does not fit at any count"})
            continue
        last = fit.iloc[-1]
        rows.append(
            {
                "workload": wl,
                "chip": chip,
                "layout": lay,
                "answer": f"{100 * last['efficiency']:.0f} % ({int(last['chips']):,} vs "
                f"{int(last['baseline chips']):,} chips)",
                "efficiency": last["efficiency"],
            }
        )
    short = pd.DataFrame(rows)
    ranked = short.dropna(subset=["efficiency"]).sort_values("efficiency") if "efficiency" in short else short
    if ranked.empty:
        return "No series fits at any chip count.", short
    lo, hi = ranked.iloc[0], ranked.iloc[-1]
    sentence = (
        f"Projected weak scaling to {max(counts):,} chips: best {hi['workload']} {hi['layout']} on {hi['chip']}, "
        f"{hi['answer']}; worst {lo['workload']} {lo['layout']} on {lo['chip']}, {lo['answer']}."
    )
    # one row per (workload, layout), one column per chip: as many rows for 2 chips as for 6 (first screen)
    wide = short.pivot(index=["workload", "layout"], columns="chip", values="answer")
    return sentence, wide[list(dict.fromkeys(short["chip"]))].reset_index().rename_axis(columns=None)


def replica_answer(
    chip: str,
    workload: str,
    counts: Sequence[int],
    *,
    mix: tuple[int, int] = (1024, 1024),
    target: float = 20.0,
    layout: str = "tp",
    precision: str = "bf16",
    price_kind: str | None = "owner-tco",
) -> pd.DataFrame:
    """Serving one replica on more chips: output tok/s per chip and $/M output at ``target`` for each chip
    count (the serving model); a count that does not fit or misses the target says why, with no number."""
    prices = comparable_prices([load_catalog().chip(chip)], price_kind)
    price = prices.prices.get(load_catalog().chip(chip).name)
    rows = []
    for n in counts:
        row = {"chips per replica": n}
        try:
            m = StepModel.build(
                workload,
                ServingDeployment(
                    chip, n, layout, precision=precision, max_batch=512, seq_overhead_s=engine_overhead(chip)
                ),
            )
        except WorkbenchError as e:  # a layout the model cannot take: a reason, not a number
            rows.append({**row, "why not": str(e).splitlines()[0]})
            continue
        p = at_interactivity(m, *mix, target, price.usd_per_chip_hour if price else math.nan)
        if p.infeasible:
            rows.append({**row, "why not": p.infeasible})
            continue
        rows.append(
            {
                **row,
                "concurrency": p.state.concurrency,
                "output tok/s/chip": p.state.output_tok_s_per_chip,
                "$/M output": p.usd_per_m_output if price else None,
                "why not": "" if price else f"no {prices.kind} price in the catalog",
            }
        )
    return pd.DataFrame(rows)


EXAMPLES = "committed example"


def source_tables(table: pd.DataFrame, example_files: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Split :func:`analysis.mfu_conventions` rows by where they came from, each row labelled in ``source``:
    'run here', 'your file: NAME', 'committed example: NAME' (files in ``example_files``: not your runs) or
    'projected'. Returns the non-empty groups, in that order, so a notebook shows them apart."""
    examples = {Path(f).name for f in example_files}

    def label(r: dict) -> str:
        if r["provenance"] != "measured":
            return str(r["provenance"])
        if r["source"] == "this run":
            return "run here"
        return f"{EXAMPLES}: {r['source']}" if r["source"] in examples else f"your file: {r['source']}"

    if table.empty:
        return {}
    labelled = table.assign(source=[label(r) for r in table.to_dict("records")])
    kind = labelled["source"].str.split(":").str[0]
    order = ["run here", "your file", EXAMPLES, "projected"]
    return {k: labelled[kind == k] for k in order if (kind == k).any()}


def serving_verdict(
    chips: Sequence[str],
    workload: str,
    *,
    target: float = 20.0,
    mix: tuple[int, int] = (1024, 1024),
    n_chips: int = 8,
    kinds: Sequence[str] = HEADLINE_KINDS,
) -> pd.DataFrame:
    """The demo report's serving rows, in :func:`demo_verdict.verdict_table`'s columns: per kind of price, the
    chip with the lowest $/M output tokens at ``target`` tok/s/user (serving model, ``n_chips`` tp), the
    runner-up and the dated price used. Chips that do not fit or miss the target are not ranked."""
    catalog = load_catalog()
    models = {
        c: StepModel.build(
            workload, ServingDeployment(c, n_chips, "tp", max_batch=512, seq_overhead_s=engine_overhead(c))
        )
        for c in chips
    }
    rows = []
    for kind in kinds:
        prices = comparable_prices([catalog.chip(c) for c in chips], kind)
        ranked = []
        for chip, m in models.items():
            price = prices.prices.get(catalog.chip(chip).name)
            if price is None or price.kind != kind:
                continue
            p = at_interactivity(m, *mix, target, price.usd_per_chip_hour)
            if not p.infeasible:
                ranked.append((p.usd_per_m_output, chip, price))
        if not ranked:
            continue
        ranked.sort(key=lambda t: t[0])
        usd, chip, price = ranked[0]
        stale = price.staleness()
        rows.append(
            {
                "phase": f"serve ({mix[0]}/{mix[1]}, >= {target:g} tok/s/user)",
                "price kind": kind,
                "cheapest chip": chip,
                "$ per M tokens": f"${fmt(usd)} per M output tokens",
                "runner-up": f"{ranked[1][1]} ${fmt(ranked[1][0])}" if len(ranked) > 1 else "-",
                "price used (projected x catalog price)": (
                    f"{price.tier} ${price.usd_per_chip_hour:g}/chip-h, {price.date}"
                    + (" (stale)" if stale else "")
                    + f"; {price.source[:60]}"
                ),
            }
        )
    return pd.DataFrame(rows)
